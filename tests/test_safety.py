"""The safety layer's rules, as properties over generated cluster states, plans and histories
(:mod:`planner.planners.safety`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actuators import registry
from actuators.topology import observe_all
from planner.domain.admin import AdminConfig, CpuBounds, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.memory import plain
from planner.domain.plan import Plan, ReasonPart
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import capacity, safety
from planner.planners.base import PlanningContext
from planner.planners.hpa import HPAPlanner
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
SIZES = (0.5, 1.0, 2.0, 4.0)
POOLS = ("a", "b", "c")
PROPS = settings(max_examples=150, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class World:
    ctx: PlanningContext
    violated: bool
    plan: Plan


def _intent() -> tuple[Any, Any]:
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 100, "measuredBy": "lat"}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    return intent, prof


@st.composite
def worlds(draw: st.DrawFn, shape_change: bool = True) -> World:
    """A cluster (pools of nodes, partly filled by other workloads), the workload's pods placed
    where they fit (the rest Pending), an observation and an arbitrary plan target."""
    n_pools = draw(st.integers(1, 3))
    nodes: list[dict[str, Any]] = []
    for p in POOLS[:n_pools]:
        cap = draw(st.sampled_from((4.0, 8.0, 16.0, 32.0)))
        gpus = draw(st.sampled_from((0, 0, 2)))
        for i in range(draw(st.integers(1, 4))):
            nodes.append({"name": f"{p}{i}", "pool": p, "cap": cap, "gpus": gpus,
                          "alloc": draw(st.floats(0.0, cap)), "gpu_alloc": 0})
    pool = draw(st.sampled_from((None, *POOLS[:n_pools])))
    cfg = WorkloadConfig(draw(st.integers(1, 40)), draw(st.sampled_from(SIZES)), "cpu", pool)
    util = draw(st.floats(0.0, 1.0))
    pods: list[PodState] = []
    for i in range(cfg.replicas):
        where = next((n for n in nodes if (pool is None or n["pool"] == pool)
                      and n["cap"] - n["alloc"] >= cfg.cpu), None)
        if where is not None:
            where["alloc"] += cfg.cpu
        ready = where is not None and draw(st.booleans())
        pods.append(PodState(f"w-{i}", where["name"] if where else None, cfg.cpu, "cpu", ready,
                             pool=where["pool"] if where else None,
                             cpu_utilization=util if ready else 0.0))
    # A rollout may be under way: pods of an earlier size still serve.
    old_cpu = draw(st.sampled_from(SIZES))
    for i in range(draw(st.integers(0, 4)) if old_cpu != cfg.cpu else 0):
        where = next((n for n in nodes if n["cap"] - n["alloc"] >= old_cpu), None)
        if where is not None:
            where["alloc"] += old_cpu
        pods.append(PodState(f"old-{i}", where["name"] if where else None, old_cpu, "cpu",
                             where is not None, pool=where["pool"] if where else None,
                             cpu_utilization=util))
    node_states = tuple(NodeState(n["name"], n["pool"], "eu", n["cap"], n["alloc"], n["gpus"],
                                  n["gpu_alloc"], 0.04, 2.0) for n in nodes)
    wl = WorkloadState("ns", "w", cfg, tuple(pods), request_rate=100.0, cpu_utilization=util)
    violated = draw(st.booleans())
    max_r = draw(st.integers(max(cfg.replicas, 2), 60))
    admin = AdminConfig(actuators=("replicas", "cpu", "placement"),
                        replicas=ReplicaBounds(min=1, max=max_r, max_step=100),
                        cpu=CpuBounds(sizes=SIZES, cooldown_s=0), cycleSeconds=15)
    acts = registry.create(admin.actuators, admin)
    intent, prof = _intent()
    snap = ClusterSnapshot(1000.0, node_states, {"ns/w": wl})
    ctx = PlanningContext(intent, {"p95": prof}, wl, snap, {"p95": 150.0 if violated else 50.0},
                          admin, acts, None, 1000.0)
    if shape_change:
        target = WorkloadConfig(draw(st.integers(1, max_r)), draw(st.sampled_from(SIZES)),
                                "cpu", draw(st.sampled_from((None, *POOLS[:n_pools]))))
    else:
        target = cfg.with_(replicas=draw(st.integers(1, max_r)))
    kind = draw(st.sampled_from(("choice", "hysteresis")))
    plan = Plan("ns/w", "any", cfg, target,
                reason_parts=(ReasonPart(kind, "current configuration still meets every "
                                               "objective" if kind == "hysteresis" else "x"),))
    return World(ctx, violated, plan)


def _floor(w: World, target: WorkloadConfig) -> int:
    """HPA's proportional rule (rule 1), in pods of the target's size."""
    obs = safety.observe(w.ctx)
    base = obs.ready if obs.ready else w.ctx.config.replicas
    cores = math.ceil(base * (obs.utilization or 0.0) / safety.PROPORTIONAL_TARGET) * \
        w.ctx.config.cpu
    return max(base + 1, math.ceil(cores / target.cpu - 1e-9))


def _scheduled_like(w: World, cfg: WorkloadConfig) -> int:
    return sum(1 for p in w.ctx.workload.pods if p.node is not None and p.cpu == cfg.cpu
               and p.device == cfg.device and (cfg.pool is None or p.pool == cfg.pool))


@PROPS
@given(worlds())
def test_never_beyond_what_the_cluster_can_schedule(w: World) -> None:
    plan, _ = safety.guard(w.ctx, w.plan, {})
    t = plan.target
    room = capacity.schedulable_replicas(w.ctx.workload, w.ctx.snapshot, t)
    serving = min(w.ctx.config.replicas, safety.observe(w.ctx).scheduled)
    assert t.replicas <= max(room, _scheduled_like(w, t), serving, w.ctx.admin.replicas.min)


@PROPS
@given(worlds())
def test_the_layer_never_removes_serving_pods(w: World) -> None:
    """Whatever it caps or rolls back, the layer asks for no fewer replicas than serve now,
    unless the planner itself asked for fewer."""
    plan, _ = safety.guard(w.ctx, w.plan, {})
    serving = min(w.ctx.config.replicas, safety.observe(w.ctx).scheduled)
    if w.plan.target.replicas >= serving:
        assert plan.target.replicas >= min(serving, w.ctx.admin.replicas.max)


@PROPS
@given(worlds())
def test_saturated_and_violated_scales_out_at_least_proportionally(w: World) -> None:
    plan, _ = safety.guard(w.ctx, w.plan, {})
    t = plan.target
    obs = safety.observe(w.ctx)
    if not (w.violated and obs.saturated):
        return
    limit = min(_floor(w, t), w.ctx.admin.replicas.max,
                max(capacity.schedulable_replicas(w.ctx.workload, w.ctx.snapshot, t),
                    _scheduled_like(w, t)))
    assert t.replicas >= limit
    if t != w.plan.target:
        # The capacity rule's changes have their own kind (the controller plans competing
        # intents together when it sees one).
        assert any(p.kind in ("safety", "capacity") for p in plan.reason_parts)


@PROPS
@given(worlds())
def test_no_scale_in_while_violated(w: World) -> None:
    plan, _ = safety.guard(w.ctx, w.plan, {})
    if not w.violated:
        return
    scheduled = safety.observe(w.ctx).scheduled
    t = plan.target
    cur = w.ctx.config
    # In cores, whatever the shape: the pods serving now are never taken away.
    assert t.replicas * t.cpu >= min(cur.replicas, scheduled) * cur.cpu - 1e-9


@PROPS
@given(worlds())
def test_never_claims_met_while_violated(w: World) -> None:
    plan, _ = safety.guard(w.ctx, w.plan, {})
    kinds = {p.kind for p in plan.reason_parts}
    if w.violated:
        assert "hysteresis" not in kinds
    assert plan.reason == "; ".join(p.text for p in plan.reason_parts)


@PROPS
@given(worlds())
def test_actions_lead_to_the_guarded_target_and_memory_is_data(w: World) -> None:
    plan, mem = safety.guard(w.ctx, w.plan, {})
    assert json.loads(json.dumps(plain(mem))) == plain(mem)
    if plan.target != w.plan.target:
        assert plan.steps[0].config == w.ctx.config
        assert plan.steps[-1].config == plan.target


@PROPS
@given(worlds(shape_change=False))
def test_a_baseline_is_left_as_it_is(w: World) -> None:
    plan, _ = safety.guard(w.ctx, w.plan, {}, HPAPlanner())
    assert plan == w.plan


# ---------------------------------------------------------------------- histories
def _move(ready_old: int, new_ready: int, new_starting: int, pending: int,
          now: float, util: float = 0.5) -> PlanningContext:
    """A workload asked to move from pool ``a`` to pool ``b``: old pods serving in ``a``, new
    ones ready or starting in ``b`` and the rest Pending (``b`` is full); the pods ``util``
    busy."""
    replicas = new_ready + new_starting + pending
    cfg = WorkloadConfig(max(replicas, 1), 1.0, "cpu", "b")
    pods = ([PodState(f"old-{i}", "a0", 1.0, "cpu", True, pool="a") for i in range(ready_old)]
            + [PodState(f"new-{i}", "b0", 1.0, "cpu", True, pool="b") for i in range(new_ready)]
            + [PodState(f"start-{i}", "b0", 1.0, "cpu", False, pool="b")
               for i in range(new_starting)]
            + [PodState(f"pend-{i}", None, 1.0, "cpu", False) for i in range(pending)])
    wl = WorkloadState("ns", "w", cfg, tuple(pods), request_rate=50.0, cpu_utilization=util)
    nodes = (NodeState("a0", "a", "eu", 16.0, float(ready_old)),
             NodeState("b0", "b", "eu", float(new_ready + new_starting),
                       float(new_ready + new_starting)))
    admin = AdminConfig(actuators=("replicas", "placement"),
                        replicas=ReplicaBounds(min=1, max=20, max_step=10), cycleSeconds=15)
    intent, prof = _intent()
    return PlanningContext(intent, {"p95": prof}, wl, ClusterSnapshot(now, nodes, {"ns/w": wl}),
                           {"p95": 50.0}, admin, registry.create(admin.actuators, admin), None,
                           now)


def _unpinned(ready: int, now: float, util: float = 0.5) -> PlanningContext:
    ctx = _move(ready, 0, 0, 0, now)
    cfg = WorkloadConfig(ready, 1.0, "cpu", None)
    wl = WorkloadState("ns", "w", cfg, ctx.workload.pods, request_rate=50.0,
                       cpu_utilization=util)
    return replace(ctx, workload=wl, snapshot=ClusterSnapshot(now, ctx.snapshot.nodes,
                                                              {"ns/w": wl}))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8))
def test_a_rollout_without_progress_is_rolled_back_then_not_retried(pending: int,
                                                                    ready: int) -> None:
    # The workload ran unpinned, then the planner moved it to the full pool b.
    mem: dict[str, Any] = {}
    ctx = _unpinned(ready, 985.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    rolled_back_at = None
    for cycle in range(safety.STUCK_CYCLES + 3):
        ctx = _move(ready, 0, 0, pending, 1000.0 + 15.0 * cycle)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        if plan.target.pool != "b":
            rolled_back_at = cycle
            # Back to exactly the shape before the move, keeping every serving pod.
            assert plan.target.pool is None and plan.target.replicas >= ready
            assert "stuck" in plan.reason
            break
    assert rolled_back_at == safety.STUCK_CYCLES
    # Held back (say, by a cooldown): the next plans keep steering back.
    ctx = _move(ready, 0, 0, pending, 1000.0 + 15.0 * (rolled_back_at + 1))
    plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    assert plan.target.pool is None
    # Rolled back; the planner asks for the move again: vetoed for an hour.
    ctx = _unpinned(ready, 1000.0 + 15.0 * (rolled_back_at + 2))
    plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config,
                                       ctx.config.with_(pool="b")), mem)
    assert plan.target.pool is None and "rolled back as stuck" in plan.reason
    # What planners are told (PlanningContext.vetoed): that shape, until the veto ends.
    assert safety.vetoed_shapes(mem, ctx.now) == ((1.0, "cpu", "b"),)
    assert safety.vetoed_shapes(mem, ctx.now + safety.VETO_S) == ()


def _stuck_rollback(ready: int, pending: int, now: float) -> PlanningContext:
    """Rolled back from pool ``b`` to running unpinned with more replicas than pool ``a``
    holds: ``ready`` pods serve in ``a``, the rest are Pending (both pools full); the pods
    busy enough that the ready ones alone would not carry the load."""
    ctx = _move(ready, 0, 0, 0, now)
    cfg = WorkloadConfig(ready + pending, 1.0, "cpu", None)
    pods = (*ctx.workload.pods, *(PodState(f"pend-{i}", None, 1.0, "cpu", False)
                                  for i in range(pending)))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=50.0, cpu_utilization=0.85)
    nodes = (NodeState("a0", "a", "eu", float(ready), float(ready)), ctx.snapshot.nodes[1])
    return replace(ctx, workload=wl, snapshot=ClusterSnapshot(now, nodes, {"ns/w": wl}))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6))
def test_a_stuck_rollback_is_not_undone_in_turn(pending: int, ready: int) -> None:
    # gen-306 on a branch: the move to b is stuck and rolled back; the rollback keeps more
    # replicas than a holds, so it is stuck too; it used to be rolled back to b, and so on
    # every few minutes for as long as the vetoes lasted.
    mem: dict[str, Any] = {}
    ctx = _unpinned(ready, 985.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    now = 1000.0
    for _ in range(safety.STUCK_CYCLES + 1):
        ctx = _move(ready, 0, 0, pending, now, util=0.85)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        now += 15.0
    assert plan.target.pool is None and "stuck" in plan.reason
    for _ in range(3 * safety.STUCK_CYCLES):
        ctx = _stuck_rollback(ready, pending, now)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        assert plan.target.pool is None, plan.reason          # never back to b
        now += 15.0
    assert "both rolled back as stuck" in plan.reason
    assert plan.target.replicas == ready                      # what a can hold: no Pending


def _stuck_move(old: int, new_ready: int, pending: int, wanted: int, p95: float,
                mem: dict[str, Any], util: float = 0.85) -> tuple[Plan, dict[str, Any]]:
    """The move to the full pool ``b`` made no progress for :data:`safety.STUCK_CYCLES`
    cycles while the plan asks for ``wanted`` pods of it and the pods are ``util`` busy; the
    guarded plan of the cycle that finds it stuck."""
    ctx = _unpinned(old, 985.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    for cycle in range(safety.STUCK_CYCLES + 1):
        ctx = replace(_move(old, new_ready, 0, pending, 1000.0 + 15.0 * cycle, util),
                      current={"p95": p95})
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config,
                                           ctx.config.with_(replicas=wanted)), mem)
    return plan, mem


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8), st.data())
def test_a_stuck_rollout_whose_ready_pods_hold_the_plan_is_finished_not_rolled_back(
        old: int, new_ready: int, pending: int, data: st.DataObject) -> None:
    # gen-306: the move to a faster pool had 24 of its 30 pods ready and the plan wanted 8 of
    # them; 6 never got room, and the rollout was rolled back, back to a pool where p50 could
    # not be met, for the hour of the veto.
    wanted = data.draw(st.integers(1, new_ready))
    plan, mem = _stuck_move(old, new_ready, pending, wanted, 50.0, {})
    assert plan.target == WorkloadConfig(new_ready, 1.0, "cpu", "b"), plan.reason
    assert "cannot progress" in plan.reason
    moves = [a for a in plan.actions if a.actuator == "replicas"]
    # One step to the ready pods, whatever the admin's max step: a rollout finishing.
    assert [a.params["replicas"] for a in moves] == [new_ready]
    assert not mem["vetoed"]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8))
def test_a_stuck_rollout_whose_ready_pods_carry_the_measured_load_is_finished(
        old: int, new_ready: int, pending: int) -> None:
    # gen-101: the plan kept 32 pods of the faster pool (its current configuration still
    # met every objective), 29 were ready at a p99 of 34 ms against 50; the rollback put the
    # workload back on the slower pool, violated for the rest of the hour of the veto. The
    # plan asks for every pod of b here; the ready ones carry all the pods' measured load at
    # the proportional rule's target utilisation.
    util = 0.8 * new_ready / (old + new_ready) * 0.99
    plan, mem = _stuck_move(old, new_ready, pending, new_ready + pending, 50.0, {}, util)
    assert plan.target == WorkloadConfig(new_ready, 1.0, "cpu", "b"), plan.reason
    assert "cannot progress" in plan.reason and not mem["vetoed"]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8), st.booleans())
def test_a_stuck_rollout_is_rolled_back_when_its_ready_pods_do_not_hold_the_plan(
        old: int, new_ready: int, pending: int, violated: bool) -> None:
    # Violated (no scale-in then), or the plan wants more pods of b than are ready.
    wanted = new_ready if violated else new_ready + 1
    plan, mem = _stuck_move(old, new_ready, pending, wanted, 150.0 if violated else 50.0, {})
    assert plan.target.pool is None and "stuck" in plan.reason, plan.reason
    assert mem["vetoed"]


def test_a_slow_rollout_that_progresses_is_not_rolled_back() -> None:
    """New pods take longer to start than STUCK_CYCLES cycles, and only one fits at a time:
    each one that becomes ready frees room for the next. Never stuck."""
    mem: dict[str, Any] = {}
    ctx = _unpinned(6, 985.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    start_cycles = 2 * safety.STUCK_CYCLES
    for cycle in range(6 * start_cycles):
        done = min(6, cycle // start_cycles)
        starting = 1 if done < 6 else 0
        ctx = _move(6 - done, done, starting, max(0, 6 - done - starting),
                    1000.0 + 15.0 * cycle)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        assert plan.target.pool == "b", plan.reason


# ---------------------------------------------------------------------- end to end
@pytest.mark.parametrize("planner", ["grid", "queueing", "astar"])
def test_restarted_during_an_overload_without_a_model_it_acts_in_its_first_cycle(
        planner: str) -> None:
    """A saturated workload, a fresh knowledge base: the first cycle that sees the KPI scales
    out, whichever planner (before, each said "no model yet" or "load too low to estimate"
    and waited while HPA scaled out)."""
    doc = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml").read_text())
    w = doc["workloads"][0]
    capacity = w["service"]["rate_per_core"] * w.get("cpu", 1.0) * 2
    w["replicas"] = 2
    w["trace"] = {"kind": "constant", "rate": capacity * 3}
    run = ScenarioRun(parse_scenario(doc, "overload", ROOT / "examples/scenarios"), planner, 1)
    for _ in range(200):
        outcomes = run.advance()
        if outcomes is None:
            continue
        out = next(o for o in outcomes if o.intent.workload_key == run.scenario.spec.workloads[
            0].key)
        if all(v is not None for v in out.current.values()):
            assert out.plan is not None
            assert out.plan.target.replicas > 2, out.plan.reason
            assert out.applied, out.plan.reason
            return
    raise AssertionError("the KPI never became known")


def _context(wl: WorkloadState, nodes: tuple[NodeState, ...], actuators: tuple[str, ...],
             p95: float, max_replicas: int = 60, max_step: int = 100,
             cooldown_s: float = 0.0) -> PlanningContext:
    """A context for ``wl`` on ``nodes`` with the given actuators and observed p95 (the
    objective is p95 <= 100)."""
    admin = AdminConfig(actuators=actuators,
                        replicas=ReplicaBounds(min=1, max=max_replicas, max_step=max_step),
                        cpu=CpuBounds(sizes=SIZES, cooldown_s=cooldown_s), cycleSeconds=15)
    intent, prof = _intent()
    snap = ClusterSnapshot(1000.0, nodes, {"ns/w": wl})
    return PlanningContext(intent, {"p95": prof}, wl, snap, {"p95": p95}, admin,
                           registry.create(admin.actuators, admin), None, 1000.0)


def test_a_smaller_size_clipped_by_the_admin_maximum_keeps_the_serving_cores() -> None:
    """Found by the property above: 2 x 1 cpu starting, saturated and violated, the admin's
    maximum 2; a planner asking for 0.5-cpu pods got the proportional floor (6 x 0.5) clipped
    to 2 x 0.5, half the cores serving. The current size is kept instead."""
    pods = tuple(PodState(f"w-{i}", "a0", 1.0, "cpu", False, pool="a") for i in range(2))
    cfg = WorkloadConfig(2, 1.0, "cpu", None)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=100.0, cpu_utilization=1.0)
    ctx = _context(wl, (NodeState("a0", "a", "eu", 4.0, 2.0, 0, 0, 0.04, 2.0),),
                   ("replicas", "cpu"), 150.0, max_replicas=2)
    plan, _ = safety.guard(ctx, Plan("ns/w", "any", cfg, cfg.with_(replicas=1, cpu=0.5),
                                     reason_parts=(ReasonPart("choice", "x"),)), {})
    assert plan.target.replicas * plan.target.cpu >= 2.0
    assert "no scale-in" in plan.reason


def _gpu_move(speed: float | None) -> Plan:
    """29 one-core CPU pods at 70 % CPU, p95 violated; a GPU pool with room for 8 GPU pods;
    the plan moves to 2 GPU pods, measured ``speed`` times as fast (``None``: not measured)."""
    pods = tuple(PodState(f"w-{i}", f"a{i // 8}", 1.0, "cpu", True, pool="a",
                          cpu_utilization=0.7, request_rate=35.0) for i in range(29))
    cfg = WorkloadConfig(29, 1.0, "cpu", None)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1015.0, cpu_utilization=0.7)
    nodes = (*(NodeState(f"a{i}", "a", "eu", 8.0, 8.0 if i < 3 else 5.0, 0, 0, 0.04, 2.0)
               for i in range(4)),
             *(NodeState(f"g{i}", "g", "eu", 16.0, 0.0, 4, 0, 0.04, 0.3) for i in range(2)))
    ctx = _context(wl, nodes, ("replicas", "device"), 150.0)
    plan, _ = safety.guard(ctx, Plan("ns/w", "any", cfg, cfg.with_(replicas=2, device="gpu"),
                                     reason_parts=(ReasonPart("choice", "x"),),
                                     target_speed=speed), {})
    return plan


def test_a_scale_in_across_devices_is_counted_in_the_work_a_measured_pod_does() -> None:
    """Rule 2 (no scale-in while violated) across devices: a GPU pod measured 30x as fast does
    the work of 29 CPU pods at 70 % in one pod at the proportional rule's target, so the move
    to 2 GPU pods goes ahead. Unmeasured, the rule keeps 29 pods of the new device, which the
    pool's 8 GPUs cannot schedule: the current shape stays (before, measured or not)."""
    moved = _gpu_move(30.0)
    assert moved.target == WorkloadConfig(2, 1.0, "gpu", None), moved.reason
    held = _gpu_move(None)
    assert held.target.device == "cpu" and held.target.replicas >= 29, held.reason
    # Measured only 3x as fast, 29 x 0.7 / 3 / 0.8 = 8.5: nine GPU pods; eight fit.
    slow = _gpu_move(3.0)
    assert "no scale-in (at least 9 x 1 cpu gpu" in slow.reason, slow.reason


