"""Facts about the cluster every intent's planning reads (prices per pool and device, totals,
pool names), computed once per snapshot: one pass over the nodes instead of one per candidate
scoring call and intent (:attr:`planner.domain.state.ClusterSnapshot.facts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

Prices = tuple[float, float]
"""(price per core-hour, price per GPU-hour)."""


class Node(Protocol):
    """What the facts read of a node (:class:`planner.domain.state.NodeState`, which holds
    the facts: no import back)."""

    @property
    def pool(self) -> str: ...
    @property
    def cpu_capacity(self) -> float: ...
    @property
    def gpus(self) -> int: ...
    @property
    def cost_per_core_hour(self) -> float: ...
    @property
    def cost_per_gpu_hour(self) -> float: ...


@dataclass(frozen=True)
class ClusterFacts:
    total_cores: float = 0.0
    total_gpus: int = 0
    pool_names: tuple[str, ...] = ()
    """Every node pool, sorted."""
    first: Prices | None = None
    """The first node's prices (what a configuration no node can host is priced at)."""
    first_in_pool: dict[str, Prices] = field(default_factory=dict)
    first_gpu_in_pool: dict[str, Prices] = field(default_factory=dict)
    dearest: Prices = (0.0, 0.0)
    """Per price, the dearest node's (a pod that may land anywhere)."""
    dearest_gpu: Prices | None = None
    """Per price, the dearest GPU node's; ``None`` without GPU nodes."""
    pool_cores: dict[str, float] = field(default_factory=dict)
    """Allocatable cores per pool (pools in node order, each summed in node order)."""

    @property
    def has_gpu(self) -> bool:
        return self.total_gpus > 0

    @classmethod
    def of(cls, nodes: Sequence[Node]) -> ClusterFacts:
        first_in_pool: dict[str, Prices] = {}
        first_gpu_in_pool: dict[str, Prices] = {}
        core = gpu = core_g = gpu_g = -float("inf")
        pool_cores: dict[str, float] = {}
        cores, gpus = 0.0, 0
        for n in nodes:
            prices = (n.cost_per_core_hour, n.cost_per_gpu_hour)
            first_in_pool.setdefault(n.pool, prices)
            pool_cores[n.pool] = pool_cores.get(n.pool, 0.0) + n.cpu_capacity
            cores += n.cpu_capacity
            gpus += n.gpus
            core, gpu = max(core, prices[0]), max(gpu, prices[1])
            if n.gpus > 0:
                first_gpu_in_pool.setdefault(n.pool, prices)
                core_g, gpu_g = max(core_g, prices[0]), max(gpu_g, prices[1])
        if not nodes:
            return cls()
        return cls(cores, gpus, tuple(sorted(first_in_pool)),
                   (nodes[0].cost_per_core_hour, nodes[0].cost_per_gpu_hour),
                   first_in_pool, first_gpu_in_pool, (core, gpu),
                   (core_g, gpu_g) if first_gpu_in_pool else None, pool_cores)

    def prices(self, pool: str | None, device: str) -> Prices:
        """The prices of the nodes that could host a configuration in ``pool`` (``None``:
        anywhere, priced at the dearest eligible node, to be safe) on ``device``; where no
        node could, the first node's."""
        if self.first is None:
            return 0.0, 0.0
        gpu = device == "gpu"
        if pool is None:
            return (self.dearest_gpu or self.dearest) if gpu else self.dearest
        found = (self.first_gpu_in_pool if gpu else self.first_in_pool).get(pool)
        return found if found is not None else self.first
