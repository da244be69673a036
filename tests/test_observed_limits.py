"""Limits observed per shape: a configuration seen violating is not chosen again at that load per
pod, whatever an optimistic model says (planner/planners/observed_limits.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import CanaryState, PodState, WorkloadConfig
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import feedback
from planner.planners.base import PlanningContext
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


def test_a_scale_in_that_breaks_an_objective_records_the_load_per_pod_at_once() -> None:
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(4, 1060.0, 40.0), 300.0, 290.0)   # 4 pods steady for a whole window
    lim.observe(at(3, 1075.0, 90.0), 306.0, 290.0)   # 15 s after the scale-in, violated
    assert lim.limits == {}                             # recorded with the next cycle's rate
    lim.observe(at(5, 1090.0, 90.0), 300.0, 290.0)
    assert lim.limits == {SHAPE: Limit(102.0, 1075.0)}


def test_on_a_steep_rise_the_limit_is_the_load_the_next_cycle_measures() -> None:
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(4, 1060.0, 90.0), 300.0, 290.0)
    lim.observe(at(8, 1075.0, 90.0), 600.0, 290.0)
    assert lim.limits == {SHAPE: Limit(150.0, 1060.0)}


def test_a_violation_while_a_canary_serves_records_nothing() -> None:
    lim = ObservedLimits()
    for t in (1000.0, 1060.0, 1075.0):
        ctx = at(4, t, 90.0)
        wl = replace(ctx.workload, canary=CanaryState(
            WorkloadConfig(1, 1.0, pool="fast"), (PodState("c0", "n1", 1.0, pool="fast"),)))
        lim.observe(replace(ctx, workload=wl), 300.0, 290.0)
    assert lim.limits == {} and lim.pending is None


def test_a_scale_in_from_a_configuration_not_steady_for_a_window_records_nothing() -> None:
    """The window may still hold what came before the 4 pods (fewer of them, say)."""
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(3, 1015.0, 90.0), 306.0, 290.0)
    assert lim.limits == {}


def test_pods_that_have_just_become_ready_do_not_make_a_whole_window() -> None:
    lim = ObservedLimits()
    lim.observe(at(5, 1000.0, 90.0, ready=False), 300.0, 290.0)
    lim.observe(at(5, 1100.0, 90.0), 300.0, 290.0)   # in place 100 s, all ready only now
    assert lim.limits == {}
    lim.observe(at(5, 1160.0, 90.0), 300.0, 290.0)
    lim.observe(at(5, 1175.0, 90.0), 300.0, 290.0)
    assert lim.limits == {SHAPE: Limit(60.0, 1160.0)}


def test_a_violation_while_a_scale_out_is_still_in_the_window_records_nothing() -> None:
    lim = ObservedLimits()
    lim.observe(at(3, 1000.0, 90.0), 300.0, 290.0)   # first sight: not in place for a window
    lim.observe(at(5, 1015.0, 90.0), 300.0, 290.0)   # the window still holds 3 pods
    assert lim.limits == {}
    lim.observe(at(5, 1015.0 + feedback.KPI_WINDOW_S, 90.0), 300.0, 290.0)
    lim.observe(at(5, 1090.0, 90.0), 300.0, 290.0)
    assert lim.limits == {SHAPE: Limit(60.0, 1075.0)}


def test_a_pod_not_ready_records_nothing() -> None:
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(3, 1015.0, 90.0, ready=False), 300.0, 290.0)
    assert lim.limits == {}


def test_met_at_the_limits_load_per_pod_over_a_whole_window_drops_it() -> None:
    lim = ObservedLimits({SHAPE: Limit(100.0, 900.0)})
    lim.observe(at(3, 1000.0, 40.0), 330.0, 290.0)
    lim.observe(at(3, 1000.0 + feedback.KPI_WINDOW_S, 40.0), 330.0, 290.0)
    assert SHAPE in lim.limits                          # met, but at 96.7 req/s per pod
    lim.observe(at(3, 1100.0, 40.0), 330.0, 300.0)
    assert lim.limits == {}                             # met at 100 req/s per pod


def test_a_limit_is_forgotten_after_the_memory_horizon() -> None:
    lim = ObservedLimits({SHAPE: Limit(100.0, 1000.0)})
    lim.observe(at(8, 1000.0 + feedback.FORGET_S, 40.0, rate=100.0), 100.0, 100.0)
    assert SHAPE in lim.limits
    lim.observe(at(8, 1001.0 + feedback.FORGET_S, 40.0, rate=100.0), 100.0, 100.0)
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
    """4 pods hold the load; the model says 3 would, and 3 violate every time. Without the
    limit the planner stays at 3 or returns there whenever the KPI clears; with it, once the
    violation is the 3 pods' own, never again."""
    planner = planner_with(Optimistic())
    replicas, violated, reasons = 4, 0, []
    for i in range(120):
        violated += replicas <= 3
        plan = planner.plan(at(replicas, 1000.0 + 15 * i, 95.0 if replicas <= 3 else 40.0))
        replicas = plan.target.replicas
        reasons.append(plan.reason)
    # Two short visits (the first is not the 3 pods' own: the 4 pods had not been steady for a
    # window), then none; without the limit 119 of the 120 cycles are violated.
    assert violated <= 6, violated
    assert "observed violating at 100.0 req/s per pod" in reasons[-1]


def test_the_limit_is_kept_in_the_plans_memory() -> None:
    planner = planner_with(Optimistic())
    planner.plan(at(4, 1000.0, 40.0))
    planner.plan(at(5, 1015.0, 40.0))
    planner.plan(at(5, 1075.0, 95.0))
    planner.plan(at(6, 1090.0, 40.0))
    assert ObservedLimits.recall(planner.memory["limits"]).limits == {
        SHAPE: Limit(60.0, 1075.0)}


def test_a_config_not_changing_keeps_its_since() -> None:
    lim = ObservedLimits()
    lim.observe(at(4, 1000.0, 40.0), 300.0, 290.0)
    lim.observe(at(4, 1030.0, 40.0), 300.0, 290.0)
    assert (lim.config, lim.since, lim.by_scale_in) == (WorkloadConfig(4, 1.0), 1000.0, False)
