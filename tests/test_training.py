"""The training hook: refits only with new data, within the budget, from what the knowledge
base holds (a restart keeps it); the same fit code inline, in worker processes and on a Dask
cluster gives the same stored model; warm start."""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from knowledge.base import KnowledgeBase
from knowledge.connect import open_knowledge_base
from planner.control import training_backends
from planner.control.outcome import IntentOutcome
from planner.control.training import Trainer
from planner.domain.admin import TrainingSettings
from planner.domain.intents import Intent, KPIProfileSpec, KPIType
from planner.domain.ports import StaticIntentSource
from planner.models.fit_job import FitJob, FitResult
from planner.models.latency import QueueingLatencyRegressor
from planner.models.observations import Dataset, dataset
from simulator.characterize import characterize
from simulator.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]
END = 1_767_225_600.0
"""Where :func:`characterize` puts its observations."""


@functools.cache
def _scenario() -> Scenario:
    return load_scenario(ROOT / "examples" / "scenarios" / "heterogeneous.yaml")


def _intent() -> Intent:
    return next(i for i in _scenario().intents if i.spec.active)


def _observed(trials: int = 24) -> KnowledgeBase:
    kb = open_knowledge_base(None)
    characterize(_scenario(), _intent().workload_key, trials, kb, seed=7, train=False)
    return kb


def _cycle(trainer: Trainer, now: float) -> None:
    trainer(SimpleNamespace(time=now), [IntentOutcome(_intent())])  # type: ignore[arg-type]


def _source() -> StaticIntentSource:
    return StaticIntentSource(_scenario().intents, _scenario().profiles)


