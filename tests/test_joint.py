"""Planning intents that compete for capacity together (:mod:`planner.planners.joint`, and the
controller's side, :mod:`planner.control.contention`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.admin import UtilityWeights
from planner.domain.state import ClusterSnapshot, NodeState, WorkloadConfig, WorkloadState
from planner.planners import joint
from planner.planners.base import ShapeOption

UTILITY = UtilityWeights()


def _cluster(cheap_cores: float = 8.0, dear_cores: float = 32.0) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, (
        NodeState("c0", "cheap", "eu", cheap_cores, cost_per_core_hour=0.02),
        NodeState("d0", "dear", "eu", dear_cores, cost_per_core_hour=0.05)), {})


def _new(name: str) -> WorkloadState:
    return WorkloadState("ns", name, WorkloadConfig(0, 1.0), ())


def _opt(replicas: int, pool: str, price: float) -> ShapeOption:
    return ShapeOption(WorkloadConfig(replicas, 1.0, "cpu", pool), replicas * price)


def test_the_first_intent_moves_so_that_both_fit() -> None:
    """One after another, the high-priority intent takes the cheap pool (its cheapest option)
    and the other, which only the cheap pool can serve, is left without room. Together,
    the high-priority intent goes to the dear pool and both are served."""
    high = joint.Contender("ns/high", _new("high"), 0.9,
                           (_opt(6, "cheap", 0.02), _opt(6, "dear", 0.05)))
    low = joint.Contender("ns/low", _new("low"), 0.3, (_opt(6, "cheap", 0.02),))
    snap = _cluster()
    alone = (high.options[0], None)
    assert joint.fits(snap, [high, low], (high.options[0], low.options[0])) > 0
    assert joint.fits(snap, [high, low], alone) == 0
    found = joint.assign(snap, [high, low], UTILITY)
    assert found is not None
    assert found.chosen == (high.options[1], low.options[0])
    assert found.served == 0.9 + 0.3
    assert found.how.startswith("exact")


def test_priority_decides_who_gets_scarce_room_and_weights_add_up() -> None:
    """Room for 8 cores: one intent of priority 0.7 needing 8, or two of 0.4 needing 4 each.
    The two are served (0.8 > 0.7); with the larger one at 0.9 it is served instead."""
    snap = _cluster(dear_cores=0.0)
    a = joint.Contender("ns/a", _new("a"), 0.7, (_opt(8, "cheap", 0.02),))
    b = joint.Contender("ns/b", _new("b"), 0.4, (_opt(4, "cheap", 0.02),))
    c = joint.Contender("ns/c", _new("c"), 0.4, (_opt(4, "cheap", 0.02),))
    found = joint.assign(snap, [a, b, c], UTILITY)
    assert found is not None and found.chosen == (None, b.options[0], c.options[0])
    a9 = joint.Contender("ns/a", _new("a"), 0.9, a.options)
    found = joint.assign(snap, [a9, b, c], UTILITY)
    assert found is not None and found.chosen == (a9.options[0], None, None)


def test_among_equal_service_the_cheapest_and_least_disruptive() -> None:
    """Both fit either way: the cheaper option wins; a pool change costs its disruption."""
    snap = _cluster(cheap_cores=64.0)
    running = WorkloadState("ns", "x", WorkloadConfig(2, 1.0, "cpu", "dear"), ())
    x = joint.Contender("ns/x", running, 0.5, (_opt(2, "cheap", 0.02), _opt(2, "dear", 0.02)))
    found = joint.assign(snap, [x], UTILITY)
    assert found is not None and found.chosen == (x.options[1],)   # same price, no move
    assert joint.option_cost(x, x.options[0], UTILITY) > joint.option_cost(x, x.options[1],
                                                                           UTILITY)


def test_the_optuna_study_finds_the_exact_answer_on_a_small_space() -> None:
    """Forced onto the study (exact limit 1): seeded, it finds the assignment the exact
    search finds, and the same one twice."""
    high = joint.Contender("ns/high", _new("high"), 0.9,
                           (_opt(6, "cheap", 0.02), _opt(6, "dear", 0.05)))
    low = joint.Contender("ns/low", _new("low"), 0.3, (_opt(6, "cheap", 0.02),))
    snap = _cluster()
    exact = joint.assign(snap, [high, low], UTILITY)
    runs = [joint.assign(snap, [high, low], UTILITY, seed=3, n_trials=60, timeout_s=5.0,
                         exact_limit=1) for _ in range(2)]
    assert exact is not None and all(r is not None for r in runs)
    assert runs[0] == runs[1]
    assert runs[0] is not None and runs[0].chosen == exact.chosen
    assert runs[0].how.startswith("optuna")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from((0.2, 0.4, 0.5, 0.9)),
                          st.lists(st.tuples(st.integers(1, 10), st.sampled_from(
                              ("cheap", "dear")), st.sampled_from((0.02, 0.03, 0.05))),
                                   min_size=0, max_size=3)),
                min_size=1, max_size=3),
       st.sampled_from((4.0, 8.0, 12.0)), st.sampled_from((0.0, 6.0, 16.0)))
def test_the_exact_assignment_fits_and_nothing_that_fits_is_better(
        spec: list[tuple[float, list[tuple[int, str, float]]]], cheap: float,
        dear: float) -> None:
    snap = _cluster(cheap, dear)
    contenders = [joint.Contender(f"ns/w{i}", _new(f"w{i}"), prio,
                                  tuple(sorted({_opt(r, p, c) for r, p, c in opts},
                                               key=lambda o: o.cost_per_hour)))
                  for i, (prio, opts) in enumerate(spec)]
    found = joint.assign(snap, contenders, UTILITY)
    assert found is not None          # serving nobody always fits
    assert joint.fits(snap, contenders, found.chosen) == 0
    for combo in itertools.product(*((*c.options, None) for c in contenders)):
        if joint.fits(snap, contenders, combo) == 0:
            served = sum(c.priority for c, o in zip(contenders, combo, strict=True) if o)
            cost = sum(joint.option_cost(c, o, UTILITY)
                       for c, o in zip(contenders, combo, strict=True) if o)
            assert served <= found.served + 1e-9
            if abs(served - found.served) < 1e-9:
                assert cost >= found.cost - 1e-9


# ---------------------------------------------------------------------- the controller's side
def _menu_scenario() -> dict[str, object]:
    """A cheap pool with room for 8 one-core pods and a dear one with room for 32; both
    workloads start with one pod in the cheap pool, under light load."""
    def workload(name: str) -> dict[str, object]:
        return {"name": name, "namespace": "ns", "replicas": 1, "cpu": 1, "pool": "cheap",
                "service": {"rate_per_core": 100, "base_latency_ms": 5, "startup_s": "5s"},
                "trace": {"kind": "constant", "rate": 5}}

    def intent(name: str, priority: float) -> dict[str, object]:
        return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"targetRef": {"kind": "Deployment", "name": name},
                         "priority": priority,
                         "objectives": [{"name": "p95", "value": 5000, "measuredBy": "p95"}]}}

    return {
        "name": "contention", "duration": "5m", "step_s": 5,
        "cluster": {"pools": [
            {"name": "cheap", "region": "eu", "nodes": 1, "cpu": 8, "cost_per_core_hour": 0.02},
            {"name": "dear", "region": "eu", "nodes": 1, "cpu": 32,
             "cost_per_core_hour": 0.05}]},
        "workloads": [workload("high"), workload("low")],
        "admin": {"actuators": ["replicas", "placement"],
                  "replicas": {"min": 1, "max": 10, "maxStep": 10}, "cycleSeconds": 15},
        "manifests": [
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
             "metadata": {"name": "p95", "namespace": "ns"},
             "spec": {"type": "latency", "percentile": 95}},
            intent("high", 0.9), intent("low", 0.3)],
    }


def _run_with_menus(offers: bool,
                    given: Mapping[str, tuple[ShapeOption, ...]] | None = None,
                    then: Callable[[Any], object] | None = None) -> dict[str, object]:
    """One cycle with a planner that knows each intent's options (6 pods in the cheap pool,
    or for ``ns/high`` also 6 in the dear one) and takes the cheapest, within the assigned
    shape when there is one; ``offers``: whether it tells the controller its options.
    ``then(run)`` runs after the cycle, its result under ``"then"``."""
    from planner.domain.plan import Plan
    from planner.planners import registry
    from planner.planners.base import Planner, PlanningContext, steps_towards
    from simulator.runner import ScenarioRun
    from simulator.scenario import parse_scenario

    menus = given or {"ns/high": (_opt(6, "cheap", 0.02), _opt(6, "dear", 0.05)),
                      "ns/low": (_opt(6, "cheap", 0.02),)}

    class MenuPlanner(Planner):
        def plan(self, ctx: PlanningContext) -> Plan:
            menu = [o for o in menus[ctx.intent.key] if ctx.placement is None or (
                o.config.pool == ctx.placement.pool)]
            target = min(menu, key=lambda o: o.cost_per_hour).config
            return Plan(ctx.intent.key, self.name, ctx.config, target,
                        tuple(steps_towards(ctx, target)), reason="cheapest of the menu")

        def shape_options(self, ctx: PlanningContext) -> list[ShapeOption] | None:
            return list(menus[ctx.intent.key]) if offers else None

    registry.register_planner("test-menu")(MenuPlanner)
    try:
        run = ScenarioRun(parse_scenario(_menu_scenario(), "contention"), "test-menu", 1)
        outcomes = run.advance()
        assert outcomes is not None
        return {o.intent.key: o.plan for o in outcomes} | {"placements": dict(
            run.controller.placements), "then": then(run) if then is not None else None}
    finally:
        registry.REGISTRY.unregister("test-menu")


def test_a_capped_plan_makes_the_controller_plan_the_competitors_together() -> None:
    from planner.domain.plan import Plan

    alone = _run_with_menus(offers=False)
    low = alone["ns/low"]
    assert isinstance(low, Plan) and any(p.kind == "capacity" for p in low.reason_parts)
    assert low.target.replicas < 6 and alone["placements"] == {}

    together = _run_with_menus(offers=True)
    high, low = together["ns/high"], together["ns/low"]
    assert isinstance(high, Plan) and isinstance(low, Plan)
    assert (high.target.pool, high.target.replicas) == ("dear", 6)
    assert (low.target.pool, low.target.replicas) == ("cheap", 6)
    assert not any(p.kind == "capacity" for p in low.reason_parts)
    assert any(p.kind == "contention" and "dear" in p.text for p in high.reason_parts)
    assert together["placements"] == {"ns/high": high.target.with_(replicas=6),
                                      "ns/low": low.target.with_(replicas=6)}


def test_the_preview_plans_in_the_shape_the_last_joint_plan_assigned() -> None:
    """Without the assignment the menu planner would take the cheap pool for ``ns/high`` (as
    the capped cycle's first plans did); the preview shows the cycle's joint choice and says
    why."""
    from planner.api import schemas
    from planner.api.preview import preview
    from planner.cli.embedded import scenario_runtime

    def previews(run: Any) -> dict[str, schemas.PreviewOut]:
        rt = scenario_runtime(run)
        return {name: preview(rt, schemas.PreviewRequest(
            ref=schemas.IntentRef(namespace="ns", name=name))) for name in ("high", "low")}

    together = _run_with_menus(offers=True, then=previews)
    shown = together["then"]
    assert isinstance(shown, dict)
    assert (shown["high"].target.pool, shown["high"].target.replicas) == ("dear", 6)
    assert (shown["low"].target.pool, shown["low"].target.replicas) == ("cheap", 6)
    assert any("joint plan assigned" in n for n in shown["high"].reasons)

    alone = _run_with_menus(offers=False, then=previews)["then"]
    assert isinstance(alone, dict)
    assert alone["high"].target.pool == "cheap"
    assert not any("joint plan assigned" in n for n in alone["high"].reasons)


def test_the_grid_planner_offers_the_fewest_replicas_of_every_shape() -> None:
    """Its options are, per CPU size, the fewest replicas its predictor says meet the
    objective (brute force), cheapest first; planned within an assigned shape it stays there."""
    from dataclasses import replace

    from planner.models.predictor import CandidateBatch
    from planner.planners.grid import GridPlanner
    from tests.test_grid_planner import TrueLatency, context

    ctx = context(replicas=10, cpu=1.0, latency=20.0)
    grid = GridPlanner()
    grid.predictors = lambda ctx, mem: {"p95": TrueLatency()}  # type: ignore[method-assign]
    options = grid.shape_options(ctx)
    fewest = {cpu: next((r for r in range(1, ctx.admin.replicas.max + 1)
                         if TrueLatency().predict(CandidateBatch.of(
                             [WorkloadConfig(r, cpu)]), 300.0).bound[0] <= 60), None)
              for cpu in ctx.admin.cpu.sizes}
    assert None in fewest.values()          # a size no replica count serves is left out
    assert options is not None
    assert {o.config.cpu: o.config.replicas for o in options} == {
        c: r for c, r in fewest.items() if r is not None}
    assert [o.cost_per_hour for o in options] == sorted(o.cost_per_hour for o in options)
    for o in options:
        assert o.cost_per_hour == pytest.approx(o.config.replicas * o.config.cpu * 0.04)
    # From a size no option has (nothing to keep by hysteresis): the assigned shape's option.
    moving = context(replicas=10, cpu=0.5, latency=20.0)
    dearest = options[-1].config
    assert grid.plan(replace(moving, placement=dearest)).target == dearest
    assert grid.plan(moving).target == options[0].config


def test_an_intent_no_room_can_serve_does_not_take_the_room_of_one_it_can() -> None:
    """The high-priority intent needs 12 pods in the cheap pool (room for 8): one after
    another it is capped at what fits and leaves nothing for the other. Together, the other
    is served first and the high-priority intent gets what is left (its plan says so)."""
    from planner.domain.plan import Plan

    menus = {"ns/high": (_opt(12, "cheap", 0.02),), "ns/low": (_opt(6, "cheap", 0.02),)}
    alone = _run_with_menus(offers=False, given=menus)
    assert isinstance(alone["ns/low"], Plan) and alone["ns/low"].target.replicas < 6
    together = _run_with_menus(offers=True, given=menus)
    high, low = together["ns/high"], together["ns/low"]
    assert isinstance(high, Plan) and isinstance(low, Plan)
    assert low.target.replicas == 6
    assert high.target.replicas == 8 - 6 and any(
        p.kind == "contention" and "what is left" in p.text for p in high.reason_parts)
