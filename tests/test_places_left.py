"""The explicit estimate of a place the workload left is kept (planner memory) and predicts
that place where the predictors in use do not vouch for it (``planner.planners.places_left``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.explicit import ExplicitLatency
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners import places_left
from planner.planners.predictors import CurrentSizeOnly, PredictorMemory
from tests.test_measured_in_one_call import POOLS, SIZES, _learned
from tests.test_prediction_equivalence import same

CPU_EST = QueueEstimate(20.0, 5.0, {}, ("cpu", "slow"), 1.0)
GPU_EST = QueueEstimate(400.0, 3.0, {}, ("gpu", None), 4.0)


def test_a_restart_elsewhere_keeps_the_estimate_of_the_place_left_until_it_expires() -> None:
    """The place left is kept at the size its pods had (1 cpu), not the new pods' (4)."""
    left = places_left.updated({}, CPU_EST, GPU_EST, 100.0)
    assert left == {("cpu", "slow"): places_left.Left(CPU_EST, 100.0)}
    # The same place: nothing left; the estimate of a place the workload is back in is live.
    assert places_left.updated(left, GPU_EST, GPU_EST, 200.0) == left
    back = QueueEstimate(21.0, 5.0, {}, ("cpu", "slow"), 1.0)
    both = places_left.updated(left, GPU_EST, back, 300.0)
    assert set(both) == {("gpu", None)} and both[("gpu", None)].cpu == 4.0
    # Kept for a day.
    assert places_left.updated(left, GPU_EST, GPU_EST,
                               100.0 + places_left.LEFT_TTL_S - 1) == left
    assert places_left.updated(left, GPU_EST, GPU_EST, 100.0 + places_left.LEFT_TTL_S) == {}
    # An estimate of unknown place or size (memory written before they were kept) leaves
    # nothing.
    assert places_left.updated({}, QueueEstimate(20.0, 5.0), GPU_EST, 100.0) == {}
    assert places_left.updated({}, QueueEstimate(20.0, 5.0, {}, ("cpu", "slow")), GPU_EST,
                               100.0) == {}


def test_memory_keeps_the_places_left_and_older_memory_reads() -> None:
    mem = PredictorMemory(GPU_EST, left=places_left.updated({}, CPU_EST, GPU_EST, 50.0))
    again = PredictorMemory.recall(mem.as_memory())
    assert again.left == mem.left and again.estimate == GPU_EST
    old = mem.as_memory()
    del old["left"]
    assert PredictorMemory.recall(old).left == {}
    # Unreadable records are dropped, the readable ones kept.
    bad = mem.as_memory()
    est = bad["left"][0]["estimate"]
    bad["left"] = [*bad["left"], {"estimate": None, "at": 0.0}, "x",
                   {"estimate": {**est, "cpu": "none"}, "at": 0.0},
                   {"estimate": {**est, "cpu": 0.0}, "at": 0.0},
                   {"estimate": {**est, "mu_per_core": None}, "at": 0.0},
                   {"estimate": est, "at": math.inf}]
    assert PredictorMemory.recall(bad).left == mem.left


def _explicit_at(est: QueueEstimate, cpu: float) -> Predictor:
    assert est.place is not None
    cfg = WorkloadConfig(4, cpu, est.place[0], est.place[1])
    return CurrentSizeOnly(ExplicitLatency(est, 0.95, cfg, parallel_sizes=True), cpu)


def _row(p: Prediction, i: int) -> tuple[float, float, bool]:
    return float(p.mean[i]), float(p.bound[i]), bool(p.supported[i])


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["learned", "learned2", "explicit"]), st.integers(0, 2**32 - 1),
       st.floats(1.0, 3000.0))
def test_each_row_is_inners_where_it_vouches_else_the_place_lefts(
        kind: str, seed: int, rate: float) -> None:
    """Row by row: ``inner``'s numbers where it vouches or knows the row's place and size at
    some load, else those of the first place left that vouches for the row (its place and
    size), else ``inner``'s unsupported ones; for a
    prediction, one at a speed, one with a speed per row, the support of each and the means
    at several loads."""
    inner: Predictor = (_explicit_at(QueueEstimate(50.0, 5.0, {}, ("cpu", None)), 1.0)
                        if kind == "explicit" else _learned(kind == "learned2"))
    others = [_explicit_at(CPU_EST, 1.0), _explicit_at(GPU_EST, 2.0)]
    wrapped = places_left.WithPlacesLeft(inner, others)
    rng = np.random.default_rng(seed)
    n = 30
    batch = CandidateBatch(rng.integers(1, 60, n).astype(float), rng.choice(SIZES, n),
                           (rng.random(n) < 0.4).astype(float),
                           tuple(POOLS[i] for i in rng.integers(0, 3, n).tolist()))
    factors = rng.choice([1.0, 0.3, 2.5, 12.0], n)

    def want(ask: str, i: int) -> tuple[float, float, bool]:
        one = batch.take(np.array([i]))
        known = bool(inner.knows(one)[0])
        for p in (inner, *([] if known else others)):
            got = (p.predict(one, rate) if ask == "predict"
                   else p.predict_faster(one, rate, float(factors[i])))
            if got.supported[0]:
                return _row(got, 0)
        return _row(inner.predict(one, rate) if ask == "predict"
                    else inner.predict_faster(one, rate, float(factors[i])), 0)

    with np.errstate(all="ignore"):
        plain = wrapped.predict(batch, rate)
        per_row = wrapped.predict_faster_rows(batch, rate, factors)
        for i in range(n):
            for got, ask in ((_row(plain, i), "predict"), (_row(per_row, i), "rows")):
                w = want(ask, i)
                assert same(np.array(got[:2]), np.array(w[:2])) and got[2] == w[2]
        assert np.array_equal(wrapped.supported(batch, rate), plain.supported)
        assert np.array_equal(wrapped.supported_faster_rows(batch, rate, factors),
                              per_row.supported)
        at = wrapped.predict_faster(batch, rate, 2.5)
        assert np.array_equal(wrapped.supported_faster(batch, rate, 2.5), at.supported)
        rates = [rate, rate / 3.0]
        means = wrapped.predict_mean_rates(batch, rates)
        for j, r in enumerate(rates):
            p = wrapped.predict(batch, r)
            # The mean path: a learned model's fitted parameters alone, the same rows.
            ref = np.where(inner.supported(batch, r) | ~p.supported,
                           inner.predict_mean_rates(batch, [r])[0], p.mean)
            assert same(means[j], ref)


