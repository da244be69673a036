"""The configuration space a planner may choose from, given the enabled actuators and the
admin's bounds, and the price of every point in it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from planner.domain.state import ClusterSnapshot
from planner.models.predictor import CandidateBatch
from planner.planners.base import PlanningContext


@dataclass(frozen=True)
class SearchSpace:
    replicas: tuple[int, ...]
    cpus: tuple[float, ...]
    devices: tuple[str, ...]
    pools: tuple[str | None, ...]

    @property
    def size(self) -> int:
        return len(self.replicas) * len(self.cpus) * len(self.devices) * len(self.pools)

    def grid(self) -> CandidateBatch:
        """Every candidate: each shape of :attr:`shapes` with every replica count, shape by
        shape."""
        cpu, gpu, pools = self.shapes
        n_r = len(self.replicas)
        return CandidateBatch(np.tile(np.asarray(self.replicas, dtype=float), len(pools)),
                              np.repeat(cpu, n_r), np.repeat(gpu, n_r),
                              tuple(itertools.chain.from_iterable(
                                  itertools.repeat(p, n_r) for p in pools)))

    @cached_property
    def shapes(self) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str | None, ...]]:
        """Every (CPU size, device, pool) combination in :meth:`grid`'s order, as the CPU,
        GPU and pool columns of a :class:`CandidateBatch` (one row per combination)."""
        combos = list(itertools.product(self.cpus, self.devices, self.pools))
        cpu = np.array([c for c, _, _ in combos], dtype=float)
        gpu = np.array([1.0 if d == "gpu" else 0.0 for _, d, _ in combos])
        return cpu, gpu, tuple(p for _, _, p in combos)

    def rows(self, idx: NDArray[np.intp]) -> CandidateBatch:
        """``grid().take(idx)`` (the same values) without building the grid: row ``i`` is
        replica count ``i % len(replicas)`` of shape ``i // len(replicas)``."""
        cpu, gpu, pools = self.shapes
        shape, rep = np.divmod(idx, len(self.replicas))
        return CandidateBatch(np.asarray(self.replicas, dtype=float)[rep], cpu[shape],
                              gpu[shape], tuple(pools[i] for i in shape.tolist()))


def space_for(ctx: PlanningContext) -> SearchSpace:
    knobs = {k for a in ctx.actuators.values() for k in a.knobs}
    cur = ctx.config
    b = ctx.admin.replicas
    replicas = tuple(range(max(b.min, 1), b.max + 1)) if "replicas" in knobs else (cur.replicas,)
    cpus = tuple(sorted(set(ctx.admin.cpu.sizes))) if "cpu" in knobs else (cur.cpu,)
    facts = ctx.snapshot.facts
    has_gpu = facts.has_gpu
    devices: tuple[str, ...] = (cur.device,)
    if "device" in knobs:
        devices = tuple(d for d in ctx.admin.devices if d == "cpu" or has_gpu) or (cur.device,)
    pools: tuple[str | None, ...] = (cur.pool,)
    if "pool" in knobs:
        names = ctx.admin.pools or facts.pool_names
        pools = (None, *names)
    if ctx.placement is not None:           # a shape assigned by joint planning
        p = ctx.placement
        cpus, devices, pools = (p.cpu,), (p.device,), (p.pool,)
    return SearchSpace(replicas, cpus, devices, pools)


def prices(snapshot: ClusterSnapshot, batch: CandidateBatch) -> NDArray[np.float64]:
    """Cost per hour of each candidate (a pool of ``None`` is priced at the dearest pool that
    could host it, as :func:`planner.domain.cost.pool_prices`)."""
    from planner.domain.cost import pool_prices

    # Per distinct pool both devices' prices once, then per row a look-up.
    pools, rows = batch.pool_rows
    table = np.array([[pool_prices(snapshot, pool, device) for device in ("cpu", "gpu")]
                      for pool in pools], dtype=float).reshape(len(pools), 2, 2)
    gpu = (batch.gpu > 0.5).astype(np.intp)
    core, gpu_price = table[rows, gpu, 0], table[rows, gpu, 1]
    out: NDArray[np.float64] = batch.replicas * (batch.cpu * core + batch.gpu * gpu_price)
    return out


def gpu_capacity_ok(snapshot: ClusterSnapshot, batch: CandidateBatch) -> NDArray[np.bool_]:
    """Candidates that fit the cluster's GPUs and cores at all (ignoring other workloads); a
    GPU candidate pinned to a pool without GPU nodes fits nowhere."""
    facts = snapshot.facts
    gpus, cores = facts.total_gpus, facts.total_cores
    pools, rows = batch.pool_rows
    hosts = np.array([p is None or p in facts.first_gpu_in_pool for p in pools],
                     dtype=bool)[rows]
    out: NDArray[np.bool_] = ((batch.gpu < 0.5) | ((batch.replicas <= gpus) & hosts)) & (
        batch.replicas * batch.cpu <= cores)
    return out