def test_a_pool_move_that_would_strand_gpu_pods_waits_for_the_device_change() -> None:
    """From GPU pods to CPU pods in a CPU-only pool, with the device change not made this
    cycle (here: no device actuator; in gen-2183's trace, its cooldown): moving the pool alone
    would leave GPU pods where no node has a GPU, Pending until rolled back as stuck. The pool
    move is held, with the reason; once the device is CPU (or the pool has GPUs) it goes."""
    from planner.planners.base import steps_towards
    cfg = WorkloadConfig(2, 1.0, "gpu", None)
    pods = tuple(PodState(f"w-{i}", "g0", 1.0, "gpu", True, pool="g") for i in range(2))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=100.0, cpu_utilization=0.1)
    nodes = (NodeState("a0", "a", "eu", 16.0, 0.0, 0, 0, 0.04, 2.0),
             NodeState("g0", "g", "eu", 16.0, 2.0, 4, 2, 0.04, 0.3))
    ctx = _context(wl, nodes, ("replicas", "placement"), 50.0)
    acts = ctx.actuators
    steps = steps_towards(ctx, WorkloadConfig(6, 1.0, "cpu", "a"))
    assert [a.actuator for a in steps] == ["replicas"]
    assert "GPU pods cannot run there" in acts["placement"].held["ns/w"]
    on_cpu = replace(ctx, workload=replace(wl, config=cfg.with_(device="cpu")))
    moved = steps_towards(on_cpu, WorkloadConfig(6, 1.0, "cpu", "a"))
    assert any(a.params.get("pool") == "a" for a in moved)
    to_gpu_pool = steps_towards(ctx, WorkloadConfig(2, 1.0, "gpu", "g"))
    assert any(a.params.get("pool") == "g" for a in to_gpu_pool)


