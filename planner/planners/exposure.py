"""Which node pools expose an intent's Service: a small decision layered on every plan.

Runs after the intent's planner chose the replicas and shape (:func:`with_exposure`, called by
:func:`planner.planners.safety.plan_safely`), only where the workload is exposed per pool
(:attr:`WorkloadState.exposure`), the backend knows the geography
(:attr:`ClusterSnapshot.geography`) and the ``exposure`` actuator is enabled. Elsewhere the plan
is returned as it is, so nothing changes for workloads without client regions.

**The model** (docs/regions.md). Clients of a region reach the nearest exposing pool
(:func:`planner.domain.geography.route`), so the latency they see is the round trip plus the
service's. A latency objective (target ``T`` at percentile ``q``) leaves the round trip a part
of ``T``: ``admin.exposure.networkShare`` (0.5 by default: half for the network, half for the
service, which the per-workload planner provisions for). A client region whose round trip to
its serving pool is above ``networkShare * T`` is *served too far*. An exposure set holds the
objective only if the demand served too far stays inside the objective's tail ``1 - q`` (for
p95: 5 % of the requests); it is *acceptable* while that share is below ``tailShare`` of the
tail (``admin.exposure.tailShare``). Its default is 0: no demand served too far, because the
per-workload planner sizes the service for the whole tail, so demand served too far takes
tail the service then misses (measured: with 0.5, violations while 2 % of the demand was
served across the ocean; docs/regions.md).

**The choice**, from the client demand per region observed now:

* the current set acceptable: keep it, unless a cheaper set has at most half that share
  served too far (narrowing only well inside the bound, so a shrinking region is not
  dropped and re-added);
* otherwise: the cheapest acceptable set; none acceptable: the set with the least demand
  served too far (then the cheapest).

Cost per hour of a set = its load balancers (``geography.lb_cost_per_hour`` each) + the plan's
target replicas split over its pools as the cluster splits them
(:func:`planner.domain.geography.split_replicas`: at least a pod per pool), at each pool's
price. Candidate sets: every non-empty set of the pools the intent's regions allow, up to the
admin's ``maxPools``. The :class:`~actuators.exposure.ExposureActuator` then moves one pool at a
time with a cooldown; the plan's reason and the action's say which regions are served too far,
by how much, and what each set costs.

Not modelled: demand forecasts (the decision reads the demand of the last metrics window;
the widening threshold below the tail is what leaves time), the service latency of each
pool (the per-workload planner sizes one replica count, the split keeps the load per pod even).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from actuators.exposure import ExposureActuator, allowed_pools
from planner.domain.geography import Geography, route, routed_demand, split_replicas
from planner.domain.intents import KPIType
from planner.domain.plan import Plan, ReasonPart, join_reason
from planner.planners.base import PlanningContext

MAX_CANDIDATE_POOLS = 12
"""Pools beyond this many are not enumerated: the current ones, then, client region by client
region (most demand first), each region's nearest pool not yet taken (:func:`_nearest_first`)."""


@dataclass(frozen=True)
class Budget:
    """The network's part of the tightest latency objective."""

    rtt_ms: float
    """Largest round trip a client region may be served over."""
    tail: float
    """Share of requests the objective lets be slow (1 - percentile)."""
    objective: str
    target_ms: float


@dataclass(frozen=True)
class Option:
    pools: tuple[str, ...]
    far_share: float
    cost_per_hour: float
    far_regions: tuple[str, ...]


@dataclass(frozen=True)
class Decision:
    wanted: tuple[str, ...]
    reason: str
    options: tuple[Option, ...]


def budget(ctx: PlanningContext) -> Budget | None:
    """The tightest latency objective's network budget (``None``: no latency objective)."""
    share = ctx.admin.exposure.network_share
    best: Budget | None = None
    for obj in ctx.intent.spec.objectives:
        prof = ctx.profiles.get(obj.name)
        if prof is None or prof.spec.type is not KPIType.LATENCY:
            continue
        b = Budget(obj.value * share, 1.0 - prof.spec.latency_percentile / 100.0, obj.name,
                   obj.value)
        if best is None or (b.rtt_ms, b.tail) < (best.rtt_ms, best.tail):
            best = b
    return best


