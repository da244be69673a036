"""The windowed grid search (``GridPlanner._windowed``) against scoring every candidate: each
row it keeps is the whole grid's row bit for bit, and everything a plan reads from a search
comes out the same, over generated models, spaces, limits and alarms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from planner.domain.admin import CpuBounds, ReplicaBounds, UtilityWeights
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import feedback
from planner.planners.canary import MeasuredShapes, Speed
from planner.planners.feedback import EXPLORE_GAIN, Tried
from planner.planners.grid import GridPlanner, Inputs, Scored
from planner.planners.observed_limits import Limit, ObservedLimits
from planner.planners.predictors import ComputedCost, CurrentSizeOnly
from planner.planners.search_space import space_for
from tests.test_grid_planner import context


class Monotone(Predictor):
    """An M/M/1-per-core latency whose service rate, margin and support differ per CPU size:
    from two replicas on, more replicas never predict worse nor lose support (the
    :class:`Predictor` contract); one replica is drawn at random either way. Counts calls.

    Two ways to break the promise, as canary speeds do where the model takes over from the
    measured speed: the CPU sizes in ``wild`` jump about with the replica count (a run per
    row); from ``split[0]`` replicas on, every size's pods are ``split[1]`` times as fast (two
    runs per size, each monotone). :meth:`runs` says so."""

    kind = "learned"

    def __init__(self, mu: dict[float, float], margin: float, seen: frozenset[float],
                 load_max: float, single: tuple[float, bool],
                 wild: frozenset[float] = frozenset(),
                 split: tuple[int, float] | None = None) -> None:
        self.mu, self.margin, self.seen, self.load_max, self.single = (mu, margin, seen,
                                                                      load_max, single)
        self.wild, self.split = wild, split
        self.monotone = not wild and split is None
        self.calls = 0

    def runs(self, batch: CandidateBatch, rate: float) -> NDArray[np.int64]:
        if not self.wild and self.split is None:
            return super().runs(batch, rate)
        n = len(batch)
        label = np.zeros(n, dtype=np.int64)
        if self.split is not None:
            label = (batch.replicas >= self.split[0]).astype(np.int64)
        out: NDArray[np.int64] = np.where(np.isin(batch.cpu, list(self.wild)),
                                          2 + np.arange(n), label)
        return out

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls += 1
        mu = np.array([self.mu[c] for c in batch.cpu.tolist()]) * batch.cpu
        if self.split is not None:
            mu = np.where(batch.replicas >= self.split[0], mu * self.split[1], mu)
        lam = rate / batch.replicas
        with np.errstate(divide="ignore"):
            p = np.where(lam < 0.98 * mu, 3.0 + 1000.0 * np.log(20.0) / (mu - lam), np.inf)
        bound = p * (1.0 + self.margin)
        ok = (np.isin(batch.cpu, list(self.seen))
              & (rate / (batch.replicas * batch.cpu) <= self.load_max))
        wild = np.isin(batch.cpu, list(self.wild))
        bound = np.where(wild, bound * (1.0 + 0.9 * np.sin(batch.replicas)), bound)
        ok = np.where(wild, ok ^ (batch.replicas % 3 == 0), ok)
        one = batch.replicas < 1.5
        bound = np.where(one, self.single[0], bound)
        ok = np.where(one, self.single[1], ok)
        return Prediction(p, bound, ok)


@st.composite
def cases(draw: st.DrawFn) -> tuple[object, Inputs, float, Monotone]:
    sizes = tuple(sorted(draw(st.sets(st.sampled_from([0.5, 1.0, 2.0, 4.0]), min_size=1,
                                      max_size=4))))
    top = draw(st.integers(70, 400))
    low = draw(st.sampled_from([1, 1, 2, 5]))
    ctx = context(replicas=draw(st.integers(low, top)), cpu=draw(st.sampled_from(sizes)),
                  latency=draw(st.floats(20.0, 90.0)), cpu_sizes=sizes, max_replicas=top)
    ctx = replace(ctx, admin=ctx.admin.model_copy(update={
        "replicas": ReplicaBounds(min=low, max=top, max_step=50),
        "cpu": CpuBounds(sizes=sizes, cooldown_s=0),
        "utility": UtilityWeights(slo_risk=draw(st.sampled_from([0.0, 1.0, 5.0])),
                                  disruption=draw(st.sampled_from([0.0, 0.02, 0.5])))}))
    pred = Monotone({c: draw(st.floats(20.0, 200.0)) for c in sizes},
                    draw(st.floats(0.0, 0.5)),
                    frozenset(draw(st.sets(st.sampled_from(sizes), max_size=len(sizes)))),
                    draw(st.floats(1.0, 400.0)),
                    (draw(st.sampled_from([5.0, 55.0, 65.0, np.inf])), draw(st.booleans())),
                    frozenset(draw(st.sets(st.sampled_from(sizes), max_size=len(sizes) - 1))),
                    draw(st.none() | st.tuples(st.integers(2, top), st.floats(0.2, 5.0))))
    limits = ObservedLimits({(c, "cpu", None): Limit(draw(st.floats(5.0, 300.0)), 0.0)
                             for c in draw(st.sets(st.sampled_from(sizes)))})
    inp = Inputs({"p95": pred}, draw(st.sampled_from([0.0, 0.4, 1.0])), limits)
    return ctx, inp, draw(st.floats(10.0, 20_000.0)), pred


def _known_best(s: Scored) -> object:
    known = s.feasible & s.supported
    if not known.any():
        return None
    return s.batch.config(int(np.flatnonzero(known)[np.argmin(s.score[known])]))


def _novel_best(s: Scored, below: float) -> object:
    """An unobserved shape's cheapest feasible candidate scoring below ``below`` (the
    explorer's and the nothing-known path's pick)."""
    cand = s.feasible & feedback.unobserved_shapes(s.batch, s.supported) & (s.score < below)
    if not cand.any():
        return None
    return s.batch.config(int(np.flatnonzero(cand)[np.argmin(s.score[cand])]))


def _supported_shapes(s: Scored) -> set[tuple[float, float]]:
    i = np.flatnonzero(s.supported)
    return set(zip(s.batch.cpu[i].tolist(), s.batch.gpu[i].tolist(), strict=True))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_the_window_reads_as_the_whole_grid(case: tuple[object, Inputs, float, Monotone]
                                            ) -> None:
    _same_as_the_whole_grid(*case)


def test_one_replica_is_a_regime_apart() -> None:
    """One replica predicted feasible and risk-free but unsupported (no redundancy: an
    availability model may say anything there); the other counts supported from 4 on,
    feasible from 32 and risk-free from 65 (past the cluster's 64 cores): the cheapest known
    candidate lies past where one replica's answers would end the window."""
    ctx = context(replicas=200, cpu=1.0, cpu_sizes=(1.0,), max_replicas=400)
    ctx = replace(ctx, admin=ctx.admin.model_copy(update={"utility": UtilityWeights(
        slo_risk=5.0)}))
    pred = Monotone({1.0: 100.0}, 0.0, frozenset({1.0}), 400.0, (5.0, False))
    _same_as_the_whole_grid(ctx, Inputs({"p95": pred}, 0.0), 1500.0, pred)


class Steps(Predictor):
    """A latency (target 60) in steps: infeasible below 10 replicas, at the target from 10,
    ``low`` from 250; supported from 200. Counts calls."""

    kind = "learned"
    calls = 0

    def __init__(self, low: float) -> None:
        self.low = low

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls += 1
        r = batch.replicas
        bound = np.where(r < 10, 90.0, np.where(r < 250, 60.0, self.low))
        return Prediction(bound, bound, r >= 200)


@pytest.mark.parametrize(("low", "most"), [(30.0, 400), (50.0, 300)])
def test_the_window_ends_where_no_row_can_score_better(low: float, most: int) -> None:
    """Past a row whose score at the run end's risk already exceeds the best sampled score, no
    row can come below it, risk-free (``low`` 30, half the target) or not (50: every count
    pays for its risk, and 290 of the 400 counts are feasible, known and costlier than 250).
    In a run supported at its end the best is the best *known* sampled score: the cheaper
    feasible rows before support (10 replicas, a quarter of the price at 250) would end the
    window before 250, the cheapest known candidate."""
    ctx = context(replicas=300, cpu=0.1, cpu_sizes=(0.1,), max_replicas=400)
    ctx = replace(ctx, admin=ctx.admin.model_copy(update={"utility": UtilityWeights(
        slo_risk=5.0)}))
    pred = Steps(low)
    _same_as_the_whole_grid(ctx, Inputs({"p95": pred}, 1.0), 1000.0, pred)
    part, _ = GridPlanner()._search(ctx, space_for(ctx), 1000.0, Inputs({"p95": pred}, 1.0))
    assert _known_best(part).replicas == 250  # type: ignore[attr-defined]
    assert len(part.batch) < most


def _same_as_the_whole_grid(ctx: object, inp: Inputs, rate: float,
                            pred: Monotone | Counted | Steps) -> None:
    planner = GridPlanner()
    space = space_for(ctx)  # type: ignore[arg-type]
    assert len(space.replicas) > 64
    full = planner.score(ctx, space.grid(), rate, inp)  # type: ignore[arg-type]
    pred.calls = 0
    part, how = planner._search(ctx, space, rate, inp)  # type: ignore[arg-type]
    assert pred.calls <= 2
    assert how.startswith(f"grid of {space.size}, {len(part.batch)} predicted")
    # Every replica count of a size that keeps no promise is predicted.
    wild = list(getattr(pred, "wild", ()))
    n_wild = int(np.isin(space.cpus, wild).sum())
    assert int(np.isin(part.batch.cpu, wild).sum()) == n_wild * len(space.replicas)
    # Every row kept is the whole grid's row, bit for bit, in the grid's order.
    n_r = len(space.replicas)
    rows = ((np.searchsorted(sorted(set(space.cpus)), part.batch.cpu)) * n_r
            + part.batch.replicas.astype(int) - space.replicas[0])
    assert np.all(np.diff(rows) > 0)
    for name in ("cost", "feasible", "supported", "excess", "score", "calm"):
        assert np.array_equal(getattr(part, name), getattr(full, name)[rows], equal_nan=True)
    for attr in ("mean", "bound", "supported"):
        assert np.array_equal(getattr(part.predictions["p95"], attr),
                              getattr(full.predictions["p95"], attr)[rows], equal_nan=True)
    # What a plan reads from its search comes out the same.
    assert _known_best(part) == _known_best(full)
    for below in (np.inf, float(np.min(full.score)) * (1.0 - EXPLORE_GAIN),
                  float(np.median(full.score))):
        assert _novel_best(part, below) == _novel_best(full, below)
    assert _supported_shapes(part) == _supported_shapes(full)
    assert (inp.limits.excluded(part.batch, rate).any()
            == inp.limits.excluded(full.batch, rate).any())


def test_a_predictor_without_the_promise_is_searched_whole() -> None:
    """A predictor that is not monotone in replicas (a cost objective's price, canary speeds
    taking over from the model) has every candidate of the grid predicted."""
    ctx = context(replicas=100, cpu=1.0, cpu_sizes=(1.0, 2.0), max_replicas=200)
    space = space_for(ctx)
    pred = Monotone({1.0: 100.0, 2.0: 100.0}, 0.1, frozenset({1.0, 2.0}), 400.0, (5.0, True))
    planner = GridPlanner()
    _, how = planner._search(ctx, space, 3000.0, Inputs({"p95": pred}, 0.0))
    assert how.endswith("predicted")
    pred.monotone = False
    scored, how = planner._search(ctx, space, 3000.0, Inputs({"p95": pred}, 0.0))
    assert how == f"grid of {space.size}" and len(scored.batch) == space.size
    assert not ComputedCost(ctx.snapshot).monotone
    assert not MeasuredShapes(pred, {}).monotone


def test_measured_speeds_break_the_promise_only_where_they_apply() -> None:
    """Canary speeds replace the model's rows only on the place (or shape) measured, where the
    model does not vouch: a run is cut where a row's source changes, and the rows of every
    other shape keep the model's single run."""
    ctx = context(replicas=100, cpu=1.0, cpu_sizes=(1.0, 2.0), max_replicas=200)
    # The model vouches at a load per core of at most 40: from 75 cores on at 3,000 req/s.
    pred = Monotone({1.0: 100.0, 2.0: 100.0}, 0.1, frozenset({1.0, 2.0}), 40.0, (5.0, True))
    reps = np.array([40.0, 60.0, 80.0, 40.0, 60.0, 80.0])
    batch = CandidateBatch(reps, np.array([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]), np.zeros(6),
                           (None,) * 6)

    def cuts(p: Predictor) -> list[bool]:
        label = p.runs(batch, 3000.0)
        return [True, *(label[1:] != label[:-1]).tolist()]

    place = MeasuredShapes(pred, {("cpu", "other"): Speed(("cpu", None), 1.5)})
    assert cuts(place) == [True, False, False, False, False, False]
    speeds: dict[Tried, Speed] = {(1.0, "cpu", None): Speed(("cpu", None), 1.5, 2.0)}
    size = MeasuredShapes(pred, speeds)
    # 1 cpu: the model vouches for it from 75 cores on, so it knows the size and no row is
    # remapped (below 75 cores the rows stay its own, unvouched: docs/benchmarks.md section
    # 61); one run, as the 2-cpu rows (a new shape starts a run anyway: the search cuts
    # there itself). Before, 40 and 60 pods were remapped and the run was cut at 80.
    assert cuts(size) == [True, False, False, False, False, False]
    assert not size.predict(batch, 3000.0).supported[:2].any()
    assert cuts(CurrentSizeOnly(size, 1.0)) == cuts(size)
    pred.monotone = False
    assert all(cuts(MeasuredShapes(pred, {(1.0, "cpu", None): Speed(("cpu", None), 1.5,
                                                                       2.0)})))
    pred.monotone = True
    space = space_for(ctx)
    scored, how = GridPlanner()._search(ctx, space, 3000.0, Inputs({"p95": size}, 0.0))
    assert how.endswith("predicted") and len(scored.batch) < space.size
    counted = Counted(pred, speeds)
    _same_as_the_whole_grid(ctx, Inputs({"p95": counted}, 0.0), 3000.0, counted)


class Counted(MeasuredShapes):
    """Measured speeds around a model, counting the search's calls."""

    calls = 0

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls += 1
        return super().predict(batch, rate)


@st.composite
def binary_cases(draw: st.DrawFn) -> tuple[object, Inputs, float]:
    """Spaces, models and limits where feasibility and support are monotone in replicas from
    one replica on, and the score is the price (no risk term), as the binary search needs."""
    sizes = tuple(sorted(draw(st.sets(st.sampled_from([0.5, 1.0, 2.0, 4.0]), min_size=1,
                                      max_size=4))))
    top = draw(st.integers(20, 300))
    ctx = context(replicas=draw(st.integers(1, top)), cpu=draw(st.sampled_from(sizes)),
                  latency=draw(st.floats(20.0, 90.0)), cpu_sizes=sizes, max_replicas=top)
    ctx = replace(ctx, admin=ctx.admin.model_copy(update={
        "cpu": CpuBounds(sizes=sizes, cooldown_s=0),
        "utility": UtilityWeights(slo_risk=0.0,
                                  disruption=draw(st.sampled_from([0.0, 0.02, 0.5])))}))
    pred = Monotone({c: draw(st.floats(20.0, 200.0)) for c in sizes},
                    draw(st.floats(0.0, 0.5)),
                    frozenset(draw(st.sets(st.sampled_from(sizes), max_size=len(sizes)))),
                    draw(st.floats(1.0, 400.0)), (np.inf, False))
    limits = ObservedLimits({(c, "cpu", None): Limit(draw(st.floats(5.0, 300.0)), 0.0)
                             for c in draw(st.sets(st.sampled_from(sizes)))})
    return ctx, Inputs({"p95": pred}, 0.0, limits), draw(st.floats(10.0, 20_000.0))


@settings(max_examples=150, deadline=None)
@given(binary_cases())
def test_the_binary_search_finds_the_whole_grids_cheapest_known(
        case: tuple[object, Inputs, float]) -> None:
    """The binary search (``GridPlanner._grid``, for spaces too large to score whole) keeps
    each shape's fewest feasible count, and where that count loads each pod beyond what the
    model vouches for, also the fewest feasible and supported one: the cheapest known
    candidate scores as the whole grid's, and the same shapes count as observed. (Before, a
    shape vouched for only above its fewest feasible count was never chosen: a place a canary
    measured twice as fast was predicted feasible at a load per pod never seen, unsupported,
    and the workload stayed where it was.)"""
    ctx, inp, rate = case
    planner = GridPlanner()
    space = space_for(ctx)  # type: ignore[arg-type]
    full = planner.score(ctx, space.grid(), rate, inp)  # type: ignore[arg-type]
    part, _ = planner._grid(ctx, space, rate, inp)  # type: ignore[arg-type]
    n_r, n = len(space.replicas), len(space.cpus)
    # The fewest counts meeting the constraints that tighten with fewer replicas (the cores
    # and the budget are applied to the search's result).
    per_shape = planner.score(ctx, space.grid(), rate, inp,  # type: ignore[arg-type]
                              monotone_only=True).feasible.reshape(n, n_r)
    fewest = np.where(per_shape.any(axis=1), per_shape.argmax(axis=1), n_r - 1)
    assert np.array_equal(part.batch.replicas[:n], np.asarray(space.replicas)[fewest])
    known, known_full = part.feasible & part.supported, full.feasible & full.supported
    assert known.any() == known_full.any()
    if known.any():
        assert np.min(part.score[known]) == np.min(full.score[known_full])
    assert _supported_shapes(part) == _supported_shapes(full)
