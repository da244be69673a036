"""Training effect models from recorded events, off the planning hot path.

The :class:`Trainer` runs as a controller cycle hook: every ``interval_s`` per intent it reads
the intent's recent events, fits one model per learnable objective and stores it in
``effects``. With ``threaded=True`` (live runs) fits run on a worker thread so a cycle never
waits for them; simulations use ``threaded=False`` so runs stay deterministic.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from knowledge.base import KnowledgeBase
from planner.control.controller import IntentOutcome
from planner.domain.errors import TemporaryError
from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.domain.ports import IntentSource
from planner.domain.state import ClusterSnapshot
from planner.models.availability import AvailabilityRegressor
from planner.models.effects import (
    KIND_AVAILABILITY,
    KIND_LATENCY,
    EffectCache,
    EffectModel,
    library_versions,
    to_document,
)
from planner.models.latency import QueueingLatencyRegressor
from planner.models.observations import Dataset, dataset

log = logging.getLogger(__name__)
SATURATED_UTILIZATION = 0.9


def mape(pred: np.ndarray, y: np.ndarray) -> float | None:
    ok = np.isfinite(pred) & (y > 0)
    if not ok.any():
        return None
    return float(np.mean(np.abs(pred[ok] - y[ok]) / y[ok]))


def fit_latency(ds: Dataset, percentile: float, validate: bool = True) -> tuple[Any, float | None]:
    """Fit on everything; score on the newest 20 % with a model fitted on the oldest 80 %."""
    q = percentile / 100.0
    score = None
    if validate and len(ds) >= 10:
        order = np.argsort(ds.times)
        cut = int(len(order) * 0.8)
        train, test = order[:cut], order[cut:]
        try:
            probe = QueueingLatencyRegressor(quantile=q, n_bootstrap=0).fit(ds.X[train],
                                                                            ds.y[train])
            score = mape(probe.predict(ds.X[test]), ds.y[test])
        except ValueError:
            score = None
    return QueueingLatencyRegressor(quantile=q).fit(ds.X, ds.y), score


def _log_failure(fut: Future[list[EffectModel]]) -> None:
    exc = fut.exception() if not fut.cancelled() else None
    if exc is not None:
        log.error("training failed: %s", exc, exc_info=exc)


class Trainer:
    def __init__(self, knowledge: KnowledgeBase, source: IntentSource,
                 cache: EffectCache | None = None, min_samples: int = 8,
                 interval_s: float = 300.0, window_s: float = 6 * 3600.0, max_rows: int = 400,
                 threaded: bool = False) -> None:
        self.knowledge = knowledge
        self.source = source
        self.cache = cache
        self.min_samples = min_samples
        self.interval_s = interval_s
        self.window_s = window_s
        self.max_rows = max_rows
        self._last: dict[str, float] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="trainer") if threaded else None
        self._running: dict[str, Future[list[EffectModel]]] = {}
        self._lock = threading.Lock()
        self.trained = 0

    # -- the cycle hook
    def __call__(self, snapshot: ClusterSnapshot, outcomes: list[IntentOutcome]) -> None:
        profiles = self.source.profiles()
        for out in outcomes:
            if out.invalid is not None:
                continue
            key = out.intent.key
            if snapshot.time - self._last.get(key, -1e18) < self.interval_s:
                continue
            self._last[key] = snapshot.time
            if self._pool is None:
                self.train(out.intent, profiles, snapshot.time)
            else:
                with self._lock:
                    running = self._running.get(key)
                    if running is not None and not running.done():
                        continue
                    fut = self._pool.submit(self.train, out.intent, profiles, snapshot.time)
                    fut.add_done_callback(_log_failure)
                    self._running[key] = fut

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    # -- training
    def train(self, intent: Intent, profiles: Mapping[str, KPIProfile],
              now: float) -> list[EffectModel]:
        try:
            events = self.knowledge.events(intent.key, since=now - self.window_s,
                                           limit=self.max_rows)
        except TemporaryError as exc:
            log.warning("cannot train %s: %s", intent.key, exc)
            return []
        stored: list[EffectModel] = []
        for obj in intent.spec.objectives:
            prof = profiles.get(obj.profile_key(intent.metadata.namespace))
            if prof is None or prof.spec.type not in (KPIType.LATENCY, KPIType.AVAILABILITY):
                continue
            ds = dataset(events, obj.name)
            if len(ds) < self.min_samples:
                continue
            try:
                model = self._fit(intent, obj.name, prof, ds, now)
            except ValueError as exc:
                log.info("no model for %s/%s yet: %s", intent.key, obj.name, exc)
                continue
            try:
                self.knowledge.put_effect(to_document(model))
            except TemporaryError as exc:
                log.warning("cannot store the model for %s/%s: %s", intent.key, obj.name, exc)
                continue
            stored.append(model)
            self.trained += 1
        if stored and self.cache is not None:
            self.cache.invalidate(intent.key)
        return stored

    def _fit(self, intent: Intent, objective: str, prof: KPIProfile, ds: Dataset,
             now: float) -> EffectModel:
        meta: dict[str, Any] = {
            "training_window": [float(ds.times.min()), float(ds.times.max())],
            "versions": library_versions(),
            "kpi": {"type": prof.spec.type.value, "percentile": prof.spec.percentile},
        }
        if prof.spec.type is KPIType.LATENCY:
            est, score = fit_latency(ds, prof.spec.latency_percentile)
            meta["validation"] = {"mape": score, "method": "newest 20% held out"}
            kind = KIND_LATENCY
        else:
            # Saturation losses belong to the latency/capacity model; availability learns the
            # losses of a healthy, unsaturated configuration (failures, redundancy).
            calm = ~(ds.utilization >= SATURATED_UTILIZATION)
            if calm.sum() < self.min_samples:
                raise ValueError(f"only {int(calm.sum())} unsaturated observations")
            X, y = ds.X[calm], ds.y[calm]
            est = AvailabilityRegressor().fit(X, y)
            meta["validation"] = {"mae": float(np.mean(np.abs(est.predict(X) - y))),
                                  "method": "in-sample, unsaturated rows"}
            kind = KIND_AVAILABILITY
        return EffectModel(intent.key, objective, kind, est, ds.pools, now, False, meta,
                           ds.classes)
