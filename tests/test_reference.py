"""The perfect-foresight reference held to the planners' limits (``bench/reference.py``) and
the collapse bar measured against it (``bench/slo.py``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bench.oracle import Failures, Shape, fewest_replicas, requirements
from bench.reference import START, ReferencePlanner, run_reference
from bench.slo import ROOT, collapses_beyond, devices_and_pools, load, pool_kinds
from planner.domain.plan import Plan
from planner.domain.state import WorkloadConfig
from planner.planners.base import PlanningContext
from simulator.runner import ScenarioRun


def _row(violations: int, minutes: int = 100, planner: str = "grid") -> dict[str, object]:
    return {"scenario": "s", "seed": 1, "planner": planner, "violation_minutes": violations,
            "minutes": minutes}


def test_a_collapse_is_measured_beyond_what_the_reference_could_keep() -> None:
    """40 of 100 minutes violated is no collapse where the reference violates 30 (only 10
    beyond it), and is one where the reference violates 10 (30 beyond)."""
    floor = [{"scenario": "s", "seed": 1, "violation_minutes": 30, "minutes": 100}]
    assert collapses_beyond([_row(40)], floor, "grid") == []
    assert collapses_beyond([_row(40)], [{**floor[0], "violation_minutes": 10}], "grid") == [
        {"scenario": "s", "seed": 1, "violation_minutes": 40, "minutes": 100,
         "reference_violation_minutes": 10}]
    assert collapses_beyond([_row(90, planner="hpa@80")], floor, "grid") == []


def test_a_second_pool_counts_where_the_oracle_spreads_an_intent_over_two() -> None:
    """The "second pool" bar: only intents the oracle runs in two or more pools are compared,
    and ours count as spread when they ran pods in two; the cost compared is those runs'."""
    refs = [{"scenario": "s", "seed": 1, "cost": 2.0, "gpu_hours": 0.0,
             "pools_by_intent": {"a/x": ["old", "new"], "a/y": ["old"]}},
            {"scenario": "t", "seed": 1, "cost": 5.0, "gpu_hours": 0.0,
             "pools_by_intent": {"a/z": ["old"]}}]
    rows = [{"scenario": "s", "seed": 1, "planner": "grid", "cost": 3.0, "gpu_hours": 0.0,
             "pools_by_intent": {"a/x": {"old": 1.0, "new": 0.5}, "a/y": {"old": 1.0}}},
            {"scenario": "t", "seed": 1, "planner": "grid", "cost": 9.0, "gpu_hours": 0.0,
             "pools_by_intent": {"a/z": {"old": 1.0, "new": 1.0}}},
            {"scenario": "s", "seed": 1, "planner": "hpa@80", "cost": 1.0, "gpu_hours": 0.0,
             "pools_by_intent": {"a/x": {"old": 1.0, "new": 0.0}}}]
    ours = devices_and_pools(rows, refs, "grid")
    assert (ours["pool_runs"], ours["pool_intents"], ours["pool_intents_used"]) == (1, 1, 1)
    assert (ours["pool_cost"], ours["pool_oracle_cost"]) == (3.0, 2.0)
    assert ours["runs"] == 0                 # no GPU anywhere
    theirs = devices_and_pools(rows, refs, "hpa@80")   # a pool with no core-hours is unused
    assert theirs["pool_intents_used"] == 0 and theirs["pool_not_used"] == ["s seed 1 a/x"]
    # Two pools of one kind (same region, speed, price, distance) are one: nothing to compare
    # in "s" then, and "t"'s intent now counts nowhere.
    same = {"s": {"old": "k", "new": "k"}, "t": {"old": "k", "new": "k"}}
    assert devices_and_pools(rows, refs, "grid", same)["pool_intents"] == 0
    other = {"s": {"old": "k", "new": "fast"}, "t": {"old": "k", "new": "k"}}
    assert devices_and_pools(rows, refs, "grid", other)["pool_intents_used"] == 1


def test_pools_of_a_scenario_are_told_apart_by_what_a_cpu_pod_gets_from_them() -> None:
    """heterogeneous: two node generations (kinds differ); gen-512: a GPU pool whose cores
    are the general pool's (one kind)."""
    kinds = pool_kinds([str(ROOT / "examples" / "scenarios" / "heterogeneous.yaml"),
                        "generated:512", "/nowhere/missing.yaml"])
    assert set(kinds) == {"heterogeneous", "gen-512"}
    assert len(set(kinds["heterogeneous"].values())) == 2
    assert len(kinds["gen-512"]) == 2 and len(set(kinds["gen-512"].values())) == 1


