"""The perfect-knowledge reference for ``bench/slo.py``: the cheapest configuration of every
active intent that keeps its objectives, minute by minute, if the planner knew each minute's load
and its workload's true behaviour, and pods started instantly. Its cost, core-hours and GPU-hours
are reported (cheapest, as the planners choose: on a cluster with GPUs the fewest core-hours would
put everything on GPUs at any price).

**Per intent.** For every minute it takes the noise-free trace at the simulator's steps and
searches the planner's own knobs (the admin's enabled actuators): CPU size, device, node pool (or
unpinned), replicas. Each configuration is scored with the simulator's ground truth:

- *latency*: per-pod M/M/c queues at the pool's speed and network latency, the device's speed-up,
  the load balancer's split (by capacity when the ``weights`` actuator runs, else round robin),
  unpinned pods placed as the simulator's scheduler places them (the emptiest node first, on
  an otherwise empty cluster: :func:`_placed`), and the exact percentile of the mixture, at
  the minute's peak;
- *throughput* (maximised): the simulator measures the served rate, so the minute's mean served
  rate (capped by saturation, less the expected failure losses) must reach the target; a minute
  whose offered load is below the target cannot hold for any configuration;
- *availability* (served / offered): its expectation under the simulator's failure model, in
  closed form. Each ready pod fails at ``failure_rate_per_hour``; the failing step drops its share
  for ``min(detection_s, step_s)``; the pod then stays out for ``restart_s`` (rounded to steps)
  while the others carry its load, dropping what they cannot serve (all of it with one replica);
- *cost* and *power* (minimised): the simulator's cost per hour and watts of the pods.

**Jointly.** The pods of all active intents, and those of the workloads no active intent drives
(they keep their scenario replicas), must fit the nodes: a pod of ``c`` cores (and a GPU) goes to
one node with ``c`` cores (and a GPU) free. Packing is first-fit decreasing (bigger pods first,
fullest node first; pods that may use several pools spare the room the pinned pods need): exact
when the CPU sizes divide each other and the node sizes (as the default sizes do) and the pods
may use the same nodes; otherwise a sufficient test (on random small clusters it missed a few
packable sets in a thousand, all with GPU pods of several sizes).

When every intent's own cheapest configuration fits, that is the answer. When not, each intent's
candidates (per shape its fewest replicas, dominated candidates pruned) are combined
cheapest-first until a combination fits: the cheapest joint assignment, exact. If none fits,
intents are served in order of ``spec.priority`` (each added with the cheapest joint
assignment that still fits) and the minutes of those left out count as infeasible. Past
``search_limit`` combinations the search falls back to a greedy by priority (each intent takes
its cheapest candidate that fits beside those already placed): a feasible assignment whose cost
is an upper bound; such minutes are counted in ``heuristic_minutes``. Unpinned pods may use any
eligible node in this test, while their latency and price are scored with the placement on an
empty cluster.

Minutes where an intent cannot be served count no cost (and take no capacity) and are reported
as ``infeasible_minutes``.

It is a reference, not a proof: start-up delays, noise and cooldowns are left out (they all cost
more); failures enter only the availability objective, in expectation: the latency of the minutes
in which a pod restarts is not modelled, and a minute is judged by the simulator on its own
(served / offered within that minute), so a failure inside a minute can break an availability
objective that holds on average. The oracle cannot prevent that short of provisioning against
every failure; it reports the expected number of such minutes of its own choice
(``availability_risk_minutes``) and lists the objective in ``uncovered`` with the reason in
``notes``. Objectives it does not model at all (e.g. a latency to be maximised) are listed there
too. The minute's peak is planned for, which costs more than a planner that rides the
noise-free curve inside the minute (a little on these traces, whose load changes slowly within
a minute, except at the steps of a flash sale).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from planner.domain.intents import Intent, KPIProfile, KPIType
from simulator import queueing
from simulator.cluster import WATTS_PER_CORE, WATTS_PER_GPU
from simulator.scenario import PoolSpec, Scenario, WorkloadSpec

SEARCH_LIMIT = 2000
"""Combinations the joint search tries per minute before it falls back to the greedy."""

_EPS = 1e-9


@dataclass(frozen=True)
class Shape:
    cpu: float
    device: str
    pool: str | None


def _mix(pools: Sequence[PoolSpec], shape: Shape, replicas: int | None = None
         ) -> list[tuple[PoolSpec, float]]:
    """The eligible pools of ``shape`` with the share of its pods in each: of ``replicas`` pods
    as the simulator's scheduler places them (:func:`_placed`); without ``replicas``, in
    proportion to the pools' CPU (where a full cluster's pods end up)."""
    eligible = [p for p in pools if (shape.pool is None or p.name == shape.pool)
                and (shape.device != "gpu" or p.gpus > 0)]
    cores = sum(p.nodes * p.cpu for p in eligible)
    if not cores:
        return []
    counts = (_placed(tuple((p.nodes, p.cpu, p.gpus) for p in eligible), shape.cpu,
                      shape.device == "gpu", int(replicas))
              if replicas is not None and replicas >= 1 else ())
    placed = sum(counts)
    if placed <= 0:                   # no count, or none of them fits: where CPU is
        return [(p, p.nodes * p.cpu / cores) for p in eligible]
    return [(p, n / placed) for p, n in zip(eligible, counts, strict=True)]


@functools.lru_cache(maxsize=65_536)
def _placed(pools: tuple[tuple[int, float, int], ...], cpu: float, gpu: bool,
            replicas: int) -> tuple[int, ...]:
    """Pods per pool (``(nodes, cores, GPUs)`` each, in node order) when ``replicas`` pods of
    ``cpu`` cores (and a GPU each if ``gpu``) are placed one by one on an otherwise empty
    cluster by the simulator's rule (:mod:`simulator.scheduling`): the node with the most
    free CPU that has room, the first in node order among equals. Nodes of different sizes
    fill unevenly: the biggest take pods until they are no emptier than the rest, so a few
    pods on a cluster of 64-core and 32-core nodes all land on the 64-core ones, not in
    proportion to the pools' CPU. Pods with no room are left out."""
    heap: list[tuple[float, int, int, int]] = []      # (-free CPU, node order, pool, GPUs free)
    order = 0
    for k, (nodes, cores, gpus) in enumerate(pools):
        for _ in range(nodes):
            if not gpu or gpus > 0:
                heap.append((-cores, order, k, gpus))
            order += 1
    heapq.heapify(heap)
    counts = [0] * len(pools)
    for _ in range(replicas):
        if not heap or -heap[0][0] < cpu - _EPS:
            break
        free, at, k, gpus = heapq.heappop(heap)
        counts[k] += 1
        left = gpus - 1 if gpu else gpus
        if not gpu or left > 0:
            heapq.heappush(heap, (free + cpu, at, k, left))
    return tuple(counts)


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
    mix = _mix(pools, shape, replicas)
    if not mix or replicas < 1:
        return None
    c = max(1, int(shape.cpu))
    mu0 = queueing.service_rate(svc.rate_per_core, shape.cpu, svc.cpu_exponent,
                                svc.gpu_speedup, shape.device)
    pull = [(p.speed * mu0 if weighted else 1.0) * f for p, f in mix]
    terms: list[tuple[float, float, float]] = []
    for (p, f), share in zip(mix, pull, strict=True):
        if f <= 0:                                    # no pod there
            continue
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


