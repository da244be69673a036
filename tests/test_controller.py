from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowledge.base import KnowledgeBaseUnavailable
from knowledge.connect import open_knowledge_base
from planner.control.controller import RETENTION_EVERY_S, IntentController
from planner.domain.events import records
from planner.domain.ports import StaticIntentSource
from simulator.cluster import SimulatedCluster
from simulator.runner import ScenarioRun
from simulator.scenario import Scenario, load_scenario
from tests.support.runs import SharedRun, on_shared_run

SharedRunOf = Callable[[Path], SharedRun]

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples/scenarios/diurnal-shop.yaml"
MULTI = ROOT / "examples/scenarios/multi-tenant.yaml"


def test_one_event_per_intent_per_cycle() -> None:
    kb = open_knowledge_base(None)
    run = ScenarioRun(load_scenario(MULTI), knowledge=kb)
    run.run(duration=300)
    cycles = run.controller.cycles
    assert cycles == 20
    for intent in ("ml/inference", "search/api"):
        events = kb.events(intent)
        assert len(events) == cycles
        for ev in events:
            assert set(ev) >= {"time", "intent", "current", "desired", "pod_groups",
                               "resources", "node_pools", "plan", "config", "load"}
            assert ev["desired"] and ev["node_pools"]
            assert sum(g["count"] for g in records(ev["pod_groups"]) if g["ready"]) == \
                ev["resources"]["ready_replicas"]
        first = events[-1]  # newest first: the controller's first event carries every pod
        detail = kb.pod_details(intent)[-1]
        assert first["pod_detail"] and detail["time"] == first["time"]
        assert records(detail["nodes"])
        assert len(records(detail["pods"])) == sum(
            g["count"] for g in records(first["pod_groups"]))


def test_shadow_mode_plans_but_never_acts() -> None:
    kb = open_knowledge_base(None)
    run = ScenarioRun(load_scenario(MULTI), knowledge=kb)
    run.run(duration=600)
    api = run.sim.workloads["search/api"]
    assert api.config.replicas == 3                      # untouched
    plans = [e["plan"] for e in kb.events("search/api")]
    assert any(p and p["actions"] for p in plans)        # it would have acted
    assert not any(e["applied"] for e in kb.events("search/api"))
    status = run.controller.status("search/api")
    assert status is not None
    cond = {c["type"]: c for c in status["conditions"]}
    assert cond["Actuating"]["status"] == "False" and cond["Actuating"]["reason"] == "Shadow"


@on_shared_run(SHOP)
@pytest.mark.slow
def test_keeps_slo_on_embedded_default(shared_run: SharedRunOf) -> None:
    """The whole scenario, with its own seed (the run ``shared_run`` shares with other tests)."""
    shop = load_scenario(SHOP).spec
    run = shared_run(SHOP).until(shop.duration)
    assert run.seed == shop.seed and run.admin == shop.admin
    report = run.report(0.0).as_dict()
    assert report["duration_s"] == 2 * 3600 and report["cycles"] == 480
    checkout = report["intents"]["shop/checkout"]
    assert checkout["objectives"]["p95latency"]["attainment"] >= 0.95
    assert checkout["actions"] > 0


@on_shared_run(SHOP)
def test_status_conditions_transition_only_on_flips(shared_run: SharedRunOf) -> None:
    """The conditions after each cycle of the first 20 minutes of the embedded default."""
    shop = shared_run(SHOP)
    shop.until(1200)
    seen = [conditions for t, conditions in shop.conditions["shop/checkout"] if t < 1200]
    assert len(seen) == 80
    for before, after in itertools.pairwise(seen):
        for t, c in after.items():
            if t in before and before[t]["status"] == c["status"]:
                assert before[t]["lastTransitionTime"] == c["lastTransitionTime"]
    last = seen[-1]
    assert last["Invalid"]["status"] == "False"
    assert last["Planned"]["status"] == "True"
    assert last["ObjectivesMet"]["observedGeneration"] == 1


class BlindKPIs:
    """A KPI source that is down."""

    def measure(self, intent: Any, profile: Any) -> float | None:
        return None

    def last_error(self, intent: Any, profile: Any) -> str:
        return "prometheus: connection refused"


