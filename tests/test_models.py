"""Learned effect models: estimator API, fit quality, uncertainty, safe (de)serialisation."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from knowledge.connect import open_knowledge_base
from planner.models import effects as effects_module
from planner.models import serialization
from planner.models.availability import AvailabilityRegressor
from planner.models.effects import (
    KIND_LATENCY,
    EffectModel,
    from_document,
    to_document,
)
from planner.models.latency import QueueingLatencyRegressor
from planner.models.observations import dataset
from planner.models.sojourn import sojourn_quantile
from planner.planners.effect_cache import EffectCache


def truth(X: np.ndarray, base: float = 3.0) -> np.ndarray:
    rate, rep, cpu, gpu, _ = X.T
    mu = 100 * cpu**0.9 * np.where(gpu > 0.5, 8, 1)
    return base + sojourn_quantile(0.95, rate / rep, mu, np.clip(np.floor(cpu), 1, 64))


def sample(n: int, seed: int, gpu: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(100, 600, n), rng.integers(2, 20, n),
                         rng.choice([0.5, 1, 2, 4], n),
                         rng.integers(0, 2, n) if gpu else np.zeros(n), -np.ones(n)])
    y = truth(X)
    ok = np.isfinite(y) & (y < 2000)
    return X[ok], y[ok] * np.exp(rng.normal(0, 0.02, ok.sum()))


def test_estimator_api() -> None:
    est = QueueingLatencyRegressor(quantile=0.9, n_bootstrap=3)
    assert est.get_params()["quantile"] == 0.9
    assert not hasattr(est, "theta_")
    X, y = sample(40, 0)
    assert est.fit(X, y) is est
    assert hasattr(est, "theta_") and hasattr(est, "bootstrap_thetas_")
    assert clone(est).get_params() == est.get_params()


def test_fit_recovers_the_workload() -> None:
    X, y = sample(50, 1, gpu=True)
    est = QueueingLatencyRegressor(n_bootstrap=4).fit(X, y)
    Xt, yt = sample(200, 2, gpu=True)
    pred = est.predict(Xt)
    ok = np.isfinite(pred)
    assert ok.mean() > 0.95
    assert np.mean(np.abs(pred[ok] - yt[ok]) / yt[ok]) < 0.05
    assert np.exp(est.theta_[2]) == pytest.approx(8.0, rel=0.15)   # GPU speed-up learned


def test_bound_is_conservative_and_outliers_pull_little() -> None:
    X, y = sample(60, 3)
    y = y.copy()
    y[:4] *= 6.0  # pods mid-restart inside the KPI window
    est = QueueingLatencyRegressor(n_bootstrap=6).fit(X, y)
    Xt, yt = sample(100, 4)
    pred, bound = est.predict(Xt), est.predict_bound(Xt)
    ok = np.isfinite(pred)
    assert np.all(bound[ok] >= pred[ok])
    assert np.mean(np.abs(pred[ok] - yt[ok]) / yt[ok]) < 0.08


def test_ensemble_in_one_solve_gives_the_members_numbers(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The bootstrap ensemble is solved as one stacked batch (planning speed); row by row it
    is the same arithmetic as evaluating each member alone, so the numbers are identical."""
    from planner.models import latency

    X, y = sample(60, 7, gpu=True)
    est = QueueingLatencyRegressor(n_bootstrap=5).fit(X, y)
    Xt, _ = sample(300, 8, gpu=True)
    Xt = np.vstack([Xt, [[5000.0, 2, 0.5, 0, -1]]])          # an unstable queue: inf
    shares = est._shares(Xt)
    mean = est._forward(est.theta_, Xt, shares)
    members = np.vstack([est._forward(t, Xt, shares) for t in est.bootstrap_thetas_])
    with np.errstate(invalid="ignore"):
        q = np.quantile(members, est.bound_quantile, axis=0, method="higher")
    bound = np.maximum(q, mean) * np.exp(est.residual_scale_)
    assert np.isinf(mean[-1])
    for rows in (latency.STACKED_ROWS, 700):           # one solve, or several
        monkeypatch.setattr(latency, "STACKED_ROWS", rows)
        got_mean, got_bound = est.predict_with_bound(Xt)
        assert np.array_equal(got_mean, mean) and np.array_equal(got_mean, est.predict(Xt))
        assert np.array_equal(got_bound, bound) and np.array_equal(est.predict_bound(Xt), bound)


