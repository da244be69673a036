"""Multi-region exposure (issue 14, docs/regions.md): routing to the nearest exposing pool,
latency measured at the client, a load balancer per exposed pool, the exposure actuator's
limits, data residency, the admin's cap, the planner widening and narrowing exposure, and no
change for scenarios without clients."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from actuators import registry
from actuators.exposure import ExposureActuator, allowed_pools
from knowledge.connect import open_knowledge_base
from planner.domain.admin import AdminConfig, parse_admin
from planner.domain.errors import PermanentError, SpecError
from planner.domain.geography import Geography, route, routed_demand, split_replicas
from planner.domain.intents import KPIType, parse_intent
from planner.domain.plan import Plan
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, NodeState, WorkloadConfig, WorkloadState
from planner.planners import exposure
from planner.planners.base import PlanningContext
from simulator.cluster import SimulatedCluster
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
START = 1_767_225_600.0

if "exposure" not in registry.REGISTRY.names():
    # The entry point is declared in pyproject.toml; an install that predates it lacks it.
    registry.REGISTRY.register("exposure")(ExposureActuator)

GEO = Geography({"eu-west": {"eu-west": 4.0, "us-east": 90.0},
                 "us-east": {"eu-west": 90.0, "us-east": 4.0}}, lb_cost_per_hour=0.05)
REGION = {"eu": "eu-west", "us": "us-east"}


def region_doc(us_steps: list[dict[str, Any]] | None = None, duration: str = "20m",
               exposure: list[str] | None = None, **admin: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/multi-region.yaml")
                                         .read_text())
    doc["duration"] = duration
    if us_steps is not None:
        doc["clients"]["regions"][1]["trace"] = {"kind": "step", "initial": 0.0,
                                                 "steps": us_steps}
    if exposure is not None:
        doc["workloads"][0]["exposure"] = exposure
    doc["admin"].update(admin)
    return doc


def p95(sim: SimulatedCluster, sc: Any) -> float:
    intent = sc.intents[0]
    prof = next(p for p in sc.profiles if p.spec.type is KPIType.LATENCY)
    from simulator.cluster import kpi_value
    value = kpi_value(prof, sim.window(intent.workload_key))
    assert value is not None
    return value


# --------------------------------------------------------------------------- geography
def test_route_to_the_nearest_exposing_pool() -> None:
    demand = {"eu-west": 10.0, "us-east": 5.0}
    assert route(demand, ["eu"], REGION, GEO) == {"eu-west": "eu", "us-east": "eu"}
    assert route(demand, ["eu", "us"], REGION, GEO) == {"eu-west": "eu", "us-east": "us"}
    assert routed_demand(demand, ["us", "eu"], REGION, GEO) == {"eu": 10.0, "us": 5.0}
    assert routed_demand(demand, ["us"], REGION, GEO) == {"us": 15.0}
    assert route(demand, [], REGION, GEO) == {}


def test_replicas_follow_routed_demand_with_a_pod_per_pool() -> None:
    assert split_replicas(10, {"eu": 75.0, "us": 25.0}) == {"eu": 7, "us": 3}
    assert split_replicas(10, {"eu": 100.0, "us": 0.0}) == {"eu": 9, "us": 1}
    assert split_replicas(1, {"eu": 1.0, "us": 3.0}) == {"eu": 0, "us": 1}
    assert split_replicas(4, {"eu": 0.0, "us": 0.0}) == {"eu": 2, "us": 2}
    for n in range(0, 30):
        assert sum(split_replicas(n, {"a": 1.0, "b": 2.5, "c": 0.3}).values()) == n


# --------------------------------------------------------------------------- simulator
def test_far_clients_pay_the_round_trip_until_a_pool_near_them_exposes() -> None:
    sc = parse_scenario(region_doc([{"at": "0s", "rate": 1.0}]), "t", ROOT)
    sim = SimulatedCluster(sc, seed=1, start_time=START)
    key = "shop/storefront"
    sim.scale(key, 8)
    for _ in range(24):
        sim.step(5.0)
    # half the clients are 90 ms from the only exposing pool: p95 includes the round trip
    assert p95(sim, sc) > 90.0
    assert {p.pool for p in sim.workloads[key].pods} == {"eu"}
    sim.expose(key, ("eu", "us"))
    for _ in range(30):
        sim.step(5.0)
    pods = sim.workloads[key].pods
    assert [p.pool for p in pods].count("us") == 4   # half the demand, half the pods
    sim.window_s = 30.0
    assert p95(sim, sc) < 60.0
    snap = sim.observe()
    wl = snap.workloads[key]
    assert wl.exposure == ("eu", "us")
    assert wl.client_demand is not None and set(wl.client_demand) == {"eu-west", "us-east"}
    assert snap.geography is not None and snap.geography.rtt("us-east", "eu-west") == 90.0


def test_a_load_balancer_per_exposed_pool_is_paid() -> None:
    sc = parse_scenario(region_doc([{"at": "0s", "rate": 0.0}]), "t", ROOT)
    costs = {}
    for pools in (("eu",), ("eu", "us")):
        sim = SimulatedCluster(sc, seed=1, start_time=START)
        sim.scale("shop/storefront", 4)
        sim.expose("shop/storefront", pools)
        for _ in range(10):
            sim.step(5.0)
        rec = sim.workloads["shop/storefront"].history[-1]
        pods = sum(p.cpu * sim.pools[p.pool or ""].cost_per_core_hour
                   for p in sim.workloads["shop/storefront"].pods)
        assert rec.cost_per_hour == pytest.approx(pods + 0.05 * len(pools))
        costs[pools] = rec.cost_per_hour
    assert costs[("eu", "us")] > costs[("eu",)] + 0.05 - 1e-9


def test_expose_refuses_nothing_and_unknown_pools() -> None:
    sim = SimulatedCluster(parse_scenario(region_doc(), "t", ROOT), seed=1, start_time=START)
    with pytest.raises(PermanentError, match="at least one pool"):
        sim.expose("shop/storefront", ())
    with pytest.raises(PermanentError, match="mars"):
        sim.expose("shop/storefront", ("mars",))


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.pop("clients"), "exposure needs clients"),
    (lambda d: d["clients"]["latency_ms"]["us-east"].pop("us-east"), "no round trip"),
    (lambda d: d["clients"]["latency_ms"].pop("us-east"), "no row for client region"),
    (lambda d: d["workloads"][0].update(exposure=["mars"]), "exposure pool 'mars'"),
    (lambda d: d["clients"]["regions"][0].update(trace={"kind": "constant", "rate": 1}),
     "exactly one of share"),
])
def test_bad_geography_names_the_field_and_the_fix(change: Any, field: str) -> None:
    doc = region_doc()
    change(doc)
    with pytest.raises(SpecError, match=field):
        parse_scenario(doc, "t", ROOT)


def test_without_clients_nothing_changes() -> None:
    """Declaring clients changes nothing for a workload that is not exposed per pool: the
    same steps, figures and snapshot as without them."""
    doc = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml").read_text())
    doc["duration"] = "10m"
    with_clients = copy.deepcopy(doc)
    with_clients["clients"] = {"regions": [{"name": "eu-west", "share": 1.0}],
                               "latency_ms": {"eu-west": {"eu-west": 50.0}}}
    runs = []
    for d in (doc, with_clients):
        sim = SimulatedCluster(parse_scenario(d, "t", ROOT), seed=3, start_time=START)
        sim.scale("shop/checkout", 6)
        for _ in range(60):
            sim.step(5.0)
        snap = sim.observe()
        assert snap.workloads["shop/checkout"].exposure is None
        runs.append([(r.offered, r.served, r.cost_per_hour, r.components.offset_ms.tolist())
                     for r in sim.workloads["shop/checkout"].history])
    assert runs[0] == runs[1]
    plain = SimulatedCluster(parse_scenario(doc, "t", ROOT), seed=3, start_time=START)
    assert plain.observe().geography is None


# --------------------------------------------------------------------------- actuator
class Recorder(ClusterBackend):
    def __init__(self) -> None:
        self.exposed: list[tuple[str, tuple[str, ...]]] = []

    def now(self) -> float:
        return 0.0

    def observe(self) -> ClusterSnapshot:
        raise NotImplementedError

    def scale(self, workload: str, replicas: int) -> None:
        raise NotImplementedError

    def expose(self, workload: str, pools: tuple[str, ...]) -> None:
        self.exposed.append((workload, pools))


def test_actuator_adds_one_pool_at_a_time_with_a_reason_and_a_cooldown() -> None:
    act = ExposureActuator(parse_admin({"exposure": {"cooldownSeconds": 300}}))
    allowed = ["ap", "eu", "us"]
    [a] = act.propose("ns/w", ("eu",), ("ap", "eu", "us"), allowed, "because", 100.0, {})
    assert a.params == {"pools": ["ap", "eu"], "from": ["eu"]}
    assert "pool ap" in a.reason and a.reason.endswith("because")
    backend = Recorder()
    act.apply(a, backend)
    assert backend.exposed == [("ns/w", ("ap", "eu"))]
    mem = act.applied(a, 100.0, {})
    assert act.propose("ns/w", ("ap", "eu"), ("ap", "eu", "us"), allowed, "", 200.0, mem) == []
    assert "cooldown" in act.held["ns/w"] and "exposure.cooldownSeconds" in act.held["ns/w"]
    [b] = act.propose("ns/w", ("ap", "eu"), ("eu",), allowed, "", 400.0, mem)
    assert b.params["pools"] == ["eu"] and "stop exposing" in b.reason
    assert act.propose("ns/w", ("eu",), ("eu",), allowed, "", 400.0, mem) == []


def test_actuator_respects_the_cap_and_never_exposes_nothing() -> None:
    act = ExposureActuator(parse_admin({"exposure": {"maxPools": 1}}))
    assert act.clip_pools(["us", "eu"], ["eu", "us"]) == ("us",)
    assert act.propose("ns/w", ("eu",), ("eu", "us"), ["eu", "us"], "", 0.0, {}) == []
    [a] = act.propose("ns/w", ("eu", "us"), ("eu",), ["eu", "us"], "", 0.0, {})
    assert a.params["pools"] == ["eu"]
    assert act.clip_pools([], ["eu", "us"], keep=("us",)) == ("us",)
    assert act.propose("ns/w", ("eu",), ("us",), [], "", 0.0, {}) == []
    assert "regions" in act.held["ns/w"]
    with pytest.raises(PermanentError, match=r"params\.pools"):
        act.apply(a.__class__("exposure", "ns/w", {"pools": []}), Recorder())


def test_residency_keeps_exposure_in_the_intents_regions() -> None:
    assert allowed_pools(REGION, ["eu-west"]) == ["eu"]
    assert allowed_pools(REGION, None) == ["eu", "us"]
    act = ExposureActuator(AdminConfig())
    [a] = act.propose("ns/w", ("eu", "us"), ("eu", "us"), ["eu"], "", 0.0, {})
    assert a.params["pools"] == ["eu"]


def test_intent_regions_are_validated() -> None:
    doc: dict[str, Any] = {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
           "metadata": {"name": "a", "namespace": "ns"},
           "spec": {"targetRef": {"name": "w"}, "regions": ["eu-west", "eu-west"],
                    "objectives": [{"name": "l", "value": 60, "measuredBy": "p"}]}}
    with pytest.raises(SpecError, match="regions"):
        parse_intent(doc)
    doc["spec"]["regions"] = ["EU West"]
    with pytest.raises(SpecError, match="regions"):
        parse_intent(doc)
    doc["spec"]["regions"] = ["eu-west"]
    assert parse_intent(doc).spec.regions == ["eu-west"]
    crd = yaml.safe_load((ROOT / "crds/intents.intent-planner.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["regions"]["items"]["type"] == "string"


# --------------------------------------------------------------------------- planner
def _context(demand: dict[str, float], current: tuple[str, ...], regions: list[str] | None = None,
             **admin: Any) -> tuple[PlanningContext, Plan]:
    sc = parse_scenario(region_doc(), "t", ROOT)
    intent = sc.intents[0]
    if regions is not None:
        intent = intent.model_copy(update={"spec": intent.spec.model_copy(
            update={"regions": regions})})
    profiles = {p.metadata.name: p for p in sc.profiles}
    by_objective = {o.name: profiles[o.measured_by] for o in intent.spec.objectives}
    cfg = WorkloadConfig(10)
    wl = WorkloadState("shop", "storefront", cfg, exposure=current, client_demand=demand)
    nodes = (NodeState("eu-0", "eu", "eu-west", 16.0, cost_per_core_hour=0.04),
             NodeState("us-0", "us", "us-east", 16.0, cost_per_core_hour=0.045))
    snap = ClusterSnapshot(0.0, nodes, {wl.key: wl}, geography=GEO)
    adm = parse_admin({"actuators": ["replicas", "exposure"], **admin})
    acts = registry.create(adm.actuators, adm)
    ctx = PlanningContext(intent, by_objective, wl, snap, {}, adm, acts, None, 1000.0)
    return ctx, Plan(intent.key, "grid", cfg, cfg)


def test_planner_widens_when_far_demand_grows_and_narrows_when_it_shrinks() -> None:
    half: dict[str, Any] = {"exposure": {"tailShare": 0.5}}
    ctx, plan = _context({"eu-west": 100.0, "us-east": 2.0}, ("eu",), **half)
    assert exposure.with_exposure(plan, ctx) == plan        # 2 % far: inside half the tail
    ctx, plan = _context({"eu-west": 100.0, "us-east": 10.0}, ("eu",), **half)
    out = exposure.with_exposure(plan, ctx)
    [a] = out.actions
    assert a.actuator == "exposure" and a.params["pools"] == ["eu", "us"]
    assert "us-east" in out.reason and "network budget 30 ms" in out.reason
    # both exposed, far demand at 2 %: above a quarter of the tail, kept
    ctx, plan = _context({"eu-west": 100.0, "us-east": 2.0}, ("eu", "us"), **half)
    assert exposure.with_exposure(plan, ctx).actions == ()
    ctx, plan = _context({"eu-west": 100.0, "us-east": 0.5}, ("eu", "us"), **half)
    [b] = exposure.with_exposure(plan, ctx).actions
    assert b.params["pools"] == ["eu"] and "stop exposing" in b.reason


def test_by_default_no_demand_is_served_too_far() -> None:
    ctx, plan = _context({"eu-west": 100.0, "us-east": 0.5}, ("eu",))
    [a] = exposure.with_exposure(plan, ctx).actions
    assert a.params["pools"] == ["eu", "us"] and "tailShare 0" in a.reason
    ctx, plan = _context({"eu-west": 100.0, "us-east": 0.5}, ("eu", "us"))
    assert exposure.with_exposure(plan, ctx).actions == ()
    ctx, plan = _context({"eu-west": 100.0, "us-east": 0.0}, ("eu", "us"))
    [b] = exposure.with_exposure(plan, ctx).actions
    assert b.params["pools"] == ["eu"]
    # nothing near the far clients is allowed: the home pool stays, named as held by nothing
    ctx, plan = _context({"eu-west": 100.0, "us-east": 50.0}, ("eu",), regions=["eu-west"])
    assert exposure.with_exposure(plan, ctx).actions == ()


def test_planner_keeps_residency_and_the_cap() -> None:
    ctx, plan = _context({"eu-west": 100.0, "us-east": 60.0}, ("eu",), regions=["eu-west"])
    out = exposure.with_exposure(plan, ctx)
    assert out.actions == ()
    ctx, plan = _context({"eu-west": 10.0, "us-east": 60.0}, ("eu",),
                         exposure={"maxPools": 1})
    [a] = exposure.with_exposure(plan, ctx).actions   # one pool: the one most demand is near
    assert a.params["pools"] == ["us"] and "maxPools 1" in a.reason
    ctx, plan = _context({"eu-west": 100.0, "us-east": 60.0}, ("eu", "us"),
                         regions=["eu-west"])
    [b] = exposure.with_exposure(plan, ctx).actions
    assert b.params["pools"] == ["eu"] and "outside the intent's regions" in b.reason


def test_a_selector_matching_no_pool_is_exposed_where_the_demand_is() -> None:
    ctx, plan = _context({"eu-west": 10.0, "us-east": 60.0}, ())
    [a] = exposure.with_exposure(plan, ctx).actions   # towards both, one pool per change
    assert a.params == {"pools": ["eu"], "from": []}
    assert a.reason.startswith("expose shop/storefront in pool eu: no pool exposes it")
    assert "pools eu+us leaves 0.0%" in a.reason
    ctx, plan = _context({"eu-west": 0.0, "us-east": 60.0}, ())
    [b] = exposure.with_exposure(plan, ctx).actions
    assert b.params == {"pools": ["us"], "from": []}


def test_the_backends_note_is_in_the_plan_when_nothing_is_decided() -> None:
    ctx, plan = _context({}, ("eu",))
    assert exposure.with_exposure(plan, ctx) is plan
    wl = replace(ctx.workload, client_demand=None, exposure_note="Prometheus down")
    noted = exposure.with_exposure(plan, replace(ctx, workload=wl))
    assert noted.actions == () and noted.reason_parts[-1].kind == "note"
    assert noted.reason.endswith("exposure of shop/storefront not decided: Prometheus down")


def test_no_exposure_decision_without_the_actuator_or_geography() -> None:
    ctx, plan = _context({"eu-west": 100.0, "us-east": 60.0}, ("eu",))
    without = PlanningContext(ctx.intent, ctx.profiles, ctx.workload, ctx.snapshot, {},
                              ctx.admin, {}, None, 0.0)
    assert exposure.with_exposure(plan, without) is plan
    wl = WorkloadState("shop", "storefront", WorkloadConfig(10))
    plain = PlanningContext(ctx.intent, ctx.profiles, wl, ctx.snapshot, {}, ctx.admin,
                            ctx.actuators, None, 0.0)
    assert exposure.with_exposure(plan, plain) is plan


def test_controller_widens_exposure_and_narrows_it_back() -> None:
    """End to end on the simulator with the default planner: a second region's demand grows
    from nothing to a third of the requests and goes away; exposure goes from the home pool to
    both and back, each change applied with its reason."""
    doc = region_doc([{"at": "8m", "rate": 0.5}, {"at": "25m", "rate": 0.0}],
                     duration="40m")
    sc = parse_scenario(doc, "t", ROOT)
    seen: list[tuple[float, tuple[str, ...], str]] = []

    def hook(sim: Any, outcomes: list[Any]) -> None:
        for o in outcomes:
            for a in o.applied_actions:
                if a.actuator == "exposure":
                    seen.append((sim.elapsed, tuple(a.params["pools"]), a.reason))

    run = ScenarioRun(sc, "grid", 1, open_knowledge_base(None), start_time=START)
    run.run(None, on_cycle=hook)
    assert [s[1] for s in seen] == [("eu", "us"), ("eu",)]
    assert 8 * 60 <= seen[0][0] < 10 * 60 and "us-east" in seen[0][2]
    assert seen[1][0] >= 25 * 60 and "stop exposing" in seen[1][2]
    assert run.sim.workloads["shop/storefront"].exposure == ("eu",)


# --------------------------------------------------------------------------- Kubernetes
def test_pool_selector_selects_exactly_the_pools() -> None:
    from planner.k8s import openyurt

    assert openyurt.pool_selector(("us", "eu", "eu")) == "openyurt.io/pool-name in (eu,us)"
    with pytest.raises(ValueError, match="at least one pool"):
        openyurt.pool_selector(())


def test_more_pools_than_enumerated_keeps_the_ones_near_the_clients() -> None:
    """Beyond MAX_CANDIDATE_POOLS pools, those enumerated are the ones near the demand (and
    the current ones), not the first by name: the clients' own pool is never left out."""
    n = exposure.MAX_CANDIDATE_POOLS + 2
    names = [f"p{i:02d}" for i in range(n)]
    geo = Geography({f"r{i:02d}": {f"r{j:02d}": (4.0 if i == j else 150.0) for j in range(n)}
                     for i in range(n)}, lb_cost_per_hour=0.05)
    ctx, plan = _context({"r13": 100.0}, ("p00",))
    nodes = tuple(NodeState(f"{p}-0", p, f"r{p[1:]}", 16.0, cost_per_core_hour=0.04)
                  for p in names)
    wl = replace(ctx.workload, exposure=("p00",), client_demand={"r13": 100.0})
    ctx = replace(ctx, workload=wl, snapshot=ClusterSnapshot(0.0, nodes, {wl.key: wl},
                                                             geography=geo))
    decision = exposure.decide(ctx, plan)
    assert decision is not None and decision.wanted == ("p13",)
    # the current pool is evaluated too, and the cheaper set near the clients wins
    assert ("p00",) in {o.pools for o in decision.options}