def controller_for(sc: Scenario, kpis: Any = None, kb: Any = None) -> tuple[IntentController,
                                                                            SimulatedCluster]:
    sim = SimulatedCluster(sc, start_time=0.0)
    for _ in range(12):
        sim.step(5)
    src = StaticIntentSource(sc.intents, sc.profiles)
    ctl = IntentController(sim, kpis or sim, src, kb or open_knowledge_base(None), sc.spec.admin)
    return ctl, sim


def test_missing_kpis_mean_unknown_and_no_action() -> None:
    sc = load_scenario(SHOP)
    ctl, sim = controller_for(sc, kpis=BlindKPIs())
    sim.scale("shop/checkout", 2)  # under-provisioned: a planner with data would act
    [out] = ctl.cycle()
    assert out.applied == [] and out.plan is not None and out.plan.actions == ()
    cond = {c["type"]: c for c in out.status["conditions"]}
    assert cond["ObjectivesMet"]["status"] == "Unknown"
    assert "connection refused" in cond["ObjectivesMet"]["message"]


class DownKB:
    def __getattr__(self, name: str) -> Any:
        def fail(*a: Any, **k: Any) -> Any:
            raise KnowledgeBaseUnavailable("mongodb down")
        return fail


def test_knowledge_base_down_degrades() -> None:
    sc = load_scenario(SHOP)
    ctl, sim = controller_for(sc, kb=DownKB())
    sim.scale("shop/checkout", 1)
    [out] = ctl.cycle()
    assert out.plan is not None and out.applied  # still acts
    assert sim.workloads["shop/checkout"].config.replicas > 1


def test_missing_workload_is_invalid_and_others_continue() -> None:
    sc = load_scenario(MULTI)
    ghost = sc.intents[0].model_copy(update={"spec": sc.intents[0].spec.model_copy(update={
        "target_ref": sc.intents[0].spec.target_ref.model_copy(update={"name": "ghost"})}),
        "metadata": sc.intents[0].metadata.model_copy(update={"name": "ghost"})})
    sc.intents.append(ghost)
    ctl, _ = controller_for(sc)
    outs = {o.intent.key: o for o in ctl.cycle()}
    assert outs["ml/ghost"].invalid is not None and "not found" in outs["ml/ghost"].invalid
    cond = {c["type"]: c for c in outs["ml/ghost"].status["conditions"]}
    assert cond["Invalid"]["status"] == "True"
    assert outs["ml/inference"].plan is not None


@pytest.mark.parametrize("planner", ["queueing", "hpa"])
def test_planners_run_through_the_same_controller(planner: str) -> None:
    run = ScenarioRun(load_scenario(SHOP), planner=planner)
    report = run.run(duration=600).as_dict()
    assert report["planner"] == planner and report["cycles"] == 40
    # The controller isolates planner failures: check the planner really planned, and acted.
    assert run.last and all(o.plan is not None and not o.errors for o in run.last)
    assert report["totals"]["actions"] > 0


class BrokenPlanner:
    name = "broken"
    uses_models = False

    def plan(self, ctx: Any) -> Any:
        raise ZeroDivisionError("a plugin bug")


def test_a_crashing_planner_fails_only_its_intent() -> None:
    sc = load_scenario(MULTI)
    ctl, _ = controller_for(sc)
    real = ctl.planner_for(sc.intents[0])
    ctl.planner_for = lambda intent: (  # type: ignore[method-assign]
        BrokenPlanner() if intent.key == "ml/inference" else real)
    outs = {o.intent.key: o for o in ctl.cycle()}
    assert outs["ml/inference"].plan is None
    cond = {c["type"]: c for c in outs["ml/inference"].status["conditions"]}
    assert cond["Planned"]["status"] == "False" and "a plugin bug" in cond["Planned"]["message"]
    assert cond["Planned"]["reason"] == "PlannerError"
    # A planner's failure is not an actuator's: nothing was actuated, nothing failed to.
    assert cond["ActuationFailed"]["status"] == "False" and not outs["ml/inference"].errors
    assert outs["search/api"].plan is not None


