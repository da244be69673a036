"""Limits observed per shape: a configuration seen violating is not chosen again at that load per
pod, whatever an optimistic model says (planner/planners/observed_limits.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import CanaryState, PodState, WorkloadConfig
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import feedback
from planner.planners.base import PlanningContext
from planner.planners.grid import GridPlanner, Inputs
from planner.planners.observed_limits import Limit, ObservedLimits
from tests.test_grid_planner import context, planner_with


def at(replicas: int, now: float, latency: float, rate: float = 300.0,
       ready: bool = True) -> PlanningContext:
    """One intent (p95 target 60 ms, 1-cpu pods) at ``replicas``, observed at ``now``."""
    ctx = context(replicas=replicas, latency=latency, rate=rate, cpu_sizes=(1.0,))
    pods = tuple(PodState(f"p{i}", "n0", 1.0, ready=ready or i > 0, started_at=0.0)
                 for i in range(replicas))
    wl = replace(ctx.workload, pods=pods)
    return replace(ctx, workload=wl, now=now,
                   snapshot=replace(ctx.snapshot, workloads={"ns/w": wl}))


SHAPE = (1.0, "cpu", None)
PINNED = (1.0, "cpu", "general")


def run(lim: ObservedLimits, replicas: int, start: float, end: float, latency: float,
        peak: float = 300.0, low: float = 290.0) -> None:
    """Observe ``replicas`` pods every 15 s from ``start`` to ``end`` (both included)."""
    t = start
    while t <= end:
        lim.observe(at(replicas, t, latency), peak, low)
        t += 15.0


def test_a_scale_in_that_breaks_an_objective_records_the_load_per_pod_at_once() -> None:
    lim = ObservedLimits()
    run(lim, 4, 1000.0, 1060.0, 40.0)                   # 4 pods steady for a whole window
    lim.observe(at(3, 1075.0, 90.0), 306.0, 290.0)      # 15 s after the scale-in, violated
    assert lim.limits == {}                             # recorded with the next cycle's rate
    lim.observe(at(5, 1090.0, 90.0), 300.0, 290.0)
    assert lim.limits == {SHAPE: Limit(102.0, 1075.0)}


def test_on_a_steep_rise_the_limit_is_the_load_the_next_cycle_measures() -> None:
    lim = ObservedLimits()
    run(lim, 4, 1000.0, 1045.0, 40.0, peak=100.0, low=100.0)
    lim.observe(at(4, 1060.0, 90.0), 300.0, 100.0)
    lim.observe(at(8, 1075.0, 90.0), 600.0, 100.0)
    assert lim.limits == {SHAPE: Limit(150.0, 1060.0)}


def test_a_scale_in_from_a_configuration_not_steady_for_a_window_records_nothing() -> None:
    """The window may still hold what came before the 4 pods (fewer of them, say)."""
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(3, 1015.0, 90.0), 306.0, 290.0)
    lim.observe(at(5, 1030.0, 90.0), 306.0, 290.0)
    assert lim.limits == {}


def test_a_violation_while_a_scale_out_is_still_in_the_window_records_nothing() -> None:
    lim = ObservedLimits()
    lim.observe(at(3, 1000.0, 90.0), 300.0, 290.0)     # first sight: not in place for a window
    run(lim, 5, 1015.0, 1060.0, 90.0)                   # the window still holds 3 pods
    assert lim.limits == {}
    run(lim, 5, 1075.0, 1090.0, 90.0)
    assert lim.limits == {SHAPE: Limit(60.0, 1075.0)}


def test_a_pod_not_ready_records_nothing() -> None:
    lim = ObservedLimits()
    run(lim, 4, 1000.0, 1060.0, 40.0)
    lim.observe(at(3, 1075.0, 90.0, ready=False), 300.0, 290.0)
    lim.observe(at(3, 1090.0, 90.0, ready=False), 300.0, 290.0)
    assert lim.limits == {}


def test_pods_that_have_just_become_ready_do_not_make_a_whole_window() -> None:
    lim = ObservedLimits()
    for t in range(1000, 1100, 15):
        lim.observe(at(5, float(t), 90.0, ready=False), 300.0, 290.0)
    run(lim, 5, 1105.0, 1150.0, 90.0)                   # in place 150 s, all ready for 45 s
    assert lim.limits == {}
    run(lim, 5, 1165.0, 1180.0, 90.0)
    assert lim.limits == {SHAPE: Limit(60.0, 1165.0)}


def test_a_pod_restarted_between_cycles_starts_the_window_over() -> None:
    lim = ObservedLimits()
    run(lim, 5, 1000.0, 1060.0, 40.0, peak=100.0, low=100.0)
    ctx = at(5, 1075.0, 90.0)
    pods = (replace(ctx.workload.pods[0], restarts=1), *ctx.workload.pods[1:])
    restarted = replace(ctx, workload=replace(ctx.workload, pods=pods))
    lim.observe(restarted, 300.0, 100.0)
    lim.observe(replace(restarted, now=1090.0), 300.0, 100.0)
    assert lim.limits == {} and lim.pending is None


def test_a_gap_between_observations_starts_the_window_over() -> None:
    lim = ObservedLimits()
    lim.observe(at(5, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(5, 1100.0, 90.0), 300.0, 290.0)     # unobserved for 100 s
    lim.observe(at(5, 1115.0, 90.0), 300.0, 290.0)
    assert lim.limits == {}


def test_a_violation_at_a_load_the_shape_has_held_records_nothing() -> None:
    """8 pods held 300 req/s (37.5 per pod); 5 violate at 100 req/s (20 per pod): not the
    load (a slow dependency, say)."""
    lim = ObservedLimits()
    run(lim, 8, 1000.0, 1060.0, 40.0, peak=300.0, low=300.0)
    run(lim, 5, 1075.0, 1150.0, 90.0, peak=100.0, low=100.0)
    assert lim.limits == {} and lim.held[SHAPE].per_pod == 37.5
    # What the 8 pods held no longer vouches for the shape: it was just seen violating below.
    assert SHAPE not in lim.vouch


def test_a_violation_while_a_canary_serves_records_nothing() -> None:
    lim = ObservedLimits()
    for t in range(1000, 1100, 15):
        ctx = at(4, float(t), 90.0)
        wl = replace(ctx.workload, canary=CanaryState(
            WorkloadConfig(1, 1.0, pool="fast"), (PodState("c0", "n1", 1.0, pool="fast"),)))
        lim.observe(replace(ctx, workload=wl), 300.0, 290.0)
    assert lim.limits == {} and lim.pending is None


def test_met_at_the_limits_load_per_pod_over_a_whole_window_drops_it() -> None:
    lim = ObservedLimits({SHAPE: Limit(100.0, 900.0)})
    run(lim, 3, 1000.0, 1060.0, 40.0, peak=330.0, low=290.0)
    assert SHAPE in lim.limits                          # met, but at 96.7 req/s per pod
    lim.observe(at(3, 1075.0, 40.0), 330.0, 300.0)
    assert lim.limits == {}                             # met at 100 req/s per pod


def test_a_limit_is_forgotten_after_the_memory_horizon() -> None:
    lim = ObservedLimits({SHAPE: Limit(100.0, 1000.0)})
    lim.observe(at(8, 1000.0 + feedback.FORGET_S, 40.0, rate=100.0), 100.0, 100.0)
    assert SHAPE in lim.limits
    lim.observe(at(8, 1001.0 + feedback.FORGET_S, 40.0, rate=100.0), 100.0, 100.0)
    assert lim.limits == {}


def test_a_clock_that_goes_back_forgets_everything() -> None:
    lim = ObservedLimits({SHAPE: Limit(100.0, 1000.0)}, seen_at=2000.0)
    lim.observe(at(8, 1500.0, 40.0), 100.0, 100.0)
    assert lim.limits == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0]), st.floats(1.0, 200.0)),
                max_size=3),
       st.sampled_from([0.5, 1.0, 2.0]), st.floats(0.0, 2000.0))
def test_the_exclusion_is_monotone_in_replicas_and_only_of_the_limited_shape(
        limits: list[tuple[float, float]], cpu: float, rate: float) -> None:
    lim = ObservedLimits({(c, "cpu", None): Limit(p, 0.0) for c, p in limits})
    reps = np.arange(1, 41, dtype=float)
    batch = CandidateBatch(reps, np.full(reps.size, cpu), np.zeros(reps.size),
                           (None,) * reps.size)
    out = lim.excluded(batch, rate)
    # Excluded at n replicas implies excluded at every fewer count (the binary search relies
    # on it): the mask is a prefix.
    assert not np.any(out[1:] & ~out[:-1])
    if (cpu, "cpu", None) not in lim.limits:
        assert not out.any()
    else:
        per_pod = rate / reps
        assert np.array_equal(out, (per_pod >= lim.limits[(cpu, "cpu", None)].per_pod)
                              & (rate > 0))
    back = ObservedLimits.recall(lim.remember())
    assert np.array_equal(back.excluded(batch, rate), out)


class Optimistic(Predictor):
    """Says 3 pods or more meet the 60 ms target at any load; 2 do not."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = np.where(batch.replicas >= 3, 40.0, 500.0)
        return Prediction(p, p, np.ones(len(batch), dtype=bool))


