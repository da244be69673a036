"""Predictors from the explicit queueing estimate (:mod:`planner.models.queue_estimate`): the
fallback
before anything is learned. Knobs the estimate knows nothing about (another device or node
pool than the current one) are predicted as if unchanged and marked unsupported."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch, FloatArray, Prediction, Predictor
from planner.models.queue_estimate import MAX_UTILIZATION, QueueEstimate
from planner.models.sojourn import sojourn_quantile

MAX_SERVERS = 64.0
"""The most servers one pod is taken to be (:func:`planner.models.sojourn.erlang_c`'s bound)."""


def _supported(batch: CandidateBatch, current: WorkloadConfig) -> NDArray[np.bool_]:
    gpu_now = 1.0 if current.device == "gpu" else 0.0
    out: NDArray[np.bool_] = (batch.gpu == gpu_now) & batch.in_pool(current.pool)
    return out


class _Explicit(Predictor):
    """What the explicit predictors share: they vouch for the current device and pool alone,
    at any load, so support needs no prediction."""

    kind = "explicit"
    current: WorkloadConfig

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        return _supported(batch, self.current)

    def supported_faster(self, batch: CandidateBatch, rate: float, factor: float
                         ) -> NDArray[np.bool_]:
        return _supported(batch, self.current)

    def supported_faster_rows(self, batch: CandidateBatch, rate: float,
                              factors: FloatArray) -> NDArray[np.bool_]:
        return _supported(batch, self.current)


class ExplicitLatency(_Explicit):
    """A latency percentile with each pod an M/M/1 queue served at the estimate's rate per core
    times its CPU size (:mod:`planner.models.queue_estimate`).

    ``parallel_sizes``: no request is served sooner than a current pod serves it, or than one
    whole core does when a current pod has less (a share of a core: its quota slows every
    request). With ``u`` that speed in cores (the current pods' size, at least 1), a pod of
    ``k > u`` cores is ``ceil(k / u)`` servers (an M/M/c queue) sharing the same total rate
    (at most :data:`MAX_SERVERS` servers of ``u`` cores each), not one server ``k`` times as
    fast: only the capacity of a bigger pod is assumed, not a faster request. Where ``k`` is no
    whole multiple of ``u``, the sooner of that and ``floor(k / u)`` servers of ``u`` cores
    each, so a bigger pod is never predicted slower than a smaller one. So a latency
    target below what the current pods' service time allows is not predicted met by a bigger
    pod on the assumption alone (a workload whose requests each use one core is served no
    sooner by more cores). Sizes up to ``u`` are the M/M/1 either way. Off (the default),
    every size is one server: the textbook estimate the ``queueing`` planner plans with."""

    def __init__(self, estimate: QueueEstimate, quantile: float, current: WorkloadConfig,
                 margin: float = 0.1, objective: str | None = None,
                 parallel_sizes: bool = False) -> None:
        self.estimate = estimate
        self.quantile = quantile
        self.current = current
        self.margin = margin
        self.parallel_sizes = parallel_sizes
        self.base_ms = estimate.base_for(objective)

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return self._predict(batch, rate, 1.0)

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        """Pods ``factor`` times as fast: the estimate's service rate per core scaled, as the
        learned latency model scales its own (a faster pod serves each request sooner, not
        only more of them). The default (the same service time at ``rate / factor``) would
        keep a GPU's requests as slow as the CPU pods' it is measured against, so a latency
        target those pods' service time misses could never be met by any faster place."""
        return self._predict(batch, rate, factor)

    def predict_faster_rows(self, batch: CandidateBatch, rate: float,
                            factors: FloatArray) -> Prediction:
        """:meth:`predict_faster` with a factor per row, in one evaluation (each row's numbers
        those of its factor alone: the arithmetic is per row)."""
        return self._predict(batch, rate, np.asarray(factors, dtype=float))

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        out: FloatArray = np.array([self._predict(batch, r, factor).mean for r in rates],
                                   dtype=float).reshape(len(rates), len(batch))
        return out

    def _predict(self, batch: CandidateBatch, rate: float, speed: float | FloatArray
                 ) -> Prediction:
        per_core = self.estimate.mu_per_core * np.broadcast_to(
            np.asarray(speed, dtype=float), batch.cpu.shape)
        mu = per_core * batch.cpu
        lam = rate / np.maximum(batch.replicas, 1e-9)
        stable = (batch.replicas > 0) & (lam < MAX_UTILIZATION * mu)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = self.base_ms + 1000.0 * math.log(1.0 / (1.0 - self.quantile)) / (mu - lam)
        if self.parallel_sizes:
            unit = max(self.current.cpu, 1.0)
            servers = np.ceil(batch.cpu / unit - 1e-9)
            mu = np.minimum(mu, MAX_SERVERS * unit * per_core)
            stable &= lam < MAX_UTILIZATION * mu
            many = np.flatnonzero(stable & (servers >= 2.0))
            if many.size:
                q[many] = self.base_ms + sojourn_quantile(
                    self.quantile, lam[many], mu[many], np.minimum(servers[many], MAX_SERVERS))
                # Not a whole multiple of ``unit``: also its whole multiple, that many servers
                # of ``unit`` cores each (less capacity, faster servers), whichever is sooner,
                # so a bigger pod is never predicted slower than a smaller one.
                whole = np.minimum(np.floor(batch.cpu[many] / unit + 1e-9), MAX_SERVERS)
                part = (whole < servers[many]) & (whole >= 1.0)
                cap = whole * unit * per_core[many]
                part &= lam[many] < MAX_UTILIZATION * cap
                if part.any():
                    rows = many[part]
                    q[rows] = np.minimum(q[rows], self.base_ms + sojourn_quantile(
                        self.quantile, lam[rows], cap[part], whole[part]))
        mean = np.where(stable, q, np.inf)
        return Prediction(mean, mean * (1.0 + self.margin), _supported(batch, self.current))


class ExplicitThroughput(_Explicit):

    def __init__(self, estimate: QueueEstimate, current: WorkloadConfig) -> None:
        self.estimate = estimate
        self.current = current

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        cap = batch.replicas * self.estimate.mu_per_core * batch.cpu * MAX_UTILIZATION
        served = np.minimum(rate, cap)
        return Prediction(served, served * 0.95, _supported(batch, self.current))


class ExplicitAvailability(_Explicit):
    """Redundancy rule: one replica is a single point of failure."""

    def __init__(self, estimate: QueueEstimate, current: WorkloadConfig,
                 single_replica: float = 0.98, redundant: float = 0.9995) -> None:
        self.estimate = estimate
        self.current = current
        self.single, self.redundant = single_replica, redundant

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        cap = batch.replicas * self.estimate.mu_per_core * batch.cpu * MAX_UTILIZATION
        base = np.where(batch.replicas >= 2, self.redundant, self.single)
        overload = np.where(cap > 0, np.clip(rate / np.maximum(cap, 1e-9), 1.0, None), np.inf)
        mean = base / overload
        return Prediction(mean, mean, _supported(batch, self.current))