@dataclass(frozen=True)
class Failures:
    """The simulator's pod failures (``ServiceModel``), at its step length."""

    per_hour: float = 0.0
    """Failure rate of one ready pod."""
    lost_s: float = 0.0
    """Seconds of the failed pod's share dropped before the load balancer notices."""
    down_steps: int = 0
    """Further steps the pod is out (not ready) while it restarts."""
    step_s: float = 5.0

    @property
    def down_s(self) -> float:
        return self.down_steps * self.step_s

    @staticmethod
    def of(w: WorkloadSpec, step_s: float) -> Failures:
        """A pod that fails at step ``t`` drops ``min(detection_s, step_s) / step_s`` of its
        share in that step and is ready again at the first step ``>= t + restart_s``."""
        svc = w.service
        steps_out = max(0, math.ceil(svc.restart_s / step_s - _EPS) - 1)
        return Failures(svc.failure_rate_per_hour, min(svc.detection_s, step_s), steps_out,
                        step_s)


@dataclass(frozen=True)
class Requirements:
    """What one intent's objectives ask of a configuration, on the simulator's definitions."""

    latency: tuple[tuple[float, float], ...] = ()
    """(target ms, quantile) pairs at the minute's peak."""
    min_throughput: float | None = None
    """Mean served rate over the minute, req/s."""
    min_availability: float | None = None
    """Expected served / offered over the minute."""
    max_cost_per_hour: float | None = None
    max_watts: float | None = None
    failures: Failures = Failures()


