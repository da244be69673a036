"""The load correction's bisection with several steps' predictions asked for in one call: the
same factor, bit for bit, as asking one prediction per step (planner/planners/feedback.py at
5387311, copied below), and a learned model's predictions at several rates in one call the
numbers it gives at each rate alone."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.availability import AvailabilityRegressor
from planner.models.effects import KIND_AVAILABILITY, KIND_LATENCY, EffectModel, LearnedKPI
from planner.models.predictor import CandidateBatch, FloatArray, Prediction, Predictor
from planner.planners import canary, feedback
from tests.test_prediction_equivalence import fitted_models, same


def old_bisect(p: Predictor, batch: CandidateBatch, rate: float, seen: float) -> float:
    """The bisection of ``load_correction`` as it was (5387311), verbatim."""
    lo, hi = 1.0, feedback.MAX_CORRECTION
    if float(p.predict_mean(batch, rate * hi)[0]) > seen:
        for _ in range(12):                  # predicted latency grows with load
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if float(p.predict_mean(batch, rate * mid)[0]) < seen \
                else (lo, mid)
    return hi


class Counting(Predictor):
    """``inner`` (default :meth:`predict_mean_rates`: one call per rate), counting calls."""

    def __init__(self, inner: Predictor) -> None:
        self.inner = inner
        self.calls = 0

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return self.inner.predict(batch, rate)

    def predict_mean_rates(self, batch: CandidateBatch, rates: Any) -> FloatArray:
        self.calls += 1
        return self.inner.predict_mean_rates(batch, rates)


class Wiggly(Predictor):
    """Not monotone in the rate (the bisection must still take the old steps), NaN somewhere."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.a, self.b, self.c = rng.uniform(0.5, 2.0, 3)
        self.nan_above = rng.choice([np.inf, rng.uniform(100.0, 1000.0)])

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        v = self.a * rate + self.b * 40.0 * math.sin(rate / self.c)
        out = np.full(len(batch), v if rate < self.nan_above else np.nan)
        return Prediction(out, out, np.ones(len(batch), dtype=bool))


def learned(est: Any, X: FloatArray, seed: int) -> tuple[LearnedKPI, CandidateBatch]:
    """A learned latency predictor around ``est`` and a one-configuration batch like a row of
    ``X`` (pinned to a pool, or spread as a random mix)."""
    rng = np.random.default_rng(seed)
    k = est.n_classes_
    names = tuple(f"p{i}" for i in range(k))
    classes = names if est.share_columns_ else ()
    pools = names if est.share_columns_ else names[:-1]
    row = X[int(rng.integers(0, len(X)))]
    pool = None if rng.random() < 0.5 or not pools else str(rng.choice(pools))
    cfg = WorkloadConfig(max(1, int(row[1])), float(row[2]), "gpu" if row[3] > 0.5 else "cpu",
                         pool)
    mix = ({n: float(v) for n, v in zip(names, rng.dirichlet(np.ones(k)), strict=True)}
           if classes and rng.random() < 0.7 else None)
    model = EffectModel("ns/app", "p95", KIND_LATENCY, est, pools, 0.0, False, {}, classes)
    return LearnedKPI(model, mix), CandidateBatch.of([cfg])


@settings(max_examples=300, deadline=None)
@given(fitted_models(), st.integers(0, 2**32 - 1), st.integers(1, 70))
def test_a_learned_model_predicts_several_rates_as_each_alone(case: Any, seed: int,
                                                              count: int) -> None:
    est, X = case
    p, batch = learned(est, X, seed)
    rng = np.random.default_rng(seed)
    rates = (np.exp(rng.uniform(math.log(0.1), math.log(1e5), count))
             * (rng.random(count) < 0.95)).tolist()
    with np.errstate(all="ignore"):
        got = p.predict_mean_rates(batch, rates)
        want = np.array([p.predict_mean(batch, r) for r in rates]).reshape(count, 1)
    assert same(got, want)


def test_an_availability_model_predicts_several_rates_as_each_alone() -> None:
    est = AvailabilityRegressor()
    est.loss_, est.spread_, est.counts_ = (np.array([0.02, 0.001]), np.array([0.01, 0.0]),
                                           np.array([5, 0]))
    p = LearnedKPI(EffectModel("ns/app", "availability", KIND_AVAILABILITY, est, (), 0.0))
    batch = CandidateBatch.of([WorkloadConfig(r, 1.0) for r in (1, 3)])
    rates = [10.0, 200.0, 5e4]
    assert same(p.predict_mean_rates(batch, rates),
                np.array([p.predict_mean(batch, r) for r in rates]))


