"""An explicit queueing estimate of a workload: what the planner uses before it has learned.

Each pod is taken as an M/M/1 queue. From one observation (request rate, CPU utilisation,
ready pods, observed latency percentile) it estimates the service rate per core and the base
latency, then predicts a percentile for any replica count and CPU size:
``p_q = base + ln(1 / (1 - q)) / (mu - lam / r)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.domain.state import WorkloadConfig, WorkloadState

MAX_UTILIZATION = 0.9
"""Never plan a pod above this utilisation: the queue is unstable near 1."""


@dataclass(frozen=True)
class QueueEstimate:
    mu_per_core: float
    """Requests per second one core serves."""
    base_ms: float
    """Latency of a request that does not queue."""

    def service_rate(self, config: WorkloadConfig) -> float:
        return self.mu_per_core * config.cpu

    def latency_ms(self, rate: float, config: WorkloadConfig, q: float) -> float:
        """Predicted ``q`` quantile (0..1) of latency in ms at ``rate`` req/s."""
        if config.replicas <= 0:
            return math.inf
        mu = self.service_rate(config)
        lam = rate / config.replicas
        if lam >= mu * MAX_UTILIZATION:
            return math.inf
        return self.base_ms + 1000.0 * math.log(1.0 / (1.0 - q)) / (mu - lam)

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
    return QueueEstimate(mu / cpu, base)


def blend(old: QueueEstimate | None, new: QueueEstimate, alpha: float = 0.3) -> QueueEstimate:
    """Exponentially weighted update of an estimate."""
    if old is None:
        return new if not math.isnan(new.base_ms) else QueueEstimate(new.mu_per_core, 0.0)
    base = old.base_ms if math.isnan(new.base_ms) else (
        (1 - alpha) * old.base_ms + alpha * new.base_ms)
    return QueueEstimate((1 - alpha) * old.mu_per_core + alpha * new.mu_per_core, base)