def test_learned_mean_alone_is_the_predictions_mean() -> None:
    """``predict_mean`` (the load correction's bisection) skips the ensemble, not a digit."""
    from planner.domain.state import WorkloadConfig
    from planner.models.effects import LearnedLatency
    from planner.models.predictor import CandidateBatch

    X, y = sample(40, 9)
    p = LearnedLatency(effect(QueueingLatencyRegressor(n_bootstrap=4).fit(X, y)))
    batch = CandidateBatch.of([WorkloadConfig(r, 1.0, "cpu", None) for r in (2, 5, 9)])
    for rate in (50.0, 300.0, 2000.0):
        assert np.array_equal(p.predict_mean(batch, rate), p.predict(batch, rate).mean)


def test_support_knows_what_it_has_not_seen() -> None:
    X, y = sample(30, 5)
    X[:, 2] = 1.0
    y = truth(X)
    ok = np.isfinite(y)
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X[ok], y[ok])
    probe = np.array([[300, 6, 1.0, 0, -1], [300, 6, 2.0, 0, -1], [300, 6, 1.0, 1, -1]])
    assert est.supported(probe).tolist() == [True, False, False]


def test_too_little_data_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        QueueingLatencyRegressor().fit(np.ones((2, 5)), np.ones(2))


def test_availability_model() -> None:
    X = np.array([[100, 1, 1, 0, -1]] * 10 + [[100, 3, 1, 0, -1]] * 10, dtype=float)
    y = np.array([0.97] * 10 + [0.9995] * 10)
    est = AvailabilityRegressor().fit(X, y)
    p = est.predict(X[[0, 15]])
    assert p[0] < 0.98 < p[1]
    assert np.all(est.predict_bound(X) <= est.predict(X))


def effect(est: Any) -> EffectModel:
    return EffectModel("shop/checkout", "p95", KIND_LATENCY, est, ("a", "b"), 100.0, False,
                       {"validation": {"mape": 0.01}})


@pytest.mark.parametrize("n_bootstrap", [2, 0])  # 0: an empty (0, P) ensemble keeps its shape
def test_round_trip_is_exact(n_bootstrap: int) -> None:
    X, y = sample(30, 6)
    est = QueueingLatencyRegressor(n_bootstrap=n_bootstrap).fit(X, y)
    doc = to_document(effect(est))
    assert isinstance(doc["blob"], bytes) and b"pickle" not in doc["blob"]
    back = from_document(doc)
    np.testing.assert_allclose(back.estimator.predict(X), est.predict(X))
    np.testing.assert_allclose(back.estimator.predict_bound(X), est.predict_bound(X))
    assert back.pools == ("a", "b") and back.metadata["samples"] == est.n_samples_


def _blob(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(doc["blob"])
    return out


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(blob=b"\x80\x04\x95 pickle bytes"),                       # corrupt
    lambda d: d.update(blob=json.dumps({**_blob(d), "class": "os.system"}).encode()),  # foreign
    lambda d: d.update(blob=json.dumps({**_blob(d), "version": 99}).encode()),   # wrong version
    lambda d: d.update(kind="tensorflow"),
    lambda d: d.update(format="pickle"),
    lambda d: d["metadata"].update(features=["rate"]),
    lambda d: d.update(blob=json.dumps({**_blob(d), "params": {"evil": "x"}}).encode()),
    lambda d: d.update(blob=json.dumps({**_blob(d), "fitted": {**_blob(d)["fitted"],
                                        "theta_": {"__array__": [1], "dtype": "object"}}})
                       .encode()),
], ids=["corrupt", "foreign-class", "wrong-version", "unknown-kind", "pickle-format",
        "feature-mismatch", "unknown-param", "object-array"])
def test_untrusted_documents_are_refused(mutate: Any) -> None:
    X, y = sample(20, 7)
    doc = to_document(effect(QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)))
    mutate(doc)
    with pytest.raises(serialization.ModelRefused):
        from_document(doc)


def test_cache_refuses_logs_once_and_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    kb = open_knowledge_base(None)
    X, y = sample(20, 8)
    doc = to_document(effect(QueueingLatencyRegressor(n_bootstrap=0).fit(X, y)))
    doc["blob"] = b"not json"
    kb.put_effect(doc)
    cache = EffectCache(kb, refresh_s=0.0)
    with caplog.at_level(logging.WARNING):
        assert cache.get("shop/checkout", "p95", now=150.0)[0] is None
        assert cache.get("shop/checkout", "p95", now=160.0)[0] is None
    refusals = [r for r in caplog.records if "refused effect model" in r.getMessage()]
    assert len(refusals) == 1 and "not a JSON model document" in refusals[0].getMessage()
    assert cache.refusals == 1