def evaluate(pools: tuple[str, ...], demand: Mapping[str, float], pool_region: Mapping[str, str],
             price: Mapping[str, float], geo: Geography, replicas: int, cpu: float,
             rtt_budget: float) -> Option:
    """Demand share served too far and cost per hour of exposing ``pools``."""
    total = sum(max(0.0, v) for v in demand.values())
    routes = route(demand, pools, pool_region, geo)
    far = tuple(sorted(r for r, p in routes.items()
                       if geo.rtt(r, pool_region.get(p, "")) > rtt_budget and demand[r] > 0))
    far_share = sum(demand[r] for r in far) / total if total > 0 else 0.0
    split = split_replicas(replicas, routed_demand(demand, pools, pool_region, geo))
    cost = geo.lb_cost_per_hour * len(pools) + sum(n * cpu * price.get(p, 0.0)
                                                   for p, n in split.items())
    return Option(pools, far_share, cost, far)


def _nearest_first(allowed: Sequence[str], current: Sequence[str], demand: Mapping[str, float],
                   pool_region: Mapping[str, str], geo: Geography) -> list[str]:
    """At most :data:`MAX_CANDIDATE_POOLS` of ``allowed``, sorted: the current ones, then in
    rounds over the client regions (most demand first) each region's nearest pool not taken
    yet (ties: the pool name), then the rest by name."""
    order = [p for p in current if p in allowed]
    regions = sorted((r for r, v in demand.items() if v > 0), key=lambda r: (-demand[r], r))
    near = {r: sorted(allowed, key=lambda p: (geo.rtt(r, pool_region.get(p, "")), p))
            for r in regions}
    for rank in range(len(allowed)):
        if len(order) >= MAX_CANDIDATE_POOLS:
            break
        for r in regions:
            if near[r][rank] not in order:
                order.append(near[r][rank])
    order.extend(p for p in allowed if p not in order)
    return sorted(dict.fromkeys(order[:MAX_CANDIDATE_POOLS]))


def _candidates(pools: Sequence[str], cap: int | None) -> list[tuple[str, ...]]:
    top = min(len(pools), cap if cap is not None else len(pools))
    return [c for k in range(1, top + 1) for c in combinations(pools, k)]


