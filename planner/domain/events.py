"""The event document recorded for each intent in each cycle (see :mod:`knowledge.base`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner.domain.intents import Intent
from planner.domain.plan import Action, Plan
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadState


def build_event(
    intent: Intent,
    workload: WorkloadState,
    snapshot: ClusterSnapshot,
    current: dict[str, float | None],
    plan: Plan | None,
    applied: bool,
    applied_actions: Sequence[Action] | None = None,
    pod_detail: bool = True,
) -> dict[str, Any]:
    """The event of one intent in one cycle.

    Compact whatever the workload's size: its pods summarised per node pool, device, CPU size
    and readiness (``pod_groups``) and the nodes hosting them per pool (``node_pools``), both
    tables (:func:`table`). ``pod_detail`` adds every pod (``pods``) and hosting node
    (``nodes``), tables too: the controller asks for them when the pods changed, at most every
    few minutes (:class:`planner.control.event_detail.PodDetailSampler`), and the knowledge
    base keeps them apart from the event (:meth:`knowledge.base.KnowledgeBase.pod_details`)."""
    cfg = workload.config
    hosting = snapshot.nodes_named(sorted({p.node for p in workload.pods if p.node}))
    event: dict[str, Any] = {
        "time": snapshot.time,
        "intent": intent.key,
        "workload": workload.key,
        "priority": intent.spec.priority,
        "active": intent.spec.active,
        "current": dict(current),
        "desired": {o.name: o.value for o in intent.spec.objectives},
        "config": cfg.as_dict(),
        **({"use_case": {"class": uc.workload_class, "name": uc.name, "device": uc.device}}
           if (uc := intent.spec.use_case) is not None else {}),
        "load": {"request_rate": workload.request_rate,
                 "cpu_utilization": workload.cpu_utilization,
                 **({"utilization": workload.utilization}
                    if workload.utilization is not None else {})},
        "pod_groups": pod_groups(workload.pods),
        "resources": {"cpu_per_pod": cfg.cpu, "device": cfg.device,
                      "ready_replicas": workload.ready_replicas,
                      "cores": sum(p.cpu for p in workload.pods if p.node)},
        "node_pools": node_pools(hosting),
        "plan": plan.as_dict() if plan is not None else None,
        "planner": plan.planner if plan is not None else None,
        "exploratory": plan.exploratory if plan is not None else False,
        "applied": applied,
        "dispatch": dispatch_record(plan, applied, applied_actions),
    }
    if workload.canary is not None:
        # Its pods served part of the load: the KPIs are not the configuration's own.
        event["canary"] = {"config": workload.canary.config.as_dict(),
                           "pod_groups": pod_groups(workload.canary.pods)}
    if pod_detail:
        event["pods"] = table([p.as_dict() for p in workload.pods], POD_COLUMNS)
        event["nodes"] = table([{"name": n.name, "pool": n.pool, "region": n.region,
                                 "cpu_capacity": n.cpu_capacity,
                                 "cpu_allocated": n.cpu_allocated, "gpus": n.gpus,
                                 "gpus_allocated": n.gpus_allocated} for n in hosting],
                               NODE_COLUMNS)
    return event


POD_GROUP_COLUMNS = ("pool", "device", "cpu", "ready", "scheduled", "count", "restarts")
NODE_POOL_COLUMNS = ("pool", "region", "nodes", "cpu_capacity", "cpu_allocated", "gpus",
                     "gpus_allocated")
POD_COLUMNS = ("name", "node", "cpu", "device", "ready", "restarts", "started_at",
               "cpu_utilization", "pool", "request_rate", "gpu_utilization",
               "gpu_memory_utilization")
NODE_COLUMNS = ("name", "pool", "region", "cpu_capacity", "cpu_allocated", "gpus",
                "gpus_allocated")


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> dict[str, list[Any]]:
    """``rows`` as one list per column (``pandas.DataFrame(table)`` reads it as it is): each
    field name is stored once per event instead of once per row, which at ten node pools
    halves an event (``docs/benchmarks.md`` section 36)."""
    return {c: [r.get(c) for r in rows] for c in columns}


def records(stored: Any, key: str = "name") -> list[dict[str, Any]]:
    """The rows of a stored table (:func:`table`). Events recorded before tables held a list
    of rows (``pod_groups``, ``pods``) or rows by name (``node_pools`` by pool, ``nodes`` by
    node): those come back as rows too, the name under ``key``. ``[]`` for anything else, or
    for columns of unequal length (a document damaged by hand: a reader must not pair the
    wrong values)."""
    if isinstance(stored, list):
        return [r for r in stored if isinstance(r, dict)]
    if not isinstance(stored, Mapping) or not stored:
        return []
    values = list(stored.values())
    if all(isinstance(v, Mapping) for v in values):
        return [{key: k, **v} for k, v in stored.items()]
    if not all(isinstance(v, list) for v in values) or len({len(v) for v in values}) != 1:
        return []
    return [dict(zip(stored.keys(), row, strict=True)) for row in zip(*values, strict=True)]


def pod_groups(pods: Sequence[PodState]) -> dict[str, list[Any]]:
    """The pods counted per (node pool, device, CPU size, ready, scheduled), with their
    restarts, as a table: what training and a reader of the knowledge base need of them, in a
    size that does not grow with the replicas."""
    groups: dict[tuple[str | None, str, float, bool, bool], dict[str, Any]] = {}
    for p in pods:
        key = (p.pool, p.device, p.cpu, p.ready, p.node is not None)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"pool": p.pool, "device": p.device, "cpu": p.cpu,
                               "ready": p.ready, "scheduled": p.node is not None,
                               "count": 0, "restarts": 0}
        g["count"] += 1
        g["restarts"] += p.restarts
    return table(list(groups.values()), POD_GROUP_COLUMNS)


def node_pools(hosting: Sequence[NodeState]) -> dict[str, list[Any]]:
    """Per node pool of ``hosting`` (the nodes hosting a workload's pods), as a table: the
    pool (``""`` for nodes in none), how many nodes, their region, their CPU and GPU capacity
    and allocation (summed)."""
    out: dict[str, dict[str, Any]] = {}
    for n in hosting:
        name = n.pool or ""
        pool = out.get(name)
        if pool is None:        # (a row built per pool, not per node and thrown away)
            pool = out[name] = {"pool": name, "region": n.region, "nodes": 0,
                                "cpu_capacity": 0.0, "cpu_allocated": 0.0, "gpus": 0,
                                "gpus_allocated": 0}
        pool["nodes"] += 1
        pool["cpu_capacity"] += n.cpu_capacity
        pool["cpu_allocated"] += n.cpu_allocated
        pool["gpus"] += n.gpus
        pool["gpus_allocated"] += n.gpus_allocated
    return table(list(out.values()), NODE_POOL_COLUMNS)


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