def test_a_place_the_model_knows_stays_its_own_beyond_its_range() -> None:
    """The learned model knows 1-cpu CPU pods in no pool up to a load per core; a place-left
    estimate of that place does not take over beyond it (the model's own, unvouched, as for
    a measured speed), and the runs are the model's; a place it knows nothing of is the
    estimate's, a run of its own."""
    inner = _learned(False)
    wrapped = places_left.WithPlacesLeft(inner, [
        _explicit_at(QueueEstimate(150.0, 5.0, {}, ("cpu", None), 1.0), 1.0),
        _explicit_at(CPU_EST, 1.0)])
    reps = np.arange(1, 41, dtype=float)
    n = reps.size
    batch = CandidateBatch(np.tile(reps, 2), np.ones(2 * n), np.zeros(2 * n),
                           (None,) * n + ("slow",) * n)
    rate = 2000.0
    with np.errstate(all="ignore"):
        own = inner.predict(batch, rate)
        got = wrapped.predict(batch, rate)
    assert not own.supported[:n].all()
    assert got.supported[:n].tolist() == own.supported[:n].tolist()
    assert same(got.mean[:n], own.mean[:n])
    assert got.supported[n:].all() and not own.supported[n:].any()
    runs = wrapped.runs(batch, rate)
    assert len(set(runs[n:].tolist())) == 1 and not set(runs[n:]) & set(runs[:n])


def test_source_vouches_for_the_place_left_after_a_move() -> None:
    """The GPU pods' estimate vouches for GPU pods only; the CPU pods the workload left are
    predicted from their estimate, at the size they had, and vouched for; CPU pods of another
    size or pool are not."""
    cpu_left = places_left.Left(CPU_EST, 0.0)
    inner = _explicit_at(GPU_EST, 1.0)
    wrapped = places_left.WithPlacesLeft(inner, [_explicit_at(cpu_left.estimate, cpu_left.cpu)])
    batch = CandidateBatch.of([WorkloadConfig(8, 1.0, "cpu", "slow"),
                               WorkloadConfig(8, 2.0, "cpu", "slow"),
                               WorkloadConfig(8, 1.0, "cpu", "fast"),
                               WorkloadConfig(1, 1.0, "gpu", None)])
    p = wrapped.predict(batch, 80.0)
    assert p.supported.tolist() == [True, False, False, True]
    assert p.mean[0] == pytest.approx(CPU_EST.latency_ms(80.0, WorkloadConfig(8, 1.0), 0.95))


def test_a_place_left_stands_for_its_other_sizes_where_the_model_knows_it_at_neither() -> None:
    """A model that has seen no GPU pod extrapolates every GPU row from its CPU pods and its
    prior; the estimate of the GPU place the workload left (calibrated on 4-cpu GPU pods)
    predicts that place's other sizes instead (its more-servers prediction, unvouched), and
    its own size as before (vouched). Without the places the other sizes stay the model's
    (gpu-inference: 4-cpu CPU pods were predicted as fast as the GPU by a GPU-only model,
    docs/benchmarks.md sections 63 and 65)."""
    inner = _learned(False)
    left = _explicit_at(GPU_EST, 4.0)
    reps = np.arange(1, 11, dtype=float)
    sizes = (1.0, 2.0, 4.0)
    batch = CandidateBatch(np.tile(reps, len(sizes)), np.repeat(sizes, reps.size),
                           np.ones(reps.size * len(sizes)), (None,) * (reps.size * len(sizes)))
    rate = 800.0
    with np.errstate(all="ignore"):
        plain = places_left.WithPlacesLeft(inner, [left]).predict(batch, rate)
        placed = places_left.WithPlacesLeft(inner, [left], [(("gpu", None), 4.0)]).predict(
            batch, rate)
        own, theirs = inner.predict(batch, rate), left.predict(batch, rate)
    assert not inner.knows(batch).any(), "the model knows no GPU place"
    other = batch.cpu != 4.0
    assert same(placed.mean[other], theirs.mean[other])
    assert same(placed.bound[other], theirs.bound[other])
    assert not placed.supported[other].any(), "another size is not vouched for"
    assert same(plain.mean[other], own.mean[other]), "without the places: the model's"
    assert same(placed.mean[~other], theirs.mean[~other]) and placed.supported[~other].all()
    with pytest.raises(ValueError, match="one \\(place, cpu\\) per predictor"):
        places_left.WithPlacesLeft(inner, [left], [])