@on_shared_run(SHOP)
def test_memory_is_kept_in_the_knowledge_base_and_the_status_shows_last_changes(
        shared_run: SharedRunOf) -> None:
    """The knowledge base and the controller after 15 minutes of the embedded default."""
    at = shared_run(SHOP).snapshot_at(900, "shop/checkout")
    stored = at["stored_memory"]
    assert stored is not None and stored["planner"] == "grid"
    assert stored["planning"]["forecast"]["points"]          # the load history survives
    assert stored == at["live_memory"]
    status = at["status"]
    assert status is not None and "replicas" in status["lastChangeTimes"]
    assert status["lastChangeTimes"]["replicas"].endswith("Z")


@pytest.mark.slow
def test_retention_runs_from_the_controller() -> None:
    """The controller applies the retention (10 minutes here) at its first cycle and then every
    ``RETENTION_EVERY_S``. 80 simulated minutes are enough to see it: the retention an hour in
    deletes what is older than 50 minutes, while the events of 80 minutes kept whole would span
    more than the bound checked (it was a two-hour run: the same check, a longer way there)."""
    kb = open_knowledge_base(None, retention_s=600.0)
    run = ScenarioRun(load_scenario(SHOP), "queueing", knowledge=kb)
    duration = RETENTION_EVERY_S + 1200
    run.run(duration=duration)
    times = [e["time"] for e in kb.events("shop/checkout")]
    bound = 3600 + 600
    assert duration - run.cycle_s > bound      # without the retention, the check would fail
    assert times and max(times) - min(times) < bound  # old events were deleted


def test_an_actuator_failing_to_observe_is_an_actuation_failure_not_a_planner_one() -> None:
    from actuators.replicas import ReplicasActuator

    class Broken(ReplicasActuator):
        name = "broken"
        knobs = ()

        def observe(self, workload: str, now: float, memory: Any) -> Any:
            raise RuntimeError("observe bug")

    sc = load_scenario(SHOP)
    ctl, _ = controller_for(sc)
    ctl.actuators["broken"] = Broken(sc.spec.admin)
    [out] = ctl.cycle()
    cond = {c["type"]: c for c in out.status["conditions"]}
    assert out.plan is not None and cond["Planned"]["status"] == "True"
    assert cond["ActuationFailed"]["status"] == "True"
    assert "broken: observe failed" in cond["ActuationFailed"]["message"]


class CountingKB:
    """The embedded store, counting status writes; ``down`` makes them fail."""

    def __init__(self) -> None:
        self.inner = open_knowledge_base(None)
        self.status_writes = 0
        self.down = False

    def put_status(self, intent: str, time: float, status: dict[str, Any]) -> None:
        if self.down:
            raise KnowledgeBaseUnavailable("mongodb down")
        self.status_writes += 1
        self.inner.put_status(intent, time, status)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_status_is_stored_when_it_changed_and_after_an_outage() -> None:
    sc = load_scenario(MULTI)
    ghost = sc.intents[0].model_copy(update={
        "metadata": sc.intents[0].metadata.model_copy(update={"name": "ghost"}),
        "spec": sc.intents[0].spec.model_copy(update={
            "target_ref": sc.intents[0].spec.target_ref.model_copy(update={"name": "ghost"})})})
    sc.intents.append(ghost)
    kb = CountingKB()
    ctl, sim = controller_for(sc, kb=kb)
    ctl.cycle()
    first, t0 = kb.status_writes, sim.now()
    assert first == len(sc.intents)
    for _ in range(3):
        sim.step(15)
        ctl.cycle()
        for key, doc in kb.inner.statuses().items():  # what is stored is what was reported
            assert doc["status"] == ctl.status(key)
    # the invalid intent's status never changes: stored once; the others' measured values do
    assert kb.status_writes <= first + 3 * (len(sc.intents) - 1)
    assert kb.inner.statuses()["ml/ghost"]["time"] == t0  # when it last changed
    kb.down = True
    ctl.cycle()                      # not stored: remembered as not stored
    kb.down = False
    before = kb.status_writes
    ctl.cycle()
    assert kb.status_writes - before >= len(sc.intents) - 1
    for key, doc in kb.inner.statuses().items():
        assert doc["status"] == ctl.status(key)