def _enacted(ctx: PlanningContext, steps: list[Any]) -> WorkloadConfig:
    from planner.planners.base import after
    cfg = ctx.config
    for a in steps:
        cfg = after(cfg, a)
    return cfg


TWO_GPU_PODS = WorkloadConfig(2, 1.0, "gpu", None)


def _held_move(pinned: str | None, pool_cooldown: float,
               target: WorkloadConfig = TWO_GPU_PODS,
               max_actions: int = 5, max_step: int = 100,
               gpus: int = 4) -> tuple[PlanningContext, list[Any]]:
    """40 one-core CPU pods filling pool ``a`` (pinned there, or not: ``pinned``), a GPU
    pool with ``gpus`` GPUs free; the pool moved 10 s ago (move cooldown ``pool_cooldown``);
    the steps towards ``target``."""
    from planner.planners.base import steps_towards
    cfg = WorkloadConfig(40, 1.0, "cpu", pinned)
    pods = tuple(PodState(f"w-{i}", f"a{i // 8}", 1.0, "cpu", True, pool="a")
                 for i in range(40))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1000.0, cpu_utilization=0.5)
    nodes = (*(NodeState(f"a{i}", "a", "eu", 8.0, 8.0, 0, 0, 0.04, 2.0) for i in range(5)),
             NodeState("g0", "g", "eu", 16.0, 0.0, gpus, 0, 0.04, 0.3))
    admin = AdminConfig(actuators=("replicas", "cpu", "device", "placement"),
                        replicas=ReplicaBounds(min=1, max=60, max_step=max_step),
                        cpu=CpuBounds(sizes=SIZES, cooldown_s=pool_cooldown), cycleSeconds=15,
                        maxActionsPerCycle=max_actions)
    intent, prof = _intent()
    ctx = PlanningContext(intent, {"p95": prof}, wl,
                          ClusterSnapshot(1000.0, nodes, {"ns/w": wl}), {"p95": 50.0}, admin,
                          registry.create(admin.actuators, admin), None, 1000.0,
                          actuator_memory={"placement": {"last_change": 990.0}})
    observe_all(ctx.actuators.values(), ctx.snapshot)      # as the controller does
    return ctx, steps_towards(ctx, target)