@dataclass(frozen=True)
class Option:
    """One candidate configuration of one intent for one minute."""

    shape: Shape
    replicas: int
    cost_per_hour: float
    order: int
    """Index of the shape in the search order (ties go to the first, as before)."""
    pools: tuple[str, ...]
    """Pools its pods may use."""

    @property
    def cores(self) -> float:
        return self.replicas * self.shape.cpu

    @property
    def gpus(self) -> int:
        return self.replicas if self.shape.device == "gpu" else 0


def _pods(pools: Sequence[PoolSpec], shape: Shape, replicas: float) -> list[tuple[PoolSpec, float]]:
    """Pods per eligible pool (placed as :func:`_mix` says)."""
    return [(p, replicas * f) for p, f in _mix(pools, shape, round(replicas))]


def _mu0(w: WorkloadSpec, shape: Shape) -> float:
    svc = w.service
    return queueing.service_rate(svc.rate_per_core, shape.cpu, svc.cpu_exponent,
                                 svc.gpu_speedup, shape.device)


def served_rate(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
                rate: float, weighted: bool) -> float:
    """Requests per second served at ``rate`` by ``pods`` (pool, count): each pod serves its
    share up to ``SATURATION`` x its rate, as :func:`simulator.queueing.step_outcome`."""
    mu0 = _mu0(w, shape)
    pull = [(p.speed * mu0 if weighted else 1.0) * max(0.0, n) for p, n in pods]
    total = sum(pull)
    if total <= 0 or rate <= 0:
        return 0.0
    return sum(min(rate * x / total, max(0.0, n) * queueing.SATURATION * mu0 * p.speed)
               for (p, n), x in zip(pods, pull, strict=True))


def _arrivals(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
              rate: float, weighted: bool) -> list[float]:
    """Requests per second one pod of each pool of ``pods`` receives."""
    mu0 = _mu0(w, shape)
    pull = [(p.speed * mu0 if weighted else 1.0) * max(0.0, n) for p, n in pods]
    total = sum(pull)
    return [rate * (x / n) / total if total > 0 and n > 0 else 0.0
            for (_, n), x in zip(pods, pull, strict=True)]


def _without(pods: Sequence[tuple[PoolSpec, float]], *gone: int) -> list[tuple[PoolSpec, float]]:
    return [(p, n - sum(1.0 for g in gone if g == k)) for k, (p, n) in enumerate(pods)]


def _failure_losses(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
                    rate: float, weighted: bool, fail: Failures) -> list[tuple[float, float]]:
    """Per pool of ``pods``, when one of its pods fails: requests lost in the failing step
    (its share over ``lost_s``) and per second of the restart (what the others cannot serve)."""
    served = served_rate(w, shape, pods, rate, weighted)
    return [(arr * fail.lost_s,
             served - served_rate(w, shape, _without(pods, j), rate, weighted))
            for j, arr in enumerate(_arrivals(w, shape, pods, rate, weighted))]


def _loss_per_second(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
                     rate: float, weighted: bool, fail: Failures) -> float:
    """Expected requests lost per second to pod failures at ``rate``.

    A pod fails at ``per_hour`` while ready, and is ready ``1 / (1 + per_hour * down_s /
    3600)`` of the time. Each failure loses :func:`_failure_losses`. A second pod that fails
    while the first is out (in one of its ``D`` restart steps, or in the same step) meets
    fewer survivors: its share is bigger in its failing step, and while both are out the
    rest serve ``served(n - p - q)`` instead of what the two single failures assumed; that
    pairwise term is added, longer chains are not."""
    if fail.per_hour <= 0 or rate <= 0:
        return 0.0
    lam = fail.per_hour / 3600.0
    up = 1.0 / (1.0 + lam * fail.down_s)
    p_step = lam * fail.step_s * up              # a given pod fails in a given step
    d, dt = fail.down_steps, fail.step_s
    served = served_rate(w, shape, pods, rate, weighted)
    single = _failure_losses(w, shape, pods, rate, weighted, fail)
    arrivals = _arrivals(w, shape, pods, rate, weighted)
    loss = 0.0
    for p, ((_, n_p), (first, per_s)) in enumerate(zip(pods, single, strict=True)):
        if n_p <= 0:
            continue
        rest = _without(pods, p)
        served_p = served_rate(w, shape, rest, rate, weighted)
        arrivals_p = _arrivals(w, shape, rest, rate, weighted)
        pair = 0.0
        for q, (_, m_q) in enumerate(rest):
            if m_q <= 0:
                continue
            served_q = served_rate(w, shape, _without(pods, q), rate, weighted)
            both = served_rate(w, shape, _without(pods, p, q), rate, weighted)
            extra = served_p + served_q - served - both
            # Second failure k = 1..D steps after the first, or in the same step (each pair
            # once: half of it from either side).
            pair += m_q * p_step * (d * (arrivals_p[q] - arrivals[q]) * fail.lost_s
                                    + dt * (d * (d - 1) / 2 + d / 2) * extra)
        loss += n_p * lam * up * (first + fail.down_s * per_s + pair)
    return loss


