"""Measured speeds predicted in one model call (``MeasuredShapes._in_one_call``) give every
row the numbers the place-by-place path gives it, bit for bit; and the learned latency model
with one speed-up per row gives each row what that speed-up alone gives it."""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.effects import KIND_LATENCY, EffectModel, LearnedLatency, LearnedThroughput
from planner.models.explicit import ExplicitLatency
from planner.models.latency import QueueingLatencyRegressor, _faster
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.models.sojourn import sojourn_quantile
from planner.planners import canary, feedback
from planner.planners.predictors import CurrentSizeOnly
from tests.test_prediction_equivalence import fitted_models, same

SIZES = (0.5, 1.0, 2.0)
POOLS = (None, "fast", "slow")


@functools.cache
def _learned(two_sizes: bool) -> LearnedLatency:
    """A learned p95 model of M/M/c pods seen on CPU pods (of 1 cpu, or of 1 and 2), with the
    highest load per core it saw recorded."""
    rng = np.random.default_rng(5)
    n = 80
    cpu = rng.choice([1.0, 2.0], n) if two_sizes else np.ones(n)
    X = np.column_stack([rng.uniform(20, 300, n), rng.integers(4, 20, n), cpu, np.zeros(n),
                         -np.ones(n)])
    y = 5.0 + sojourn_quantile(0.95, X[:, 0] / X[:, 1], np.full(n, 50.0) * cpu**0.8,
                               np.floor(cpu))
    ok = np.isfinite(y)
    est = QueueingLatencyRegressor(n_bootstrap=3).fit(X[ok], y[ok])
    return LearnedLatency(EffectModel("ml/infer", "p95", KIND_LATENCY, est, (), 0.0, False,
                                      {"load_per_core_max": {"cpu": 40.0, "gpu": 200.0}}))


def _explicit() -> Predictor:
    """The explicit estimate as the planner wraps it before a model is learned (its
    ``predict_faster_rows`` is the default's, one call per factor)."""
    return CurrentSizeOnly(ExplicitLatency(QueueEstimate(50.0, 5.0), 0.95,
                                           WorkloadConfig(4, 1.0)), 1.0)


@st.composite
def cases(draw: st.DrawFn) -> tuple[canary.MeasuredShapes, CandidateBatch, float]:
    kind = draw(st.sampled_from(["learned", "learned2", "explicit", "nested"]))
    inner: Predictor = (_explicit() if kind == "explicit"
                        else _learned(kind == "learned2"))
    if kind == "nested":       # measured speeds inside optimistic ones, as canary.propose has
        inner = canary.MeasuredShapes(inner, {("gpu", None): canary.Speed(("cpu", None),
                                                                          draw(st.floats(0.5,
                                                                                         50.0)))})
    places = [(d, p) for d in ("cpu", "gpu") for p in POOLS]
    speeds: dict[feedback.Tried, canary.Speed] = {}
    for place in draw(st.lists(st.sampled_from(places), max_size=6, unique=True)):
        ref_cpu = draw(st.none() | st.sampled_from(SIZES))
        factor = draw(st.sampled_from([0.0, 0.4, 1.0, 3.0, math.nan]))
        # Against the current pods, or against another place (measured too, or not): chains
        # and cycles of measurements, as after moves between measured places.
        ref = draw(st.just(("cpu", None)) | st.sampled_from([p for p in places if p != place]))
        # Measured at a known CPU size (beside the reference's pods of it) or not.
        speeds[place] = canary.Speed(ref, factor, ref_cpu,
                                     draw(st.none() | st.sampled_from(SIZES)))
    for size in draw(st.lists(st.sampled_from(SIZES), max_size=2, unique=True)):
        place = draw(st.sampled_from(places))
        speeds[(size, *place)] = canary.Speed(place, draw(st.floats(0.2, 5.0)),
                                              draw(st.none() | st.sampled_from(SIZES)))
    n = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    batch = CandidateBatch(rng.integers(1, 60, n).astype(float), rng.choice(SIZES, n),
                           (rng.random(n) < 0.4).astype(float),
                           tuple(POOLS[i] for i in rng.integers(0, 3, n).tolist()))
    return canary.MeasuredShapes(inner, speeds), batch, draw(st.floats(1.0, 3000.0))


def _same(a: Prediction, b: Prediction) -> bool:
    return (same(a.mean, b.mean) and same(a.bound, b.bound)
            and np.array_equal(a.supported, b.supported))


@settings(max_examples=200, deadline=None)
@given(cases())
def test_one_call_gives_every_row_what_the_place_by_place_path_gives(
        case: tuple[canary.MeasuredShapes, CandidateBatch, float]) -> None:
    """Places and CPU sizes measured (against the current pods, or against pods of another
    size), overlapping, at speeds 0 (not used), below and above 1 and NaN (used, as the
    place-by-place path uses it), around a learned latency model, the explicit estimate (the
    default one-call path, a call per factor) or another wrapper of measured speeds: the same
    means, bounds and support, exactly."""
    lat, batch, rate = case
    with np.errstate(all="ignore"):
        want = lat._by_place(batch, rate, 1.0)
        got = lat.predict(batch, rate)
    assert _same(got, want)