def test_half_a_shape_change_that_would_strand_its_pods_waits_with_its_count() -> None:
    """gen-2183 (docs/benchmarks.md section 58): the switch to GPU went ahead while the move
    out of the GPU-less pool the workload was pinned to waited for its cooldown, and GPU pods
    were left Pending there. The switch waits for the move, and so does the count sized for
    the target: a scale-in, or a scale-out that would land on the shape that stays. Once the
    move may go, all of it does."""
    ctx, steps = _held_move("a", pool_cooldown=300.0)
    assert steps == [], steps
    assert "would not fit the cluster (room for 0)" in ctx.actuators["device"].held["ns/w"]
    ctx, steps = _held_move("a", pool_cooldown=300.0, target=WorkloadConfig(45, 1.0, "gpu"),
                            gpus=50)
    assert steps == [], steps
    ctx, steps = _held_move("a", pool_cooldown=0.0)
    assert _enacted(ctx, steps) == WorkloadConfig(2, 1.0, "gpu", None), steps


def test_half_a_shape_change_cut_by_the_actions_per_cycle_waits_too() -> None:
    """The admin's actions per cycle cut the pool move off the end of the list (replicas,
    CPU size, device, pool, in the actuators' order): the device switch alone would strand
    the GPU pods in the GPU-less pool as a cooldown does, so it waits as well."""
    ctx, steps = _held_move("a", pool_cooldown=0.0, max_actions=2)
    assert not any("device" in a.params for a in steps), steps
    assert "only part of the change" in ctx.actuators["device"].held["ns/w"]


def test_a_cpu_size_on_its_way_to_the_targets_goes_ahead() -> None:
    """One CPU size a cycle: 40 x 1 cpu to 10 x 4 passes through 2 cpu, and 30 x 2 (the
    step limit's first step) does not fit the full pool. That is the way to the target, in
    its place, not half of it: the resize goes ahead (a review found it frozen for good)."""
    ctx, steps = _held_move(None, pool_cooldown=0.0, target=WorkloadConfig(10, 4.0, "cpu"),
                            max_step=10)
    assert _enacted(ctx, steps) == WorkloadConfig(30, 2.0, "cpu", None), steps


def test_a_move_to_another_device_that_does_not_fit_keeps_the_current_count() -> None:
    """gen-2183 after the fix above: from 2 GPU pods, a plan of 51 CPU pods in a pool with
    room for 48 is not started, and the current shape stays. With the target's count it
    was 51 GPU pods, capped at what the GPU nodes could schedule: 8 here, six more than
    served (on gen-2183, 6 where 2 served, every few cycles)."""
    cfg = WorkloadConfig(2, 1.0, "gpu", None)
    pods = tuple(PodState(f"w-{i}", "g0", 1.0, "gpu", True, pool="g", cpu_utilization=0.1,
                          request_rate=300.0) for i in range(2))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=600.0, cpu_utilization=0.1)
    nodes = (*(NodeState(f"a{i}", "a", "eu", 8.0, 0.0, 0, 0, 0.04, 2.0) for i in range(6)),
             NodeState("g0", "g", "eu", 16.0, 2.0, 8, 2, 0.04, 0.3))
    ctx = _context(wl, nodes, ("replicas", "device", "placement"), 50.0)
    plan, _ = safety.guard(ctx, Plan("ns/w", "any", cfg, WorkloadConfig(51, 1.0, "cpu", "a"),
                                     reason_parts=(ReasonPart("choice", "x"),)), {})
    assert plan.target == cfg, plan.reason
    assert "does not fit the cluster (room for 48)" in plan.reason


def test_a_measured_speed_does_not_loosen_the_rule_once_every_pod_runs_there() -> None:
    """Rule 2 is counted in work only while pods of another device serve beside the target's:
    with every serving pod already a GPU pod, a scale-in under violation is still refused."""
    pods = tuple(PodState(f"w-{i}", "g0", 1.0, "gpu", True, pool="g", cpu_utilization=0.05,
                          request_rate=300.0) for i in range(4))
    cfg = WorkloadConfig(4, 1.0, "gpu", None)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1200.0, cpu_utilization=0.05)
    ctx = _context(wl, (NodeState("g0", "g", "eu", 16.0, 4.0, 4, 4, 0.04, 0.3),),
                   ("replicas", "device"), 150.0)
    plan, _ = safety.guard(ctx, Plan("ns/w", "any", cfg, cfg.with_(replicas=1),
                                     reason_parts=(ReasonPart("choice", "x"),),
                                     target_speed=30.0), {})
    assert plan.target.replicas == 4 and "no scale-in (at least 4 x 1 cpu kept)" in plan.reason


def _gpu_pool_ctx(cfg: WorkloadConfig, pods: tuple[PodState, ...], now: float
                  ) -> PlanningContext:
    """Pool ``g``: two nodes of 18 cores (14 taken by the workload's CPU pods) and 3 GPUs
    each."""
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=800.0, cpu_utilization=0.7)
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 18.0, 14.0, 3, 0, 0.04, 0.3) for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "device"), 150.0)
    ctx = replace(ctx, now=now, snapshot=replace(ctx.snapshot, time=now))
    observe_all(ctx.actuators.values(), ctx.snapshot)      # as the controller does
    return ctx


@pytest.mark.parametrize("speed", [40.0, None])
def test_a_stuck_rollout_back_to_a_measured_device_holds_the_work_not_the_pods(
        speed: float | None) -> None:
    """gen-2183, traced: two GPU pods served; the plan moved the workload to 30 CPU pods in the
    GPU pool, whose CPU room held 28 (2 Pending, stuck); the plan now wants 2 GPU pods, which
    a canary measured 40x as fast. The rollback went to the GPU at the 30 replicas of the
    stuck rollout, and the device change then waited for 30 GPUs in a pool of 6 (25 minutes
    violated). At the measured speed the 28 CPU pods' work (70 % busy) is one GPU pod's: the
    rollback asks for the plan's 2. Unmeasured, every serving pod is kept, as before."""
    gpu = WorkloadConfig(2, 1.0, "gpu", "g")
    mem: dict[str, Any] = {}
    ctx = _gpu_pool_ctx(gpu, tuple(PodState(f"gpu-{i}", "g0", 1.0, "gpu", True, pool="g",
                                            cpu_utilization=0.5) for i in range(2)), 985.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", gpu, gpu), mem)
    cfg = WorkloadConfig(30, 1.0, "cpu", "g")
    pods = (*(PodState(f"c-{i}", f"g{i % 2}", 1.0, "cpu", True, pool="g", cpu_utilization=0.7)
              for i in range(28)),
            *(PodState(f"p-{i}", None, 1.0, "cpu", False) for i in range(2)))
    plan = None
    for cycle in range(safety.STUCK_CYCLES + 1):
        ctx = _gpu_pool_ctx(cfg, pods, 1000.0 + 15.0 * cycle)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", cfg, gpu, target_speed=speed,
                                           reason_parts=(ReasonPart("choice", "x"),)), mem)
    assert plan is not None and "stuck" in plan.reason and plan.target.device == "gpu"
    if speed is None:
        assert plan.target.replicas >= 28, plan.reason
    else:
        assert plan.target.replicas == 2, plan.reason


