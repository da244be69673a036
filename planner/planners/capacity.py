"""Capacity shared by the intents of one cycle: what each plan reserves.

The controller plans intents one after another, highest priority first, on one snapshot of
the cluster. Without a ledger every intent would see the same free room and two of them would
both plan to fill it, leaving pods Pending. :func:`reserve` returns the snapshot as the next
intent should see it: the pods a plan adds are placed (as the scheduler would: the node with
the most free CPU first) and their room counted as allocated. The safety layer's capacity rule
(:func:`planner.planners.safety.schedulable_replicas`) then caps a lower-priority intent at
what is left, and its plan says so: priority decides who gets scarce capacity.

Pods a plan removes are not given back within the cycle (they leave only as a rollout or a
scale-in completes), so the ledger errs on the side of too little room, never too much.
"""

from __future__ import annotations

from dataclasses import replace

from planner.domain.plan import Plan
from planner.domain.state import ClusterSnapshot, NodeState, WorkloadState


def _fits(n: NodeState, cpu: float, gpus: int, pool: str | None) -> bool:
    if not n.schedulable or (pool is not None and n.pool != pool):
        return False
    if gpus and n.gpus - n.gpus_allocated < gpus:
        return False
    return n.cpu_capacity - n.cpu_allocated >= cpu - 1e-9


def added_pods(workload: WorkloadState, plan: Plan) -> int:
    """Pods of the plan's target shape it needs beyond those scheduled now."""
    t = plan.target
    have = sum(1 for p in workload.pods if p.node is not None and p.cpu == t.cpu
               and p.device == t.device and (t.pool is None or p.pool == t.pool))
    return max(0, t.replicas - have)


def reserve(snapshot: ClusterSnapshot, workload: WorkloadState, plan: Plan) -> ClusterSnapshot:
    """``snapshot`` with the room of the pods ``plan`` adds counted as allocated."""
    count = added_pods(workload, plan)
    if count == 0:
        return snapshot
    t = plan.target
    gpus = 1 if t.device == "gpu" else 0
    nodes = list(snapshot.nodes)
    for _ in range(count):
        best = None
        for i, n in enumerate(nodes):
            if _fits(n, t.cpu, gpus, t.pool) and (
                    best is None or n.cpu_capacity - n.cpu_allocated
                    > nodes[best].cpu_capacity - nodes[best].cpu_allocated):
                best = i
        if best is None:
            break
        n = nodes[best]
        nodes[best] = replace(n, cpu_allocated=n.cpu_allocated + t.cpu,
                              gpus_allocated=n.gpus_allocated + gpus)
    return replace(snapshot, nodes=tuple(nodes))
