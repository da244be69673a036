"""The perfect-knowledge reference for ``bench/slo.py``: the cheapest configuration that keeps
every latency objective of a scenario, minute by minute, if the planner knew each minute's load
and its workload's true behaviour, and pods started instantly. Its cost and core-hours are
reported (cheapest, as the planners choose: on a cluster with GPUs the fewest core-hours would
put everything on GPUs at any price).

For every minute it takes the peak of the noise-free trace and searches the planner's own knobs
(the admin's enabled actuators): CPU size, device, node pool (or unpinned), replicas. It scores
each configuration with the simulator's ground truth: per-pod M/M/c queues at the pool's speed
and network latency, the device's speed-up, the load balancer's split (by capacity when the
``weights`` actuator runs, else round robin), unpinned pods spread over the eligible pools in
proportion to their CPU (the simulator's scheduler fills the emptiest node first), and the
exact percentile of the mixture. Cluster capacity bounds the replicas. Minutes where no
configuration keeps the objectives count no cost and are reported as ``infeasible_minutes``.

It is a reference, not a proof: start-up delays, failures, noise and cooldowns are left out
(they all cost more); availability objectives are not modelled; and the minute's peak is
planned for, which costs more than a planner that rides the noise-free curve inside the minute
(a little on these traces, whose load changes slowly within a minute, except at the steps of a
flash sale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator import queueing
from simulator.scenario import PoolSpec, Scenario, WorkloadSpec


@dataclass(frozen=True)
class Shape:
    cpu: float
    device: str
    pool: str | None


def _mix(pools: Sequence[PoolSpec], shape: Shape) -> list[tuple[PoolSpec, float]]:
    eligible = [p for p in pools if (shape.pool is None or p.name == shape.pool)
                and (shape.device != "gpu" or p.gpus > 0)]
    # The scheduler puts each pod on the node with the most free CPU: pods spread in
    # proportion to the pools' CPU.
    cores = sum(p.nodes * p.cpu for p in eligible)
    return [(p, p.nodes * p.cpu / cores) for p in eligible] if cores else []


def _max_replicas(pools: Sequence[PoolSpec], shape: Shape) -> int:
    total = 0
    for p, _ in _mix(pools, shape):
        per_node = math.floor(p.cpu / shape.cpu)
        if shape.device == "gpu":
            per_node = min(per_node, p.gpus)
        total += per_node * p.nodes
    return total


def _terms(w: WorkloadSpec, pools: Sequence[PoolSpec], shape: Shape, replicas: int,
           rate: float, weighted: bool) -> list[tuple[float, float, float]] | None:
    """(weight, offset ms, rate 1/ms) terms of the latency mixture of ``replicas`` pods of
    ``shape`` at ``rate`` (:func:`simulator.queueing.pod_components`); ``None`` when no pool
    is eligible or a pod saturates."""
    svc = w.service
    mix = _mix(pools, shape)
    if not mix or replicas < 1:
        return None
    c = max(1, int(shape.cpu))
    mu0 = queueing.service_rate(svc.rate_per_core, shape.cpu, svc.cpu_exponent,
                                svc.gpu_speedup, shape.device)
    pull = [(p.speed * mu0 if weighted else 1.0) * f for p, f in mix]
    terms: list[tuple[float, float, float]] = []
    for (p, f), share in zip(mix, pull, strict=True):
        served = rate * share / sum(pull)
        lam = served / (replicas * f)                 # per pod of this pool
        mu = mu0 * p.speed
        if lam >= queueing.SATURATION * mu:
            return None
        terms.extend(queueing.pod_components(served, mu, c, lam,
                                             svc.base_latency_ms + p.network_latency_ms,
                                             svc.timeout_ms, False))
    return terms


def _survival(terms: Sequence[tuple[float, float, float]], t_ms: float) -> float:
    """Share of requests slower than ``t_ms`` (:func:`simulator.queueing.survival` for
    finite rates, in plain floats: the mixtures here have a handful of terms)."""
    total = sum(x[0] for x in terms)
    if total <= 0:
        return 0.0
    return sum(wt * (1.0 if t_ms < off else math.exp(-k * (t_ms - off)))
               for wt, off, k in terms) / total


def latency_ms(w: WorkloadSpec, pools: Sequence[PoolSpec], shape: Shape, replicas: int,
               rate: float, q: float, weighted: bool) -> float:
    """The true ``q`` quantile of ``w``'s latency at ``rate`` with ``replicas`` pods."""
    terms = _terms(w, pools, shape, replicas, rate, weighted)
    if terms is None:
        return math.inf
    arr = np.asarray(terms, dtype=float)
    comps = queueing.Components(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())
    out = queueing.quantile(comps, q)
    return math.inf if out is None else out