def test_a_move_to_a_measured_device_holds_the_work_while_pods_are_replaced() -> None:
    """The grid's step towards 2 GPU pods from 28 CPU pods (70 % busy) in a pool of 6 GPUs.
    A shape change holds the replica count while pods are replaced: 28 GPU pods, which the
    pool cannot schedule (at 30 or more the device actuator waits for GPUs that are not
    there). Measured 40x as fast, the step holds as many serving pods as the pool has GPUs
    for (6: more than the 2 that do the work there, the plan's) and the device change goes."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(28, 1.0, "cpu", "g")
    pods = tuple(PodState(f"c-{i}", f"g{i % 2}", 1.0, "cpu", True, pool="g",
                          cpu_utilization=0.7) for i in range(28))
    ctx = _gpu_pool_ctx(cfg, pods, 1000.0)
    target = WorkloadConfig(2, 1.0, "gpu", "g")
    grid = GridPlanner()
    inp = Inputs({}, 0.0)
    step, why, actions = grid._safe_step(ctx, target, 800.0, inp, 40.0)
    assert step == target.with_(replicas=6) and "old pods that serve" in why, why
    assert any(a.actuator == "device" for a in actions), [a.reason for a in actions]
    # Unmeasured: one GPU pod per serving pod is held, 22 more than the pool has GPUs.
    held, why, _ = grid._safe_step(ctx, target, 800.0, inp)
    assert held == target.with_(replicas=28) and "replicas held" in why


class _Capacity(Predictor):
    """p95 of pods serving ``per_core`` requests a second a core (a GPU pod ``gpu`` times
    that): 10 ms plus M/M/1 queueing, infinite at saturation."""

    kind = "learned"

    def __init__(self, per_core: float, gpu: float) -> None:
        self.per_core, self.gpu = per_core, gpu

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        mu = self.per_core * batch.cpu * np.where(batch.gpu > 0, self.gpu, 1.0)
        lam = rate / batch.replicas
        with np.errstate(divide="ignore"):
            p95 = np.where(lam < mu, 10.0 + 300.0 / (mu - lam), np.inf)
        return Prediction(p95, p95, np.ones(len(batch), dtype=bool))


@pytest.mark.parametrize("max_step", [3, 40])
def test_a_move_to_slower_pods_waits_until_one_step_carries_the_load(max_step: int) -> None:
    """gen-2620, traced: one GPU pod served 800 req/s; the plan moved to 34 CPU pods, 9 %
    cheaper, with the admin's step limit at 3. The rolling update replaced the GPU pod as soon
    as 4 CPU pods were ready, and they saturated (p90 5 s) for the minutes the step limit took
    to add the rest. The move now waits while its first step would not carry the load; with a
    step limit that reaches the target in one step it goes."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(1, 1.0, "gpu", "g")
    pods = (PodState("gpu-0", "g0", 1.0, "gpu", True, pool="g", cpu_utilization=0.2),)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=800.0, cpu_utilization=0.2)
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 32.0, 1.0 if i == 0 else 0.0, 4,
                            1 if i == 0 else 0, 0.03, 1.1) for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "device"), 20.0, max_step=max_step)
    inp = Inputs({"p95": _Capacity(30.0, 60.0)}, 0.0)
    target = WorkloadConfig(34, 1.0, "cpu", "g")
    step, why, actions = GridPlanner()._safe_step(ctx, target, 800.0, inp)
    if max_step == 3:
        assert step.device == "gpu" and "waits: its first step (4 of 34 pods" in why, why
        assert not any(a.actuator == "device" for a in actions)
    else:
        assert step == target and why == ""
        assert any(a.actuator == "device" for a in actions)


@pytest.mark.parametrize("gpu_price", [1.1, 0.4])
def test_a_waiting_move_takes_a_known_shape_one_step_reaches_whole(gpu_price: float) -> None:
    """gen-2110, traced: one GPU pod, the cheapest known configuration 15 one-core CPU pods;
    the step limit's first step (9 pods) would not carry the load, so the move waited and the
    GPU pod stayed. A known shape that one step reaches whole (there 8 two-core pods) and that
    costs less than staying is moved to instead; where staying is cheaper, the move waits.
    Here: one GPU pod at 800 req/s, the step limit 3 (a first step of 4 pods), 34 one-core
    pods or 4 four-core pods needed (hold 20 ms at 200 req/s a pod: 10 + 300/40 ms)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(1, 1.0, "gpu", "g")
    pods = (PodState("gpu-0", "g0", 1.0, "gpu", True, pool="g", cpu_utilization=0.2),)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=800.0, cpu_utilization=0.2)
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 32.0, 1.0 if i == 0 else 0.0, 4,
                            1 if i == 0 else 0, 0.03, gpu_price) for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "cpu", "device"), 20.0, max_step=3)
    inp = Inputs({"p95": _Capacity(60.0, 60.0)}, 0.0)
    grid = GridPlanner()
    target, whole = WorkloadConfig(34, 1.0, "cpu", "g"), WorkloadConfig(4, 4.0, "cpu", "g")
    scored = grid.score(ctx, CandidateBatch.of([target, whole, WorkloadConfig(3, 4.0, "cpu",
                                                                              "g")]),
                        800.0, inp)
    assert scored.feasible.tolist() == [True, True, False]
    step, why, actions = grid._safe_step(ctx, target, 800.0, inp, None, scored)
    if gpu_price > 1.0:          # staying: 1.13/h; four 4-core pods: 0.48/h
        assert step == whole and "which one step reaches whole" in why, why
        assert {a.actuator for a in actions} >= {"device", "cpu"}
    else:                        # staying: 0.43/h, cheaper than four 4-core pods
        assert step.device == "gpu" and "waits: its first step (4 of 34 pods" in why, why
        assert "instead" not in why and not any(a.actuator == "device" for a in actions)


def test_the_grid_plans_within_the_shapes_the_safety_layer_has_not_vetoed() -> None:
    """gen-2620, traced: 1-core pods in pool ``g`` were rolled back as stuck; the grid kept
    choosing them (88 pods) and the layer replaced each choice by the current shape at no
    fewer pods than it ran (120), so the workload could not scale in for the veto's hour.
    Told the vetoed shapes, the grid leaves them out and sizes the others."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(120, 1.0, "cpu", None)
    pods = tuple(PodState(f"w-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.5)
                 for i in range(120))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1800.0, cpu_utilization=0.5)
    nodes = (NodeState("a0", "a", "eu", 200.0, 120.0, 0, 0, 0.03, 1.1),
             NodeState("g0", "g", "eu", 48.0, 0.0, 4, 0, 0.03, 1.1))
    ctx = _context(wl, nodes, ("replicas", "placement"), 50.0, max_replicas=200)
    inp = Inputs({"p95": _Capacity(30.0, 60.0)}, 0.0)
    batch = CandidateBatch.of([WorkloadConfig(88, 1.0, "cpu", "g"),
                               WorkloadConfig(88, 1.0, "cpu", None)])
    grid = GridPlanner()
    assert grid.score(ctx, batch, 1800.0, inp).feasible.tolist() == [True, True]
    vetoed = replace(ctx, vetoed=((1.0, "cpu", "g"),))
    assert grid.score(vetoed, batch, 1800.0, inp).feasible.tolist() == [False, True]


