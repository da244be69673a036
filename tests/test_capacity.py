"""Capacity shared by the intents of one cycle (:mod:`planner.planners.capacity`): a plan's new
pods are reserved, so a lower-priority intent planned after it sees only what is left."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from actuators import registry
from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.plan import Plan
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.planners import capacity, safety
from planner.planners.base import PlanningContext


def _snapshot(free: list[float]) -> ClusterSnapshot:
    nodes = tuple(NodeState(f"n{i}", "small", "eu", 8.0, 8.0 - f) for i, f in enumerate(free))
    return ClusterSnapshot(0.0, nodes, {})


def _workload(name: str, replicas: int, cpu: float = 1.0) -> WorkloadState:
    pods = tuple(PodState(f"{name}-{i}", "n0", cpu, pool="small") for i in range(replicas))
    return WorkloadState("ns", name, WorkloadConfig(replicas, cpu), pods, request_rate=10.0,
                         cpu_utilization=0.95)


@settings(max_examples=100, deadline=None)
# Free room on a quarter-core grid: exact in binary floating point, so the property is about
# placement, not about where a rounding tolerance falls.
@given(st.lists(st.integers(0, 32).map(lambda q: q / 4), min_size=1, max_size=6),
       st.integers(0, 30),
       st.sampled_from((0.5, 1.0, 2.0)))
def test_reserving_never_overcommits_and_places_what_fits(free: list[float], add: int,
                                                          cpu: float) -> None:
    snap = _snapshot(free)
    wl = WorkloadState("ns", "w", WorkloadConfig(0, cpu), ())
    plan = Plan("ns/w", "any", wl.config, wl.config.with_(replicas=add))
    after = capacity.reserve(snap, wl, plan)
    placed = sum(a.cpu_allocated - b.cpu_allocated
                 for a, b in zip(after.nodes, snap.nodes, strict=True)) / cpu
    fits = sum(int(f // cpu) for f in free)
    assert round(placed) == min(add, fits)
    assert all(n.cpu_allocated <= n.cpu_capacity + 1e-9 for n in after.nodes)
    # nothing placed: the same snapshot object, not a copy
    assert (after is snap) == (round(placed) == 0)


def test_the_lower_priority_intent_gets_what_is_left_and_is_told_why() -> None:
    """Two saturated, violated intents on one small pool: the first one's scale-out is
    reserved; the second is capped at the rest, and its plan says so."""
    snap = _snapshot([4.0, 4.0])
    admin = AdminConfig(actuators=("replicas",),
                        replicas=ReplicaBounds(min=1, max=20, max_step=20))
    acts = registry.create(admin.actuators, admin)
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    views = [snap]
    plans = []
    for name in ("high", "low"):
        wl = _workload(name, 4)
        intent = parse_intent({"kind": "Intent", "metadata": {"name": name, "namespace": "ns"},
                               "spec": {"targetRef": {"name": name}, "objectives": [
                                   {"name": "p95", "value": 100, "measuredBy": "lat"}]}})
        ctx = PlanningContext(intent, {"p95": prof}, wl, views[-1], {"p95": 500.0}, admin, acts,
                              None, 0.0)
        # A planner asking for far more than fits (a model that knows nothing).
        plan, _ = safety.guard(ctx, Plan(intent.key, "any", wl.config,
                                         wl.config.with_(replicas=20)), {})
        plans.append(plan)
        views.append(capacity.reserve(views[-1], wl, plan))
    high, low = plans
    assert high.target.replicas == 4 + 8          # all the free room
    assert low.target.replicas == 4               # nothing left: keeps what it runs
    assert "capped" in low.reason
    assert sum(n.cpu_allocated for n in views[-1].nodes) <= 16.0


def test_a_cordoned_node_offers_no_room() -> None:
    from dataclasses import replace

    snap = _snapshot([8.0, 8.0])
    cordoned = ClusterSnapshot(0.0, (snap.nodes[0], replace(snap.nodes[1], schedulable=False)),
                               {})
    wl = WorkloadState("ns", "w", WorkloadConfig(0, 1.0), ())
    plan = Plan("ns/w", "any", wl.config, wl.config.with_(replicas=12))
    after = capacity.reserve(cordoned, wl, plan)
    assert after.nodes[1].cpu_allocated == cordoned.nodes[1].cpu_allocated
    assert after.nodes[0].cpu_allocated == 8.0
    admin = AdminConfig(actuators=("replicas",), replicas=ReplicaBounds(min=1, max=20))
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 100, "measuredBy": "lat"}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    ctx = PlanningContext(intent, {"p95": prof}, wl, cordoned, {"p95": 50.0}, admin,
                          registry.create(admin.actuators, admin), None, 0.0)
    assert capacity.schedulable_replicas(ctx.workload, ctx.snapshot, wl.config) == 8


def test_the_controller_reserves_for_the_next_intent_and_a_preview_sees_the_same() -> None:
    """On a generated scenario where workloads compete for one small pool, each cycle's
    active plans are recorded in priority order and ``view_for`` shows a later intent the
    room the earlier ones took (what the preview plans on)."""
    from simulator.generate import SCENARIO_DIR, generate
    from simulator.runner import ScenarioRun
    from simulator.scenario import parse_scenario

    seed = next(s for s in range(1, 60)
                if "competing for one small pool" in generate(s)["description"])
    sc = parse_scenario(generate(seed), f"gen-{seed}", SCENARIO_DIR)
    run = ScenarioRun(sc, "grid", 1)
    while run.elapsed < 300:
        run.advance()
    order = [k for k, _, _ in run.controller.reserved]
    active = sorted((i for i in sc.intents if i.spec.active), key=lambda i: -i.spec.priority)
    assert order == [i.key for i in active if i.key in order] and len(order) >= 2
    snap = run.sim.observe()
    first, last = order[0], order[-1]
    assert run.controller.view_for(first, snap) == snap
    taken = sum(n.cpu_allocated for n in run.controller.view_for(last, snap).nodes)
    before = sum(n.cpu_allocated for n in snap.nodes)
    adds = sum(capacity.added_pods(w, plan) for k, wk, plan in run.controller.reserved
               if k != last and (w := snap.workload(wk)) is not None)
    free = sum(n.cpu_capacity - n.cpu_allocated for n in snap.nodes)
    if adds and free >= 4.0:   # room for at least one pod of any generated size
        assert taken > before
    else:
        assert taken == before


def _reserved_by_scan(snapshot: ClusterSnapshot, workload: WorkloadState,
                      t: WorkloadConfig) -> tuple[NodeState, ...]:
    """The reservation as a scan of every node per added pod (the code before the heap)."""
    count = capacity._added(workload, t)
    nodes = list(snapshot.nodes)
    for _ in range(count):
        best = None
        for i, n in enumerate(nodes):
            if capacity._room(n, t) > 0 and (
                    best is None or n.cpu_capacity - n.cpu_allocated
                    > nodes[best].cpu_capacity - nodes[best].cpu_allocated):
                best = i
        if best is None:
            break
        n = nodes[best]
        nodes[best] = NodeState(n.name, n.pool, n.region, n.cpu_capacity,
                                n.cpu_allocated + t.cpu, n.gpus,
                                n.gpus_allocated + (1 if t.device == "gpu" else 0),
                                n.cost_per_core_hour, n.cost_per_gpu_hour, n.labels,
                                n.schedulable)
    return tuple(nodes)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 32).map(lambda q: q / 4),
                          st.integers(0, 2), st.booleans()), min_size=1, max_size=8),
       st.integers(0, 40), st.sampled_from((0.5, 1.0, 2.0)), st.sampled_from(("cpu", "gpu")),
       st.sampled_from((None, "a", "b")))
def test_reserving_places_each_pod_where_a_scan_of_the_nodes_would(
        spec: list[tuple[str, float, int, bool]], add: int, cpu: float, device: str,
        pool: str | None) -> None:
    nodes = tuple(NodeState(f"n{i}", p, "r", 8.0, 8.0 - free, gpus, 0, 0.04, 1.0,
                            schedulable=ok) for i, (p, free, gpus, ok) in enumerate(spec))
    snapshot = ClusterSnapshot(0.0, nodes, {})
    t = WorkloadConfig(add, cpu, device, pool)
    workload = WorkloadState("ns", "w", WorkloadConfig(0, cpu, device, pool))
    assert capacity.reserve_config(snapshot, workload, t).nodes == _reserved_by_scan(
        snapshot, workload, t)


def _schedulable_by_scan(workload: WorkloadState, snapshot: ClusterSnapshot,
                         cfg: WorkloadConfig) -> int:
    """Schedulable replicas as a scan of every node (the code before the room count)."""
    mine: dict[str, float] = {}
    matching = 0
    for p in workload.pods:
        if p.node is not None and capacity.runs(p, cfg):
            matching += 1
        elif p.node is not None:
            mine[p.node] = mine.get(p.node, 0.0) + p.cpu
    return matching + sum(capacity._room(n, cfg, mine.get(n.name, 0.0)) for n in snapshot.nodes)


shape_st = st.tuples(st.integers(0, 12), st.sampled_from((0.5, 1.0, 2.0)),
                     st.sampled_from(("cpu", "gpu")), st.sampled_from((None, "a", "b")))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 32).map(lambda q: q / 4),
                          st.integers(0, 2), st.booleans()), min_size=1, max_size=8),
       st.lists(st.tuples(st.integers(0, 7), st.sampled_from((0.5, 1.0, 2.0))), max_size=6),
       st.lists(shape_st, min_size=1, max_size=5), st.lists(shape_st, min_size=1, max_size=4))
def test_schedulable_replicas_count_what_a_scan_of_the_nodes_would(
        spec: list[tuple[str, float, int, bool]], own: list[tuple[int, float]],
        reserves: list[tuple[int, float, str, str | None]],
        asks: list[tuple[int, float, str, str | None]]) -> None:
    """The room counted once per snapshot and shape, carried through a cycle's reservations,
    gives what a scan of every node gives, for a workload with pods of other shapes."""
    nodes = tuple(NodeState(f"n{i}", p, "r", 8.0, 8.0 - free, gpus, 0, 0.04, 1.0,
                            schedulable=ok) for i, (p, free, gpus, ok) in enumerate(spec))
    pods = tuple(PodState(f"p{j}", f"n{i % len(nodes)}", cpu) for j, (i, cpu) in enumerate(own))
    mine = WorkloadState("ns", "mine", WorkloadConfig(len(pods)), pods)
    view = ClusterSnapshot(0.0, nodes, {})
    for n, cpu, device, pool in reserves:
        for ask in asks:  # counted (and then carried) before each reservation
            cfg = WorkloadConfig(ask[0], ask[1], ask[2], ask[3])
            assert capacity.schedulable_replicas(mine, view, cfg) == _schedulable_by_scan(
                mine, view, cfg)
        other = WorkloadState("ns", "other", WorkloadConfig(0, cpu, device, pool))
        view = capacity.reserve_config(view, other, WorkloadConfig(n, cpu, device, pool))
    fresh = ClusterSnapshot(0.0, view.nodes, {})
    for ask in asks:
        cfg = WorkloadConfig(ask[0], ask[1], ask[2], ask[3])
        assert capacity.schedulable_replicas(mine, view, cfg) == _schedulable_by_scan(
            mine, fresh, cfg) == capacity.schedulable_replicas(mine, fresh, cfg)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 32).map(lambda q: q / 4),
                          st.integers(0, 2), st.booleans()), min_size=1, max_size=8),
       st.lists(shape_st, min_size=1, max_size=8), st.integers(0, 7))
def test_a_cycle_of_reservations_places_each_pod_where_a_scan_would(
        spec: list[tuple[str, float, int, bool]],
        reserves: list[tuple[int, float, str, str | None]], branch_at: int) -> None:
    """The placement heaps handed on from reservation to reservation (other shapes took room
    in between) place every pod where a scan of the nodes would; a second reservation from a
    snapshot already reserved from (a branch: the joint planner's trials, a preview) too."""
    nodes = tuple(NodeState(f"n{i}", p, "r", 8.0, 8.0 - free, gpus, 0, 0.04, 1.0,
                            schedulable=ok) for i, (p, free, gpus, ok) in enumerate(spec))
    view = ClusterSnapshot(0.0, nodes, {})
    views = [view]
    for n, cpu, device, pool in reserves:
        workload = WorkloadState("ns", "w", WorkloadConfig(0, cpu, device, pool))
        t = WorkloadConfig(n, cpu, device, pool)
        expected = _reserved_by_scan(view, workload, t)
        view = capacity.reserve_config(view, workload, t)
        assert view.nodes == expected
        views.append(view)
    base = views[min(branch_at, len(views) - 1)]
    for n, cpu, device, pool in reserves:
        workload = WorkloadState("ns", "w", WorkloadConfig(0, cpu, device, pool))
        t = WorkloadConfig(n, cpu, device, pool)
        expected = _reserved_by_scan(base, workload, t)
        base = capacity.reserve_config(base, workload, t)
        assert base.nodes == expected


pod_st = st.tuples(st.sampled_from((None, "n0", "n1")), st.sampled_from((0.5, 1.0, 2.0)),
                   st.sampled_from(("cpu", "gpu")), st.sampled_from((None, "a", "b")),
                   st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(pod_st, max_size=12), shape_st,
       st.lists(st.sampled_from([30.0, 100.0, 120.0]), min_size=12, max_size=12),
       st.sampled_from([100.0, 190.0, 210.0, 220.0]))
def test_pod_counts_answer_what_a_scan_of_the_pods_would(
        spec: list[tuple[str | None, float, str, str | None, bool]],
        ask: tuple[int, float, str, str | None], starts: list[float], now: float) -> None:
    """The workload's pods counted once by group give what each scan of its pods gave: the
    scheduled pods of a shape (ready or all), ready, scheduled and pending pods, pods to add,
    a rollout in progress, the pods serving as configured and settled."""
    from planner.planners import feedback

    pods = tuple(PodState(f"p{i}", node, cpu, device, ready, restarts=i % 3,
                          started_at=start, pool=pool)
                 for i, ((node, cpu, device, pool, ready), start)
                 in enumerate(zip(spec, starts, strict=False)))
    cfg = WorkloadConfig(ask[0], ask[1], ask[2], ask[3])
    workload = WorkloadState("ns", "w", cfg.with_(replicas=len(pods)), pods)
    mine = [p for p in pods if p.node is not None and capacity.runs(p, cfg)]
    assert capacity.scheduled_running(workload, cfg) == len(mine)
    assert capacity.scheduled_running(workload, cfg, ready=True) == sum(p.ready for p in mine)
    assert capacity._added(workload, cfg) == max(0, cfg.replicas - len(mine))
    assert workload.ready_replicas == sum(1 for p in pods if p.ready)
    assert workload.restarts == sum(p.restarts for p in pods)
    assert workload.newest_start == max((p.started_at for p in pods), default=-math.inf)
    assert workload.newest_ready_start == max((p.started_at for p in pods if p.ready),
                                              default=-math.inf)
    snap = ClusterSnapshot(0.0, (), {workload.key: workload})
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 100, "measuredBy": "lat"}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    admin = AdminConfig(actuators=("replicas",))
    ctx = PlanningContext(intent, {"p95": prof}, workload, snap, {"p95": 50.0}, admin,
                          registry.create(admin.actuators, admin), None, now)
    obs = safety.observe(ctx)
    assert (obs.ready, obs.scheduled, obs.unscheduled) == (
        sum(p.ready for p in pods), sum(p.node is not None for p in pods),
        sum(p.node is None for p in pods))
    stale = any(p.cpu != cfg.cpu or p.device != cfg.device
                or (cfg.pool is not None and p.pool is not None and p.pool != cfg.pool)
                for p in pods)
    assert feedback.rollout_in_progress(ctx) == (bool(pods) and (
        stale or sum(1 for p in pods if p.ready) < len(pods)))  # replicas: len(pods)
    assert feedback.serving_as_configured(ctx) == (
        not feedback.rollout_in_progress(ctx) and all(p.ready for p in pods))
    assert feedback.steady(ctx) == all(capacity.runs(p, cfg) and now - p.started_at >= 90.0
                                       for p in pods if p.ready)