def expected_availability(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
                          rates: Sequence[float], weighted: bool, fail: Failures) -> float:
    """Expected served / offered over steps at ``rates``: saturation drops and the failures'
    losses (:func:`_loss_per_second`)."""
    offered = sum(rates)
    if offered <= 0:
        return 1.0
    return _expected_served(w, shape, pods, rates, weighted, fail) / offered


def _expected_served(w: WorkloadSpec, shape: Shape, pods: Sequence[tuple[PoolSpec, float]],
                     rates: Sequence[float], weighted: bool, fail: Failures) -> float:
    """Sum over the steps of the expected served rate. The failures' loss per request is
    taken at the minute's peak (it does not fall as the load grows while the pods keep up,
    as the latency objectives require at the peak) and applied to every step."""
    peak = max(rates, default=0.0)
    if served_rate(w, shape, pods, peak, weighted) >= peak * (1 - _EPS):
        total = sum(rates)             # keeping up at the peak, they keep up at every step
    else:
        total = sum(served_rate(w, shape, pods, rate, weighted) for rate in rates)
    if fail.per_hour > 0 and peak > 0:
        total -= sum(rates) * _loss_per_second(w, shape, pods, peak, weighted, fail) / peak
    return max(0.0, total)


def availability_risk(w: WorkloadSpec, shape: Shape, replicas: int, pools: Sequence[PoolSpec],
                      rate: float, weighted: bool, fail: Failures, target: float,
                      minute_s: float = 60.0) -> float:
    """Probability that a minute at ``rate`` misses an availability ``target`` because a pod
    fails: a failure at some step costs the failing step and the restart's steps
    (:func:`_failure_losses`), which may straddle two minutes; it breaks this minute when the
    part inside it is more than the target allows. Each ready pod fails in a step with
    probability ``per_hour * step_s / 3600``; two failures in one minute are not combined."""
    if fail.per_hour <= 0 or rate <= 0:
        return 0.0
    pods = _pods(pools, shape, replicas)
    steps = max(1, round(minute_s / fail.step_s))
    allowed = served_rate(w, shape, pods, rate, weighted) * minute_s - target * rate * minute_s
    exposure = 0.0
    for (_, n), (first, per_s) in zip(pods, _failure_losses(w, shape, pods, rate, weighted,
                                                            fail), strict=True):
        profile = [first, *([per_s * fail.step_s] * fail.down_steps)]
        breaking = sum(1 for start in range(1 - len(profile), steps)
                       if sum(x for i, x in enumerate(profile) if 0 <= start + i < steps)
                       > allowed + _EPS * rate)
        exposure += n * breaking
    return 1.0 - math.exp(-fail.per_hour * fail.step_s / 3600.0 * exposure)


def fewest_replicas(w: WorkloadSpec, pools: Sequence[PoolSpec], shape: Shape,
                    rates: float | Sequence[float], need: Requirements, weighted: bool,
                    bounds: tuple[int, int], hint: int | None = None) -> int | None:
    """The fewest replicas of ``shape`` that meet ``need`` over the minute's steps at ``rates``
    (latency at their peak); ``None`` if no count within ``bounds`` (and the cluster's nodes)
    does. Latency, throughput and availability improve as replicas grow (bisection); cost and
    power then bound the answer from above."""
    steps = [float(rates)] if isinstance(rates, (int, float)) else [float(x) for x in rates]
    peak = max(steps)
    lo, hi = bounds[0], min(bounds[1], _max_replicas(pools, shape))

    def ok(r: int) -> bool:
        if not meets_latency(w, pools, shape, r, peak, need.latency, weighted):
            return False
        if need.min_throughput is None and need.min_availability is None:
            return True
        pods = _pods(pools, shape, r)
        served = _expected_served(w, shape, pods, steps, weighted, need.failures)
        if (need.min_throughput is not None
                and served / len(steps) < need.min_throughput * (1 - _EPS)):
            return False
        offered = sum(steps)
        return (need.min_availability is None or offered <= 0
                or served / offered >= need.min_availability * (1 - _EPS))

    r = _fewest(ok, lo, hi, hint)
    if r is None:
        return None
    if need.max_cost_per_hour is not None and \
            r * price_per_pod_hour(pools, shape, r) > need.max_cost_per_hour * (1 + _EPS):
        return None
    gpus = 1 if shape.device == "gpu" else 0
    if need.max_watts is not None and \
            r * (shape.cpu * WATTS_PER_CORE + gpus * WATTS_PER_GPU) > need.max_watts * (1 + _EPS):
        return None
    return r