def _reference_cycles(sc: Any, seconds: float, shapes: bool = False
                      ) -> tuple[list[tuple[float, WorkloadConfig, Plan]],
                                 Callable[[float, Shape], int]]:
    """The reference (with ``shapes`` or not) planning ``sc``'s active intent for ``seconds``
    on the simulator: every cycle's time, configuration and plan; and the replicas the
    oracle's sizing asks of a shape at a plan's time, for the trace's real load over
    start-up plus a cycle from then (the admin's maximum where no count suffices)."""
    seen: list[tuple[float, WorkloadConfig, Plan]] = []

    class Recording(ReferencePlanner):
        def plan(self, ctx: PlanningContext) -> Plan:
            plan = super().plan(ctx)
            seen.append((ctx.now, ctx.config, plan))
            return plan

    run = ScenarioRun(sc, "hpa", 1, start_time=START)
    run.controller._planners["hpa"] = Recording(sc, 1, shapes=shapes)
    while run.elapsed < seconds:
        run.advance()
    intent = next(i for i in sc.intents if i.spec.active)
    w = next(x for x in sc.spec.workloads if x.key == intent.workload_key)
    need = requirements(intent, {p.key: p for p in sc.profiles},
                        Failures.of(w, sc.spec.step_s))[0]
    admin, trace = sc.spec.admin, sc.trace_for(w, 1)
    ahead = w.service.startup_s + admin.cycle_s

    def sized(now: float, shape: Shape) -> int:
        rates = [trace.rate(now - START + k * sc.spec.step_s)
                 for k in range(math.ceil(ahead / sc.spec.step_s) + 1)]
        fewest = fewest_replicas(w, sc.spec.cluster.pools, shape, rates, need,
                                 "weights" in admin.actuators,
                                 (max(1, admin.replicas.min), admin.replicas.max))
        return fewest or admin.replicas.max

    return seen, sized


def test_the_reference_sizes_for_the_load_it_will_see_when_its_pods_are_ready() -> None:
    """On gen-15 (bursts larger than maxStep per cycle, 77 s start-up), over its first ten
    minutes: every target is the fewest replicas of the current shape meeting the objectives
    at the trace's real load (noise included) over start-up plus a cycle from the plan's
    time, on the simulator's clock; and a run of it counts every objective-minute."""
    ref = "generated:15"
    sc = load(ref)
    seen, sized = _reference_cycles(sc, 600)
    assert len(seen) >= 600 / sc.spec.admin.cycle_s - 1
    for now, cfg, plan in seen:
        assert plan.target == cfg.with_(replicas=sized(now, Shape(cfg.cpu, cfg.device,
                                                                  cfg.pool)))
    assert len({p.target.replicas for _, _, p in seen}) > 1     # it follows the load
    intent = next(i for i in sc.intents if i.spec.active)
    short = run_reference(ref, 1, duration=300)
    assert short["minutes"] == 5 * len(intent.spec.objectives)
    assert 0 <= short["violation_minutes"] <= short["minutes"]


def test_the_reference_with_shapes_follows_the_switching_models_shapes_a_start_up_early() -> None:
    """With ``shapes``, on gen-2793 (bursts where a limit-held switching model runs one GPU pod
    from minute 11), over its first 20 minutes: every target moves each knob (CPU size,
    device, pool) either not at all or to the switching model's shape of the minute its new
    pods would be ready (start-up plus a cycle after the plan), and is that shape, or the part
    of it the actuators reach this cycle, sized as the oracle sizes it for the load known
    ahead; the workload runs on GPU pods before minute 20; and a run counts GPU-hours where
    the replicas-only reference has none."""
    from bench.oracle_switching import switching

    ref = "generated:2793"
    sc = load(ref)
    path = next(iter(switching(sc, 1).values()))["path"]
    assert any(s.device == "gpu" for s in path[:15])
    seen, sized = _reference_cycles(sc, 1200, shapes=True)
    w = next(x for x in sc.spec.workloads if x.key == next(
        i for i in sc.intents if i.spec.active).workload_key)
    ahead = w.service.startup_s + sc.spec.admin.cycle_s
    reached = 0
    for now, cfg, plan in seen:
        goal = path[min(len(path) - 1, int((now - START + ahead) // 60))]
        t = plan.target
        for knob in ("cpu", "device", "pool"):
            assert getattr(t, knob) in (getattr(cfg, knob), getattr(goal, knob)), (now, t, goal)
        shape = Shape(t.cpu, t.device, t.pool)
        reached += shape == goal
        assert t.replicas == sized(now, shape)
    assert reached >= len(seen) - 2
    assert any(p.current.device == "gpu" for _, _, p in seen)
    assert run_reference(ref, 1, duration=1200, shapes=True)["gpu_hours"] > 0
    assert run_reference(ref, 1, duration=1200)["gpu_hours"] == 0


def test_the_reference_with_shapes_waits_where_the_part_it_reaches_meets_nothing() -> None:
    """gen-2183: two GPU pods of a quarter core, the switching model's next shape four-core CPU
    pods. The device change can go at once, the CPU size waits for its cooldown, and no count
    of quarter-core CPU pods meets the p99: the move waits (the current shape sized) instead
    of asking, cycle after cycle, for the admin's maximum of them. (The switching model's own
    shape may need the maximum at a peak: that is the oracle's sizing, as without shapes.)"""
    sc = load("generated:2183")
    seen, _ = _reference_cycles(sc, sc.spec.duration, shapes=True)
    most = sc.spec.admin.replicas.max
    part = [p for _, _, p in seen if "reached in part" in p.reason]
    assert all(p.target.replicas < most for p in part), [p.reason for p in part]
    assert any(p.current.device == "gpu" for _, _, p in seen)
    waits = [p for _, _, p in seen if "the move waits" in p.reason]
    assert waits and all(p.target.replicas < most for p in waits)
