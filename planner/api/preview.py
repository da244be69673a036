"""Plan previews: what the planner would do now for an intent, without doing it.

A preview reads the live state under the runtime's lock (one cluster snapshot, the KPI values,
the intent source, and the controller's memory of the intent: cooldowns, margins, forecasts,
trials, which is immutable data) and plans outside the lock with a fresh planner instance given
that memory. Planners and actuators keep no state of their own between cycles (the dispatch
weights' engines are in the memory too), so nothing is deep-copied. Each actuator is a shallow
copy of the live one with its own per-call output (``held``, written by ``steps``): a cycle
running beside the preview does not see the preview's, nor the preview the cycle's. The copies
share the live actuators' configuration and wiring (a ConfigMap apply function the operator
attached, a policy factory given to the controller), which fresh instances from the registry
would lack. They observe the preview's snapshot and take in its samples from the controller's
memory (:func:`planner.control.controller.observed`, as a cycle does before planning). The
preview shows the plan as it is (planned load, steps with their predictions, models, reasons:
the plan carries them; nothing is recomputed here). Nothing is applied, recorded or reported:
the next controller cycle sees exactly the state it would have seen without the preview, and
for the same snapshot it makes the same plan.

What-if overrides change the observed workload before planning: ``load`` replaces the request
rate, ``replicas``/``cpu``/``device``/``pool`` the configuration (and its pods). The CPU
utilisation is rescaled so that the service rate the explicit estimate infers stays the one
observed; the measured objective values stay the measured ones. Learned models predict from
(load, configuration) and need no such adjustment.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pydantic

from actuators import topology
from actuators.base import Actuator
from knowledge.base import KnowledgeBase
from planner.api import schemas
from planner.api.runtime import Runtime
from planner.control import controller as controller_module
from planner.domain import plan as plan_domain
from planner.domain import use_case
from planner.domain.admin import AdminConfig
from planner.domain.errors import IntentPlannerError, SpecError, TemporaryError
from planner.domain.intents import Intent, KPIProfile, objective_profiles, parse_intent
from planner.domain.memory import IntentMemory
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState
from planner.domain.validation import spec_error
from planner.planners import registry as planner_registry
from planner.planners import safety
from planner.planners.base import Planner, PlanningContext, without_knobs

log = logging.getLogger(__name__)



class PreviewInvalid(Exception):
    """The request names something that does not fit: rendered as a 422 naming the field."""

    def __init__(self, loc: Sequence[str | int], problem: str, fix: str,
                 kind: str = "invalid_intent") -> None:
        self.loc = tuple(loc)
        self.problem = problem
        self.fix = fix
        self.kind = kind
        super().__init__(f"{'.'.join(map(str, self.loc))}: {problem}; fix: {fix}")

    def detail(self) -> list[dict[str, Any]]:
        field_name = _render_loc(self.loc[2:] if self.loc[:2] == ("body", "intent")
                                 else self.loc[1:])
        return [{"loc": list(self.loc), "msg": f"{self.problem}; fix: {self.fix}",
                 "type": self.kind, "field": field_name, "fix": self.fix}]


class PreviewFailed(Exception):
    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(detail)


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def field_loc(path: str) -> list[str | int]:
    """``spec.objectives[0].value`` -> ``["spec", "objectives", 0, "value"]``."""
    if path in ("", "(document)"):
        return []
    return [int(i) if i else name for name, i in _PART.findall(path)]


def _render_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def finite(v: float | None) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


@dataclass
class Prepared:
    """Everything a preview plans from, detached from the live controller."""

    intent: Intent
    profiles: dict[str, KPIProfile]
    workload: WorkloadState
    snapshot: ClusterSnapshot
    current: dict[str, float | None]
    admin: AdminConfig
    actuators: dict[str, Actuator]
    planner: Planner
    memory: IntentMemory
    """The controller's memory of the intent, as of the snapshot."""
    knowledge: KnowledgeBase
    notes: list[str] = field(default_factory=list)
    placement: WorkloadConfig | None = None
    """The shape the last cycle's joint plan assigned the intent (see
    :mod:`planner.control.contention`)."""