def price_per_pod_hour(pools: Sequence[PoolSpec], shape: Shape,
                       replicas: int | None = None) -> float:
    """Price of one pod of ``shape``, averaged over where ``replicas`` of them land
    (:func:`_mix`; unpinned pods in pools of several prices)."""
    gpus = 1 if shape.device == "gpu" else 0
    return sum(f * (shape.cpu * p.cost_per_core_hour + gpus * p.cost_per_gpu_hour)
               for p, f in _mix(pools, shape, replicas))


def requirements(intent: Intent, profiles: Mapping[str, KPIProfile], failures: Failures,
                 latency_margin: float = 0.0) -> tuple[Requirements, dict[str, str]]:
    """``intent``'s objectives as :class:`Requirements` on the simulator's KPI definitions
    (honouring each objective's tolerance as ``objective_met`` does), and the objectives the
    oracle does not model, by name, with the reason. ``latency_margin``: every latency
    target that much tighter (a fraction), the room a planner without perfect knowledge keeps."""
    lat: list[tuple[float, float]] = []
    lows: dict[KPIType, float] = {}
    highs: dict[KPIType, float] = {}
    skipped: dict[str, str] = {}
    for o in intent.spec.objectives:
        prof = profiles[o.profile_key(intent.metadata.namespace)].spec
        kind, minimize = prof.type, prof.minimizes
        if kind is KPIType.LATENCY and minimize:
            lat.append((o.value * (1 + o.tolerance) * (1.0 - latency_margin),
                        prof.latency_percentile / 100))
        elif kind in (KPIType.THROUGHPUT, KPIType.AVAILABILITY) and not minimize:
            lows[kind] = max(lows.get(kind, 0.0), o.value * (1 - o.tolerance))
        elif kind in (KPIType.COST, KPIType.POWER) and minimize:
            highs[kind] = min(highs.get(kind, math.inf), o.value * (1 + o.tolerance))
        else:
            skipped[o.name] = (f"a {kind.value} objective to be "
                               f"{'minimised' if minimize else 'maximised'} is not modelled")
    need = Requirements(tuple(lat), lows.get(KPIType.THROUGHPUT),
                        lows.get(KPIType.AVAILABILITY), highs.get(KPIType.COST),
                        highs.get(KPIType.POWER), failures)
    return need, skipped


def _dominates(a: Option, b: Option) -> bool:
    """Whether ``a`` can replace ``b`` in any joint assignment that fits, for no more money:
    ``a``'s pods go wherever ``b``'s went, one for one (no more pods, none bigger, no GPU where
    ``b`` had none) or, for CPU pods, several in the room of one (sizes that divide)."""
    if (a.cost_per_hour, a.order) >= (b.cost_per_hour, b.order) or not set(a.pools) >= set(b.pools):
        return False
    if a.shape.device == "gpu" and b.shape.device != "gpu":
        return False
    if a.replicas <= b.replicas and a.shape.cpu <= b.shape.cpu + _EPS:
        return True
    if a.shape.device != "cpu":
        return False
    k = b.shape.cpu / a.shape.cpu
    return abs(k - round(k)) < _EPS and a.replicas <= round(k) * b.replicas


def _prune(options: list[Option]) -> list[Option]:
    """Options sorted by cost (ties: search order), dominated ones dropped."""
    ranked = sorted(options, key=lambda o: (o.cost_per_hour, o.order))
    return [b for b in ranked if not any(_dominates(a, b) for a in ranked)]


_Group = tuple[int, float, tuple[str, ...], int]
"""(GPUs per pod, cores per pod, eligible pools, pods)."""


