"""The planners where the cluster resizes pods in place (``ClusterSnapshot.in_place_resize``):
a CPU change alone costs no restart (:mod:`planner.planners.disruption`); device and pool
changes still do; with it off, everything scores as before."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from actuators import registry
from planner.domain.admin import AdminConfig, CpuBounds, ReplicaBounds, UtilityWeights
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import disruption, joint, safety
from planner.planners.base import PlanningContext, ShapeOption
from planner.planners.grid import GridPlanner, Inputs
from tests.support.memory import Remembering
from tests.test_grid_planner import TrueLatency as Latency

NODES = (NodeState("a0", "a", "eu", 64.0, cost_per_core_hour=0.04),
         NodeState("b0", "b", "eu", 64.0, cost_per_core_hour=0.05))


def context(in_place: bool, replicas: int = 7, cpu: float = 1.0, disruption_weight: float = 0.02,
            pods: tuple[PodState, ...] | None = None, now: float = 1000.0) -> PlanningContext:
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 60, "measuredBy": "lat"}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    cfg = WorkloadConfig(replicas, cpu, "cpu", "a")
    if pods is None:
        pods = tuple(PodState(f"p{i}", "a0", cpu, pool="a") for i in range(replicas))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=300.0, cpu_utilization=0.5)
    admin = AdminConfig(actuators=("replicas", "cpu", "placement"),
                        replicas=ReplicaBounds(min=1, max=40, maxStep=50),
                        cpu=CpuBounds(sizes=(1.0, 2.0, 4.0), cooldownSeconds=0), headroom=0.0,
                        utility=UtilityWeights(disruption=disruption_weight))
    snap = ClusterSnapshot(now, NODES, {"ns/w": wl}, in_place_resize=in_place)
    return PlanningContext(intent, {"p95": prof}, wl, snap, {"p95": 40.0}, admin,
                           registry.create(admin.actuators, admin), None, now)


CANDIDATES = [WorkloadConfig(7, 1.0, "cpu", "a"),      # the current configuration
              WorkloadConfig(3, 2.0, "cpu", "a"),      # another CPU size alone
              WorkloadConfig(7, 1.0, "cpu", "b"),      # another pool
              WorkloadConfig(3, 2.0, "cpu", "b"),      # both
              WorkloadConfig(7, 1.0, "gpu", "a")]      # another device


def test_restart_counts() -> None:
    cur = CANDIDATES[0]
    off = [disruption.restarts(cur, c, False) for c in CANDIDATES]
    on = [disruption.restarts(cur, c, True) for c in CANDIDATES]
    assert off == [0, 1, 1, 2, 1]
    assert on == [0, 0, 1, 2, 1]
    batch = CandidateBatch.of(CANDIDATES)
    assert disruption.batch_restarts(batch, cur, False).tolist() == off
    assert disruption.batch_restarts(batch, cur, True).tolist() == on


def test_the_grid_scores_a_cpu_change_alone_without_the_restart_where_resized_in_place() -> None:
    batch = CandidateBatch.of(CANDIDATES[:4])
    inp = Inputs({"p95": Latency()}, 0.0)
    off = GridPlanner().score(context(False), batch, 300.0, inp)
    on = GridPlanner().score(context(True), batch, 300.0, inp)
    u = context(False).admin.utility
    assert np.array_equal(off.cost, on.cost) and np.array_equal(off.feasible, on.feasible)
    # The CPU size alone: the restart's disruption term is gone; the rest scores as before.
    assert on.score[1] == pytest.approx(off.score[1] - u.disruption * off.cost[1])
    assert on.score[1] < off.score[1]
    for i in (0, 2, 3):
        assert on.score[i] == off.score[i]


def test_with_a_heavy_disruption_weight_the_planner_resizes_only_where_in_place() -> None:
    """A restart weighed as much as the cost itself: rolling 7 one-core pods over to one
    four-core pod (cheaper by 43 %) does not pay; resizing in place does."""
    plans = {}
    for in_place in (False, True):
        p = GridPlanner()
        p.predictors = lambda ctx, mem: {"p95": Latency()}  # type: ignore[method-assign]
        plans[in_place] = Remembering(p).plan(context(in_place, disruption_weight=1.0))
    assert plans[False].target.cpu == 1.0
    assert plans[True].target.cpu > 1.0
    dear, cheap = plans[False].cost_per_hour, plans[True].cost_per_hour
    assert dear is not None and cheap is not None and cheap < dear


def test_the_joint_assignment_weighs_restarts_alike() -> None:
    running = WorkloadState("ns", "w", CANDIDATES[0], ())
    c = joint.Contender("ns/w", running, 0.5,
                        tuple(ShapeOption(o, 1.0) for o in CANDIDATES[1:3]))
    u = UtilityWeights()
    resize, move = c.options
    assert joint.option_cost(c, resize, u) == joint.option_cost(c, move, u)
    assert joint.option_cost(c, resize, u, in_place=True) < joint.option_cost(c, move, u, True)
    assert joint.option_cost(c, move, u, True) == joint.option_cost(c, move, u)


@pytest.mark.parametrize("in_place", [False, True])
def test_a_cpu_change_resized_in_place_finishes_the_safety_layers_watch(in_place: bool) -> None:
    """Resized in place, the pods keep their start time: the rollout of the new size is
    finished once every pod runs it (then a scale-out stuck later is not undone by rolling
    the size back); rolled out, only pods started since the change count."""
    old = context(in_place, cpu=1.0, now=1000.0)
    watch = safety.Watch.of({}, old.now)
    assert not safety._stuck(old, safety.observe(old), watch)
    resized = tuple(PodState(f"p{i}", "a0", 2.0, pool="a", started_at=0.0) for i in range(7))
    for now in (1015.0, 1030.0):
        ctx = context(in_place, cpu=2.0, pods=resized, now=now)
        safety._stuck(ctx, safety.observe(ctx), watch)
    assert (watch.previous is None) is in_place


class Busy(Predictor):
    """Latency met while the pods are at most 70 % busy (100 req/s per core): the fewest
    cores win, whatever their size."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        busy = rate / (batch.replicas * batch.cpu * 100.0)
        p = np.where(busy <= 0.7, 30.0, 90.0)
        return Prediction(p, p, np.ones(len(batch), dtype=bool))


