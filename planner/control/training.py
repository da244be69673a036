"""The training hook: refits effect models from recorded events, off the planning hot path,
within a CPU budget.

The :class:`Trainer` runs as a controller cycle hook. Every ``intervalSeconds`` per intent it
looks at the intent's recent events and its stored models: an objective whose model has seen
every settled observation is left alone; the others become fit jobs
(:class:`planner.models.fit_job.FitJob`, plain data). The schedule
(:mod:`planner.control.training_schedule`) picks which intents' jobs run, stalest and
worst-fitting first, within the admin's CPU seconds per hour (``training`` in the admin
config); a backend (:mod:`planner.control.training_backends`) runs them inline, on a thread,
in worker processes or on a Dask cluster, and the hook stores the models as they complete.

What the schedule needs survives a restart as data: each stored model's metadata holds its
training window, validation error and the CPU time its fit took (``metadata.training``); the
budget's last hour is rebuilt from those. The hook's own memory (when it last looked, what
waits, what runs) is only a cache of that.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knowledge.base import KnowledgeBase
from planner.control import training_backends
from planner.control.outcome import IntentOutcome
from planner.control.training_schedule import CpuLedger, ModelState, choose
from planner.domain.admin import TrainingSettings
from planner.domain.errors import PermanentError, TemporaryError
from planner.domain.intents import Intent, KPIProfile, KPIType, objective_profiles
from planner.domain.ports import IntentSource
from planner.domain.state import ClusterSnapshot
from planner.models.effects import EffectModel, from_document
from planner.models.fit_job import FitJob, FitResult, run_fits
from planner.models.observations import Dataset, dataset
from planner.models.training import LEARNABLE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LastFit:
    """What a stored (trained) model says of its fit."""

    timestamp: float
    window_end: float
    """Time of the newest observation it was fitted on."""
    error: float | None
    cost_s: float | None
    classes: tuple[str, ...]
    pools: tuple[str, ...]
    theta: tuple[float, ...] | None
    """The latency model's parameters (read only for a warm start)."""


def last_fit(doc: Mapping[str, Any] | None, with_theta: bool) -> LastFit | None:
    """The :class:`LastFit` of a stored effect document (``None``: none, or a static one)."""
    if doc is None or doc.get("static"):
        return None
    meta = doc.get("metadata") or {}
    window = meta.get("training_window") or [None, None]
    validation = meta.get("validation") or {}
    training = meta.get("training") or {}
    mape, cost = validation.get("mape"), training.get("cpu_s")
    theta = None
    if with_theta:
        try:
            est = from_document(dict(doc)).estimator
            theta = tuple(float(v) for v in getattr(est, "theta_", ())) or None
        except PermanentError as exc:
            log.info("no warm start from %s/%s: %s", doc.get("intent"), doc.get("objective"),
                     exc)
    return LastFit(float(doc.get("timestamp", 0.0)),
                   float(window[-1]) if isinstance(window[-1], int | float) else -math.inf,
                   float(mape) if isinstance(mape, int | float) else None,
                   float(cost) if isinstance(cost, int | float) else None,
                   tuple(str(c) for c in meta.get("classes") or ()),
                   tuple(str(p) for p in meta.get("pools") or ()), theta)


def new_rows(ds: Dataset, last: LastFit | None) -> int:
    """Observations of ``ds`` newer than what ``last`` was fitted on."""
    if last is None:
        return len(ds)
    return int(np.count_nonzero(ds.times > last.window_end))


@dataclass
class Candidate:
    """An intent with objectives to refit: its jobs and what its last fits cost."""

    intent: str
    jobs: list[FitJob]
    last_fit: float | None
    error: float | None
    costs: list[float | None] = field(default_factory=list)

    def state(self, mean_cost: float | None) -> ModelState:
        """For the schedule; a cost never measured counts as ``mean_cost`` per objective."""
        costs = [c if c is not None else mean_cost for c in self.costs]
        total = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
        return ModelState(self.intent, max(j.new_rows for j in self.jobs), self.last_fit,
                          self.error, total)