class Packer:
    """Whether sets of pods fit the cluster's nodes beside the pods that stay put."""

    def __init__(self, pools: Sequence[PoolSpec], fixed: Sequence[tuple[Shape, int]]) -> None:
        self.pools = list(pools)
        names = [p.name for p in pools for _ in range(p.nodes)]
        cpu = [p.cpu for p in pools for _ in range(p.nodes)]
        gpus = [p.gpus for p in pools for _ in range(p.nodes)]
        # Pods that stay put were scheduled first, by the simulator's own rule: the eligible
        # node with the most free CPU; a pod that fits nowhere stays pending (takes nothing).
        for shape, replicas in fixed:
            elig = set(_eligible(pools, shape))
            g = 1 if shape.device == "gpu" else 0
            for _ in range(replicas):
                fit = [j for j in range(len(names)) if names[j] in elig
                       and cpu[j] >= shape.cpu - _EPS and gpus[j] >= g]
                if fit:
                    best = max(fit, key=lambda j: cpu[j])
                    cpu[best] -= shape.cpu
                    gpus[best] -= g
        self.base: dict[str, Counter[tuple[float, int]]] = {p.name: Counter() for p in pools}
        for name, c, g in zip(names, cpu, gpus, strict=True):
            self.base[name][(c, g)] += 1
        self.free_cores = sum(cpu)
        self.free_gpus = sum(gpus)
        self._cache: dict[tuple[tuple[Shape, int], ...], bool] = {}

    def fits(self, chosen: Sequence[Option]) -> bool:
        key = tuple(sorted(((o.shape, o.replicas) for o in chosen),
                           key=lambda x: (x[0].cpu, x[0].device, x[0].pool or "", x[1])))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._pack([(1 if o.shape.device == "gpu" else 0, o.shape.cpu, o.pools,
                               o.replicas) for o in chosen])
            self._cache[key] = hit
        return hit

    def _pack(self, groups: list[_Group]) -> bool:
        if (sum(n * c for _, c, _, n in groups) > self.free_cores + _EPS
                or sum(n * g for g, _, _, n in groups) > self.free_gpus):
            return False
        state = {k: Counter(v) for k, v in self.base.items()}
        # First-fit decreasing: GPU pods, then bigger pods, then the more constrained first.
        order = sorted(groups, key=lambda x: (-x[0], -x[1], len(x[2])))
        pinned_cores: dict[str, float] = {}
        for _, c, elig, n in order:
            if len(elig) == 1:
                pinned_cores[elig[0]] = pinned_cores.get(elig[0], 0.0) + n * c
        for g, c, elig, need in order:
            if len(elig) == 1:
                pinned_cores[elig[0]] -= need * c
            # Pods that may go to several pools try first the pool with the most room left
            # once the pods pinned there are counted; within a pool, the fullest node first.
            room = {name: sum(cpu * k for (cpu, _), k in state[name].items())
                    - pinned_cores.get(name, 0.0) for name in elig}
            ranked = [elig[i] for i in sorted(range(len(elig)), key=lambda i: (-room[elig[i]], i))]
            if len(ranked) > 1:
                # First no more than the room each pool has to spare, then anywhere.
                for name in ranked:
                    spare = math.floor(max(0.0, room[name]) / c + _EPS)
                    need -= _place(state[name], g, c, min(need, spare))
            for name in ranked:
                need -= _place(state[name], g, c, need)
            if need:
                return False
        return True


def _place(nodes: Counter[tuple[float, int]], g: int, c: float, count: int) -> int:
    """Put up to ``count`` pods of ``c`` cores and ``g`` GPUs on ``nodes`` (free cores, free
    GPUs -> how many nodes), the fullest node first; how many were placed."""
    left = count
    for cpu, gpus in sorted(nodes):
        if left <= 0:
            break
        avail = nodes[(cpu, gpus)]
        per = math.floor(cpu / c + _EPS)
        if g:
            per = min(per, gpus)
        if per <= 0 or avail <= 0:
            continue
        full = min(avail, left // per)
        if full:
            nodes[(cpu, gpus)] -= full
            nodes[(cpu - per * c, gpus - per * g)] += full
            left -= full * per
        if left and full < avail:
            nodes[(cpu, gpus)] -= 1
            nodes[(cpu - left * c, gpus - left * g)] += 1
            left = 0
    return count - left


def _eligible(pools: Sequence[PoolSpec], shape: Shape) -> tuple[str, ...]:
    return tuple(p.name for p, _ in _mix(pools, shape))


def _cheapest_joint(options: Sequence[Sequence[Option]], members: Sequence[int],
                    packer: Packer, limit: int) -> tuple[dict[int, Option] | None, bool]:
    """The cheapest combination of ``members``' options that fits, best-first over the sorted
    lists; and whether the search was complete (``False``: ``limit`` reached first)."""
    def cost(idx: tuple[int, ...]) -> float:
        return sum(options[i][k].cost_per_hour for i, k in zip(members, idx, strict=True))

    start = tuple(0 for _ in members)
    heap = [(cost(start), start)]
    seen = {start}
    tried = 0
    while heap:
        _, idx = heapq.heappop(heap)
        combo = {i: options[i][k] for i, k in zip(members, idx, strict=True)}
        if packer.fits(list(combo.values())):
            return combo, True
        tried += 1
        if tried >= limit:
            return None, False
        for j, i in enumerate(members):
            if idx[j] + 1 < len(options[i]):
                nxt = (*idx[:j], idx[j] + 1, *idx[j + 1:])
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (cost(nxt), nxt))
    return None, True


