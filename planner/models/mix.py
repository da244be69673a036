"""Where an unpinned workload's pods are expected to run: the node-pool mix a learned model
needs to predict a configuration that leaves placement to the scheduler."""

from __future__ import annotations

from planner.domain.state import ClusterSnapshot, WorkloadState
from planner.models.observations import UNKNOWN_CLASS


def expected_mix(workload: WorkloadState, snapshot: ClusterSnapshot) -> dict[str, float]:
    """Share of the pods per node pool for an unpinned configuration.

    While the workload runs unpinned, its ready pods say where the scheduler puts them (scaling
    keeps roughly that mix). A pinned workload that were unpinned would spread over the
    cluster: the pools' shares of the allocatable CPU are the guess then. Without nodes, the
    pool is unknown.
    """
    if workload.config.pool is None:
        # From the workload's pod groups (pools in the order their first ready pod comes):
        # the same shares as counting its ready pods one by one.
        counts: dict[str, float] = {}
        for (_, _, pool, _, ready), n in workload.pod_counts.items():
            if ready:
                key = pool or UNKNOWN_CLASS
                counts[key] = counts.get(key, 0.0) + float(n)
        total = sum(counts.values())
        if total > 0:
            return {k: v / total for k, v in counts.items()}
    capacity = snapshot.facts.pool_cores           # counted once per snapshot
    total = sum(capacity.values())
    if total <= 0:
        return {UNKNOWN_CLASS: 1.0}
    return {k: v / total for k, v in capacity.items()}
