"""Client geography in the simulated cluster (``clients`` in a scenario; docs/regions.md).

Requests of an exposed workload arrive from client regions, each with a share of the
workload's rate (its weight over the sum of weights, weights constant or a trace). Clients of
a region go to the nearest exposing pool whose load balancer has a ready pod behind it (a pool
without one is skipped, as a health-checked DNS or global load balancer skips it; none has a
ready pod: the nearest exposing pool, whose clients are then turned away). Each pool's load
balancer spreads what it is routed over the pool's ready pods (by the dispatch weights, as
the single Service does). The latency recorded is the client's: the round trip between the
client's region and the pool's region plus the serving pod's response time, so every latency
KPI of an exposed workload is measured at the client.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from planner.domain import geography
from planner.domain.geography import Geography
from simulator import queueing
from simulator.scenario import Scenario
from simulator.traces import Trace


class Regions:
    """The client regions of one simulation: their weights over time and the round trips."""

    def __init__(self, geo: Geography, weights: dict[str, Trace]) -> None:
        self.geo = geo
        self.weights = weights

    @classmethod
    def of(cls, scenario: Scenario, seed: int) -> Regions | None:
        clients = scenario.spec.clients
        if clients is None:
            return None
        geo = Geography({k: dict(v) for k, v in clients.latency_ms.items()},
                        clients.lb_cost_per_hour)
        return cls(geo, scenario.region_weights(seed))

    @property
    def lb_cost_per_hour(self) -> float:
        return self.geo.lb_cost_per_hour

    def shares(self, elapsed: float) -> dict[str, float]:
        """Each client region's share of the demand at ``elapsed`` seconds (sums to 1)."""
        w = {r: max(0.0, t.rate(elapsed)) for r, t in self.weights.items()}
        total = sum(w.values())
        if total <= 0:
            return {r: 1.0 / len(w) for r in w}
        return {r: v / total for r, v in w.items()}

    def demand(self, rate: float, elapsed: float) -> dict[str, float]:
        """Requests per second from each client region when ``rate`` arrive in all."""
        return {r: rate * s for r, s in self.shares(elapsed).items()}

    def routed(self, rate: float, elapsed: float, exposure: Sequence[str],
               pool_region: dict[str, str]) -> dict[str, float]:
        """Requests per second each exposing pool is routed."""
        return geography.routed_demand(self.demand(rate, elapsed), exposure, pool_region,
                                       self.geo)

    def serve(self, lam: float, elapsed: float, exposure: Sequence[str],
              pool_region: dict[str, str], pod_pools: list[str], shares: queueing.FloatArray,
              mu: queueing.FloatArray, base: queueing.FloatArray, timeout_ms: float,
              failed: queueing.FloatArray, servers: NDArray[np.int64]) -> queueing.StepOutcome:
        """One step of ``lam`` req/s served through the exposing pools' load balancers, over
        the ready pods (``pod_pools[i]``: pod ``i``'s pool; ``shares``: the dispatch shares
        over all ready pods, renormalised within each pool)."""
        n = len(pod_pools)
        pools_of = np.asarray(pod_pools, dtype=object)
        live = [p for p in exposure if any(x == p for x in pod_pools)]
        demand = self.demand(lam, elapsed)
        route = geography.route(demand, live or list(exposure), pool_region, self.geo)
        served, dropped = 0.0, 0.0
        util = np.zeros(n)
        served_i = np.zeros(n)
        parts: list[queueing.Components] = []
        for pool in sorted(set(route.values())):
            clients = {r: demand[r] for r, p in route.items() if p == pool and demand[r] > 0}
            lam_p = sum(clients.values())
            idx = np.flatnonzero(pools_of == pool) if n else np.zeros(0, dtype=np.int64)
            sh = shares[idx]
            sh = sh / sh.sum() if idx.size and sh.sum() > 0 else np.full(idx.size,
                                                                         1.0 / max(1, idx.size))
            out = queueing.step_outcome(lam_p, sh, mu[idx], base[idx], timeout_ms, failed[idx],
                                        servers[idx])
            served += out.served
            dropped += out.dropped
            if idx.size and lam_p > 0:
                util[idx] = out.utilization
                if out.served_per_pod is not None:
                    served_i[idx] = out.served_per_pod
            c = out.components
            if lam_p <= 0 or c.weight.size == 0:
                continue
            region = pool_region.get(pool, "")
            for r, rate in sorted(clients.items()):
                parts.append(queueing.Components(c.weight * (rate / lam_p),
                                                 c.offset_ms + self.geo.rtt(r, region),
                                                 c.rate_per_ms))
        comps = queueing.Components.concat(parts) if parts else queueing.Components.empty()
        return queueing.StepOutcome(served, dropped, comps, util,
                                    served_i if served > 0 else None)