def meets_latency(w: WorkloadSpec, pools: Sequence[PoolSpec], shape: Shape, replicas: int,
                  rate: float, targets: Sequence[tuple[float, float]], weighted: bool) -> bool:
    """Whether every (target ms, quantile) holds: the ``q`` quantile is at most the target
    exactly when the share of requests slower than the target is at most ``1 - q`` (one
    evaluation of the survival function instead of solving for the quantile)."""
    if not targets:
        return True
    terms = _terms(w, pools, shape, replicas, rate, weighted)
    return terms is not None and all(_survival(terms, target) <= 1.0 - q
                                     for target, q in targets)


def _fewest(ok: Callable[[int], bool], lo: int, hi: int, hint: int | None = None) -> int | None:
    """The smallest ``r`` in ``[lo, hi]`` with ``ok(r)`` (``ok`` monotone), ``None`` if none.
    From a ``hint`` (last minute's answer: load changes slowly) it gallops to a bracket first,
    so a steady load costs two evaluations instead of a full bisection."""
    if hi < lo:
        return None
    if hint is None or not lo <= hint <= hi:
        if not ok(hi):
            return None
        a, b = lo, hi
    elif ok(hint):
        a, b, step = lo, hint, 1
        while b - step >= lo:
            if not ok(b - step):
                a = b - step + 1
                break
            b, step = b - step, step * 2
    else:
        a, step = hint + 1, 1
        while True:
            cand = min(hint + step, hi)
            if ok(cand):
                b = cand
                break
            if cand == hi:
                return None
            a, step = cand + 1, step * 2
    while a < b:
        mid = (a + b) // 2
        a, b = (a, mid) if ok(mid) else (mid + 1, b)
    return a


def fewest_replicas(w: WorkloadSpec, pools: Sequence[PoolSpec], shape: Shape, rate: float,
                    targets: Sequence[tuple[float, float]], weighted: bool,
                    bounds: tuple[int, int], hint: int | None = None) -> int | None:
    """The fewest replicas of ``shape`` that keep every (target ms, quantile) at ``rate``
    (latency falls as replicas grow); ``None`` if even the most do not."""
    lo, hi = bounds[0], min(bounds[1], _max_replicas(pools, shape))
    return _fewest(lambda r: meets_latency(w, pools, shape, r, rate, targets, weighted),
                   lo, hi, hint)


def price_per_pod_hour(pools: Sequence[PoolSpec], shape: Shape) -> float:
    """Expected price of one pod of ``shape`` (unpinned: averaged over where pods land)."""
    gpus = 1 if shape.device == "gpu" else 0
    return sum(f * (shape.cpu * p.cost_per_core_hour + gpus * p.cost_per_gpu_hour)
               for p, f in _mix(pools, shape))


def oracle(sc: Scenario, seed: int) -> dict[str, Any]:
    """Per active intent: core-hours and cost of the perfect-knowledge reference, and the
    minutes where no configuration within the knobs meets every latency objective."""
    spec, admin = sc.spec, sc.spec.admin
    pools = spec.cluster.pools
    profiles = {p.key: p for p in sc.profiles}
    out: dict[str, Any] = {}
    for intent in (i for i in sc.intents if i.spec.active):
        w = next(x for x in spec.workloads if x.key == intent.workload_key)
        trace = sc.trace_for(w, seed)
        lat = [(o.value * (1 + o.tolerance), profiles[o.profile_key(
            intent.metadata.namespace)].spec.latency_percentile / 100)
            for o in intent.spec.objectives
            if profiles[o.profile_key(intent.metadata.namespace)].spec.type.value == "latency"]
        sizes = admin.cpu.sizes if "cpu" in admin.actuators else (w.cpu,)
        has_gpu = any(p.gpus for p in pools)
        devices = (tuple(d for d in admin.devices if d == "cpu" or has_gpu)
                   if "device" in admin.actuators else (w.device,))
        placements: tuple[str | None, ...] = (
            (None, *(admin.pools or [p.name for p in pools]))
            if "placement" in admin.actuators else (w.pool,))
        shapes = [Shape(float(c), d, p) for c in sizes for d in devices for p in placements]
        weighted = "weights" in admin.actuators
        core_h, cost, infeasible = 0.0, 0.0, 0
        hints: dict[Shape, int | None] = {}
        for m in range(int(spec.duration // 60)):
            rate = max(trace.base_rate(m * 60 + s) for s in range(0, 60, int(spec.step_s)))
            best, best_cores = math.inf, 0.0
            for shape in shapes:
                r = fewest_replicas(w, pools, shape, rate, lat, weighted,
                                    (max(1, admin.replicas.min), admin.replicas.max),
                                    hints.get(shape))
                hints[shape] = r
                if r is not None and r * price_per_pod_hour(pools, shape) < best:
                    best, best_cores = r * price_per_pod_hour(pools, shape), r * shape.cpu
            if math.isfinite(best):
                core_h += best_cores / 60.0
                cost += best / 60.0
            else:
                infeasible += 1
        out[intent.key] = {"core_hours": core_h, "cost": cost, "infeasible_minutes": infeasible}
    return out