@settings(max_examples=200, deadline=None)
@given(fitted_models(), st.integers(0, 2**32 - 1))
def test_a_speed_up_per_row_is_each_rows_own(case: Any, seed: int) -> None:
    """The latency model's ensemble with a speed-up per row: each row's predictions are those
    of an evaluation with its speed-up alone (1 included), exactly."""
    est, X = case
    factors = np.random.default_rng(seed).choice([1.0, 0.3, 2.5, 10.0], len(X))
    thetas, terms = est._ensemble()
    with np.errstate(all="ignore"):
        got = est._forward_many(thetas, X, None, _faster(terms, factors))
        for f in np.unique(factors).tolist():
            rows = factors == f
            alone = est._forward_many(thetas, X[rows], None,
                                      terms if f == 1.0 else _faster(terms, f))
            assert same(got[:, rows], alone)


def _support_case(kind: str, seed: int
                  ) -> tuple[Predictor, np.random.Generator, CandidateBatch]:
    """A predictor of ``kind`` (the learned model of one or two CPU sizes, the explicit
    estimate as the planner wraps it, or measured speeds around the learned model), a
    generator seeded with ``seed`` and 30 random rows over sizes, devices and pools."""
    inner: Predictor = _explicit() if kind == "explicit" else _learned(kind == "learned2")
    if kind == "nested":
        inner = canary.MeasuredShapes(inner, {("gpu", None): canary.Speed(("cpu", None), 30.0)})
    rng = np.random.default_rng(seed)
    n = 30
    batch = CandidateBatch(rng.integers(1, 60, n).astype(float), rng.choice(SIZES, n),
                           (rng.random(n) < 0.4).astype(float),
                           tuple(POOLS[i] for i in rng.integers(0, 3, n).tolist()))
    return inner, rng, batch


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["learned", "learned2", "explicit", "nested"]),
       st.integers(0, 2**32 - 1), st.floats(1.0, 3000.0),
       st.sampled_from([1.0, 0.3, 2.5, 12.0, 40.0]))
def test_support_at_a_speed_is_what_the_prediction_at_that_speed_says(
        kind: str, seed: int, rate: float, factor: float) -> None:
    """``supported_faster`` (what a chain of measured places asks at every link) answers
    without predicting what ``predict_faster(...).supported`` says, for the learned latency
    model, the explicit estimate as the planner wraps it, and a wrapper of measured speeds;
    and the wrapped estimate's ``predict_faster_rows`` gives each row its own factor's
    numbers."""
    inner, rng, batch = _support_case(kind, seed)
    n = len(batch)
    with np.errstate(all="ignore"):
        want = (inner.predict(batch, rate) if factor == 1.0
                else inner.predict_faster(batch, rate, factor)).supported
        assert np.array_equal(inner.supported_faster(batch, rate, factor), want)
        if kind == "explicit":
            factors = rng.choice([1.0, 0.3, 2.5, 12.0], n)
            rows = inner.predict_faster_rows(batch, rate, factors)
            for f in np.unique(factors).tolist():
                m = factors == f
                alone = (inner.predict(batch, rate) if f == 1.0
                         else inner.predict_faster(batch, rate, f))
                assert same(rows.mean[m], alone.mean[m])
                assert np.array_equal(rows.supported[m], alone.supported[m])


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["learned", "learned2", "explicit", "nested"]),
       st.integers(0, 2**32 - 1), st.floats(1.0, 3000.0))
def test_support_with_a_speed_per_row_is_each_rows_own(kind: str, seed: int,
                                                       rate: float) -> None:
    """``supported_faster_rows`` (one check for every row a chain of measured places moves
    on, each at its own product of speeds) gives each row what ``supported_faster`` at its
    factor alone gives it, NaN and 1 included, for the learned latency model (one set of
    features), the explicit estimate as the planner wraps it and a wrapper of measured
    speeds (the default, a call per factor)."""
    inner, rng, batch = _support_case(kind, seed)
    n = len(batch)
    factors = rng.choice([1.0, 0.3, 2.5, 12.0, 40.0, math.nan], n)
    with np.errstate(all="ignore"):
        got = inner.supported_faster_rows(batch, rate, factors)
        for i, f in enumerate(factors.tolist()):
            one = batch.take(np.array([i]))
            assert got[i] == inner.supported_faster(one, rate, f)[0]


@settings(max_examples=50, deadline=None)
@given(st.booleans(), st.integers(0, 2**32 - 1), st.floats(1.0, 3000.0))
def test_throughput_support_is_what_its_prediction_says(two_sizes: bool, seed: int,
                                                        rate: float) -> None:
    """The learned throughput's ``supported`` (asked by every measured speed and place left)
    answers without the capacity what ``predict(...).supported`` says."""
    lat = _learned(two_sizes)
    thr = LearnedThroughput(lat.model)
    _, _, batch = _support_case("learned", seed)
    with np.errstate(all="ignore"):
        assert np.array_equal(thr.supported(batch, rate), thr.predict(batch, rate).supported)
