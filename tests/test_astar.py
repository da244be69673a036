"""The IDO-style ``astar`` planner."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actuators.base import Actuator
from actuators.registry import create as create_actuators
from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners import registry as planner_registry
from planner.planners.astar import AStarPlanner
from planner.planners.base import PlanningContext
from planner.planners.online import recalled_estimate
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples/scenarios/diurnal-shop.yaml"
MULTI = ROOT / "examples/scenarios/multi-tenant.yaml"
KEY = "ns/w"


def intent(objectives: list[dict[str, Any]], priority: float = 0.5) -> Any:
    return parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                         "spec": {"targetRef": {"name": "w"}, "priority": priority,
                                  "objectives": objectives}})


def profile(name: str, kind: str, **spec: Any) -> Any:
    return parse_profile({"kind": "KPIProfile", "metadata": {"name": name, "namespace": "ns"},
                          "spec": {"type": kind, **spec}})


LATENCY = [{"name": "p95", "value": 100, "measuredBy": "lat"}]
PROFILES = {"p95": profile("lat", "latency", percentile=95)}


def context(replicas: int, *, actuators: Mapping[str, Actuator] | None = None,
            admin: AdminConfig | None = None, current: Mapping[str, float | None] | None = None,
            rate: float = 500.0, util: float = 0.5, objectives: list[dict[str, Any]] = LATENCY,
            profiles: Mapping[str, Any] = PROFILES, priority: float = 0.5) -> PlanningContext:
    admin = admin or AdminConfig(replicas=ReplicaBounds(min=1, max=60, maxStep=10))
    pods = tuple(PodState(f"w-{i}", "n-0", 1.0) for i in range(replicas))
    wl = WorkloadState("ns", "w", WorkloadConfig(replicas), pods, request_rate=rate,
                       cpu_utilization=util)
    node = NodeState("n-0", "general", "eu", 256.0, cost_per_core_hour=0.04)
    snap = ClusterSnapshot(0.0, (node,), {KEY: wl})
    acts = create_actuators(admin.actuators, admin) if actuators is None else actuators
    return PlanningContext(intent(objectives, priority), profiles, wl, snap,
                           current if current is not None else {"p95": 50.0}, admin, acts,
                           None, 0.0)


class TableLatency(Predictor):
    """Latency as a function of the replica count; met where it is <= the target."""

    kind = "test"

    def __init__(self, f: Callable[[int], float]) -> None:
        self.f = f

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        v = np.array([self.f(int(r)) for r in batch.replicas], dtype=float)
        return Prediction(v, v, np.ones(len(batch), dtype=bool))


def with_latency(f: Callable[[int], float]) -> Callable[[PlanningContext], dict[str, Predictor]]:
    return lambda ctx: {"p95": TableLatency(f)}


# ---------------------------------------------------------------------------- search
@pytest.mark.parametrize("start", [1, 4, 9, 10, 11, 25, 60])
def test_finds_the_cheapest_satisfying_replica_count(start: int) -> None:
    planner = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r))   # r >= 10
    plan = planner.plan(context(start))
    assert plan.target.replicas == 10
    assert planner.last is not None and planner.last.found and not planner.last.exhausted
    assert planner.last.expanded <= 2000
    assert f"{planner.last.expanded} state(s) expanded" in plan.reason
    assert plan.predicted == {"p95": pytest.approx(100.0)}
    if start == 10:
        assert plan.actions == ()
    else:
        [a] = plan.actions                             # via steps_towards: max step 10
        assert a.actuator == "replicas"
        assert a.params["replicas"] == (min(10, start + 10) if start < 10 else max(10, start - 10))


def test_explicit_model_by_default_matches_brute_force() -> None:
    planner = AStarPlanner()
    ctx = context(3, rate=900.0, util=0.75, current={"p95": 80.0})
    plan = planner.plan(ctx)
    est = recalled_estimate(plan.memory["estimate"])
    assert isinstance(est, QueueEstimate)
    rate = 900.0 * (1 + ctx.admin.headroom)
    # the explicit latency predictor's bound is the mean + 10 %
    want = next(r for r in range(1, 61)
                if 1.1 * est.latency_ms(rate, WorkloadConfig(r), 0.95) <= 100.0)
    assert plan.target.replicas == want > 3
    assert "explicit model" in plan.reason
    assert plan.cost_per_hour == pytest.approx(want * 0.04)


def test_predictors_for_returning_none_falls_back_to_the_explicit_model() -> None:
    plan = AStarPlanner(predictors_for=lambda ctx: None).plan(
        context(3, rate=900.0, util=0.75, current={"p95": 80.0}))
    assert "explicit model" in plan.reason and plan.target.replicas > 3


def test_respects_max_states_and_heads_for_the_closest_state() -> None:
    planner = AStarPlanner(max_states=3, predictors_for=with_latency(lambda r: 1000.0 / r))
    objectives = [{"name": "p95", "value": 20, "measuredBy": "lat"}]      # needs r >= 50
    plan = planner.plan(context(1, objectives=objectives))
    assert planner.last is not None
    assert planner.last.expanded == 3 and planner.last.exhausted and not planner.last.found
    assert "no state predicted to meet every objective" in plan.reason
    assert "3 state(s) expanded of at most 3" in plan.reason
    # greedy on the heuristic: 1 -> 11 -> 21 expanded, 31 is the closest generated state
    assert plan.target.replicas == 31
    [a] = plan.actions
    assert a.params["replicas"] == 11                  # the admin's max step still applies


def test_no_goal_anywhere_takes_the_closest_state() -> None:
    planner = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r))
    objectives = [{"name": "p95", "value": 5, "measuredBy": "lat"}]       # would need r >= 200
    plan = planner.plan(context(10, objectives=objectives))
    assert planner.last is not None and not planner.last.found and not planner.last.exhausted
    assert plan.target.replicas == 60                  # the admin's max: closest to 5 ms


class Jump(Actuator):
    """A test actuator that can only add 1 or 10 replicas."""

    name = "jump"
    knobs = ("replicas",)

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        return [current.with_(replicas=current.replicas + d) for d in (1, 10)
                if current.replicas + d <= 60][:limit]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        if target.replicas == current.replicas:
            return []
        return [Action(self.name, workload, {"replicas": target.replicas}, "jump")]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        backend.scale(action.workload, int(action.params["replicas"]))


def crafted(r: int) -> float:
    """3..10 replicas meet 100 ms comfortably; 11+ barely; 2 replicas is pathological."""
    return {1: 500.0, 2: 5000.0}.get(r, 50.0 if r <= 10 else 99.0)


def test_inadmissible_heuristic_can_miss_the_cheapest_goal() -> None:
    """IDO's heuristic overestimates the cost to go (5000 ms - 100 ms against action costs
    below one replica-equivalent): A* never expands 2 replicas, so never finds 3, the cheapest
    goal, and settles for 11. With a zero heuristic (exact search) it finds 3."""
    acts = {"jump": Jump(AdminConfig())}
    ido = AStarPlanner(predictors_for=with_latency(crafted))
    plan = ido.plan(context(1, actuators=acts))
    assert ido.last is not None and ido.last.found
    assert plan.target.replicas == 11                  # a goal state, not the cheapest one
    assert crafted(plan.target.replicas) <= 100.0
    exact = AStarPlanner(predictors_for=with_latency(crafted), heuristic="zero")
    assert exact.plan(context(1, actuators=acts)).target.replicas == 3


def test_unknown_objective_means_no_action() -> None:
    planner = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r))
    plan = planner.plan(context(1, current={"p95": None}))
    assert plan.actions == () and plan.target == plan.current
    assert "unknown" in plan.reason and planner.last is None


def test_no_load_means_no_action() -> None:
    plan = AStarPlanner().plan(context(3, rate=0.2))
    assert plan.actions == () and "load too low" in plan.reason


def test_priority_weights_action_costs() -> None:
    """Growing is cheap for an important intent, shrinking for an unimportant one (IDO)."""
    planner = AStarPlanner()
    assert planner.action_cost("replicas", 1.0, dearer=True) == pytest.approx(0.2)
    assert planner.action_cost("replicas", 0.1, dearer=True) == pytest.approx(2.0)
    assert planner.action_cost("replicas", 1.0, dearer=False) == pytest.approx(0.4)
    assert planner.action_cost("replicas", 0.1, dearer=False) == pytest.approx(0.22)
    assert planner.action_cost("cpu", 1.0, dearer=True) > planner.action_cost(
        "replicas", 1.0, dearer=True)
    assert planner.action_cost("someone-elses", 1.0, dearer=True) == pytest.approx(0.5)
    # With a dearer scale-in (0.6 base): one replica of slack (1 replica-equivalent) is worth
    # less than a scale-in to an important intent, more than that to an unimportant one.
    costs = {"replicas": 0.6}
    keep = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r), action_costs=costs)
    shrink = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r), action_costs=costs)
    assert keep.plan(context(11, priority=1.0)).target.replicas == 11
    assert shrink.plan(context(11, priority=0.1)).target.replicas == 10


def test_cost_objective_is_computed_from_prices() -> None:
    objectives = [*LATENCY, {"name": "cost", "value": 0.3, "measuredBy": "dollars"}]
    profiles = {**PROFILES, "cost": profile("dollars", "cost")}
    planner = AStarPlanner(predictors_for=with_latency(lambda r: 1000.0 / r))
    plan = planner.plan(context(4, objectives=objectives, profiles=profiles,
                                current={"p95": 50.0, "cost": 0.16}))
    # 10 replicas would cost 0.40/h > 0.30: no state meets both; the closest is chosen
    assert planner.last is not None and not planner.last.found
    assert "computed" in plan.reason
    plan2 = planner.plan(context(4, objectives=[*LATENCY, {"name": "cost", "value": 0.5,
                                                           "measuredBy": "dollars"}],
                                 profiles=profiles, current={"p95": 50.0, "cost": 0.16}))
    assert plan2.target.replicas == 10 and plan2.predicted["cost"] == pytest.approx(0.4)


def test_registered_and_created_by_name() -> None:
    assert isinstance(planner_registry.create("astar"), AStarPlanner)
    with pytest.raises(ValueError):
        AStarPlanner(max_states=0)


# ---------------------------------------------------------------------------- end to end
def test_runs_through_the_controller_with_more_actuators() -> None:
    scenario = load_scenario(SHOP)
    admin = scenario.spec.admin.model_copy(update={"actuators": ("replicas", "cpu")})
    scenario.spec = scenario.spec.model_copy(update={"admin": admin})
    run = ScenarioRun(scenario, planner="astar")
    applied: list[str] = []
    reasons: list[str] = []
    while run.elapsed < 900:
        for o in run.advance() or []:
            assert not o.errors
            applied.extend(o.applied)
            if o.plan is not None:
                reasons.append(o.plan.reason)
    assert run.admin.planner == "astar"
    # The canary comes with ``cpu`` (it turns no knob; A* never asks it for steps).
    assert set(run.controller.actuators) == {"replicas", "cpu", "canary"}
    assert not any(a.startswith("canary") for a in applied)
    assert any("expanded" in r and r.startswith("A*: ") for r in reasons)
    assert applied
    report = run.report(0.0).as_dict()
    assert report["planner"] == "astar"


def test_runs_with_device_and_placement_on_a_gpu_cluster() -> None:
    scenario = load_scenario(MULTI)
    admin = scenario.spec.admin.model_copy(
        update={"actuators": ("replicas", "cpu", "device", "placement")})
    scenario.spec = scenario.spec.model_copy(update={"admin": admin})
    run = ScenarioRun(scenario, planner="astar")
    planned = 0
    while run.elapsed < 600:
        for o in run.advance() or []:
            assert not o.errors
            planned += o.plan is not None and "expanded" in o.plan.reason
    assert planned > 0
    # the explicit model knows nothing about GPUs or other pools: it does not move there
    inference = run.sim.workloads["ml/inference"].config
    assert inference.device == "cpu" and inference.pool is None