def test_the_cache_decodes_a_model_once_while_it_is_the_newest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kb = open_knowledge_base(None)
    X, y = sample(30, 6)
    kb.put_effect(to_document(effect(QueueingLatencyRegressor(n_bootstrap=0).fit(X, y))))
    decoded: list[float] = []
    real = effects_module.from_document

    def counting(doc: dict[str, Any]) -> EffectModel:
        decoded.append(float(doc["timestamp"]))
        return real(doc)

    monkeypatch.setattr("planner.planners.effect_cache.from_document", counting)
    cache = EffectCache(kb, refresh_s=0.0)
    first = cache.get("shop/checkout", "p95", now=150.0)[0]
    for t in (160.0, 170.0, 180.0):
        assert cache.get("shop/checkout", "p95", now=t)[0] is first
    assert decoded == [100.0]
    newer = effect(QueueingLatencyRegressor(n_bootstrap=0).fit(X, y * 2))
    kb.put_effect(to_document(replace(newer, timestamp=185.0)))
    got = cache.get("shop/checkout", "p95", now=190.0)[0]
    assert got is not None and got is not first and got.timestamp == 185.0
    np.testing.assert_allclose(got.estimator.predict(X), newer.estimator.predict(X))
    # the same timestamp, another model: told apart by the blob's digest in the metadata
    kb.put_effect(to_document(replace(effect(QueueingLatencyRegressor(n_bootstrap=0).fit(
        X, y * 3)), timestamp=185.0)))
    again = cache.get("shop/checkout", "p95", now=195.0)[0]
    assert again is not None and again is not got
    assert decoded == [100.0, 185.0, 185.0]
    assert cache.get("shop/checkout", "p95", now=100_000.0)[0] is None  # past the look-back


def test_dataset_keeps_only_settled_events() -> None:
    def ev(t: float, replicas: int, ready: int, value: float | None) -> dict[str, Any]:
        pods = [{"ready": i < ready, "cpu": 1.0, "device": "cpu"} for i in range(replicas)]
        return {"time": t, "config": {"replicas": replicas, "cpu": 1.0, "device": "cpu",
                                      "pool": None},
                "resources": {"ready_replicas": ready}, "pods": pods,
                "load": {"request_rate": 100.0}, "current": {"p95": value}}

    events = [ev(0, 2, 2, 10), ev(30, 2, 2, 11), ev(75, 2, 2, 12),   # settles after 60 s
              ev(90, 3, 2, 50),                                       # rollout
              ev(120, 3, 3, 9), ev(160, 3, 3, None), ev(200, 3, 3, 8)]
    ds = dataset(events, "p95")
    assert ds.y.tolist() == [12, 8]


def test_the_settling_time_counts_from_when_the_pods_run_the_configuration() -> None:
    """gen-2173, traced: one GPU pod served until eleven CPU pods of the new configuration
    were ready, 80 s after the change. Counted from the change, the first event with only CPU
    pods ready was already settled, and its KPI window (the last 60 s) was mostly the GPU
    pod's: eleven CPU pods were learned at 5.6 ms and 336 req/s a core, beyond their capacity.
    Counted from when the pods run the configuration, that window is left out."""
    def ev(t: float, device: str, value: float) -> dict[str, Any]:
        cpu_pods = 11 if device == "cpu" else 0
        pods = ([{"ready": True, "cpu": 1.0, "device": "cpu"}] * cpu_pods
                + ([{"ready": True, "cpu": 1.0, "device": "gpu"}] if t < 90 else []))
        return {"time": t, "config": {"replicas": 11, "cpu": 1.0, "device": "cpu", "pool": None},
                "resources": {"ready_replicas": len(pods)}, "pods": pods,
                "load": {"request_rate": 3700.0}, "current": {"p50": value}}

    # Changed at 0; the CPU pods start until 90 (only the GPU pod is ready before then).
    events = [{**ev(t, "gpu", 5.6), "pods": [{"ready": True, "cpu": 1.0, "device": "gpu"}],
               "resources": {"ready_replicas": 1}} for t in (0.0, 15.0, 30.0, 45.0, 60.0, 75.0)]
    events += [ev(90.0, "cpu", 5.6), ev(105.0, "cpu", 9.0), ev(135.0, "cpu", 24.0),
               ev(150.0, "cpu", 25.0), ev(165.0, "cpu", 25.5)]
    assert dataset(events, "p50").y.tolist() == [25.0, 25.5]
    # A scale-out of the same shape counts from the change: its window is the same shape at
    # fewer pods (kept: a pessimistic row), not another shape's.
    def scaled(t: float, ready: int, value: float) -> dict[str, Any]:
        pods = [{"ready": i < ready, "cpu": 1.0, "device": "cpu"} for i in range(13)]
        return {"time": t, "config": {"replicas": 13, "cpu": 1.0, "device": "cpu",
                                      "pool": None},
                "resources": {"ready_replicas": ready}, "pods": pods,
                "load": {"request_rate": 300.0}, "current": {"p50": value}}
    out = dataset([scaled(0.0, 10, 90.0), scaled(30.0, 13, 40.0), scaled(60.0, 13, 30.0)], "p50")
    assert out.y.tolist() == [30.0]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
           st.lists(st.lists(st.one_of(st.floats(-1e6, 1e6), st.sampled_from(
               (np.inf, -np.inf, np.nan, 0.0, -0.0))), min_size=3, max_size=3),
               min_size=n, max_size=n),
           st.sampled_from((0.0, 0.5, 0.8, 0.9, 0.95, 1.0)))))
