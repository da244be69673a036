"""The event document recorded for each intent in each cycle (see :mod:`knowledge.base`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planner.domain.intents import Intent
from planner.domain.plan import Action, Plan
from planner.domain.state import ClusterSnapshot, WorkloadState


def build_event(
    intent: Intent,
    workload: WorkloadState,
    snapshot: ClusterSnapshot,
    current: dict[str, float | None],
    plan: Plan | None,
    applied: bool,
    applied_actions: Sequence[Action] | None = None,
) -> dict[str, Any]:
    hosting = {p.node for p in workload.pods if p.node}
    nodes = {n.name: {"pool": n.pool, "region": n.region, "cpu_capacity": n.cpu_capacity,
                      "cpu_allocated": n.cpu_allocated, "gpus": n.gpus,
                      "gpus_allocated": n.gpus_allocated}
             for n in snapshot.nodes if n.name in hosting}
    cfg = workload.config
    return {
        "time": snapshot.time,
        "intent": intent.key,
        "workload": workload.key,
        "priority": intent.spec.priority,
        "active": intent.spec.active,
        "current": dict(current),
        "desired": {o.name: o.value for o in intent.spec.objectives},
        "config": cfg.as_dict(),
        "load": {"request_rate": workload.request_rate,
                 "cpu_utilization": workload.cpu_utilization},
        "pods": [p.as_dict() for p in workload.pods],
        "resources": {"cpu_per_pod": cfg.cpu, "device": cfg.device,
                      "ready_replicas": workload.ready_replicas,
                      "cores": sum(p.cpu for p in workload.pods if p.node)},
        "nodes": nodes,
        "plan": plan.as_dict() if plan is not None else None,
        "planner": plan.planner if plan is not None else None,
        "exploratory": plan.exploratory if plan is not None else False,
        "applied": applied,
        "dispatch": dispatch_record(plan, applied, applied_actions),
    }


WEIGHTS_ACTUATOR = "weights"


def dispatch_record(plan: Plan | None, applied: bool,
                    applied_actions: Sequence[Action] | None = None) -> list[dict[str, Any]]:
    """The dispatch-weight changes of ``plan``: per workload, the weights, the policy, one
    entry per changed pod with the engine's reason, and whether they were applied.

    ``applied_actions`` (the actions that were carried out) makes ``applied`` exact per action;
    without it every action shares the event's ``applied`` flag.
    """
    if plan is None:
        return []
    out: list[dict[str, Any]] = []
    for action in plan.actions:
        if action.actuator != WEIGHTS_ACTUATOR:
            continue
        done = action in applied_actions if applied_actions is not None else applied
        params = action.params
        out.append({
            "workload": action.workload,
            "policy": params.get("policy"),
            "weights": dict(params.get("weights") or {}),
            "changes": [dict(c) for c in params.get("changes") or ()],
            "retry": dict(params.get("retry") or {}),
            "reason": action.reason,
            "applied": bool(done),
        })
    return out
