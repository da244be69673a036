"""Capacity shared by the intents of one cycle: what each plan reserves.

The controller plans intents one after another, highest priority first, on one snapshot of
the cluster. Without a ledger every intent would see the same free room and two of them would
both plan to fill it, leaving pods Pending. :func:`reserve` returns the snapshot as the next
intent should see it: the pods a plan adds are placed (as the scheduler would: the node with
the most free CPU first) and their room counted as allocated. The safety layer's capacity rule
(:func:`schedulable_replicas`) then caps a lower-priority intent at
what is left, and its plan says so: priority decides who gets scarce capacity.

Pods a plan removes are not given back within the cycle (they leave only as a rollout or a
scale-in completes), so the ledger errs on the side of too little room, never too much.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

from planner.domain.plan import Plan
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState


def eligible(node: NodeState, cfg: WorkloadConfig) -> bool:
    """Whether ``node`` may host a pod of ``cfg``'s shape at all (uncordoned, in its pool,
    with GPUs for a GPU pod)."""
    if not node.schedulable or (cfg.pool is not None and node.pool != cfg.pool):
        return False
    return cfg.device != "gpu" or node.gpus > 0


def runs(pod: PodState, cfg: WorkloadConfig) -> bool:
    """Whether ``pod`` runs ``cfg``'s shape (CPU size, device, and its pool when pinned)."""
    return runs_shape(pod.cpu, pod.device, pod.pool, cfg)


def runs_shape(cpu: float, device: str, pool: str | None, cfg: WorkloadConfig) -> bool:
    """Whether pods of CPU size ``cpu`` and ``device`` in ``pool`` run ``cfg``'s shape."""
    return cpu == cfg.cpu and device == cfg.device and (cfg.pool is None or pool == cfg.pool)


def _room(n: NodeState, cfg: WorkloadConfig, freed: float = 0.0) -> int:
    """Pods of ``cfg``'s shape that fit ``n``'s free room (plus ``freed`` cores)."""
    if not eligible(n, cfg) or cfg.cpu <= 0:
        return 0
    slots = math.floor((n.cpu_capacity - n.cpu_allocated + freed) / cfg.cpu + 1e-9)
    if cfg.device == "gpu":
        slots = min(slots, n.gpus - n.gpus_allocated)
    return max(0, slots)


Shape = tuple[float, str, "str | None"]
"""A pod shape as room is counted for it: CPU size, device, pinned pool."""
ROOM = "capacity.room"
"""Key of :attr:`ClusterSnapshot.memo`: free slots per :data:`Shape` over the whole cluster."""


HEAPS = "capacity.heaps"
"""Key of :attr:`ClusterSnapshot.memo`: the placement heap per :data:`Shape`, handed on from a
snapshot to the one :func:`reserve_config` returns (:func:`_heaps`)."""


def _shape(cfg: WorkloadConfig) -> Shape:
    return (cfg.cpu, cfg.device, cfg.pool)


def free_slots(snapshot: ClusterSnapshot, cfg: WorkloadConfig) -> int:
    """Pods of ``cfg``'s shape that fit the free room of the cluster's nodes: counted once per
    snapshot and shape, then kept up to date by :func:`reserve_config` (every intent of a cycle
    asks; a scan of every node per intent would not scale)."""
    room: dict[Shape, int] = snapshot.memo.setdefault(ROOM, {})
    key = _shape(cfg)
    total = room.get(key)
    if total is None:
        total = room[key] = sum(_room(n, cfg) for n in snapshot.nodes)
    return total


def schedulable_replicas(workload: WorkloadState, snapshot: ClusterSnapshot,
                         cfg: WorkloadConfig) -> int:
    """How many pods of ``cfg``'s shape the workload can have scheduled: its scheduled pods of
    that shape, plus what fits in the free room of the eligible nodes counting the room its
    other pods there free as a rolling update replaces them (a pod fits a node or not).

    The cluster's free room comes from :func:`free_slots`; only the nodes hosting the
    workload's other pods are looked at one by one: work proportional to its own pods (none
    when every scheduled pod runs ``cfg``'s shape, as the workload's pod counts tell)."""
    matching = scheduled_running(workload, cfg)
    freed = 0
    if matching < on_nodes(workload):
        mine: dict[str, float] = {}
        for p in workload.pods:
            if p.node is not None and not runs(p, cfg):
                mine[p.node] = mine.get(p.node, 0.0) + p.cpu
        freed = sum(_room(n, cfg, mine[n.name]) - _room(n, cfg)
                    for n in snapshot.nodes_named(mine))
    return matching + free_slots(snapshot, cfg) + freed


def on_nodes(workload: WorkloadState) -> int:
    """The workload's pods on a node (ready or starting), from its pod counts."""
    return sum(n for (_, _, _, on_node, _), n in workload.pod_counts.items() if on_node)