def _observe_again(kb: KnowledgeBase, at: float) -> None:
    """Record one more settled observation at ``at``: a copy of the newest usable one."""
    objective = _intent().spec.objectives[0].name
    newest = float(dataset(kb.events(_intent().key), objective).times.max())
    ev = kb.events(_intent().key, since=newest, until=newest + 1e-3)[0]
    kb.record_event({**{k: v for k, v in ev.items() if k != "_id"}, "time": at})


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored model without what differs between two fits of the same data: the CPU time."""
    meta = {**doc["metadata"], "training": {**doc["metadata"]["training"], "cpu_s": None}}
    return {**doc, "metadata": meta}


def test_refits_only_with_new_data_and_keeps_its_state_in_the_knowledge_base() -> None:
    kb = _observed()
    trainer = Trainer(kb, _source(), settings=TrainingSettings(cpu_seconds_per_hour="unlimited"))
    _cycle(trainer, END)
    first = trainer.trained
    assert first >= 1
    docs = kb.effects(_intent().key)
    assert all(d["metadata"]["training"]["cpu_s"] > 0 for d in docs)
    assert all(d["metadata"]["training"]["new_rows"] == d["metadata"]["training"]["rows"]
               for d in docs)
    _cycle(trainer, END + 300)            # nothing new observed: nothing refitted
    assert trainer.trained == first
    # A restarted trainer reads the same from the store: still nothing to refit.
    again = Trainer(kb, _source(), settings=TrainingSettings(cpu_seconds_per_hour="unlimited"))
    _cycle(again, END + 600)
    assert again.trained == 0
    # One new settled observation: refitted, and the model says so.
    _observe_again(kb, END + 700)
    _cycle(again, END + 900)
    assert again.trained >= 1
    newest = kb.effects(_intent().key)[0]
    assert newest["timestamp"] == END + 900
    assert newest["metadata"]["training"]["new_rows"] == 1


def test_the_budget_holds_fits_back_and_a_restart_remembers_what_was_spent() -> None:
    kb = _observed()
    trainer = Trainer(kb, _source(), settings=TrainingSettings(cpu_seconds_per_hour=0.01))
    _cycle(trainer, END)                  # nothing measured yet: one fit is let through
    assert trainer.trained >= 1
    spent = trainer.ledger.spent(END)
    assert spent > 0.01                   # measured, and over that budget
    _observe_again(kb, END + 100)
    # Room for one more fit an hour, not two: the restarted trainer reads the last hour's
    # cost back from the stored models, and waits.
    budget = TrainingSettings(cpu_seconds_per_hour=1.5 * spent)
    restarted = Trainer(kb, _source(), settings=budget)
    _cycle(restarted, END + 300)
    assert restarted.trained == 0
    assert restarted.ledger.spent(END + 300) == pytest.approx(spent, rel=1e-3)
    _cycle(restarted, END + 3600 + 300)   # an hour later the budget is back
    assert restarted.trained >= 1


def _job(start: Any = None) -> FitJob:
    rng = np.random.default_rng(3)
    n = 30
    X = np.column_stack([rng.uniform(100, 600, n), rng.integers(2, 12, n),
                         rng.choice([0.5, 1.0, 2.0], n), np.zeros(n), -np.ones(n)])
    truth = QueueingLatencyRegressor(n_bootstrap=0)
    truth.share_columns_, truth.n_classes_ = 0, 1
    y = truth._forward(np.array([np.log(120.0), 0.9, 0.0, 5.0, 0.5, 0.0, 0.0]), X)
    ok = np.isfinite(y) & (y < 3000)
    y = y * np.exp(rng.normal(0, 0.03, n))
    ds = Dataset(X[ok], y[ok], (), (), np.arange(n, dtype=float)[ok], np.full(ok.sum(), 0.5))
    spec = KPIProfileSpec(type=KPIType.LATENCY, percentile=95.0)
    return FitJob("ns/web", "p95", spec, ds, 1000.0, 8, start, len(ds))


def _run(backend: training_backends.FitBackend, job: FitJob) -> FitResult:
    try:
        results: list[FitResult] = backend.submit([job]).result()
        return results[0]
    finally:
        backend.close()


def test_worker_processes_store_the_same_model_as_inline() -> None:
    job = _job()
    inline = _run(training_backends.create(TrainingSettings(executor="inline"), False), job)
    pool = _run(training_backends.create(TrainingSettings(executor="processes", workers=1),
                                         False), job)
    assert inline.document is not None and pool.document is not None
    assert _comparable(pool.document) == _comparable(inline.document)
    assert pool.cpu_s > 0


def test_a_dask_cluster_stores_the_same_model_as_inline() -> None:
    pytest.importorskip("dask.distributed")
    job = _job()
    inline = _run(training_backends.InlineBackend(), job)
    dask = _run(training_backends.DaskBackend(None, workers=1, processes=False), job)
    assert inline.document is not None and dask.document is not None
    assert _comparable(dask.document) == _comparable(inline.document)


def test_warm_start_starts_from_the_previous_parameters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _job().dataset
    starts: list[np.ndarray] = []
    solve = QueueingLatencyRegressor._fit_theta

    def spy(self: QueueingLatencyRegressor, X: Any, y: Any, shares: Any, start: Any,
            *args: Any, **kwargs: Any) -> Any:
        starts.append(np.array(start))
        return solve(self, X, y, shares, start, *args, **kwargs)

    def fit(start: Any = None) -> QueueingLatencyRegressor:
        starts.clear()
        return QueueingLatencyRegressor(n_bootstrap=0).fit(ds.X, ds.y, start=start)

    cold = fit()
    monkeypatch.setattr(QueueingLatencyRegressor, "_fit_theta", spy)
    fit()
    cold_start = starts[0]
    moved = np.array(cold.theta_)
    moved[0] += 0.1  # log service rate: free whenever there is data
    warm = fit(tuple(moved))
    assert starts[0][0] == pytest.approx(moved[0]) != pytest.approx(cold_start[0])
    assert np.allclose(warm.predict(ds.X), cold.predict(ds.X), rtol=0.05)
    # Parameters of another shape (other node classes) are ignored: a cold fit.
    fit((1.0, 2.0, 3.0))
    assert np.array_equal(starts[0], cold_start)