def test_the_higher_quantile_equals_numpys(case: tuple[list[list[float]], float]) -> None:
    """The bootstrap band's quantile without np.quantile's per-call overhead: the same values
    (NaN where a column has one), for any ensemble size."""
    from planner.models.latency import higher_quantile

    rows, q = case
    a = np.array(rows, dtype=float)
    with np.errstate(invalid="ignore"):
        want = np.quantile(a, q, axis=0, method="higher")
    assert higher_quantile(a, q).tobytes() == want.tobytes()


def test_the_cpu_utilisation_tells_the_service_time_from_the_base_latency() -> None:
    """A workload seen at one load (about 900 req/s on 29 one-core pods at about 60 % CPU)
    fits its p95 as well with a short service time and a large base latency as with the truth
    (50 req/s per pod, 5 ms): fitted on latency alone the model says about 75 req/s and
    97 ms, so a pod ten times as fast would still answer in 97 ms. The CPU utilisation the
    pods report is arrivals over service rate: fitted on it too, the service rate and the base
    come out right (50.3 req/s, 8.6 ms when written)."""
    from planner.models.observations import dataset
    from simulator.runner import ScenarioRun
    from simulator.scenario import parse_scenario
    from tests.support.gpu_trial import gpu_trial
    doc = gpu_trial(30.0, 0.3, minutes=8, actuators=("replicas",), step_s=15)
    doc["manifests"][1]["spec"]["objectives"][0]["value"] = 40
    run = ScenarioRun(parse_scenario(doc, "one-load"), "grid", 1)
    run.run(duration=8 * 60)
    ds = dataset(run.knowledge.events("ml/infer"), "p95")
    assert len(ds) >= 8 and np.nanmax(ds.X[:, 0]) < 1.15 * np.nanmin(ds.X[:, 0])
    censored = ds.utilization >= 0.9
    blind = QueueingLatencyRegressor(n_bootstrap=0).fit(ds.X, ds.y, censored)
    told = QueueingLatencyRegressor(n_bootstrap=0).fit(ds.X, ds.y, censored,
                                                       utilization=ds.utilization)
    assert np.exp(told.theta_[0]) == pytest.approx(50.0, rel=0.05)
    assert told.theta_[3] < 20.0
    # The blind fit is what the test is about: it could not tell them apart.
    assert abs(np.exp(blind.theta_[0]) - 50.0) > 10.0 and blind.theta_[3] > 50.0
    # One utilisation per row, or a clear error.
    with pytest.raises(ValueError, match="utilization must have one value per row"):
        QueueingLatencyRegressor(n_bootstrap=0).fit(ds.X, ds.y, utilization=ds.utilization[1:])


def test_first_rows_of_a_device_far_faster_than_the_prior_are_learned_not_called_unstable(
        ) -> None:
    """A GPU 20x as fast, first seen carrying 400 req/s per pod, eight times what a CPU pod
    serves. From the prior (speed-up 1) those rows are an unstable queue; a flat penalty there
    has no slope, the solve never raised the speed-up and the model kept predicting the GPU
    unstable while it served in 6 ms. The penalty grows with the predicted overload."""
    rng = np.random.default_rng(5)
    cpu = np.column_stack([rng.uniform(100, 600, 40), rng.integers(20, 40, 40), np.ones(40),
                           np.zeros(40), -np.ones(40)])
    gpu = np.column_stack([rng.uniform(700, 900, 6), np.full(6, 2.0), np.ones(6), np.ones(6),
                           -np.ones(6)])
    X = np.vstack([cpu, gpu])
    mu = np.where(X[:, 3] > 0.5, 1000.0, 50.0)
    y = 5.0 + sojourn_quantile(0.95, X[:, 0] / X[:, 1], mu, np.ones(len(X)))
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X, y, utilization=X[:, 0] / X[:, 1] / mu)
    assert np.exp(est.theta_[2]) > 8.0
    pred = est.predict(gpu)
    assert np.isfinite(pred).all() and (pred < 30.0).all(), pred


