"""HPA per pool: each exposing pool's Deployment scaled by the HPA rule on its own pods.

Where a Service is exposed per pool (docs/regions.md) a Kubernetes user runs a Deployment per
pool (OpenYurt's YurtAppSet) and puts a HorizontalPodAutoscaler on each: every pool's pod count
follows the CPU utilisation of that pool's pods alone, whatever the other pools do. This is that
baseline for the simulator: the rule of :mod:`planner.planners.hpa` (``desired = ceil(ready *
utilisation / target)``, 10 % tolerance, scale-down only to the highest recommendation of the
last 300 s, scale-up at most ``max(+100 %, +4 pods)`` per 15 s), applied per exposing pool
through :meth:`simulator.cluster.SimulatedCluster.scale_pools`, each pool between 1 pod and the
admin's ``replicas.max``. Objectives are not looked at.

It runs beside the controller as a cycle hook (``PoolHPA(target).step(sim)`` once per cycle,
HPA's 15 s sync period at the default cycle); the run's own planner should then act on nothing
(``bench/regions.py`` runs it with no actuator enabled). Its memory is data (:attr:`memory`).
"""

from __future__ import annotations

from typing import Any

from planner.planners import hpa
from simulator.cluster import SimulatedCluster


class PoolHPA:
    """The HPA rule per exposing pool of every exposed workload (see the module)."""

    def __init__(self, target: float, max_replicas: int) -> None:
        if not 0 < target <= 1:
            raise ValueError(f"target utilisation must be in (0, 1], got {target}")
        if max_replicas < 1:
            raise ValueError(f"max_replicas must be >= 1, got {max_replicas}")
        self.target = target
        self.max_replicas = max_replicas
        self.memory: dict[str, dict[str, Any]] = {}
        """Per ``<workload>@<pool>``: ``recommendations`` ([time, replicas] of the
        stabilisation window) and ``last_up`` (time of the last scale-up)."""

    def desired(self, key: str, now: float, current: int, ready: int,
                util: float | None) -> int:
        """The pool's replicas by the HPA rule (:func:`planner.planners.hpa.rule`; ``key``:
        its memory's)."""
        if util is None:
            return current
        mem = self.memory.setdefault(key, {"recommendations": [], "last_up": None})
        want, recs, mem["last_up"] = hpa.rule(current, ready, util, self.target, now,
                                              mem["recommendations"], mem["last_up"], 1,
                                              self.max_replicas)
        mem["recommendations"] = [[t, r] for t, r in recs]
        return want

    def step(self, sim: SimulatedCluster) -> dict[str, dict[str, int]]:
        """One sync: every exposed workload's pods per pool, set on ``sim``; returns them."""
        snap = sim.observe()
        out: dict[str, dict[str, int]] = {}
        for key, w in snap.workloads.items():
            if w.exposure is None:
                continue
            counts: dict[str, int] = {}
            for pool in w.exposure:
                pods = [p for p in w.pods if p.pool == pool]
                ready = [p for p in pods if p.ready and p.cpu_utilization is not None]
                util = (sum(p.cpu_utilization or 0.0 for p in ready) / len(ready)
                        if ready else None)
                current = sim.workloads[key].pool_replicas
                now_n = current.get(pool, 1) if current is not None else max(1, len(pods))
                counts[pool] = self.desired(f"{key}@{pool}", snap.time, now_n, len(ready),
                                            util)
            sim.scale_pools(key, counts)
            out[key] = counts
        return out