def test_the_planner_stops_going_back_to_a_configuration_seen_violating() -> None:
    """4 pods hold the load, steady; the model says 3 would, and 3 violate every time. The
    first scale-in to 3 is recorded as the 3 pods' own (entered by a scale-in from a steady
    window), so the planner does not come back; without the limit it stays at 3 or returns
    there whenever the KPI clears."""
    planner = planner_with(Optimistic())
    replicas, violated, reasons = 4, 0, []
    for i in range(120):
        violated += replicas <= 3
        plan = planner.plan(at(replicas, 1000.0 + 15 * i, 95.0 if replicas <= 3 else 40.0))
        if i >= 5:                        # the first five plans are not applied: 4 pods steady
            replicas = plan.target.replicas
        reasons.append(plan.reason)
    assert violated <= 2, violated        # one visit (the next cycle's plan scales out)
    assert "observed violating at 100.0 req/s per pod" in reasons[-1]


def test_the_limit_is_kept_in_the_plans_memory_and_restored() -> None:
    planner = planner_with(Optimistic())
    planner.plan(at(4, 1000.0, 40.0))
    planner.plan(at(5, 1015.0, 40.0))
    for t in (1030.0, 1045.0, 1060.0):
        planner.plan(at(5, t, 40.0))
    planner.plan(at(5, 1075.0, 95.0))
    planner.plan(at(6, 1090.0, 40.0))
    restored = ObservedLimits.recall(json.loads(json.dumps(planner.memory["limits"])))
    assert restored.limits == {SHAPE: Limit(60.0, 1075.0)}
    assert restored == ObservedLimits.recall(restored.remember())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0]), st.sampled_from([None, "a", "b"]),
                          st.floats(1.0, 200.0)), max_size=3),
       st.sampled_from([0.5, 1.0, 2.0]), st.sampled_from([None, "a", "b"]),
       st.floats(0.0, 2000.0))
