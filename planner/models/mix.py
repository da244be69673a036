"""Where an unpinned workload's pods are expected to run: the node-pool mix a learned model
needs to predict a configuration that leaves placement to the scheduler."""

from __future__ import annotations

from collections.abc import Mapping

from planner.domain.state import ClusterSnapshot, WorkloadState
from planner.models.observations import UNKNOWN_CLASS


def observed_mix(workload: WorkloadState, device: str) -> dict[str, float] | None:
    """Share of the unpinned workload's ready pods of ``device`` per node pool; ``None`` when
    it is pinned, runs another device, or none of those pods is ready.

    Only pods of the device the workload is configured for were placed by the scheduler under
    the unpinned template. Pods of the other device are the old pods of a change of device
    still rolling out, placed under the template before it, which may have pinned a pool:
    2 CPU pods left of a fleet pinned to the faster pool, read as where unpinned CPU pods
    go, made a learned model that knew only that pool vouch for unpinned CPU pods (gen-3238,
    docs/benchmarks.md section 67)."""
    if workload.config.pool is not None or workload.config.device != device:
        return None
    # From the workload's pod groups (pools in the order their first ready pod comes): the
    # same shares as counting its ready pods one by one.
    counts: dict[str, float] = {}
    for (_, dev, pool, _, ready), n in workload.pod_counts.items():
        if ready and dev == device:
            key = pool or UNKNOWN_CLASS
            counts[key] = counts.get(key, 0.0) + float(n)
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total > 0 else None


def expected_mix(workload: WorkloadState, snapshot: ClusterSnapshot, device: str,
                 last_seen: Mapping[str, float] | None = None) -> dict[str, float]:
    """Share of ``device``'s pods per node pool for an unpinned configuration.

    While the workload runs unpinned, its ready pods of that device say where the scheduler
    puts them (scaling keeps roughly that mix); its pods of another device do not: GPU pods
    in a GPU pool say nothing of where CPU pods would go (a CPU fleet may spread over pools far
    from the clients). With none of them ready now, ``last_seen`` (the mix they last had,
    from the planner's memory) says it. Otherwise the pods would spread over the cluster: the
    pools' shares of the allocatable CPU are the guess (for GPU pods, of the pools with
    GPUs). Without nodes, the pool is unknown.
    """
    seen = observed_mix(workload, device)
    if seen is not None:
        return seen
    if last_seen and workload.config.pool is None:
        return dict(last_seen)
    capacity = snapshot.facts.pool_cores           # counted once per snapshot
    if device == "gpu":
        gpu_pools = snapshot.facts.first_gpu_in_pool
        capacity = {k: v for k, v in capacity.items() if k in gpu_pools}
    total = sum(capacity.values())
    if total <= 0:
        return {UNKNOWN_CLASS: 1.0}
    return {k: v / total for k, v in capacity.items()}