def test_a_move_to_a_measured_device_keeps_the_serving_pods_as_far_as_the_room_goes() -> None:
    """gen-2110, traced: 27 two-core pods, the plan 2 GPU pods measured far faster. Held at
    the GPU pods' work, the replica count fell (by the step limit) to 19 as the GPU pods
    started, and a rolling update keeps old pods only up to the replica count less the new
    ones ready. Where the new place has room for as many of its pods, every old pod that
    serves (28, not the 25 that carry their load at the proportional rule's 80 %: a latency
    percentile is not held at 80 % busy) is held until the new ones are ready; with room for
    26, 26 are (with room for 6, the test above, 6 are: more than the 2 that do the work)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(28, 1.0, "cpu", "g")
    pods = tuple(PodState(f"c-{i}", f"g{i % 2}", 1.0, "cpu", True, pool="g",
                          cpu_utilization=0.7) for i in range(28))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=800.0, cpu_utilization=0.7)
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 64.0, 14.0, 16, 0, 0.04, 0.3)
                  for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "device"), 50.0)
    observe_all(ctx.actuators.values(), ctx.snapshot)
    target = WorkloadConfig(2, 1.0, "gpu", "g")
    step, why, actions = GridPlanner()._safe_step(ctx, target, 800.0, Inputs({}, 0.0), 40.0)
    assert step == target.with_(replicas=28) and "old pods that serve" in why, why
    assert any(a.actuator == "device" for a in actions), [a.reason for a in actions]
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 64.0, 14.0, 13, 0, 0.04, 0.3)
                  for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "device"), 50.0)
    observe_all(ctx.actuators.values(), ctx.snapshot)
    step, why, actions = GridPlanner()._safe_step(ctx, target, 800.0, Inputs({}, 0.0), 40.0)
    assert step == target.with_(replicas=26) and "old pods that serve" in why, why
    assert any(a.actuator == "device" for a in actions), [a.reason for a in actions]


def test_while_a_shape_change_waits_its_cooldown_a_rollout_in_progress_is_not_scaled_in() -> None:
    """gen-2110, traced: 19 GPU replicas rolling out (old two-core CPU pods serving, the GPU
    pods starting) when the plan turned back to CPU pods; the device change waited for its
    cooldown and the current shape was sized by the model (one GPU pod suffices), so the
    replica count fell to 11 and the Deployment removed the old pods that served: p95 0.5 s.
    While the current shape's pods are starting, its replica count is kept."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(19, 2.0, "gpu", None)
    pods = (*(PodState(f"c-{i}", "g0", 2.0, "cpu", True, pool="g", cpu_utilization=0.8)
              for i in range(19)),
            *(PodState(f"gpu-{i}", "g1", 2.0, "gpu", False, pool="g") for i in range(8)))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1200.0, cpu_utilization=0.8)
    nodes = (NodeState("g0", "g", "eu", 64.0, 38.0, 0, 0, 0.04, 0.3),
             NodeState("g1", "g", "eu", 64.0, 16.0, 8, 8, 0.04, 1.0))
    ctx = _context(wl, nodes, ("replicas", "device"), 50.0, max_step=8, cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"device": {"last_change": ctx.now - 30.0}})
    observe_all(ctx.actuators.values(), ctx.snapshot)
    inp = Inputs({"p95": _Capacity(30.0, 60.0)}, 0.0)
    step, why, actions = GridPlanner()._safe_step(ctx, WorkloadConfig(25, 2.0, "cpu", None),
                                                  1200.0, inp)
    assert step == cfg and "scale-in waits for the rollout" in why, why
    assert not any(a.actuator == "replicas" for a in actions)


def test_while_a_shape_change_waits_and_no_count_of_the_current_shape_holds_it_is_sized_explicitly(
        ) -> None:
    """gen-2110, traced: a resize waiting for its cooldown, and no count of the current shape
    predicted to meet the objective: the step asked for the admin's maximum (841 replicas).
    It is sized by the explicit estimate instead (here there is none: the pods are kept)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(12, 1.0, "cpu", None)
    pods = tuple(PodState(f"c-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.9)
                 for i in range(12))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=400.0, cpu_utilization=0.9)
    ctx = _context(wl, (NodeState("a0", "a", "eu", 64.0, 12.0, 0, 0, 0.04, 0.0),),
                   ("replicas", "cpu"), 150.0, max_replicas=800, cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"cpu": {"last_change": ctx.now - 30.0}})
    inp = Inputs({"p95": _Capacity(0.1, 1.0)}, 0.0)          # nothing holds at any count
    step, why, _ = GridPlanner()._safe_step(ctx, WorkloadConfig(8, 2.0, "cpu", None), 400.0,
                                            inp)
    assert step == cfg and "12 replica(s) of the current size" in why, why


@pytest.mark.parametrize("room_in_a", [True, False])
def test_a_waiting_move_goes_ahead_where_the_current_shape_cannot_be_scheduled_at_its_size(
        room_in_a: bool) -> None:
    """gen-4009, traced: 64 one-core pods pinned to a full pool, a move to unpinned pods whose
    first step (the step limit) would not carry the load. The move waited, and the current
    shape was asked for the 204 pods the model sized it at: 140 of them could never be
    scheduled, the move never started, and the pending pods later made the rollout look stuck.
    Where the cluster can schedule the current shape's size, the move waits as before; where it
    cannot, waiting holds pods that never start, so the move goes ahead.
    Here: 20 pods pinned to pool a at 600 req/s (30 req/s a core: 23 pods hold the p95)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(20, 1.0, "cpu", "a")
    pods = tuple(PodState(f"a-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.95)
                 for i in range(20))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=600.0, cpu_utilization=0.95)
    nodes = (NodeState("a0", "a", "eu", 64.0 if room_in_a else 20.0, 20.0, 0, 0, 0.04, 0.0),
             NodeState("b0", "b", "eu", 64.0, 0.0, 0, 0, 0.04, 0.0))
    ctx = _context(wl, nodes, ("replicas", "placement"), 150.0, max_step=1)
    inp = Inputs({"p95": _Capacity(30.0, 1.0)}, 0.0)
    target = WorkloadConfig(23, 1.0, "cpu", None)
    step, why, actions = GridPlanner()._safe_step(ctx, target, 600.0, inp)
    if room_in_a:
        assert step == cfg.with_(replicas=23) and "waits: its first step (21 of 23" in why, why
        assert not any(a.actuator == "placement" for a in actions)
    else:
        assert step == target and why == "", why
        assert any(a.actuator == "placement" for a in actions)
    assert capacity.schedulable_replicas(wl, ctx.snapshot, step) >= min(step.replicas, 21)


def _started(ctx: PlanningContext, at: float, pods: int | None = None) -> PlanningContext:
    """``ctx`` with its pods started at ``at`` (the first ``pods`` of them; all if ``None``)."""
    n = len(ctx.workload.pods) if pods is None else pods
    started = tuple(replace(p, started_at=at) if i < n else p
                    for i, p in enumerate(ctx.workload.pods))
    wl = replace(ctx.workload, pods=started)
    return replace(ctx, workload=wl, snapshot=ClusterSnapshot(ctx.now, ctx.snapshot.nodes,
                                                              {"ns/w": wl}))


def test_a_finished_rollout_is_not_rolled_back_when_a_later_scale_out_gets_stuck() -> None:
    """gen-4009, traced: the workload moved to pool a at minute 3 and ran there for ten
    minutes; a scale-out beyond a's room then left pods Pending, and the stuck-rollout rule
    rolled the workload back to the shape it had before that finished move (a resize of every
    pod). A rollout is undone only while it is one: once every pod is ready, of the shape and
    started since the change, a later stuck scale-out is capped at what fits instead."""
    mem: dict[str, Any] = {}
    ctx = _unpinned(4, 970.0)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    # The move to b is made at 970 and seen at 985; its pods start in between (at 975).
    ctx = _started(_move(0, 4, 0, 0, 985.0), 975.0, pods=1)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    # Not finished while a pod started before the change (an old pod the shape matches),
    # nor while no pod is listed at all.
    for unfinished in (_started(_move(0, 4, 0, 0, 1000.0), 975.0, pods=3),
                       replace(_move(0, 0, 0, 0, 1000.0), workload=replace(
                           ctx.workload, pods=()))):
        _, kept = safety.guard(unfinished, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        assert kept["previous"] == {"cpu": 1.0, "device": "cpu", "pool": None}
    ctx = _started(_move(0, 4, 0, 0, 1000.0), 975.0)       # every pod runs there: finished
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    assert mem["previous"] is None
    for cycle in range(safety.STUCK_CYCLES + 3):           # then asked for 3 more: b is full
        ctx = _started(_move(0, 4, 0, 3, 1015.0 + 15.0 * cycle), 975.0, pods=4)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
        assert plan.target.pool == "b" and "rolled back" not in plan.reason, plan.reason


def test_a_waiting_move_to_another_device_does_not_go_ahead_where_the_current_shape_is_capped(
        ) -> None:
    """A review's case: one GPU pod serves 1,500 req/s; the other GPU is another workload's,
    so the cluster can schedule one of the two GPU pods the planned load asks for. A move to
    CPU pods whose first step (4 pods) carries a tenth of it must still wait: going ahead
    would replace the GPU pod by four CPU pods (gen-2620's outage)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(1, 1.0, "gpu", "g")
    pods = (PodState("gpu-0", "g0", 1.0, "gpu", True, pool="g", cpu_utilization=0.8),)
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=1500.0, cpu_utilization=0.8)
    nodes = tuple(NodeState(f"g{i}", "g", "eu", 64.0, 1.0, 1, 1, 0.03, 1.1) for i in range(2))
    ctx = _context(wl, nodes, ("replicas", "device"), 20.0, max_step=3)
    inp = Inputs({"p95": _Capacity(30.0, 60.0)}, 0.0)
    grid = GridPlanner()
    assert grid._sized_current(ctx, 1900.0, inp) == 2
    assert capacity.schedulable_replicas(wl, ctx.snapshot, cfg) == 1
    step, why, actions = grid._safe_step(ctx, WorkloadConfig(70, 1.0, "cpu", "g"), 1900.0, inp)
    assert step == cfg and "waits: its first step (4 of 70 pods" in why, why
    assert "the cluster can schedule 1" in why, why
    assert not any(a.actuator == "device" for a in actions)


def test_while_a_shape_change_waits_old_pods_that_serve_are_not_capped_away() -> None:
    """A review's case: 14 pods pinned to pool b, 10 there (b is full) and 4 old ones still
    serving in a; a resize waits for its cooldown. The count stays within what is on a node
    (14), not cut to the 10 that pool b can hold."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(14, 1.0, "cpu", "b")
    pods = (*(PodState(f"b-{i}", "b0", 1.0, "cpu", True, pool="b", cpu_utilization=0.9)
              for i in range(10)),
            *(PodState(f"a-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.9)
              for i in range(4)))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=400.0, cpu_utilization=0.9)
    nodes = (NodeState("a0", "a", "eu", 64.0, 4.0, 0, 0, 0.04, 0.0),
             NodeState("b0", "b", "eu", 10.0, 10.0, 0, 0, 0.04, 0.0))
    ctx = _context(wl, nodes, ("replicas", "cpu"), 150.0, cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"cpu": {"last_change": ctx.now - 30.0}})
    inp = Inputs({"p95": _Capacity(30.0, 1.0)}, 0.0)
    assert capacity.schedulable_replicas(wl, ctx.snapshot, cfg) == 10
    step, why, _ = GridPlanner()._safe_step(ctx, WorkloadConfig(8, 2.0, "cpu", "b"), 400.0,
                                            inp)
    assert step == cfg and "14 replica(s) of the current size (the models ask 16" in why, why


