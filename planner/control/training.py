"""The training hook: refits effect models from recorded events, off the planning hot path.

The :class:`Trainer` runs as a controller cycle hook: every ``interval_s`` per intent it reads
the intent's recent events, fits one model per learnable objective
(:func:`planner.models.training.fit_effect`) and stores it in ``effects``. With
``threaded=True`` (live runs) fits run on a worker thread so a cycle never waits for them;
simulations use ``threaded=False`` so runs stay deterministic.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from knowledge.base import KnowledgeBase
from planner.control.outcome import IntentOutcome
from planner.domain.errors import TemporaryError
from planner.domain.intents import Intent, KPIProfile, objective_profiles
from planner.domain.ports import IntentSource
from planner.domain.state import ClusterSnapshot
from planner.models.effects import EffectModel, to_document
from planner.models.observations import dataset
from planner.models.training import LEARNABLE, fit_effect

log = logging.getLogger(__name__)


def _log_failure(fut: Future[list[EffectModel]]) -> None:
    exc = fut.exception() if not fut.cancelled() else None
    if exc is not None:
        log.error("training failed: %s", exc, exc_info=exc)


class Trainer:
    def __init__(self, knowledge: KnowledgeBase, source: IntentSource,
                 min_samples: int = 8,
                 interval_s: float = 300.0, window_s: float = 6 * 3600.0, max_rows: int = 400,
                 threaded: bool = False) -> None:
        self.knowledge = knowledge
        self.source = source
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
            if snapshot.time - self._last.get(key, -math.inf) < self.interval_s:
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
        by_objective, _ = objective_profiles(intent, profiles)
        for obj in intent.spec.objectives:
            prof = by_objective.get(obj.name)
            if prof is None or prof.spec.type not in LEARNABLE:
                continue
            ds = dataset(events, obj.name)
            if len(ds) < self.min_samples:
                continue
            try:
                model = fit_effect(intent.key, obj.name, prof, ds, now, self.min_samples)
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
        return stored
