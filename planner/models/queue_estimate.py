"""An explicit queueing estimate of a workload: what the planner uses before it has learned.

Each pod is taken as an M/M/1 queue. From one observation (request rate, CPU utilisation,
ready pods, observed latency percentile) it estimates the service rate per core and the base
latency, then predicts a percentile for any replica count and CPU size:
``p_q = base + ln(1 / (1 - q)) / (mu - lam / r)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from planner.domain.state import WorkloadConfig, WorkloadState

MAX_UTILIZATION = 0.9
"""Never plan a pod above this utilisation: the queue is unstable near 1."""


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
    rate, util = workload.request_rate, workload.cpu_utilization
    ready = workload.ready_replicas
    if rate is None or util is None or ready == 0 or rate < 1.0 or not 0.02 <= util < 0.95:
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