def test_a_held_load_vouches_monotonically_and_only_for_its_pinned_shape(
        held: list[tuple[float, str | None, float]], cpu: float, pool: str | None,
        rate: float) -> None:
    lim = ObservedLimits(vouch={(c, "cpu", p): Limit(per_pod, 0.0) for c, p, per_pod in held})
    reps = np.arange(1, 41, dtype=float)
    batch = CandidateBatch(reps, np.full(reps.size, cpu), np.zeros(reps.size),
                           (pool,) * reps.size)
    ctx = at(4, 1000.0, 40.0)
    out = lim.vouched(ctx, batch, rate)
    # Vouched at n replicas implies vouched at every larger count: the mask is a suffix.
    assert not np.any(out[:-1] & ~out[1:])
    shape = (cpu, "cpu", pool)
    if pool is None or shape not in lim.vouch:
        assert not out.any()       # an unpinned shape's pods land on whatever nodes
    else:
        assert np.array_equal(out, (rate / reps <= lim.vouch[shape].per_pod) & (rate > 0))
    back = ObservedLimits.recall(lim.remember())
    assert np.array_equal(back.vouched(ctx, batch, rate), out)


class Pessimistic(Predictor):
    """A model fitted on a handful of rows: its bound is above the 60 ms target at every
    count (gen-5972: 17 pods seen holding p99 at 400 ms, the bound 713 ms, 179 pods asked)."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return Prediction(np.full(len(batch), 50.0), np.full(len(batch), 90.0),
                          np.ones(len(batch), dtype=bool))


def pinned(replicas: int, now: float, latency: float, rate: float = 300.0,
           tolerance: float = 0.0) -> PlanningContext:
    """:func:`at`, the workload pinned to the pool its node is in."""
    ctx = at(replicas, now, latency, rate)
    if tolerance:
        spec = ctx.intent.spec
        objectives = [o.model_copy(update={"tolerance": tolerance}) for o in spec.objectives]
        ctx = replace(ctx, intent=ctx.intent.model_copy(
            update={"spec": spec.model_copy(update={"objectives": objectives})}))
    cfg = replace(ctx.config, pool="general")
    pods = tuple(replace(p, pool="general") for p in ctx.workload.pods)
    wl = replace(ctx.workload, config=cfg, pods=pods)
    return replace(ctx, workload=wl, snapshot=replace(ctx.snapshot, workloads={"ns/w": wl}))


def test_a_shape_seen_holding_its_load_is_planned_as_feasible_whatever_the_model_bound_says(
        ) -> None:
    """Ten pinned pods hold the load (40 ms against 60) while the model's bound says no count
    does. Before a whole window is seen, nothing is predicted feasible; once it is, the ten
    pods are planned as meeting every objective (the load per pod they held), and nine, at
    more load per pod, are not."""
    planner = planner_with(Pessimistic())
    first = planner.plan(pinned(10, 1000.0, 40.0))
    assert "meets every objective" not in first.reason, first.reason
    plans = [planner.plan(pinned(10, 1000.0 + 15 * i, 40.0)) for i in range(1, 8)]
    last = plans[-1]
    assert last.target.replicas == 10 and last.target.pool == "general", last.reason
    assert "current configuration still meets every objective" in last.reason, last.reason
    vouch = ObservedLimits.recall(planner.memory["limits"]).vouch
    assert vouch[(1.0, "cpu", "general")].per_pod == pytest.approx(30.0)
    nine = GridPlanner()._judge(last_ctx := pinned(10, 1120.0, 40.0),
                                CandidateBatch.of([WorkloadConfig(n, 1.0, "cpu", "general")
                                                   for n in (9, 10, 11)]), 300.0,
                                {"p95": Pessimistic().predict(
                                    CandidateBatch.of([WorkloadConfig(9)] * 3), 300.0)},
                                Inputs({}, 0.0, ObservedLimits.recall(
                                    planner.memory["limits"])))
    assert nine.feasible.tolist() == [False, True, True], last_ctx.config


class Cautious(Predictor):
    """Its bound meets the 60 ms target from 25 pods on, not below."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        bound = np.where(batch.replicas >= 25, 50.0, 90.0)
        return Prediction(np.full(len(batch), 50.0), bound, np.ones(len(batch), dtype=bool))


