"""What the controller holds for an intent within one cycle: the outcome it reports, and the
intent as observed while it waits for its plan to be applied (:class:`Staged`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.domain.intents import Intent, KPIProfile
from planner.domain.memory import IntentMemory
from planner.domain.plan import Action, Plan
from planner.domain.state import ClusterSnapshot, WorkloadState
from planner.planners.base import Planner


@dataclass
class IntentOutcome:
    """What one cycle did for one intent."""

    intent: Intent
    current: dict[str, float | None] = field(default_factory=dict)
    met: dict[str, bool | None] = field(default_factory=dict)
    plan: Plan | None = None
    applied: list[str] = field(default_factory=list)
    applied_actions: list[Action] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """The actuators' errors this cycle."""
    planner_error: str | None = None
    invalid: str | None = None
    use_case: dict[str, Any] | None = None
    """The status's ``useCase`` (:func:`planner.domain.use_case.use_case_status`)."""
    status: dict[str, Any] = field(default_factory=dict)


@dataclass
class Staged:
    """An intent observed this cycle and waiting for its plan to be applied."""

    out: IntentOutcome
    snapshot: ClusterSnapshot
    """What was observed (recorded in the event)."""
    workload: WorkloadState
    profiles: Mapping[str, KPIProfile]
    """KPI profile per objective name."""
    mem: IntentMemory
    """The intent's memory after the actuators observed this cycle."""
    planner: Planner
    unknown_reasons: dict[str, str]
    safety_memory: dict[str, Any] = field(default_factory=dict)