# ------------------------------------------------------------------------------ prepare
def _resolve_intent(runtime: Runtime, req: schemas.PreviewRequest) -> tuple[Intent, bool]:
    if req.ref is not None:
        key = f"{req.ref.namespace}/{req.ref.name}"
        for intent in runtime.source.intents():
            if intent.key == key:
                return intent, False
        raise PreviewFailed(404, f"unknown intent {key!r}: the controller plans no such "
                                 "intent; give it inline as 'intent' instead")
    doc = req.intent or {}
    try:
        intent = parse_intent(doc)
        # The types the CRD's schema enforces (kubectl would refuse "active: 0"): the same
        # document validated strictly as JSON.
        try:
            Intent.model_validate_json(json.dumps(doc), strict=True)
        except pydantic.ValidationError as exc:
            raise spec_error(exc, "") from None
    except SpecError as exc:
        raise PreviewInvalid(("body", "intent", *field_loc(exc.field)), exc.problem,
                             exc.fix) from None
    return intent, True


def _profiles(intent: Intent, known: Mapping[str, KPIProfile], inline: bool
              ) -> dict[str, KPIProfile]:
    out, missing = objective_profiles(intent, known)
    if missing:
        i, ref = missing[0]
        have = ", ".join(sorted(known)) or "none"
        loc: tuple[str | int, ...] = (("body", "intent", "spec", "objectives", i,
                                       "measuredBy") if inline else ("body", "ref"))
        raise PreviewInvalid(loc, f"unknown KPIProfile {ref!r}", f"reference one of: {have}")
    return out


def _what_if(workload: WorkloadState, snapshot: ClusterSnapshot,
             overrides: schemas.Overrides | None) -> WorkloadState:
    if overrides is None:
        return workload
    if overrides.pool is not None:
        pools = sorted({n.pool for n in snapshot.nodes})
        if overrides.pool not in pools:
            raise PreviewInvalid(("body", "overrides", "pool"),
                                 f"no node pool {overrides.pool!r} in the cluster",
                                 f"use one of {pools}", kind="invalid_override")
    old = workload.config
    cfg = WorkloadConfig(
        replicas=old.replicas if overrides.replicas is None else overrides.replicas,
        cpu=old.cpu if overrides.cpu is None else float(overrides.cpu),
        device=old.device if overrides.device is None else overrides.device,
        pool=old.pool if overrides.pool is None else overrides.pool,
    )
    rate = workload.request_rate if overrides.load is None else float(overrides.load)
    pods = workload.pods
    ready, ready_new = workload.ready_replicas, workload.ready_replicas
    if cfg != old:
        base = list(workload.pods) or [PodState("what-if", None, cfg.cpu, cfg.device)]
        pods = tuple(
            replace(base[i % len(base)],
                    name=base[i].name if i < len(base) else f"{base[0].name}-what-if-{i}",
                    cpu=cfg.cpu, device=cfg.device, ready=True,
                    pool=cfg.pool if cfg.pool is not None else base[i % len(base)].pool)
            for i in range(cfg.replicas))
        ready_new = cfg.replicas
    scale = None
    if workload.request_rate and rate is not None and ready_new > 0:
        # Keep the service rate the utilisation implies: util ~ rate / (pods * cpu * mu).
        scale = (rate / workload.request_rate) * (ready * old.cpu) / (ready_new * cfg.cpu)

    def scaled(util: float | None) -> float | None:
        return util if util is None or scale is None else min(util * scale, 0.99)

    return replace(workload, config=cfg, pods=pods, request_rate=rate,
                   cpu_utilization=scaled(workload.cpu_utilization),
                   utilization=scaled(workload.utilization))