class Trainer:
    def __init__(self, knowledge: KnowledgeBase, source: IntentSource,
                 min_samples: int = 8, interval_s: float | None = None,
                 window_s: float = 6 * 3600.0, max_rows: int = 400, threaded: bool = False,
                 settings: TrainingSettings | None = None) -> None:
        self.knowledge = knowledge
        self.source = source
        self.settings = settings if settings is not None else TrainingSettings()
        self.min_samples = min_samples
        self.interval_s = self.settings.interval_s if interval_s is None else interval_s
        self.window_s = window_s
        self.max_rows = max_rows
        self.backend = training_backends.create(self.settings, threaded)
        self.ledger = CpuLedger()
        self._ledger_loaded = False
        self._warned = False
        self._looked: dict[str, float] = {}
        self._pending: dict[str, Candidate] = {}
        self._running: dict[str, tuple[training_backends.Handle, float]] = {}
        self.trained = 0

    @property
    def deterministic(self) -> bool:
        """Fits run on the cycle's thread (the run can be copied and replayed)."""
        return isinstance(self.backend, training_backends.InlineBackend)

    # -- the cycle hook
    def __call__(self, snapshot: ClusterSnapshot, outcomes: list[IntentOutcome]) -> None:
        now = snapshot.time
        self._load_ledger(now)
        self.collect(now)
        profiles = self.source.profiles()
        for out in outcomes:
            if out.invalid is not None:
                continue
            key = out.intent.key
            if key in self._running or now - self._looked.get(key, -math.inf) < self.interval_s:
                continue
            self._looked[key] = now
            cand = self.candidate(out.intent, profiles, now)
            if cand is None:
                self._pending.pop(key, None)
            else:
                self._pending[key] = cand
        self.dispatch(now)

    def close(self) -> None:
        self.backend.close()

    # -- scheduling
    def dispatch(self, now: float) -> list[str]:
        """Submit the pending intents the schedule picks within the budget; the keys. Inline,
        rounds repeat until the schedule picks nothing more (an intent whose cost was never
        measured is fitted and measured before the next is admitted)."""
        submitted: list[str] = []
        while self._pending:
            batch = self._round(now)
            submitted += batch
            self.collect(now)
            if not batch or not self.deterministic:
                break
        return submitted

    def _round(self, now: float) -> list[str]:
        mean = self.ledger.mean_cost()
        states = [c.state(mean) for c in self._pending.values()]
        reserved = sum(cost for _, cost in self._running.values())
        available = self.ledger.available(now, self.settings.budget_s, reserved)
        chosen = choose(states, now, available, None, self.settings.min_new_observations)
        budget = self.settings.budget_s
        if not chosen and budget is not None and not self._warned:
            dear = [s for s in states if s.cost_s is not None and s.cost_s > budget]
            if dear:
                self._warned = True
                log.warning("a fit of %s costs %.1f CPU s, more than the whole training "
                            "budget (%.1f CPU s per hour): it never runs; raise "
                            "training.cpuSecondsPerHour", dear[0].intent, dear[0].cost_s, budget)
        if not self.deterministic:
            chosen = chosen[:max(self.backend.slots - len(self._running), 0)]
        submitted: list[str] = []
        for st in chosen:
            cand = self._pending.pop(st.intent)
            try:
                handle = self.backend.submit(cand.jobs)
            except Exception as exc:  # a backend that is down: the intent waits for its next look
                log.error("cannot submit the fits of %s: %s", st.intent, exc)
                continue
            self._running[st.intent] = (handle, st.cost_s or 0.0)
            submitted.append(st.intent)
            if st.cost_s is None and budget is not None:
                break   # measure it before admitting another on no measurement at all
        return submitted

    def collect(self, now: float) -> list[EffectModel]:
        """Store the results of the fits that completed; the models stored."""
        stored: list[EffectModel] = []
        for key, (handle, _) in list(self._running.items()):
            if not handle.done():
                continue
            del self._running[key]
            try:
                results: list[FitResult] = handle.result()
            except Exception as exc:
                log.error("training %s failed: %s", key, exc, exc_info=exc)
                continue
            stored.extend(self.store(results, now))
        return stored

    def store(self, results: Sequence[FitResult], now: float) -> list[EffectModel]:
        stored: list[EffectModel] = []
        for res in results:
            self.ledger.charge(now, res.cpu_s)
            if res.document is None:
                log.info("no model for %s/%s yet: %s", res.intent, res.objective, res.reason)
                continue
            try:
                self.knowledge.put_effect(res.document)
            except TemporaryError as exc:
                log.warning("cannot store the model for %s/%s: %s", res.intent, res.objective,
                            exc)
                continue
            stored.append(from_document(res.document))
            self.trained += 1
        return stored

    def _load_ledger(self, now: float) -> None:
        """The last hour's fits, from the stored models (once: after a start or restart)."""
        if self._ledger_loaded or self.settings.budget_s is None:
            return
        try:
            docs = self.knowledge.effects()
        except TemporaryError as exc:
            log.warning("cannot read the models' training costs: %s", exc)
            return
        self._ledger_loaded = True
        for doc in docs:
            cost = ((doc.get("metadata") or {}).get("training") or {}).get("cpu_s")
            t = float(doc.get("timestamp", -math.inf))
            if isinstance(cost, int | float) and now - 3600.0 < t <= now:
                self.ledger.charge(t, float(cost))

    # -- jobs
    def candidate(self, intent: Intent, profiles: Mapping[str, KPIProfile],
                  now: float) -> Candidate | None:
        """The fits ``intent`` needs now: its learnable objectives with enough data and new
        observations since their last model (``None``: none)."""
        try:
            events = self.knowledge.events(intent.key, since=now - self.window_s,
                                           limit=self.max_rows)
        except TemporaryError as exc:
            log.warning("cannot train %s: %s", intent.key, exc)
            return None
        by_objective, _ = objective_profiles(intent, profiles)
        cand = Candidate(intent.key, [], now, None)
        for obj in intent.spec.objectives:
            prof = by_objective.get(obj.name)
            if prof is None or prof.spec.type not in LEARNABLE:
                continue
            ds = dataset(events, obj.name)
            if len(ds) < self.min_samples:
                continue
            warm = self.settings.warm_start and prof.spec.type is KPIType.LATENCY
            try:
                last = last_fit(self.knowledge.effect(intent.key, obj.name, now, now,
                                                      with_blob=warm), warm)
            except TemporaryError as exc:
                log.warning("cannot read the model of %s/%s: %s", intent.key, obj.name, exc)
                continue
            fresh = new_rows(ds, last)
            if last is not None and fresh < self.settings.min_new_observations:
                continue
            start = (last.theta if last is not None and warm and last.classes == ds.classes
                     and last.pools == ds.pools else None)
            cand.jobs.append(FitJob(intent.key, obj.name, prof.spec, ds, now, self.min_samples,
                                    start, fresh))
            cand.costs.append(last.cost_s if last is not None else None)
            if last is None or cand.last_fit is None:
                cand.last_fit = None
            else:
                cand.last_fit = min(cand.last_fit, last.timestamp)
            if last is not None and last.error is not None:
                cand.error = max(cand.error or 0.0, last.error)
        return cand if cand.jobs else None

    def train(self, intent: Intent, profiles: Mapping[str, KPIProfile],
              now: float) -> list[EffectModel]:
        """Fit ``intent``'s models now, on this thread, whatever the budget (characterisation
        studies); the models stored."""
        cand = self.candidate(intent, profiles, now)
        if cand is None:
            return []
        return self.store(run_fits(cand.jobs), now)
