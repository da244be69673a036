"""A learned availability model: the share of requests served, by redundancy.

Availability in the data depends mostly on whether a pod failure takes the whole service down
(one replica) or a share of it (several). The model learns the mean loss for single- and
multi-replica configurations and a conservative (lower) bound from the spread, scikit-learn
estimator style.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin

FloatArray = NDArray[np.float64]


class AvailabilityRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Predicts availability (0..1) from ``X`` = [rate, replicas, cpu, gpu, pool]."""

    def __init__(self, prior_loss: float = 1e-3, prior_weight: float = 5.0) -> None:
        self.prior_loss = prior_loss
        self.prior_weight = prior_weight

    def fit(self, X: Any, y: Any) -> AvailabilityRegressor:
        X = np.asarray(X, dtype=float)
        y = np.clip(np.asarray(y, dtype=float), 0.0, 1.0)
        single = X[:, 1] < 1.5
        losses, spreads, counts = [], [], []
        for mask in (single, ~single):
            loss = 1.0 - y[mask]
            n = int(mask.sum())
            # Shrink towards the prior: few observations say little about rare failures.
            mean = (loss.sum() + self.prior_loss * self.prior_weight) / (n + self.prior_weight)
            spread = float(loss.std()) / math.sqrt(max(n, 1)) if n else self.prior_loss
            losses.append(float(mean))
            spreads.append(spread)
            counts.append(n)
        self.loss_ = np.asarray(losses)
        self.spread_ = np.asarray(spreads)
        self.counts_ = np.asarray(counts)
        self.n_samples_ = len(y)
        return self

    def check_fitted(self) -> None:
        """``ValueError`` unless the fitted attributes fit together (a loaded document)."""
        if not (self.loss_.shape == self.spread_.shape == self.counts_.shape == (2,)):
            raise ValueError("loss_, spread_ and counts_ must hold two numbers each")

    def _idx(self, X: FloatArray) -> NDArray[np.int64]:
        out: NDArray[np.int64] = np.where(X[:, 1] < 1.5, 0, 1).astype(np.int64)
        return out

    def predict(self, X: Any) -> FloatArray:
        X = np.asarray(X, dtype=float)
        out: FloatArray = 1.0 - self.loss_[self._idx(X)]
        return out

    def predict_bound(self, X: Any) -> FloatArray:
        X = np.asarray(X, dtype=float)
        i = self._idx(X)
        out: FloatArray = np.clip(1.0 - self.loss_[i] - 2.0 * self.spread_[i], 0.0, 1.0)
        return out

    def predict_with_bound(self, X: Any) -> tuple[FloatArray, FloatArray]:
        """:meth:`predict` and :meth:`predict_bound` at once (the planners' interface)."""
        return self.predict(X), self.predict_bound(X)

    def predict_with_support(self, X: Any
                             ) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
        """:meth:`predict_with_bound` and :meth:`supported` at once (the planners'
        interface)."""
        return self.predict(X), self.predict_bound(X), self.supported(X)

    def supported(self, X: Any) -> NDArray[np.bool_]:
        X = np.asarray(X, dtype=float)
        out: NDArray[np.bool_] = self.counts_[self._idx(X)] > 0
        return out
