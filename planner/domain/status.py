"""Intent status as Kubernetes conditions.

``lastTransitionTime`` changes only when a condition's status flips (controller-runtime's
``meta.SetStatusCondition``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from planner.domain.intents import Intent
from planner.domain.plan import Plan

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    def as_dict(self, generation: int, transition: str) -> dict[str, Any]:
        return {"type": self.type, "status": self.status, "reason": self.reason,
                "message": self.message, "observedGeneration": generation,
                "lastTransitionTime": transition}


def merge_conditions(previous: list[dict[str, Any]], new: list[Condition], generation: int,
                     now: float) -> list[dict[str, Any]]:
    """New conditions, keeping the previous ``lastTransitionTime`` where status did not flip."""
    before = {c["type"]: c for c in previous}
    out = []
    for c in new:
        old = before.get(c.type)
        when = old["lastTransitionTime"] if old and old["status"] == c.status else rfc3339(now)
        out.append(c.as_dict(generation, when))
    return out


def objectives_condition(met: dict[str, bool | None],
                         reasons: dict[str, str] | None = None) -> Condition:
    unknown = [n for n, m in met.items() if m is None]
    failed = [n for n, m in met.items() if m is False]
    if unknown:
        why = "; ".join(f"{n}: {(reasons or {}).get(n, 'no data')}" for n in unknown)
        return Condition("ObjectivesMet", UNKNOWN, "MissingData", f"unknown objective(s): {why}")
    if failed:
        return Condition("ObjectivesMet", FALSE, "ObjectivesViolated",
                         f"not met: {', '.join(failed)}")
    return Condition("ObjectivesMet", TRUE, "AllObjectivesMet", f"{len(met)} objective(s) met")


def reachable_condition(plan: Plan) -> Condition:
    """``TargetsReachable``: false when the plan found a target below what the service can
    do on any configuration (reason parts of kind ``unreachable``)."""
    below = [p.text for p in plan.reason_parts if p.kind == "unreachable"]
    if below:
        return Condition("TargetsReachable", FALSE, "BelowServiceFloor", "; ".join(below))
    return Condition("TargetsReachable", TRUE, "NoTargetBelowFloor",
                     "no target is below what the service can do")


def build_status(
    intent: Intent,
    previous: dict[str, Any] | None,
    now: float,
    current: dict[str, float | None],
    met: dict[str, bool | None],
    plan: Plan | None,
    applied: list[str],
    errors: list[str],
    invalid: str | None = None,
    unknown_reasons: dict[str, str] | None = None,
    planner_error: str | None = None,
    changes: Mapping[str, float] | None = None,
    use_case: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Intent's status. ``errors`` are the actuators' (``ActuationFailed``); a planner that
    failed is ``planner_error`` (``Planned`` false, reason ``PlannerError``): the two are
    reported apart. ``changes`` is when each actuator last applied an action; ``use_case`` the
    ``useCase`` part (:func:`planner.domain.use_case.use_case_status`)."""
    gen = intent.metadata.generation
    conds: list[Condition] = []
    if invalid is not None:
        conds.append(Condition("Invalid", TRUE, "InvalidSpec", invalid))
        conds.append(Condition("Planned", FALSE, "InvalidSpec", "not planned: intent invalid"))
    else:
        conds.append(Condition("Invalid", FALSE, "Valid", "spec is valid"))
        conds.append(objectives_condition(met, unknown_reasons))
        if plan is not None:
            conds.append(Condition("Planned", TRUE, "PlanComputed", plan.reason or "planned"))
            conds.append(reachable_condition(plan))
        else:
            conds.append(Condition("Planned", FALSE, "PlannerError",
                                   planner_error or "no plan this cycle"))
        mode = "Active" if intent.spec.active else "Shadow"
        msg = ("actions are applied" if intent.spec.active
               else "shadow mode: plans are recorded, not applied")
        conds.append(Condition("Actuating", TRUE if intent.spec.active else FALSE, mode, msg))
        conds.append(Condition("ActuationFailed", TRUE, "ActionError", "; ".join(errors))
                     if errors else Condition("ActuationFailed", FALSE, "NoErrors",
                                              "every action applied"))
    prev = previous or {}
    status: dict[str, Any] = {
        "observedGeneration": gen,
        "conditions": merge_conditions(prev.get("conditions", []), conds, gen, now),
        "objectivesMet": f"{sum(1 for m in met.values() if m)}/{len(intent.spec.objectives)}",
        "currentObjectives": {k: v for k, v in current.items() if v is not None},
        "desiredObjectives": {o.name: o.value for o in intent.spec.objectives},
        "lastAction": prev.get("lastAction", ""),
    }
    if use_case is not None:
        status["useCase"] = dict(use_case)
    if applied:
        status["lastAction"] = applied[-1]
    if changes:
        status["lastChangeTimes"] = {k: rfc3339(t) for k, t in sorted(changes.items())}
    if plan is not None:
        new_plan = {
            "time": rfc3339(now), "planner": plan.planner, "reason": plan.reason,
            "target": plan.target.as_dict(),
            "actions": [a.as_dict() for a in plan.actions],
            "predicted": dict(plan.predicted),
        }
        old_plan = prev.get("lastPlan")
        same = isinstance(old_plan, dict) and all(
            old_plan.get(k) == new_plan[k] for k in ("planner", "target", "actions"))
        # An unchanged plan keeps its time: no status write every cycle for nothing new.
        status["lastPlan"] = old_plan if same else new_plan
    elif "lastPlan" in prev:
        status["lastPlan"] = prev["lastPlan"]
    return status