def decide(ctx: PlanningContext, plan: Plan) -> Decision | None:
    """The exposure the intent should have (``None``: not exposed per pool, no geography,
    no demand or no latency objective to decide by)."""
    wl, snap = ctx.workload, ctx.snapshot
    geo = snap.geography
    if wl.exposure is None or geo is None or not wl.client_demand:
        return None
    b = budget(ctx)
    if b is None:
        return None
    demand = {r: float(v) for r, v in wl.client_demand.items()}
    if sum(demand.values()) <= 0:
        return None
    pool_region = {n.pool: n.region for n in snap.nodes}
    price: dict[str, float] = {}
    for n in snap.nodes:
        price.setdefault(n.pool, n.cost_per_core_hour)
    allowed = allowed_pools(pool_region, ctx.intent.spec.regions)
    if not allowed:
        return None
    current = tuple(sorted(wl.exposure))
    target = plan.target
    opts = {c: evaluate(c, demand, pool_region, price, geo, target.replicas, target.cpu,
                        b.rtt_ms)
            for c in _candidates(_nearest_first(allowed, current, demand, pool_region, geo),
                                 ctx.admin.exposure.max_pools)}
    cur = opts.get(current) or evaluate(current, demand, pool_region, price, geo,
                                        target.replicas, target.cpu, b.rtt_ms)
    widen_at = b.tail * ctx.admin.exposure.tail_share
    narrow_at = widen_at / 2.0

    def acceptable(o: Option) -> bool:
        return o.far_share < widen_at or o.far_share <= 0.0

    head = (f"network budget {b.rtt_ms:g} ms (networkShare {ctx.admin.exposure.network_share:g} "
            f"of {b.objective} {b.target_ms:g} ms); tail {b.tail:.0%}")
    cap = ctx.admin.exposure.max_pools
    outside = [p for p in current if p not in allowed]
    if outside or not current or (cap is not None and len(current) > cap):
        ok = [o for o in opts.values() if acceptable(o)]
        best = min(ok or opts.values(), key=lambda o: (o.far_share if not ok else 0.0,
                                                      o.cost_per_hour, o.pools))
        what = (f"pool(s) {', '.join(outside)} outside the intent's regions "
                f"{ctx.intent.spec.regions}" if outside
                else "no pool exposes it (its selector matches none)" if not current
                else f"more than maxPools {cap} pools")
        return Decision(best.pools, f"{what}: {_describe(best)} leaves {best.far_share:.1%} "
                        f"served too far at {best.cost_per_hour:.3f}/h; {head}",
                        tuple(opts.values()))
    if acceptable(cur):
        cheaper = [o for o in opts.values() if o.far_share <= narrow_at
                   and o.cost_per_hour < cur.cost_per_hour - 1e-12]
        if not cheaper:
            return Decision(current, "", tuple(opts.values()))
        best = min(cheaper, key=lambda o: (o.cost_per_hour, len(o.pools), o.pools))
        why = (f"{_describe(best)} serves {1 - best.far_share:.1%} of the demand within "
               f"{b.rtt_ms:g} ms (at most {narrow_at:.2%} may be served farther) "
               f"at {best.cost_per_hour:.3f}/h against {cur.cost_per_hour:.3f}/h for "
               f"{_describe(cur)}; {head}")
        return Decision(best.pools, why, tuple(opts.values()))
    ok = [o for o in opts.values() if acceptable(o)]
    if ok:
        best = min(ok, key=lambda o: (o.cost_per_hour, len(o.pools), o.pools))
    else:
        best = min(opts.values(), key=lambda o: (o.far_share, o.cost_per_hour, o.pools))
    far = ", ".join(f"{r} ({demand[r] / sum(demand.values()):.0%})" for r in cur.far_regions)
    why = (f"clients in {far} are served from farther than {b.rtt_ms:g} ms by "
           f"{_describe(cur)}: {cur.far_share:.1%} of the demand, {widen_at:.2%} or more "
           f"(tailShare {ctx.admin.exposure.tail_share:g} of the tail); {_describe(best)} "
           f"leaves {best.far_share:.1%} at "
           f"{best.cost_per_hour:.3f}/h{'' if ok else ' (no set meets the budget)'}; {head}")
    return Decision(best.pools, why, tuple(opts.values()))


def _describe(o: Option) -> str:
    return "pool " + o.pools[0] if len(o.pools) == 1 else "pools " + "+".join(o.pools)


def with_exposure(plan: Plan, ctx: PlanningContext) -> Plan:
    """``plan`` with the exposure change this cycle, if any (see the module docstring); a
    change held back by the actuator is named in the plan's reason, and so is the backend's
    :attr:`~planner.domain.state.WorkloadState.exposure_note` when there is nothing to decide
    by (no client demand measured)."""
    act = ctx.actuators.get("exposure")
    if not isinstance(act, ExposureActuator) or ctx.workload.exposure is None:
        return plan
    decision = decide(ctx, plan)
    if decision is None:
        note = ctx.workload.exposure_note
        if not note:
            return plan
        noted = (*plan.reason_parts,
                 ReasonPart("note", f"exposure of {ctx.workload.key} not decided: {note}"))
        return replace(plan, reason_parts=noted, reason=join_reason(noted))
    pool_region = {n.pool: n.region for n in ctx.snapshot.nodes}
    allowed = allowed_pools(pool_region, ctx.intent.spec.regions)
    key = ctx.workload.key
    actions = act.propose(key, ctx.workload.exposure, decision.wanted, allowed,
                          decision.reason, ctx.now, ctx.actuator_memory.get("exposure", {}))
    parts = list(plan.reason_parts)
    if actions:
        parts.append(ReasonPart("choice", actions[0].reason))
    elif key in act.held:
        parts.append(ReasonPart("held", act.held[key]))
    else:
        return plan
    return replace(plan, actions=(*plan.actions, *actions), reason_parts=tuple(parts),
                   reason=join_reason(tuple(parts)))