def scheduled_running(workload: WorkloadState, cfg: WorkloadConfig, ready: bool = False
                      ) -> int:
    """The workload's pods on a node that run ``cfg``'s shape (:func:`runs`; ``ready``: only
    those ready), counted from its pod groups (:attr:`WorkloadState.pod_counts`), not pod by
    pod."""
    return sum(n for (cpu, device, pool, on_node, is_ready), n in workload.pod_counts.items()
               if on_node and (is_ready or not ready) and runs_shape(cpu, device, pool, cfg))


def starting(workload: WorkloadState, cfg: WorkloadConfig) -> bool:
    """Some pod of ``cfg``'s shape is on a node and not ready yet: starting. (A pod waiting
    for room is not: it makes no progress.)"""
    return scheduled_running(workload, cfg) > scheduled_running(workload, cfg, ready=True)


def added_pods(workload: WorkloadState, plan: Plan) -> int:
    """Pods of the plan's target shape it needs beyond those scheduled now."""
    return _added(workload, plan.target)


def _added(workload: WorkloadState, cfg: WorkloadConfig) -> int:
    return max(0, cfg.replicas - scheduled_running(workload, cfg))


def reserve(snapshot: ClusterSnapshot, workload: WorkloadState, plan: Plan) -> ClusterSnapshot:
    """``snapshot`` with the room of the pods ``plan`` adds counted as allocated."""
    return reserve_config(snapshot, workload, plan.target)


def reserve_config(snapshot: ClusterSnapshot, workload: WorkloadState,
                   t: WorkloadConfig) -> ClusterSnapshot:
    """``snapshot`` with the room of the pods the workload needs beyond those it has
    scheduled of ``t``'s shape counted as allocated; ``snapshot`` itself when that is none,
    or when no node has room for one of them (no copy of the nodes)."""
    count = _added(workload, t)
    if count == 0:
        return snapshot
    gpus = 1 if t.device == "gpu" else 0
    nodes = list(snapshot.nodes)
    # Each pod goes to the node with room for it and the most free CPU, the first in node
    # order among equals (as the scheduler spreads): a heap of (-free CPU, index), not a scan
    # of every node per pod. The heap of each shape is built once per cycle and handed on
    # from snapshot to reserved snapshot (see _heaps), not rebuilt for every reservation.
    heaps = _heaps(snapshot)
    key = _shape(t)
    heap = heaps.get(key)
    if heap is None:
        heap = heaps[key] = [(-(n.cpu_capacity - n.cpu_allocated), i)
                             for i, n in enumerate(nodes) if _room(n, t) > 0]
        heapq.heapify(heap)
    changed: set[int] = set()
    placed = 0
    while placed < count and heap:
        free, best = heapq.heappop(heap)
        n = nodes[best]
        if _room(n, t) <= 0:  # filled by another shape's reservation since it was pushed
            continue
        if free != -(n.cpu_capacity - n.cpu_allocated):  # less free room now: its true place
            heapq.heappush(heap, (-(n.cpu_capacity - n.cpu_allocated), best))
            continue
        nodes[best] = n = replace(n, cpu_allocated=n.cpu_allocated + t.cpu,
                                  gpus_allocated=n.gpus_allocated + gpus)
        changed.add(best)
        placed += 1
        if _room(n, t) > 0:
            heapq.heappush(heap, (-(n.cpu_capacity - n.cpu_allocated), best))
    if not placed:  # no node has room for the shape: the same cluster, the same snapshot
        snapshot.memo[HEAPS] = heaps
        return snapshot
    out = snapshot.with_allocation(tuple(nodes))
    out.memo[HEAPS] = heaps
    room: dict[Shape, int] | None = snapshot.memo.get(ROOM)
    if room:  # the free room counted so far, less what the placed pods took
        out.memo[ROOM] = {shape: total + _taken(shape, changed, snapshot.nodes, nodes)
                          for shape, total in room.items()}
    return out


def _heaps(snapshot: ClusterSnapshot) -> dict[Shape, list[tuple[float, int]]]:
    """The placement heaps of ``snapshot``, taken from it (a reservation hands them on to the
    snapshot it returns; another reservation from ``snapshot`` builds its own).

    A heap holds one entry (-free CPU, index) per node with room for its shape; an entry's
    free CPU may be more than the node's now (reservations of other shapes took room since;
    allocations within a cycle only grow), never less, so the entry popped is either the
    node with the most free CPU (first in node order among equals), exactly as a heap built
    afresh would give it, or stale and put back at its true place (or dropped without room)."""
    heaps: dict[Shape, list[tuple[float, int]]] | None = snapshot.memo.pop(HEAPS, None)
    return {} if heaps is None else heaps


def _taken(shape: Shape, changed: set[int], before: tuple[NodeState, ...],
           after: list[NodeState]) -> int:
    """How the free slots of ``shape`` changed on the ``changed`` nodes (<= 0)."""
    cfg = WorkloadConfig(1, *shape)
    return sum(_room(after[i], cfg) - _room(before[i], cfg) for i in changed)
