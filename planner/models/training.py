"""Fitting effect models from a workload's observations (pure: no knowledge base, no
controller). The training hook that reads events and stores models is
:mod:`planner.control.training`."""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.domain.intents import KPIProfileSpec, KPIType
from planner.models.availability import AvailabilityRegressor
from planner.models.effects import (
    KIND_AVAILABILITY,
    KIND_LATENCY,
    EffectModel,
    library_versions,
)
from planner.models.latency import UTILIZATION_RANGE, QueueingLatencyRegressor
from planner.models.observations import Dataset

SATURATED_UTILIZATION = UTILIZATION_RANGE[1]
"""Rows with the pods this busy are saturated: censored latency, and no measure of the
service rate (the latency model's own bound)."""
LEARNABLE = (KPIType.LATENCY, KPIType.AVAILABILITY)
"""KPI types with a learned effect model."""


def mape(pred: np.ndarray, y: np.ndarray) -> float | None:
    ok = np.isfinite(pred) & (y > 0)
    if not ok.any():
        return None
    return float(np.mean(np.abs(pred[ok] - y[ok]) / y[ok]))


def fit_latency(ds: Dataset, percentile: float, validate: bool = True,
                start: Any = None) -> tuple[Any, float | None, float | None]:
    """Fit on everything (saturated rows as censored); score on the newest 20 % with a model
    fitted on the oldest 80 %: the error on its unsaturated rows, and the share of its
    saturated rows predicted below what was seen (a model blind to saturation scores high).
    ``start``: a previous model's ``theta_`` over the same columns (warm start of the full fit
    only: the previous model saw the newest rows, so a probe started from it would be scored
    on rows it had already learned from)."""
    q = percentile / 100.0
    score = None
    below: float | None = None
    # Saturated rows say "at least this slow": censored, not dropped (nor fitted as exact).
    censored = ds.utilization >= SATURATED_UTILIZATION
    if validate and len(ds) >= 10:
        order = np.argsort(ds.times)
        cut = int(len(order) * 0.8)
        train, test = order[:cut], order[cut:]
        try:
            probe = QueueingLatencyRegressor(quantile=q, n_bootstrap=0).fit(
                ds.X[train], ds.y[train], censored[train],
                utilization=ds.service_utilization[train])
            calm = test[~censored[test]]
            score = mape(probe.predict(ds.X[calm]), ds.y[calm]) if calm.size else None
            sat = test[censored[test]]
            if sat.size:
                # Saturated test rows are lower bounds: the share predicted below them.
                below = float(np.mean(probe.predict(ds.X[sat]) < ds.y[sat]))
        except ValueError:
            score = None
    model = QueueingLatencyRegressor(quantile=q).fit(ds.X, ds.y, censored, start=start,
                                                     utilization=ds.service_utilization)
    return model, score, below


def load_range(ds: Dataset) -> dict[str, float]:
    """Per device, the highest load per core (req/s) observed below saturation: how far the
    data reaches (a latency model vouches for loads a little beyond it, see
    :class:`planner.models.effects.LearnedKPI`)."""
    calm = ~(ds.utilization >= SATURATED_UTILIZATION)
    per_core = ds.X[:, 0] / np.maximum(ds.X[:, 1] * ds.X[:, 2], 1e-9)
    out: dict[str, float] = {}
    for name, rows in (("cpu", ds.X[:, 3] < 0.5), ("gpu", ds.X[:, 3] >= 0.5)):
        sel = calm & rows
        if sel.any():
            out[name] = float(per_core[sel].max())
    return out


def fit_effect(intent: str, objective: str, spec: KPIProfileSpec, ds: Dataset, now: float,
               min_samples: int, start: Any = None) -> EffectModel:
    """One effect model of ``intent``'s ``objective`` (KPI ``spec``) from ``ds``;
    :class:`ValueError` when the data cannot support one. ``start``: a previous latency
    model's ``theta_`` over the same columns (warm start; ignored for other kinds)."""
    meta: dict[str, Any] = {
        "training_window": [float(ds.times.min()), float(ds.times.max())],
        "versions": library_versions(),
        "kpi": {"type": spec.type.value, "percentile": spec.percentile},
    }
    if spec.type is KPIType.LATENCY:
        est, score, below = fit_latency(ds, spec.latency_percentile, start=start)
        meta["validation"] = {"mape": score, "saturated_predicted_below": below,
                              "method": "newest 20% held out"}
        meta["censored_rows"] = int((ds.utilization >= SATURATED_UTILIZATION).sum())
        meta["load_per_core_max"] = load_range(ds)
        kind = KIND_LATENCY
    else:
        # Saturation losses belong to the latency/capacity model; availability learns the
        # losses of a healthy, unsaturated configuration (failures, redundancy): rows whose
        # KPI window may have seen the pods saturated are left out (five such rows in 118
        # held every count below an availability target, docs/benchmarks.md 29, 55).
        peaks = ds.utilization if ds.window_utilization is None else ds.window_utilization
        calm = ~(peaks >= SATURATED_UTILIZATION)
        if calm.sum() < min_samples:
            raise ValueError(f"only {int(calm.sum())} unsaturated observations")
        X, y = ds.X[calm], ds.y[calm]
        est = AvailabilityRegressor().fit(X, y)
        meta["validation"] = {"mae": float(np.mean(np.abs(est.predict(X) - y))),
                              "method": "in-sample, unsaturated rows"}
        kind = KIND_AVAILABILITY
    return EffectModel(intent, objective, kind, est, ds.pools, now, False, meta,
                       ds.classes)