def test_availability_is_not_learned_from_windows_the_pods_saturated_in() -> None:
    """gen-26, traced (docs/benchmarks.md sections 29 and 55): availability is a share over
    the last minute, utilisation a mean over 15 s. Two kinds of row lost requests to an
    overload and passed a filter on their own utilisation: the first pods ready after a
    scale-out whose old pods had saturated until then, and a row at 0.59 whose last seconds
    were a burst's first (the next event is saturated). One such row held every count below
    the target; with the window's utilisation they are left out."""
    from planner.domain.intents import KPIProfileSpec, KPIType
    from planner.models.training import fit_effect

    def ev(t: float, replicas: int, util: float, avail: float) -> dict[str, Any]:
        pods = [{"ready": True, "cpu": 1.0, "device": "cpu"}] * replicas
        return {"time": t, "config": {"replicas": replicas, "cpu": 1.0, "device": "cpu",
                                      "pool": None},
                "resources": {"ready_replicas": replicas}, "pods": pods,
                "load": {"request_rate": 100.0, "cpu_utilization": util},
                "current": {"avail": avail}}

    calm = [ev(15.0 * i, 10, 0.4, 1.0) for i in range(20)]
    onset = [ev(300.0, 10, 0.59, 0.914)]
    # Scaled out at once (the planner's answer to that row): the old pods saturate until
    # the new ones are ready, 60 s later.
    out = [ev(315.0 + 15.0 * i, 30, 1.0, 0.7) for i in range(4)]
    after = [ev(375.0 + 15.0 * i, 30, 0.12, a) for i, a in enumerate((0.92, 0.95, 0.99))]
    later = [ev(420.0 + 15.0 * i, 30, 0.12, 1.0) for i in range(12)]
    ds = dataset(calm + onset + out + after + later, "avail")
    assert ds.window_utilization is not None
    # Rows of the burst's start and of the scale-out's first minute have calm utilisation;
    # the newest row's window is not known to have ended calm (no next event yet).
    assert ds.window_utilization[-1] == math.inf
    assert {0.914, 0.95, 0.99} <= set(ds.y[ds.utilization < 0.9].tolist())
    spec = KPIProfileSpec(type=KPIType.AVAILABILITY)
    model = fit_effect("ns/w", "avail", spec, ds, 600.0, 5).estimator
    low, _ = model.predict_with_bound(np.array([[100.0, 30.0, 1.0, 0.0, -1.0]]))
    assert low[0] >= 0.999
    # Without the window (the row's own utilisation only) they pulled it below 0.999.
    own = replace(ds, window_utilization=None)
    assert fit_effect("ns/w", "avail", spec, own, 600.0, 5).estimator.predict(
        np.array([[100.0, 30.0, 1.0, 0.0, -1.0]]))[0] < 0.999


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.one_of(st.floats(0.0, 2.0),
                                                        st.just(math.nan))), max_size=30),
       st.lists(st.integers(-5, 45), max_size=12), st.sampled_from((0.0, 1.0, 4.0, 60.0)),
       st.one_of(st.none(), st.lists(st.booleans(), min_size=30, max_size=30)))
def test_window_peaks_are_the_highest_known_utilisation_in_each_window(
        events: list[tuple[int, float]], rows: list[int], window: float,
        follows: list[bool] | None) -> None:
    """Against the definition: per row, the events after ``t - window`` up to ``t`` and the
    next after ``t``; NaN where none of them knows its utilisation; with ``follows``, the
    next only where it follows the one before it, and inf where there is no next."""
    from planner.models.observations import window_peaks

    events = sorted(events, key=lambda e: e[0])
    at = np.array([float(t) for t, _ in events])
    utils = np.array([u for _, u in events])
    cont = None if follows is None else np.array(follows[:len(events)], dtype=bool)
    got = window_peaks(np.array(rows, dtype=float), at, utils, window, cont)
    for k, t in enumerate(rows):
        inside = [u for a, u in events if t - window < a <= t]
        nxt = [j for j, (a, _) in enumerate(events) if a > t][:1]
        after = [events[j][1] for j in nxt if cont is None or cont[j]]
        known = [u for u in inside + after if not math.isnan(u)]
        want = max(known) if known else math.nan
        if cont is not None and not nxt:
            want = math.inf
        assert (math.isnan(got[k]) and math.isnan(want)) or got[k] == want
