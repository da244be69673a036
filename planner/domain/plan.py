"""Plans and the actions they are made of."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.domain.memory import Memory
from planner.domain.state import WorkloadConfig


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
class Plan:
    """What a planner wants for one intent this cycle.

    ``target`` is the configuration the planner aims for; ``actions`` are the steps from the
    current configuration towards it that fit within the admin's limits this cycle.
    ``predicted`` maps objective names to the values the planner expects after the actions.
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
        }