def test_a_held_load_does_not_vouch_while_the_objective_is_observed_violated() -> None:
    """Ten pinned pods held the load; now they read 100 ms against 60 at the same load. The
    plan scales out to what the model vouches for (the observation, not the held load, is
    believed; before, ten were kept as "predicted to meet every objective"), and once the
    violation has lasted a cycle past the window the held load vouches for nothing."""
    planner = planner_with(Cautious())
    for i in range(8):
        planner.plan(pinned(10, 1000.0 + 15 * i, 40.0))
    assert planner.plan(pinned(10, 1120.0, 40.0)).target.replicas == 10
    plan = planner.plan(pinned(10, 1135.0, 100.0))
    assert plan.target.replicas >= 25, plan.reason
    for i in range(1, 7):
        planner.plan(pinned(10, 1135.0 + 15 * i, 100.0))
    assert (1.0, "cpu", "general") not in ObservedLimits.recall(planner.memory["limits"]).vouch


def test_a_violation_at_more_load_per_pod_than_held_leaves_the_vouch() -> None:
    """gen-5972, traced: 17 pinned pods held 5.9 req/s each; on a rise they read p99 466 ms
    against 460 at 8.7 req/s each. That says nothing against the load they held, so where
    the model's bound holds nowhere, the plan scales the shape out to where it carries no
    more than that: 23 pods at the 675 req/s planned (450 observed, x1.5 for the violation),
    29.3 each. A vouch withheld on every violation left no configuration known to hold (on
    gen-5972 the explorer then moved the workload to four-core pods)."""
    planner = planner_with(Pessimistic())
    for i in range(8):
        planner.plan(pinned(10, 1000.0 + 15 * i, 40.0))
    plan = planner.plan(pinned(10, 1120.0, 100.0, rate=450.0))
    assert plan.target.replicas == 23 and plan.target.pool == "general", plan.reason
    assert "meet every objective" in plan.reason, plan.reason


