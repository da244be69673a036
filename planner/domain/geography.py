"""Where clients are and which pools serve them: multi-region exposure as plain data.

A Service may be exposed per node pool (OpenYurt's PoolService: one load balancer per selected
pool). Clients of a region reach the **nearest exposing pool** (the smallest round trip from
their region to the pool's region; ties: the pool name), and that pool's load balancer spreads
them over the workload's ready pods in that pool. The latency a client sees is the round trip
plus the serving pool's latency.

The workload's replicas are split over its exposing pools by the demand each pool is routed
(:func:`split_replicas`: at least one pod per exposing pool, the rest in proportion, largest
remainder): one replica count per workload, as the planners choose it, and the pods follow the
clients (a Deployment per pool, as OpenYurt's YurtAppSet runs them). Both the simulator and the
planner's exposure decision use these functions, so what the planner predicts is what the
simulated cluster does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Geography:
    """Round trips between client regions and pool regions, and what exposing a pool costs.

    ``latency_ms[client_region][pool_region]`` is the round trip in milliseconds (every pair
    the scenario or the operator declares; an undeclared pair is unreachable: ``inf``)."""

    latency_ms: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    lb_cost_per_hour: float = 0.0
    """What one exposed pool's load balancer costs per hour."""

    def rtt(self, client: str, region: str) -> float:
        return float(self.latency_ms.get(client, {}).get(region, math.inf))

    @property
    def client_regions(self) -> tuple[str, ...]:
        return tuple(self.latency_ms)


def route(demand: Iterable[str], exposed: Sequence[str], pool_region: Mapping[str, str],
          geo: Geography) -> dict[str, str]:
    """The exposing pool each client region in ``demand`` reaches: the nearest one (ties: the
    pool name). Empty when nothing is exposed."""
    pools = sorted(exposed)
    if not pools:
        return {}
    return {r: min(pools, key=lambda p: (geo.rtt(r, pool_region.get(p, "")), p))
            for r in demand}


def routed_demand(demand: Mapping[str, float], exposed: Sequence[str],
                  pool_region: Mapping[str, str], geo: Geography) -> dict[str, float]:
    """Requests per second each exposing pool is routed (every exposing pool named, 0 where
    no client region is nearest to it)."""
    out = {p: 0.0 for p in sorted(exposed)}
    for region, pool in route(demand, exposed, pool_region, geo).items():
        out[pool] += max(0.0, float(demand[region]))
    return out


def split_replicas(replicas: int, routed: Mapping[str, float]) -> dict[str, int]:
    """``replicas`` over the pools of ``routed`` (pool -> routed demand): one pod per pool
    first (an exposing pool without a pod would turn its clients away), the rest in proportion
    to the routed demand, largest remainder first (ties: the pool name). Fewer replicas than
    pools: the pools with the most demand get one each. No demand anywhere: an even split."""
    pools = sorted(routed)
    if not pools or replicas <= 0:
        return {p: 0 for p in pools}
    total = sum(max(0.0, routed[p]) for p in pools)
    share = {p: (max(0.0, routed[p]) / total if total > 0 else 1.0 / len(pools)) for p in pools}
    if replicas < len(pools):
        ranked = sorted(pools, key=lambda p: (-share[p], p))
        return {p: (1 if p in ranked[:replicas] else 0) for p in pools}
    extra = replicas - len(pools)
    quota = {p: extra * share[p] for p in pools}
    out = {p: 1 + math.floor(quota[p]) for p in pools}
    left = replicas - sum(out.values())
    for p in sorted(pools, key=lambda p: (-(quota[p] - math.floor(quota[p])), p))[:left]:
        out[p] += 1
    return out
