"""An explicit queueing estimate of a workload: what the planner uses before it has learned.

Each pod is taken as an M/M/1 queue. From one observation (request rate, how busy the pods'
serving device is, ready pods, observed latency percentile) it estimates the service rate per
core and the base latency, then predicts a percentile for any replica count and CPU size:
``p_q = base + ln(1 / (1 - q)) / (mu - lam / r)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.domain.state import WorkloadConfig, WorkloadState

MAX_UTILIZATION = 0.9
"""Never plan a pod above this utilisation: the queue is unstable near 1."""

MIN_READ_UTILIZATION = 0.02
"""Below this utilisation the service rate is not read from one observation (a pod that
idle is mostly background work: the reading would be noise); :func:`idle_bound` takes it as a
lower bound instead."""


@dataclass(frozen=True)
class QueueEstimate:
    mu_per_core: float
    """Requests per second one core serves."""
    base_ms: float
    """Latency of a request that does not queue."""
    bases: Mapping[str, float] = field(default_factory=dict)
    """Per latency objective, the base latency fitted from that objective's own percentile
    (the M/M/1 shape is only approximate: a p99's base is not a p50's)."""
    place: tuple[str, str | None] | None = None
    """The device and node pool of the pods the last observation was of (``None``: not
    known, an estimate written before it was kept)."""
    cpu: float | None = None
    """Their CPU size (``None``: not known, as for ``place``)."""

    def base_for(self, objective: str | None) -> float:
        """The base latency for ``objective`` (the shared one when it has none of its own)."""
        if objective is None:
            return self.base_ms
        b = self.bases.get(objective)
        return self.base_ms if b is None or math.isnan(b) else b

    def service_rate(self, config: WorkloadConfig) -> float:
        return self.mu_per_core * config.cpu

    def latency_ms(self, rate: float, config: WorkloadConfig, q: float,
                   objective: str | None = None) -> float:
        """Predicted ``q`` quantile (0..1) of latency in ms at ``rate`` req/s (with
        ``objective``'s own base latency when it has one)."""
        if config.replicas <= 0:
            return math.inf
        mu = self.service_rate(config)
        lam = rate / config.replicas
        if lam >= mu * MAX_UTILIZATION:
            return math.inf
        return self.base_for(objective) + 1000.0 * math.log(1.0 / (1.0 - q)) / (mu - lam)

    def capacity(self, config: WorkloadConfig) -> float:
        """Requests per second the configuration serves at the utilisation cap."""
        return config.replicas * self.service_rate(config) * MAX_UTILIZATION


def estimate(workload: WorkloadState, latency_ms: float | None, q: float,
             max_base_ms: float = math.inf) -> QueueEstimate | None:
    """Fit the estimate to one observation; ``None`` when the load is too low to tell or the
    pods are saturated (utilisation then says nothing about the service rate).

    ``max_base_ms`` caps the base latency (the latency target: a larger base would make every
    configuration infeasible, which is better found out by observation than by one sample).
    """
    rate, util = workload.request_rate, workload.busy
    ready = workload.ready_replicas
    if (rate is None or util is None or ready == 0 or rate < 1.0
            or not MIN_READ_UTILIZATION <= util < 0.95):
        return None
    util = min(util, 0.99)
    cpu = workload.config.cpu
    mu = rate / (ready * util)
    base = math.nan
    if latency_ms is not None and util < 0.8:
        # Near saturation the observed latency is queueing, not base latency: skip it.
        queueing = 1000.0 * math.log(1.0 / (1.0 - q)) / max(mu - rate / ready, 1e-9)
        base = min(max(0.0, latency_ms - queueing), latency_ms, max_base_ms)
    return QueueEstimate(mu / cpu, base, place=(workload.config.device, workload.config.pool),
                         cpu=cpu)


def idle_bound(workload: WorkloadState, latency_ms: float | None,
               max_base_ms: float = math.inf) -> QueueEstimate | None:
    """What one observation of pods busy less than :data:`MIN_READ_UTILIZATION` still says:
    each serves at least ``rate / (ready * MIN_READ_UTILIZATION)`` requests per second (a pod
    that busy would serve that many at full load; it is less busy, so it is faster, and
    background work only makes it look busier), and a request's base latency is at most the
    observed percentile (almost no queueing at that load). ``None`` when there is no load to
    read (no request or fewer than one per second, no ready pod) or the pods are busier.

    The bound is what keeps a workload moved to a much faster place from being stuck there
    with every pod nearly idle: nothing is read from such pods, the estimate stays the old
    place's, and no smaller count is ever predicted to hold (docs/benchmarks.md section 64)."""
    rate, util = workload.request_rate, workload.busy
    ready, cpu = workload.ready_replicas, workload.config.cpu
    if (rate is None or util is None or ready == 0 or rate < 1.0 or cpu <= 0
            or not math.isfinite(util) or util >= MIN_READ_UTILIZATION):
        return None
    mu = rate / (ready * MIN_READ_UTILIZATION)
    base = math.nan if latency_ms is None else min(max(0.0, latency_ms), max_base_ms)
    return QueueEstimate(mu / cpu, base, place=(workload.config.device, workload.config.pool),
                         cpu=cpu)


def floored(old: QueueEstimate | None, bound: QueueEstimate) -> QueueEstimate:
    """``old`` after an :func:`idle_bound` observation ``bound``: its service rate raised to the
    bound where below it (the bound's base latency is not blended in: it is only an upper
    bound). An estimate of another place (or none) is replaced by the bound, as a first
    estimate of that place."""
    if old is None or old.place != bound.place:
        return blend(None, bound)
    if old.mu_per_core >= bound.mu_per_core:
        return old
    return QueueEstimate(bound.mu_per_core, old.base_ms, dict(old.bases), old.place,
                         bound.cpu if bound.cpu is not None else old.cpu)


def _mix(old: float | None, new: float, alpha: float) -> float:
    if old is None or math.isnan(old):
        return new
    return old if math.isnan(new) else (1 - alpha) * old + alpha * new


def blend(old: QueueEstimate | None, new: QueueEstimate, alpha: float = 0.3) -> QueueEstimate:
    """Exponentially weighted update of an estimate (per objective for the bases)."""
    if old is None:
        base = new.base_ms if not math.isnan(new.base_ms) else 0.0
        return QueueEstimate(new.mu_per_core, base,
                             {k: v for k, v in new.bases.items() if not math.isnan(v)},
                             new.place, new.cpu)
    bases = dict(old.bases)
    for k, v in new.bases.items():
        if not math.isnan(mixed := _mix(bases.get(k), v, alpha)):
            bases[k] = mixed
    return QueueEstimate((1 - alpha) * old.mu_per_core + alpha * new.mu_per_core,
                         _mix(old.base_ms, new.base_ms, alpha), bases, new.place or old.place,
                         old.cpu if new.cpu is None else new.cpu)


def capped(old: QueueEstimate, workload: WorkloadState) -> QueueEstimate:
    """``old`` after a saturated observation: the pods served at most the offered load, so
    the service rate per core is at most ``rate / (ready * cpu)`` (the capacity seen at
    saturation); an estimate above that is lowered to it."""
    rate, ready = workload.request_rate, workload.ready_replicas
    if rate is None or ready == 0 or workload.config.cpu <= 0:
        return old
    bound = rate / (ready * workload.config.cpu)
    if old.mu_per_core <= bound:
        return old
    return QueueEstimate(bound, old.base_ms, dict(old.bases), old.place, old.cpu)