def test_a_load_held_only_within_the_tolerance_vouches_for_nothing() -> None:
    """Ten pinned pods read 80 ms against a 60 ms target with 50 % tolerance: met, but not
    within the target, so no count of the shape is vouched for."""
    planner = planner_with(Pessimistic())
    for i in range(8):
        planner.plan(pinned(10, 1000.0 + 15 * i, 80.0, tolerance=0.5))
    lim = ObservedLimits.recall(planner.memory["limits"])
    assert (1.0, "cpu", "general") in lim.held and not lim.vouch


def test_the_vouch_is_withheld_only_from_the_current_shape_violating_as_its_own() -> None:
    """Ten pinned pods held 300 req/s (30 each). Seen violating at that load over a whole
    window, the shape's own vouch is withheld (another shape's stays), also where no rate is
    known; just after a scale-out to 23 pods, whose KPI window still holds the ten pods'
    minutes, it is not."""
    lim = ObservedLimits()
    for i in range(6):
        lim.observe(pinned(10, 1000.0 + 15 * i, 40.0), 300.0, 300.0)
    assert lim.vouch[PINNED].per_pod == pytest.approx(30.0)
    lim.vouch[(2.0, "cpu", "general")] = Limit(50.0, 1075.0)
    batch = CandidateBatch.of([WorkloadConfig(n, c, "cpu", "general")
                               for c in (1.0, 2.0) for n in (10, 20)])
    for i in range(6, 12):
        violated = pinned(10, 1000.0 + 15 * i, 100.0)
        lim.pending = None                  # judged here, not recorded (which ends it)
        lim.observe(violated, 300.0, 300.0)
    assert lim.vouched(violated, batch, 300.0).tolist() == [False, False, True, True]
    no_rate = replace(violated, workload=replace(violated.workload, request_rate=None))
    assert lim.vouched(no_rate, batch, 300.0).tolist() == [False, False, True, True]
    out = pinned(23, 1180.0, 100.0, rate=450.0)          # a scale-out, just in place
    lim.observe(out, 450.0, 300.0)
    assert lim.vouched(out, CandidateBatch.of([WorkloadConfig(23, 1.0, "cpu", "general")]),
                       450.0).tolist() == [True]

