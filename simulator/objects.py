"""A simulated node and pod: what :mod:`simulator.cluster` schedules and
:mod:`simulator.resize` resizes in place."""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.domain.state import WorkloadConfig
from simulator.scenario import PoolSpec


@dataclass
class SimNode:
    name: str
    pool: PoolSpec
    cpu_allocated: float = 0.0
    gpus_allocated: int = 0

    def fits(self, cpu: float, gpus: int) -> bool:
        return (self.pool.cpu - self.cpu_allocated >= cpu - 1e-9
                and self.pool.gpus - self.gpus_allocated >= gpus)


@dataclass
class SimPod:
    name: str
    cpu: float
    device: str
    pool: str | None
    created_at: float
    node: SimNode | None = None
    ready_at: float = math.inf
    down_until: float = -math.inf
    restarts: int = 0
    utilization: float = 0.0
    serial: int = 0
    """The pod's number in its workload (unique there; the metrics of :class:`ServedStep`
    name pods by it)."""
    resize_to: float | None = None
    """The CPU size an in-place resize is taking the pod to (:mod:`simulator.resize`);
    :attr:`cpu` is the size it runs at until the resize lands."""
    resize_at: float = math.inf
    """When the admitted in-place resize lands (``inf``: not admitted, or none asked)."""
    deferred_since: float | None = None
    """Since when the in-place resize has waited for room on the node (Deferred)."""
    reserved: float = 0.0
    """Cores an admitted in-place increase holds on the node before it lands."""
    succeeded_for: tuple[float, str, str | None] | None = None
    """The shape a pod was started in this pod's place for (a rollout's replacement)."""

    def ready(self, t: float) -> bool:
        return self.node is not None and t >= self.ready_at and t >= self.down_until

    def matches(self, cfg: WorkloadConfig) -> bool:
        return self.cpu == cfg.cpu and self.device == cfg.device and self.pool == cfg.pool

    @property
    def gpus(self) -> int:
        return 1 if self.device == "gpu" else 0
