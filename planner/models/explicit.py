"""Predictors from the explicit queueing estimate (:mod:`planner.models.queue_estimate`): the
fallback
before anything is learned. Knobs the estimate knows nothing about (another device or node
pool than the current one) are predicted as if unchanged and marked unsupported."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.queue_estimate import MAX_UTILIZATION, QueueEstimate


def _supported(batch: CandidateBatch, current: WorkloadConfig) -> NDArray[np.bool_]:
    gpu_now = 1.0 if current.device == "gpu" else 0.0
    out: NDArray[np.bool_] = (batch.gpu == gpu_now) & batch.in_pool(current.pool)
    return out


class ExplicitLatency(Predictor):
    kind = "explicit"

    def __init__(self, estimate: QueueEstimate, quantile: float, current: WorkloadConfig,
                 margin: float = 0.1, objective: str | None = None) -> None:
        self.estimate = estimate
        self.quantile = quantile
        self.current = current
        self.margin = margin
        self.base_ms = estimate.base_for(objective)

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        mu = self.estimate.mu_per_core * batch.cpu
        lam = rate / np.maximum(batch.replicas, 1e-9)
        stable = (batch.replicas > 0) & (lam < MAX_UTILIZATION * mu)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = self.base_ms + 1000.0 * math.log(1.0 / (1.0 - self.quantile)) / (mu - lam)
        mean = np.where(stable, q, np.inf)
        return Prediction(mean, mean * (1.0 + self.margin), _supported(batch, self.current))


class ExplicitThroughput(Predictor):
    kind = "explicit"

    def __init__(self, estimate: QueueEstimate, current: WorkloadConfig) -> None:
        self.estimate = estimate
        self.current = current

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        cap = batch.replicas * self.estimate.mu_per_core * batch.cpu * MAX_UTILIZATION
        served = np.minimum(rate, cap)
        return Prediction(served, served * 0.95, _supported(batch, self.current))


class ExplicitAvailability(Predictor):
    """Redundancy rule: one replica is a single point of failure."""

    kind = "explicit"

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