@pytest.mark.parametrize("cores", [64.0, 12.0])
def test_while_a_shape_change_waits_the_current_shape_is_sized_within_what_can_be_scheduled(
        cores: float) -> None:
    """A resize waiting for its cooldown sizes the current shape by the model (16 pods here);
    where its pool holds only the 12 running, the 4 more would wait for room for ever."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(12, 1.0, "cpu", "a")
    pods = tuple(PodState(f"c-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.9)
                 for i in range(12))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=400.0, cpu_utilization=0.9)
    nodes = (NodeState("a0", "a", "eu", cores, 12.0, 0, 0, 0.04, 0.0),
             NodeState("b0", "b", "eu", 64.0, 0.0, 0, 0, 0.04, 0.0))
    ctx = _context(wl, nodes, ("replicas", "cpu"), 150.0, cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"cpu": {"last_change": ctx.now - 30.0}})
    inp = Inputs({"p95": _Capacity(30.0, 1.0)}, 0.0)
    step, why, _ = GridPlanner()._safe_step(ctx, WorkloadConfig(8, 2.0, "cpu", "a"), 400.0,
                                            inp)
    if cores > 12.0:
        assert step == cfg.with_(replicas=16) and "16 replica(s) of the current size" in why, why
    else:
        assert step == cfg and "12 replica(s) of the current size (the models ask 16" in why, why


def test_while_a_shape_change_waits_a_scale_in_of_the_current_shape_is_kept() -> None:
    """The cap on the current shape's count never removes a pod on a node, but a count the
    models size below the pods there is a scale-in, kept as asked (gen-1784: two GPU pods
    where one holds the load, while the move to CPU pods waited)."""
    from planner.planners.grid import GridPlanner, Inputs

    cfg = WorkloadConfig(20, 1.0, "cpu", "a")
    pods = tuple(PodState(f"c-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.5)
                 for i in range(20))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=400.0, cpu_utilization=0.5)
    ctx = _context(wl, (NodeState("a0", "a", "eu", 20.0, 20.0, 0, 0, 0.04, 0.0),
                        NodeState("b0", "b", "eu", 64.0, 0.0, 0, 0, 0.04, 0.0)),
                   ("replicas", "cpu"), 50.0, cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"cpu": {"last_change": ctx.now - 30.0}})
    inp = Inputs({"p95": _Capacity(30.0, 1.0)}, 0.0)
    step, why, _ = GridPlanner()._safe_step(ctx, WorkloadConfig(8, 2.0, "cpu", "a"), 400.0,
                                            inp)
    assert step == cfg.with_(replicas=16) and "16 replica(s) of the current size" in why, why


class _Unsupported(_Capacity):
    """:class:`_Capacity`'s numbers, no configuration supported (a shape never observed)."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = super().predict(batch, rate)
        return Prediction(p.mean, p.bound, np.zeros(len(batch), dtype=bool))


def _resizing(template_cpu: float, new_ready: int, pool: str | None = None) -> PlanningContext:
    """gen-3076, traced: 67 one-core pods being resized to four cores (the canary measured
    3x the capacity per pod), the plan at 12 four-core pods. Here: 20 one-core pods ready,
    ``new_ready`` four-core pods ready, two starting and two waiting for room (no node, no
    pool yet), the Deployment's template at ``template_cpu`` (pinned to ``pool``)."""
    cfg = WorkloadConfig(20, template_cpu, "cpu", pool)
    pods = (*(PodState(f"o-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.5)
              for i in range(20)),
            *(PodState(f"n-{i}", "a1", 4.0, "cpu", True, pool="a", cpu_utilization=0.3)
              for i in range(new_ready)),
            *(PodState(f"s-{i}", "a1", 4.0, "cpu", False, pool="a") for i in range(2)),
            *(PodState(f"p-{i}", None, 4.0, "cpu", False) for i in range(2)))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=400.0, cpu_utilization=0.4)
    nodes = (NodeState("a0", "a", "eu", 64.0, 20.0, 0, 0, 0.04, 0.0),
             NodeState("a1", "a", "eu", 64.0, 4.0 * (new_ready + 2), 0, 0, 0.04, 0.0))
    return _context(wl, nodes, ("replicas", "cpu"), 50.0, max_step=2, cooldown_s=300.0)


def test_a_resize_rollout_ends_once_the_new_size_ready_holds_the_load() -> None:
    """A resize rolls out pod for pod at the held replica count, and the scale-in it is on the
    way to waited for the rollout, then went two pods a cycle (the admin's step limit): 67
    four-core pods where 12 held the load, for ten minutes. Once as many pods of the new size
    are ready as the target has, and the models vouch for the target, the old pods leave at
    once, as for a move to a measured device. Not while fewer are ready, not where the models
    do not vouch for the target, and not from a template still at the old size (the pods of
    the target's size are then the old ones)."""
    from planner.planners.grid import GridPlanner, Inputs

    target = WorkloadConfig(5, 4.0, "cpu", None)
    holds = Inputs({"p95": _Capacity(30.0, 1.0)}, 0.0)      # 5 x 4 cpu: p95 17.5 ms
    for pool in (None, "a"):      # pinned, the pods waiting for room have no pool yet
        step, why, actions = GridPlanner()._safe_step(_resizing(4.0, 6, pool),
                                                      target.with_(pool=pool), 400.0, holds)
        assert step == target.with_(pool=pool) and why == "", why
        finish = [a for a in actions if a.actuator == "replicas"]
        assert [a.params["replicas"] for a in finish] == [5], [a.reason for a in actions]
        assert "rollout finished" in finish[0].reason
    # Fewer new pods ready than the target has: the rollout goes on.
    step, why, _ = GridPlanner()._safe_step(_resizing(4.0, 3), target, 400.0, holds)
    assert step.replicas == 20 and "scale-in waits for the rollout" in why, why
    # The models do not vouch for 5 four-core pods at this load: the rollout goes on.
    slow = Inputs({"p95": _Capacity(18.0, 1.0)}, 0.0)        # 72 req/s a pod: saturated
    step, why, _ = GridPlanner()._safe_step(_resizing(4.0, 6), target, 400.0, slow)
    assert step.replicas == 20, why
    # The models predict five four-core pods hold, but do not support the shape (not seen).
    unknown = Inputs({"p95": _Unsupported(30.0, 1.0)}, 0.0)
    step, why, _ = GridPlanner()._safe_step(_resizing(4.0, 6), target, 400.0, unknown)
    assert step.replicas == 20, why
    # The template not at the target's size (here still one core): the four-core pods are
    # not the rollout's new ones, and dropping the count would remove the wrong pods.
    step, why, actions = GridPlanner()._safe_step(_resizing(1.0, 6), target, 400.0, holds)
    assert not any("rollout finished" in a.reason for a in actions), [a.reason for a in actions]


