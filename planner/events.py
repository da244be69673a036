"""The event document recorded for each intent in each cycle (see :mod:`knowledge.base`)."""

from __future__ import annotations

from typing import Any

from planner.intents import Intent
from planner.plan import Plan
from planner.state import ClusterSnapshot, WorkloadState


def build_event(
    intent: Intent,
    workload: WorkloadState,
    snapshot: ClusterSnapshot,
    current: dict[str, float | None],
    plan: Plan | None,
    applied: bool,
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
    }