def joint(options: Sequence[Sequence[Option]], priority: Sequence[float], packer: Packer,
          limit: int = SEARCH_LIMIT) -> tuple[list[Option | None], bool]:
    """One option (or ``None``: not served) per intent such that all fit the cluster: the
    cheapest if one keeps every intent that can be kept alone, else intents by priority; and
    whether the answer is exact (``False``: the greedy fallback decided)."""
    n = len(options)
    live = [i for i in range(n) if options[i]]
    found, complete = _cheapest_joint(options, live, packer, limit)
    if found is not None:
        return [found.get(i) for i in range(n)], True
    by_priority = sorted(live, key=lambda i: -priority[i])
    served: dict[int, Option] = {}
    exact = complete
    for i in by_priority:
        if exact:
            trial, done = _cheapest_joint(options, [*served, i], packer, limit)
            if trial is not None:
                served = trial
                continue
            if done:
                continue
            exact = False
        for o in options[i]:
            if packer.fits([*served.values(), o]):
                served[i] = o
                break
    return [served.get(i) for i in range(n)], exact


@dataclass
class _Tally:
    core_hours: float = 0.0
    gpu_hours: float = 0.0
    cost: float = 0.0
    infeasible: int = 0
    contended: int = 0
    heuristic: int = 0
    risk: float = 0.0
    pools: set[str] = field(default_factory=set)
    shape_changes: int = 0
    device_changes: int = 0
    last: Shape | None = None


@dataclass
class Setup:
    """What the oracle searches for a scenario and seed: the active intents, their workloads,
    requirements and shapes, the loads, and the cluster's room beside the workloads no
    active intent drives (:func:`setup`)."""

    intents: list[Intent]
    workloads: list[WorkloadSpec]
    needs: list[Requirements]
    notes: list[dict[str, str]]
    shapes: list[list[Shape]]
    traces: list[Any]
    packer: Packer
    pools: Sequence[PoolSpec]
    offsets: list[float]
    weighted: bool
    bounds: tuple[int, int]
    minutes: int
    hints: list[dict[Shape, int | None]] = field(default_factory=list)

    def options(self, m: int) -> tuple[list[list[float]], list[list[Option]]]:
        """Minute ``m``'s loads (per intent, at the simulator's steps) and per intent every
        shape's fewest replicas that keep its objectives, as options, in search order. Called
        minute after minute: each minute's search starts from the last one's counts
        (``hints``)."""
        rates = [[tr.base_rate(m * 60 + x) for x in self.offsets] for tr in self.traces]
        out: list[list[Option]] = []
        for k, w in enumerate(self.workloads):
            found = []
            for order, shape in enumerate(self.shapes[k]):
                r = fewest_replicas(w, self.pools, shape, rates[k], self.needs[k],
                                    self.weighted, self.bounds, self.hints[k].get(shape))
                self.hints[k][shape] = r
                if r is not None:
                    found.append(Option(shape, r, r * price_per_pod_hour(self.pools, shape, r),
                                        order,
                                        _eligible(self.pools, shape)))
            out.append(found)
        return rates, out