def prepare(runtime: Runtime, req: schemas.PreviewRequest) -> Prepared:
    """Read the live state and copy the actuators (under the runtime's lock); observe the
    snapshot with the copies and the controller's memory; raise the API errors."""
    controller = runtime.controller
    with runtime.lock:
        intent, inline = _resolve_intent(runtime, req)
        profiles = _profiles(intent, runtime.source.profiles(), inline)
        try:
            snapshot = runtime.backend.observe()
        except TemporaryError as exc:
            raise PreviewFailed(503, f"the cluster cannot be read right now: {exc}") from None
        observed = snapshot.workload(intent.workload_key)
        if observed is None:
            where: tuple[str, ...] = (("body", "intent", "spec", "targetRef", "name") if inline
                                      else ("body", "ref"))
            have = sorted(snapshot.workloads)
            raise PreviewInvalid(where, f"no workload {intent.workload_key!r} in the cluster",
                                 f"target one of {have}")
        workload = _what_if(observed, snapshot, req.overrides)
        if workload is not observed:
            snapshot = replace(snapshot,
                               workloads={**snapshot.workloads, workload.key: workload})
        current = {o.name: runtime.measure(intent, profiles[o.name])
                   for o in intent.spec.objectives}
        admin = controller.admin
        name = req.planner or admin.planner_for(intent.metadata.namespace)
        fresh_type = planner_registry.available().get(name)
        if fresh_type is None:
            raise PreviewInvalid(("body", "planner"), f"unknown planner {name!r}",
                                 f"use one of {sorted(planner_registry.available())}",
                                 kind="invalid_planner")
        memory = controller.peek_memory(intent.key) or IntentMemory(intent.key)
        notes: list[str] = []
        if memory.planner == name:
            notes.append("planner memory of the intent from the live controller")
        else:
            notes.append("no memory of earlier cycles for this planner")
        # Planners keep no per-intent state: a fresh instance (the controller's are created the
        # same way, by the registry) given the memory plans as the live one would. Its own
        # model cache reads the knowledge base; the live cache is left untouched.
        planner = planner_registry.create_for(admin, name)
        actuators: dict[str, Actuator] = {}
        for act_name, live_act in controller.actuators.items():
            act = copy.copy(live_act)  # the live configuration, its own per-call output
            act.held = {}
            actuators[act_name] = act
        # Planned on the cluster as a cycle would show it to this intent: the room that
        # higher-priority intents' last plans reserved is taken.
        view = controller.view_for(intent.key, snapshot)
        placement = controller.placements.get(intent.key)
        if placement is not None:
            notes.append("planned in the shape the last cycle's joint plan assigned")
    topology.observe_all(actuators.values(), snapshot)
    memory = controller_module.observed(actuators, workload.key, snapshot.time, memory)
    if req.overrides is not None:
        given = req.overrides.model_dump(exclude_none=True)
        notes.append("what-if: " + ", ".join(f"{k}={v}" for k, v in given.items())
                     if given else "what-if: no overrides given")
    return Prepared(intent, profiles, workload, view, current, admin, actuators, planner,
                    memory, runtime.knowledge, notes, placement)


# ------------------------------------------------------------------------------ compute
def _model_out(m: plan_domain.ModelInfo) -> schemas.ModelUsed:
    return schemas.ModelUsed(
        objective=m.objective, source=m.source, kind=m.kind, samples=m.samples,
        trained_at=finite(m.trained_at),
        validation=_json_safe(dict(m.validation)) if m.validation is not None else None)


def config_out(cfg: WorkloadConfig) -> schemas.ConfigOut:
    return schemas.ConfigOut(replicas=cfg.replicas, cpu=cfg.cpu, device=cfg.device,
                             pool=cfg.pool)