@settings(max_examples=300, deadline=None)
@given(fitted_models(), st.integers(0, 2**32 - 1))
def test_the_correction_of_a_learned_model_is_the_old_one(case: Any, seed: int) -> None:
    """Observed latencies around the model's own prediction over the correction's range
    (where the bisection does its work), and some far off: the old factor exactly, in at
    most two calls."""
    est, X = case
    p, batch = learned(est, X, seed)
    rng = np.random.default_rng(seed)
    rate = float(np.exp(rng.uniform(math.log(0.1), math.log(1e4))))
    with np.errstate(all="ignore"):
        span = p.predict_mean_rates(batch, [rate * f for f in (1.0, 1.25, 1.5)])[:, 0]
        finite = span[np.isfinite(span)]
        seens = [float(rng.uniform(finite.min(), finite.max()) if finite.size else 1.0),
                 float(rng.uniform(0.0, 1e4)), float(finite.min()) if finite.size else 0.0]
        for seen in seens:
            counted = Counting(p)
            assert feedback._bisect(counted, batch, rate, seen) == old_bisect(p, batch, rate,
                                                                               seen)
            assert counted.calls <= 2


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.1, 1000.0), st.floats(0.0, 3000.0))
def test_the_correction_takes_the_old_steps_even_where_the_model_is_not_monotone(
        seed: int, rate: float, seen: float) -> None:
    p = Wiggly(seed)
    batch = CandidateBatch.of([WorkloadConfig(3, 1.0)])
    got = feedback._bisect(p, batch, rate, seen)
    assert got == old_bisect(p, batch, rate, seen)


def test_the_midpoints_are_the_steps_midpoints() -> None:
    """Breadth first: every path of the sequential bisection meets its midpoints at the
    indices the walk reads."""
    mids = feedback._midpoints(1.0, 1.5, 3)
    assert len(mids) == 7
    for path in range(8):
        lo, hi, node = 1.0, 1.5, 0
        for level in range(3):
            mid = 0.5 * (lo + hi)
            assert mids[node] == mid
            up = bool(path >> level & 1)
            lo, hi, node = (mid, hi, 2 * node + 1) if up else (lo, mid, 2 * node + 2)


@settings(max_examples=200, deadline=None)
@given(fitted_models(), st.integers(0, 2**32 - 1), st.integers(1, 14), st.booleans())
def test_measured_shapes_predict_several_rates_as_each_alone(case: Any, seed: int, count: int,
                                                             throughput: bool) -> None:
    """The canary's wrapper (shapes a canary measured, predicted as a known shape at their
    speed) at several rates in one call: the means its ``predict`` gives at each rate alone,
    bit for bit, whichever rows the learned model vouches for at each rate."""
    est, X = case
    rng = np.random.default_rng(seed)
    k = est.n_classes_
    est.seen_gpu_, est.seen_cpu_device_ = bool(rng.random() < 0.5), True
    est.seen_classes_ = (list(range(k)) if rng.random() < 0.6 else
                         sorted(set(rng.integers(0, k, int(rng.integers(1, k + 1))).tolist())))
    est.cpu_classes_ = est.gpu_classes_ = list(est.seen_classes_)   # both devices on each
    est.cpu_sizes_ = sorted(set(rng.choice([0.5, 1.0, 2.0, 4.0], int(rng.integers(1, 3)))))
    est.cpu_range_ = (est.cpu_sizes_[0], est.cpu_sizes_[-1])
    p, _ = learned(est, X, seed)
    seen = {"cpu": float(rng.uniform(1.0, 300.0)), "gpu": float(rng.uniform(1.0, 3000.0))}
    p = LearnedKPI(replace(p.model, metadata={"load_per_core_max": seen}), p.mix)
    pools = (None, *p.model.pools)
    rows = X[rng.integers(0, len(X), int(rng.integers(1, 6)))]
    batch = CandidateBatch.of([
        WorkloadConfig(max(1, int(r[1])),
                       float(rng.choice(est.cpu_sizes_) if rng.random() < 0.7 else r[2]),
                       "gpu" if rng.random() < 0.4 else "cpu",
                       pools[int(rng.integers(0, len(pools)))]) for r in rows])
    speeds = {(str(rng.choice(["cpu", "gpu"])), pools[int(rng.integers(0, len(pools)))]):
              canary.Speed(("cpu", pools[int(rng.integers(0, len(pools)))]),
                           float(rng.choice([0.0, 0.5, 3.0, 40.0, math.nan])))
              for _ in range(int(rng.integers(1, 4)))}
    wrapped = canary.MeasuredShapes(p, speeds, throughput)
    rates = (np.exp(rng.uniform(math.log(0.1), math.log(1e5), count))
             * (rng.random(count) < 0.95)).tolist()
    with np.errstate(all="ignore"):
        got = wrapped.predict_mean_rates(batch, rates)
        want = np.array([wrapped.predict(batch, r).mean for r in rates])
        assert same(wrapped.predict_mean(batch, rates[0]), want[0])
    assert same(got, want)