def setup(sc: Scenario, seed: int, latency_margin: float = 0.0) -> Setup:
    """The oracle's view of ``sc`` (see :class:`Setup`); ``latency_margin`` as
    :func:`requirements` takes it."""
    spec, admin = sc.spec, sc.spec.admin
    pools = spec.cluster.pools
    profiles = {p.key: p for p in sc.profiles}
    intents = [i for i in sc.intents if i.spec.active]
    workloads = [next(x for x in spec.workloads if x.key == i.workload_key) for i in intents]
    driven = {w.key for w in workloads}
    packer = Packer(pools, [(Shape(w.cpu, w.device, w.pool), w.replicas)
                            for w in spec.workloads if w.key not in driven])
    offsets = [k * spec.step_s for k in range(math.ceil(60.0 / spec.step_s - _EPS))]
    has_gpu = any(p.gpus for p in pools)
    needs: list[Requirements] = []
    notes: list[dict[str, str]] = []
    shapes: list[list[Shape]] = []
    for intent, w in zip(intents, workloads, strict=True):
        need, skipped = requirements(intent, profiles, Failures.of(w, spec.step_s),
                                     latency_margin)
        needs.append(need)
        notes.append(skipped)
        sizes = admin.cpu.sizes if "cpu" in admin.actuators else (w.cpu,)
        devices = (tuple(d for d in admin.devices if d == "cpu" or has_gpu)
                   if "device" in admin.actuators else (w.device,))
        placements: tuple[str | None, ...] = (
            (None, *(admin.pools or [p.name for p in pools]))
            if "placement" in admin.actuators else (w.pool,))
        shapes.append([Shape(float(c), d, p) for c in sizes for d in devices for p in placements])
    return Setup(intents, workloads, needs, notes, shapes,
                 [sc.trace_for(w, seed) for w in workloads],
                 packer,
                 pools, offsets, "weights" in admin.actuators,
                 (max(1, admin.replicas.min), admin.replicas.max), int(spec.duration // 60),
                 [{} for _ in intents])


def oracle(sc: Scenario, seed: int, search_limit: int = SEARCH_LIMIT,
           latency_margin: float = 0.0) -> dict[str, Any]:
    """Per active intent: core-hours, GPU-hours and cost of the perfect-knowledge reference,
    how often its choice changed shape (CPU size, device or pool) and device from one minute
    to the next (each a restart of every pod for a planner), the pools it used, the minutes
    where its objectives cannot be kept (alone, or beside higher-priority intents on a full
    cluster), the minutes where sharing the cluster changed its choice, and what it does not
    cover (``uncovered`` objective names, ``notes`` why).
    ``latency_margin``: plan every latency target that much tighter (:func:`requirements`)."""
    profiles = {p.key: p for p in sc.profiles}
    at = setup(sc, seed, latency_margin)
    intents, workloads, needs, notes = at.intents, at.workloads, at.needs, at.notes
    pools, packer, weighted = at.pools, at.packer, at.weighted
    tallies = [_Tally() for _ in intents]
    priority = [i.spec.priority for i in intents]
    for m in range(at.minutes):
        rates, found = at.options(m)
        options = [_prune(f) for f in found]
        chosen, exact = joint(options, priority, packer, search_limit)
        for k, (opt, t) in enumerate(zip(chosen, tallies, strict=True)):
            if options[k] and opt is not options[k][0]:
                t.contended += 1
            if not exact:
                t.heuristic += 1
            if opt is None:
                t.infeasible += 1
                continue
            if t.last is not None and opt.shape != t.last:
                t.shape_changes += 1
                t.device_changes += opt.shape.device != t.last.device
            t.last = opt.shape
            t.core_hours += opt.cores / 60.0
            t.gpu_hours += opt.gpus / 60.0
            t.cost += opt.cost_per_hour / 60.0
            t.pools.update(p.name for p, n in _pods(pools, opt.shape, opt.replicas) if n > 0)
            target = needs[k].min_availability
            if target is not None:
                t.risk += availability_risk(workloads[k], opt.shape, opt.replicas, pools,
                                            max(rates[k]), weighted, needs[k].failures, target)
    out: dict[str, Any] = {}
    for intent, need, t, skipped in zip(intents, needs, tallies, notes, strict=True):
        why = dict(skipped)
        if t.risk > 0:
            f = need.failures
            for o in intent.spec.objectives:
                prof = profiles[o.profile_key(intent.metadata.namespace)].spec
                if prof.type is KPIType.AVAILABILITY and not prof.minimizes:
                    why[o.name] = (
                        f"kept in expectation only: a pod failure ({f.per_hour:g}/h per pod) "
                        f"drops its share for {f.lost_s:g} s, then the others carry its load "
                        f"for {f.down_s:g} s of restart; that breaks the objective in the "
                        "minute it happens (the simulator judges each minute on its own); "
                        f"expected {t.risk:.2f} such minutes with the oracle's choice")
        out[intent.key] = {
            "core_hours": t.core_hours, "gpu_hours": t.gpu_hours, "cost": t.cost,
            "infeasible_minutes": t.infeasible, "contended_minutes": t.contended,
            "heuristic_minutes": t.heuristic, "pools_used": sorted(t.pools),
            "shape_changes": t.shape_changes, "device_changes": t.device_changes,
            "availability_risk_minutes": t.risk,
            "uncovered": sorted(why), "notes": why,
        }
    return out


def uncovered_notes(per_intent: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per objective the oracle does not guarantee, for a benchmark's report."""
    return [f"{key} {name}: {why}" for key, v in sorted(per_intent.items())
            for name, why in sorted(v.get("notes", {}).items())]
