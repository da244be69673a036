"""Placement: pin a workload's pods to one node pool (and so to a region), or let the
scheduler put them anywhere."""

from __future__ import annotations

from actuators.base import Actuator
from actuators.cooldown import Cooldown
from actuators.topology import ClusterAware, allowed_pools
from planner.domain.admin import AdminConfig
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, WorkloadConfig, WorkloadState


def _where(pool: str | None) -> str:
    return "anywhere" if pool is None else f"pool {pool}"


class PlacementActuator(ClusterAware, Actuator):
    """Sets the node pool (``None``: anywhere).

    Bounds: with ``admin.pools`` set, the workload is pinned to one of those pools (a target
    outside them is clipped to the first listed one that can host it: the admin's order is
    the preference); without, any pool of the cluster, or anywhere. GPU workloads only go to
    pools with at least one GPU per replica. Knowing the cluster's pools takes the topology
    (:mod:`actuators.topology`); without it and without ``admin.pools``, no pool is proposed.
    Moving restarts every pod, so after a move no further move for ``admin.cpu.cooldown_s``.
    """

    name = "placement"
    knobs = ("pool",)

    def __init__(self, admin: AdminConfig, snapshot: ClusterSnapshot | None = None) -> None:
        Actuator.__init__(self, admin)
        ClusterAware.__init__(self, snapshot)
        self.cooldown = Cooldown(admin.cpu.cooldown_s)

    def _hosts(self, pool: str | None, config: WorkloadConfig) -> bool:
        """Whether ``pool`` can host ``config`` as far as the topology tells (unknown: yes)."""
        if self.topology is None or pool is None:
            return True
        if pool not in self.topology.pools:
            return False
        return config.device != "gpu" or self.topology.gpus(pool) >= config.replicas

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        pools = self.admin.pools
        if pools is not None:
            if config.pool in pools:
                return config
            fit = [p for p in pools if self._hosts(p, config)]
            return config.with_(pool=(fit or list(pools))[0]) if pools else config
        if config.pool is None or self.topology is None or config.pool in self.topology.pools:
            return config
        return config.with_(pool=None)

    def _price(self, pool: str, config: WorkloadConfig) -> float:
        if self.topology is None or pool not in self.topology.pools:
            return 0.0
        info = self.topology.pools[pool]
        gpu = info.cost_per_gpu_hour if config.device == "gpu" else 0.0
        return config.cpu * info.cost_per_core_hour + gpu

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        names = [p for p in allowed_pools(self.admin, self.topology)
                 if p != current.pool and self._hosts(p, current)]
        names.sort(key=lambda p: (self._price(p, current), p))  # cheapest first
        out = [current.with_(pool=p) for p in names]
        if self.admin.pools is None and current.pool is not None:
            out.append(current.with_(pool=None))
        return out[:limit]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        self.held.pop(workload, None)
        want = self.clip(target).pool
        if want == current.pool:
            return []
        what = f"move from {_where(current.pool)} to {_where(want)}"
        if not self._hosts(want, target.with_(pool=want)):
            self.held[workload] = (f"{what} held: no such pool" if self.topology is not None
                                   and want not in self.topology.pools
                                   else f"{what} held: not enough GPUs there")
            return []
        held = self.cooldown.why_held(memory, now, what)
        if held is not None:
            self.held[workload] = held
            return []
        region = ""
        if want is not None and self.topology is not None and want in self.topology.pools:
            region = f" (region {self.topology.pools[want].region})"
        return [Action(self.name, workload, {"pool": want, "from": current.pool},
                       f"{what}{region}: restarts {current.replicas} pod(s) there")]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        pool = action.params.get("pool")
        backend.place(action.workload, None if pool is None else str(pool))

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        return self.cooldown.record(memory, now)