def _step_out(i: int, step: plan_domain.PlanStep, plan: plan_domain.Plan) -> schemas.StepOut:
    action = plan.actions[i - 1] if 0 < i <= len(plan.actions) else None
    return schemas.StepOut(
        step=i, action=_action_out(action.as_dict()) if action is not None else None,
        config=config_out(step.config),
        predicted={n: finite(pr.mean) for n, pr in step.predicted.items()},
        bound={n: finite(pr.bound) for n, pr in step.predicted.items()},
        cost_per_hour=finite(step.cost_per_hour), this_cycle=step.this_cycle)


def compute(p: Prepared) -> schemas.PreviewOut:
    """Plan on the prepared copies and show the plan as it is: the load it was sized for,
    its steps and predictions, models and reasons all come from the plan itself."""
    t0 = time.perf_counter()
    ctx = PlanningContext(p.intent, p.profiles, p.workload, p.snapshot, p.current,
                          use_case.planning_admin(p.admin, p.intent, p.workload.config),
                          without_knobs(p.actuators, use_case.fixed_knobs(p.intent)),
                          p.knowledge, p.snapshot.time,
                          p.memory.for_planner(p.planner.name), p.memory.actuators,
                          p.placement, safety.vetoed_shapes(p.memory.safety, p.snapshot.time))
    try:
        plan, _ = safety.plan_safely(p.planner, ctx, p.memory.safety)
    except TemporaryError as exc:
        raise PreviewFailed(503, f"planner {p.planner.name}: {exc}") from None
    except IntentPlannerError as exc:
        raise PreviewInvalid(("body",), f"planner {p.planner.name} cannot plan this intent: "
                             f"{exc}", "check the intent and the admin bounds",
                             kind="planning_failed") from None
    planning_ms = (time.perf_counter() - t0) * 1000.0
    steps = [_step_out(i, s, plan) for i, s in enumerate(plan.steps)]
    return schemas.PreviewOut(
        intent=p.intent.key, planner=plan.planner, applied=False, observed_at=p.snapshot.time,
        observed={k: finite(v) for k, v in p.current.items()},
        desired={o.name: o.value for o in p.intent.spec.objectives},
        observed_rate=finite(p.workload.request_rate), planned_rate=finite(plan.planned_rate),
        overrides=None, current=config_out(plan.current), target=config_out(plan.target),
        chosen=config_out(plan.chosen) if plan.chosen is not None else None,
        actions=[_action_out(a.as_dict()) for a in plan.actions], steps=steps,
        predicted={k: v for k, v in plan.predicted.items() if math.isfinite(v)},
        cost_per_hour=finite(plan.cost_per_hour),
        current_cost_per_hour=steps[0].cost_per_hour if steps else None,
        reasons=[r.text for r in plan.reason_parts] + p.notes,
        reason_parts=[schemas.ReasonOut(kind=r.kind, text=r.text) for r in plan.reason_parts],
        exploratory=plan.exploratory, models=[_model_out(m) for m in plan.models],
        planning_ms=planning_ms, total_ms=0.0)


def _action_out(d: Mapping[str, Any]) -> schemas.ActionOut:
    return schemas.ActionOut(actuator=str(d["actuator"]), workload=str(d["workload"]),
                             params=_json_safe(dict(d["params"])), reason=str(d["reason"]))


def preview(runtime: Runtime, req: schemas.PreviewRequest) -> schemas.PreviewOut:
    """Prepare and compute one preview (blocking: run it in a worker thread)."""
    t0 = time.perf_counter()
    out = compute(prepare(runtime, req))
    return out.model_copy(update={"overrides": req.overrides,
                                  "total_ms": (time.perf_counter() - t0) * 1000.0})


def _json_safe(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become ``None``, tuples lists, keys strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return None
    if value is None or isinstance(value, str | int | bool):
        return value
    try:
        f = float(value)  # numpy scalars
    except (TypeError, ValueError):
        return str(value)
    return f if math.isfinite(f) else None


json_safe = _json_safe
