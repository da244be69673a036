"""Plans and the actions they are made of.

A plan carries what was planned, so that statuses, events and the REST preview show the
planner's own figures instead of recomputing them: the load it sized for, the candidate its
search chose, the configuration after each of this cycle's actions with what the planner's own
predictors expect there, which model served each objective and why (as structured parts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.domain.memory import Memory
from planner.domain.state import WorkloadConfig

REASON_KINDS = ("choice", "forecast", "margin", "correction", "exploration", "hysteresis",
                "transition", "held", "no-model", "unknown", "search", "safety", "capacity",
                "contention", "unreachable", "note")
"""Kinds of :class:`ReasonPart`: ``choice`` (what was chosen and why), ``forecast``, ``margin``
and ``correction`` (how the planned load was derived), ``exploration`` (an untried shape on
trial), ``hysteresis`` (the current configuration kept), ``transition`` (this cycle's step
differs from the target), ``held`` (actuators holding back, e.g. cooldowns), ``no-model`` (an
objective nothing predicts), ``unknown`` (an objective's value is unknown), ``search`` (how the
search went), ``safety`` (what the safety layer changed or corrected, see
:mod:`planner.planners.safety`), ``capacity`` (the safety layer's capacity rule: a shape
that does not fit, replicas capped at what the cluster can schedule), ``contention`` (the
shape planning competing intents together assigned, :mod:`planner.planners.joint`),
``unreachable`` (a target below what the service can do on any configuration, reported as the
condition ``TargetsReachable``) and ``note`` (free text, e.g. from a plan built from a plain
reason string)."""
REASON_SEPARATOR = "; "


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


@dataclass(frozen=True)
class Action:
    """One change an actuator applies. ``params`` are actuator-specific and JSON-safe."""

    actuator: str
    workload: str
    params: dict[str, Any]
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"actuator": self.actuator, "workload": self.workload, "params": self.params,
                "reason": self.reason}


@dataclass(frozen=True)
class ReasonPart:
    """One part of a plan's reason: its ``kind`` (one of :data:`REASON_KINDS`) and the text."""

    kind: str
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


def join_reason(parts: tuple[ReasonPart, ...]) -> str:
    return REASON_SEPARATOR.join(p.text for p in parts if p.text)


@dataclass(frozen=True)
class ObjectivePrediction:
    """What a predictor expects for one objective: the mean and its conservative bound (upper
    for KPIs that are minimised, lower for maximised ones); ``inf`` latency: cannot carry the
    load."""

    mean: float
    bound: float

    def as_dict(self) -> dict[str, float | None]:
        return {"mean": _finite(self.mean), "bound": _finite(self.bound)}


@dataclass(frozen=True)
class PlanStep:
    """A configuration on the plan's way: step 0 is the current one, then the configuration
    after each of this cycle's actions, then the target when the actions do not reach it
    (``this_cycle`` false). ``predicted`` holds the planner's own prediction per objective at
    the plan's planned load (empty for planners without predictors)."""

    config: WorkloadConfig
    predicted: Mapping[str, ObjectivePrediction]
    cost_per_hour: float | None
    this_cycle: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"config": self.config.as_dict(),
                "predicted": {n: p.as_dict() for n, p in self.predicted.items()},
                "cost_per_hour": _finite(self.cost_per_hour), "this_cycle": self.this_cycle}


@dataclass(frozen=True)
class ModelInfo:
    """Which predictor served one objective: ``source`` is ``learned`` (an effect model; then
    its family, sample count, training time and validation), ``explicit`` (the queueing
    estimate), ``computed`` (e.g. cost from prices) or ``none``."""

    objective: str
    source: str
    kind: str | None = None
    samples: int | None = None
    trained_at: float | None = None
    validation: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"objective": self.objective, "source": self.source}
        if self.kind is not None:
            out.update(kind=self.kind, samples=self.samples,
                       trained_at=_finite(self.trained_at),
                       validation=_json_safe(self.validation))
        return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value if value is None or isinstance(value, str | int | bool) else str(value)


@dataclass(frozen=True)
class Plan:
    """What a planner wants for one intent this cycle.

    ``target`` is the configuration the planner aims for; ``actions`` are the steps from the
    current configuration towards it that fit within the admin's limits this cycle.
    ``predicted`` maps objective names to the values the planner expects for the configuration
    it chose. ``planned_rate`` is the load (req/s) the plan was sized for (``None``: the
    planner does not size for a load); ``chosen`` the configuration its search picked when
    that differs from ``target`` (clipped to the admin's bounds or knobs); ``steps`` the
    configurations along the way with their predictions (:class:`PlanStep`); ``models`` which
    predictor served each objective.

    The reason is structured: give ``reason_parts``, and ``reason`` is their texts joined by
    ``"; "``. A plan built from a plain ``reason`` string gets one ``note`` part per
    ``"; "``-separated piece.
    ``memory`` is the planner's memory of this intent after planning (see
    :mod:`planner.domain.memory`); it is not part of :meth:`as_dict` (events stay compact).
    """

    intent: str
    planner: str
    current: WorkloadConfig
    target: WorkloadConfig
    actions: tuple[Action, ...] = ()
    predicted: dict[str, float] = field(default_factory=dict)
    cost_per_hour: float | None = None
    reason: str = ""
    exploratory: bool = False
    planning_ms: float = 0.0
    memory: Memory = field(default_factory=dict)
    planned_rate: float | None = None
    chosen: WorkloadConfig | None = None
    steps: tuple[PlanStep, ...] = ()
    models: tuple[ModelInfo, ...] = ()
    reason_parts: tuple[ReasonPart, ...] = ()
    target_speed: float | None = None
    """How many times the capacity of a pod of the place it was measured against one pod of
    ``target``'s device and pool has at the same CPU size, where a trial measured it
    (``None``: not measured). The safety layer counts a scale-in across devices in it."""

    def __post_init__(self) -> None:
        if self.reason_parts:
            joined = join_reason(self.reason_parts)
            if self.reason and self.reason != joined:
                raise ValueError("Plan: reason differs from its reason_parts; give only the "
                                 "parts")
            object.__setattr__(self, "reason", joined)
        elif self.reason:
            object.__setattr__(self, "reason_parts", tuple(
                ReasonPart("note", t) for t in self.reason.split(REASON_SEPARATOR) if t))

    def as_dict(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "planner": self.planner,
            "current": self.current.as_dict(),
            "target": self.target.as_dict(),
            "actions": [a.as_dict() for a in self.actions],
            "predicted": dict(self.predicted),
            "cost_per_hour": self.cost_per_hour,
            "reason": self.reason,
            "exploratory": self.exploratory,
            "planning_ms": self.planning_ms,
            "planned_rate": _finite(self.planned_rate),
            "chosen": self.chosen.as_dict() if self.chosen is not None else None,
            "steps": [s.as_dict() for s in self.steps],
            "models": [m.as_dict() for m in self.models],
            "reason_parts": [p.as_dict() for p in self.reason_parts],
        }