def _gpu_switch(old: int, pending: int, util: float, p95: float, now: float,
                switched: bool = True) -> PlanningContext:
    """``old`` one-core CPU pods serving ``util`` busy on the CPU pool ``a``; ``switched``: the
    Deployment was switched to 4-core GPU pods, one of which runs on the cluster's only GPU
    (pool ``g``) while ``pending`` wait for one."""
    pods = [PodState(f"old-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=util)
            for i in range(old)]
    cfg = WorkloadConfig(old, 1.0, "cpu", None)
    if switched:
        cfg = WorkloadConfig(1 + pending, 4.0, "gpu", None)
        pods += [PodState("gpu-0", "g0", 4.0, "gpu", True, pool="g", cpu_utilization=0.02),
                 *(PodState(f"pend-{i}", None, 4.0, "gpu", False) for i in range(pending))]
    wl = WorkloadState("ns", "w", cfg, tuple(pods), request_rate=40.0 * old,
                       cpu_utilization=util)
    nodes = (NodeState("a0", "a", "eu", 64.0, float(old), 0, 0, 0.04, 2.0),
             NodeState("g0", "g", "eu", 16.0, 4.0 if switched else 0.0, 1,
                       1 if switched else 0, 0.04, 1.0))
    return replace(_context(wl, nodes, ("replicas", "cpu", "device"), p95),
                   now=now, snapshot=ClusterSnapshot(now, nodes, {"ns/w": wl}))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 30), st.integers(1, 30), st.floats(0.95, 1.0))
def test_a_stuck_switch_to_gpu_is_rolled_back_while_the_cpu_pods_that_serve_are_saturated(
        old: int, pending: int, util: float) -> None:
    # gen-360 seed 3: a switch to GPU pods with one GPU in the cluster, the CPU pods that
    # served saturated and p90 near its 5 s timeout. Rule 4 rolled the switch back to CPU;
    # rule 1 held the rollback back as a device switch while overloaded. Stuck for 18 minutes.
    mem: dict[str, Any] = {}
    ctx = _gpu_switch(old, pending, 0.5, 50.0, 985.0, switched=False)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    for cycle in range(safety.STUCK_CYCLES + 1):
        ctx = _gpu_switch(old, pending, util, 150.0, 1000.0 + 15.0 * cycle)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    assert "stuck" in plan.reason, plan.reason
    assert plan.target.device == "cpu" and plan.target.cpu == 1.0, plan.reason
    # Rule 1 still holds for the rollback: at least the proportional rule's pods, counted in
    # the one-core pods that serve (not in the stuck shape's four cores: four times as many).
    floor = max(safety.proportional(old + 1, util), old + 2)
    assert floor <= plan.target.replicas <= max(floor, 1 + pending), plan.reason
    assert any(a.params.get("device") == "cpu" for a in plan.actions), plan.actions


@pytest.mark.parametrize(("waiting", "vetoed"), [(0, False), (1, False), (44, False),
                                               (44, True)])
def test_while_a_shape_change_waits_the_old_pods_that_serve_keep_what_they_need(
        waiting: int, vetoed: bool) -> None:
    """gen-360 seed 3, traced: a switch to 4-core GPU pods with one GPU in the cluster; the
    GPU pod ran, 44 waited for a GPU, 45 four-core CPU pods served. The plan turned back to
    CPU pods, the resize waited for its cooldown, and the current shape was sized by the model
    at one GPU pod: three steps removed 33 of the CPU pods that served (p90 at 5 s), since
    pods waiting for room are not starting and the old pods take their share of the requests
    at every step. The count is now sized for the old shape that serves too, whether or not
    that shape is vetoed (rolled back as stuck: its pods serve all the same). With none
    waiting (two GPUs, both GPU pods ready, the old pods still serving), the scale-in to one
    GPU pod goes ahead as before."""
    from planner.planners.grid import GridPlanner, Inputs

    gpus = 1 if waiting else 2
    cfg = WorkloadConfig(gpus + waiting, 4.0, "gpu", None)
    pods = (*(PodState(f"c-{i}", "a0", 4.0, "cpu", True, pool="a", cpu_utilization=0.2)
              for i in range(45)),
            *(PodState(f"gpu-{i}", "g0", 4.0, "gpu", True, pool="g", cpu_utilization=0.02)
              for i in range(gpus)),
            *(PodState(f"w-{i}", None, 4.0, "gpu", False) for i in range(waiting)))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=500.0, cpu_utilization=0.2)
    nodes = (NodeState("a0", "a", "eu", 256.0, 180.0, 0, 0, 0.04, 0.0),
             NodeState("g0", "g", "eu", 64.0, 4.0 * gpus, gpus, gpus, 0.04, 1.0))
    ctx = _context(wl, nodes, ("replicas", "cpu", "device"), 50.0, max_step=11,
                   cooldown_s=300.0)
    ctx = replace(ctx, actuator_memory={"cpu": {"last_change": ctx.now - 30.0},
                                        "device": {"last_change": ctx.now - 30.0}},
                  vetoed=((4.0, "cpu", None),) if vetoed else ())
    observe_all(ctx.actuators.values(), ctx.snapshot)
    model = _Capacity(15.0, 10.0)                   # one GPU pod holds 600 req/s
    step, why, _ = GridPlanner()._safe_step(ctx, WorkloadConfig(30, 1.0, "cpu", None), 500.0,
                                            Inputs({"p95": model}, 0.0))
    # The fewest 4-core CPU pods the model has hold 500 req/s within the p95 of 100 ms.
    n = np.arange(1, 61, dtype=float)
    p95 = model.predict(CandidateBatch(n, np.full(60, 4.0), np.zeros(60), (None,) * 60),
                        500.0).bound
    need_cpu = int(n[np.flatnonzero(p95 <= 100.0)[0]])
    if waiting:
        assert step == cfg.with_(replicas=min(need_cpu, cfg.replicas)), why
        assert f"old pods that serve while new ones wait for room (they need {need_cpu})" \
            in why, why
    else:
        assert step == cfg.with_(replicas=1), why


def test_a_rollback_counts_the_ready_pods_in_their_own_cpu_size() -> None:
    """gen-7779 seed 1: a stuck resize to 4-core pods in a full pool, 20 four-core and 24
    one-core pods ready, saturated and violated. The rollback to one-core pods holds the
    proportional rule's cores of the pods that serve (their mean size, 104 / 44 cores), not
    one one-core pod per ready pod (608675e) nor four (the stuck shape's size)."""
    def ctx_at(now: float, stuck: bool) -> PlanningContext:
        cfg = WorkloadConfig(60, 4.0, "cpu", "b") if stuck else WorkloadConfig(44, 1.0, "cpu", None)
        pods = [PodState(f"o-{i}", "a0", 1.0, "cpu", True, pool="a", cpu_utilization=0.95)
                for i in range(24 if stuck else 44)]
        if stuck:
            pods += [PodState(f"n-{i}", "b0", 4.0, "cpu", True, pool="b", cpu_utilization=0.95)
                     for i in range(20)]
            pods += [PodState(f"w-{i}", None, 4.0, "cpu", False) for i in range(16)]
        wl = WorkloadState("ns", "w", cfg, tuple(pods), request_rate=1000.0,
                           cpu_utilization=0.95 if stuck else 0.5)
        nodes = (NodeState("a0", "a", "eu", 400.0, 24.0 if stuck else 44.0, 0, 0, 0.04, 0.0),
                 NodeState("b0", "b", "eu", 80.0, 80.0 if stuck else 0.0, 0, 0, 0.04, 0.0))
        base = _context(wl, nodes, ("replicas", "cpu", "placement"), 150.0 if stuck else 50.0,
                        max_replicas=400)
        return replace(base, now=now, snapshot=ClusterSnapshot(now, nodes, {"ns/w": wl}))

    ctx = ctx_at(985.0, stuck=False)
    _, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), {})
    for cycle in range(safety.STUCK_CYCLES + 1):
        ctx = ctx_at(1000.0 + 15.0 * cycle, stuck=True)
        plan, mem = safety.guard(ctx, Plan("ns/w", "any", ctx.config, ctx.config), mem)
    assert "stuck" in plan.reason and plan.target.cpu == 1.0, plan.reason
    want = math.ceil(safety.proportional(44, 0.95) * (24 + 4 * 20) / 44 - 1e-9)
    assert plan.target.replicas == max(want, 60), plan.reason
