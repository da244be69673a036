"""The windowed grid search (``GridPlanner._windowed``) against scoring every candidate: each
row it keeps is the whole grid's row bit for bit, and everything a plan reads from a search
comes out the same, over generated models, spaces, limits and alarms."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.admin import CpuBounds, ReplicaBounds, UtilityWeights
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import feedback
from planner.planners.canary import MeasuredShapes
from planner.planners.feedback import EXPLORE_GAIN
from planner.planners.grid import GridPlanner, Inputs, Scored
from planner.planners.observed_limits import Limit, ObservedLimits
from planner.planners.predictors import ComputedCost
from planner.planners.search_space import space_for
from tests.test_grid_planner import context


class Monotone(Predictor):
    """An M/M/1-per-core latency whose service rate, margin and support differ per CPU size:
    from two replicas on, more replicas never predict worse nor lose support (the
    :class:`Predictor` contract); one replica is drawn at random either way. Counts calls."""

    kind = "learned"

    def __init__(self, mu: dict[float, float], margin: float, seen: frozenset[float],
                 load_max: float, single: tuple[float, bool]) -> None:
        self.mu, self.margin, self.seen, self.load_max, self.single = (mu, margin, seen,
                                                                      load_max, single)
        self.calls = 0

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls += 1
        mu = np.array([self.mu[c] for c in batch.cpu.tolist()]) * batch.cpu
        lam = rate / batch.replicas
        with np.errstate(divide="ignore"):
            p = np.where(lam < 0.98 * mu, 3.0 + 1000.0 * np.log(20.0) / (mu - lam), np.inf)
        bound = p * (1.0 + self.margin)
        ok = (np.isin(batch.cpu, list(self.seen))
              & (rate / (batch.replicas * batch.cpu) <= self.load_max))
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
                    (draw(st.sampled_from([5.0, 55.0, 65.0, np.inf])), draw(st.booleans())))
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


def _same_as_the_whole_grid(ctx: object, inp: Inputs, rate: float, pred: Monotone) -> None:
    planner = GridPlanner()
    space = space_for(ctx)  # type: ignore[arg-type]
    assert len(space.replicas) > 64
    full = planner.score(ctx, space.grid(), rate, inp)  # type: ignore[arg-type]
    pred.calls = 0
    part, how = planner._windowed(ctx, space, rate, inp)  # type: ignore[arg-type]
    assert pred.calls <= 2
    assert how.startswith(f"grid of {space.size}, {len(part.batch)} predicted")
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
