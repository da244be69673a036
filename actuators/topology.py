"""What an actuator may need to know about the cluster beyond one workload: its node pools
(region, GPUs, prices) and, for pod-level actuators, the pods and the nodes they run on.

Why not a new parameter of :meth:`actuators.base.Actuator.candidates`: the contract is shared
with third-party actuators, and only a few built-ins need the cluster. Why not a field of
:class:`planner.domain.state.WorkloadState`: the backends build that from their own data and would
all
have to fill it (for every workload, every cycle) for the sake of two actuators. Instead an
actuator that needs the cluster mixes in :class:`ClusterAware`: it gets the snapshot as a
constructor argument (tests, a fixed cluster) and through :meth:`ClusterAware.observe_cluster`,
which
whoever plans calls with the cycle's snapshot (:func:`observe_all`: the controller once per
cycle, the REST preview for its copy). Without a snapshot such an actuator stays conservative:
it proposes nothing it cannot check (no GPU, no pool it does not know of).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from planner.domain.admin import AdminConfig
from planner.domain.state import ClusterSnapshot, WorkloadState


@dataclass(frozen=True)
class PoolInfo:
    """One node pool as the actuators see it."""

    name: str
    region: str
    nodes: int
    cpu_capacity: float
    gpus: int
    cost_per_core_hour: float
    cost_per_gpu_hour: float


@dataclass(frozen=True)
class Topology:
    """The node pools of a cluster, by name, in name order."""

    pools: dict[str, PoolInfo]

    @staticmethod
    def of(snapshot: ClusterSnapshot) -> Topology:
        by_pool = snapshot.pools()
        pools = {
            name: PoolInfo(name, nodes[0].region, len(nodes), sum(n.cpu_capacity for n in nodes),
                           sum(n.gpus for n in nodes), nodes[0].cost_per_core_hour,
                           nodes[0].cost_per_gpu_hour)
            for name, nodes in sorted(by_pool.items())
        }
        return Topology(pools)

    def gpus(self, pool: str | None) -> int:
        """GPUs in ``pool`` (``None``: in the whole cluster)."""
        if pool is None:
            return sum(p.gpus for p in self.pools.values())
        info = self.pools.get(pool)
        return info.gpus if info is not None else 0


class ClusterAware:
    """Mixin for actuators that look at the cluster (see the module docstring)."""

    def __init__(self, snapshot: ClusterSnapshot | None = None) -> None:
        self.snapshot: ClusterSnapshot | None = None
        self.topology: Topology | None = None
        if snapshot is not None:
            self.observe_cluster(snapshot)

    def observe_cluster(self, snapshot: ClusterSnapshot) -> None:
        """Remember the cycle's snapshot (cheap when called again with the same one)."""
        if snapshot is self.snapshot:
            return
        self.snapshot = snapshot
        self.topology = Topology.of(snapshot)

    def workload_state(self, key: str) -> WorkloadState | None:
        return self.snapshot.workload(key) if self.snapshot is not None else None


def observe_all(actuators: Iterable[object], snapshot: ClusterSnapshot) -> None:
    """Give the cycle's snapshot to every actuator that wants it."""
    for act in actuators:
        if isinstance(act, ClusterAware):
            act.observe_cluster(snapshot)


def allowed_pools(admin: AdminConfig, topology: Topology | None) -> tuple[str, ...]:
    """Pools a workload may be pinned to: the admin's list, or every pool of the cluster."""
    if admin.pools is not None:
        return tuple(admin.pools)
    return tuple(topology.pools) if topology is not None else ()