def _actions(in_place: bool, replicas: int) -> dict[str, Any]:
    p = GridPlanner()
    p.predictors = lambda ctx, mem: {"p95": Busy()}  # type: ignore[method-assign]
    ctx = context(in_place, replicas=replicas, cpu=4.0)
    ctx = replace(ctx, workload=replace(ctx.workload, request_rate=400.0))
    plan = Remembering(p).plan(ctx)
    assert plan.target == WorkloadConfig(6, 1.0, "cpu", "a")         # where it is heading
    return {a.actuator: a.params for a in plan.actions}


def test_an_in_place_shrink_waits_for_the_pods_added_with_it() -> None:
    """4 x 4 cpu to 6 x 1 (fewer cores). Rolled out, the old pods serve until the new ones
    are ready: both steps at once. Resized in place, the four pods would shrink within
    seconds to four cores, less than the load needs, while the two added ones start: the
    current size is scaled out first, and shrinks once six pods are ready."""
    rolled = _actions(False, 4)
    assert rolled["cpu"]["cpu"] == 2.0 and rolled["replicas"]["replicas"] == 6
    first = _actions(True, 4)
    assert "cpu" not in first and first["replicas"]["replicas"] == 6
    then = _actions(True, 6)
    assert then["cpu"]["cpu"] == 2.0 and "replicas" not in then


@pytest.mark.parametrize(("in_place", "rate"), [(False, 1400.0), (True, 1400.0), (True, 600.0)])
def test_a_scale_in_waits_for_pods_still_resizing_in_place(in_place: bool, rate: float) -> None:
    """17 pods asked to run 4 cpu, 7 do, 10 still run 2 cpu (their resize waits for room); the
    plan is 7 x 4. Rolled out, the old pods leave first: the rollout finishes at the 7.
    Resized in place, a scale-in may keep any 7: it waits while 7 pods of 2 cpu would not
    carry the load, and goes ahead (a plain scale-in) where they would."""
    pods = (*(PodState(f"n{i}", "a0", 4.0, pool="a") for i in range(7)),
            *(PodState(f"o{i}", "a0", 2.0, pool="a") for i in range(10)))
    ctx = context(in_place, replicas=17, cpu=4.0, pods=pods)
    target = WorkloadConfig(7, 4.0, "cpu", "a")
    step, why, acts = GridPlanner()._safe_step(ctx, target, rate, Inputs({"p95": Busy()}, 0.0))
    reasons = " ".join(a.reason for a in acts)
    if not in_place:
        assert step == target and "rollout finished" in reasons
    elif rate > 1000:
        assert step == target.with_(replicas=17) and "waits for the in-place resize" in why
        assert not acts
    else:
        assert step == target and why == "" and "scale in 17 -> 7" in reasons
