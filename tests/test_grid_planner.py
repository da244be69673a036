"""The default planner: cheapest feasible configuration, tolerance, safety, fallbacks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actuators import registry
from knowledge.connect import open_knowledge_base
from planner.control import contention
from planner.domain.admin import AdminConfig, CpuBounds, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.plan import Plan
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import safety
from planner.planners.base import PlanningContext
from planner.planners.feedback import EXPLORE_GAIN
from planner.planners.grid import SCALE_IN_MARGIN, GridPlanner
from simulator.characterize import characterize
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario
from tests.support.memory import Remembering
from tests.support.runs import SharedRun, on_shared_run

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples/scenarios/diurnal-shop.yaml"


class TrueLatency(Predictor):
    """An M/M/1-per-core oracle: mu = 100 req/s per core."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        mu = 100.0 * batch.cpu
        lam = rate / batch.replicas
        with np.errstate(divide="ignore"):
            p = np.where(lam < 0.98 * mu, 3 + 1000 * np.log(20) / (mu - lam), np.inf)
        return Prediction(p, p * 1.05, np.ones(len(batch), dtype=bool))


def context(replicas: int = 4, cpu: float = 1.0, latency: float | None = 40.0,
            rate: float = 300.0, tolerance: float = 0.0, actuators: tuple[str, ...] =
            ("replicas", "cpu"), cpu_sizes: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0),
            max_replicas: int = 40) -> PlanningContext:
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 60, "measuredBy": "lat",
                                "tolerance": tolerance}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    cfg = WorkloadConfig(replicas, cpu)
    pods = tuple(PodState(f"p{i}", "n0", cpu) for i in range(replicas))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=rate, cpu_utilization=0.5)
    nodes = (NodeState("n0", "general", "eu", 64.0, cost_per_core_hour=0.04),)
    admin = AdminConfig(actuators=actuators, replicas=ReplicaBounds(min=1, max=max_replicas,
                                                                    max_step=50),
                        cpu=CpuBounds(sizes=cpu_sizes, cooldown_s=0), headroom=0.0)
    acts = registry.create(actuators, admin)
    snap = ClusterSnapshot(1000.0, nodes, {"ns/w": wl})
    return PlanningContext(intent, {"p95": prof}, wl, snap, {"p95": latency}, admin, acts, None,
                           1000.0)


def planner_with(pred: Predictor, **kw: Any) -> Remembering:
    """The planner with a fixed predictor, planning in sequence as the controller does (each
    plan's memory is the next call's)."""
    p = GridPlanner(**kw)
    p.predictors = lambda ctx, mem: {"p95": pred}  # type: ignore[method-assign]
    return Remembering(p)


def brute_force(ctx: PlanningContext, pred: Predictor) -> float:
    best = np.inf
    for cpu in ctx.admin.cpu.sizes:
        for r in range(1, ctx.admin.replicas.max + 1):
            b = CandidateBatch.of([WorkloadConfig(r, cpu)])
            if pred.predict(b, 300.0).bound[0] <= 60:
                best = min(best, r * cpu * 0.04)
                break
    return float(best)


def test_cheapest_feasible_configuration_matches_brute_force() -> None:
    ctx = context(replicas=10, cpu=1.0, latency=20.0)
    plan = planner_with(TrueLatency()).plan(ctx)
    assert plan.cost_per_hour == pytest.approx(brute_force(ctx, TrueLatency()))
    assert plan.predicted["p95"] <= 60
    assert plan.actions and all(a.reason for a in plan.actions)


def test_tpe_study_for_large_spaces_finds_a_feasible_cheap_plan() -> None:
    ctx = context(replicas=10, latency=20.0)
    plan = planner_with(TrueLatency(), grid_limit=10, n_trials=300, timeout_s=5.0).plan(ctx)
    assert "optuna TPE" in plan.reason
    assert plan.predicted["p95"] <= 60
    assert plan.cost_per_hour is not None
    assert plan.cost_per_hour <= brute_force(ctx, TrueLatency()) * 1.5


def test_tolerance_keeps_a_configuration_within_it() -> None:
    # 3 x 1 cpu at 170 req/s: bound ~ 76 ms, over the 60 ms target but within 50 % tolerance.
    rate = 170.0
    tight = planner_with(TrueLatency()).plan(context(replicas=3, rate=rate, tolerance=0.0))
    loose = planner_with(TrueLatency()).plan(context(replicas=3, rate=rate, tolerance=0.5))
    bound3 = TrueLatency().predict(CandidateBatch.of([WorkloadConfig(3, 1.0)]), rate).bound[0]
    assert 60 < bound3 <= 90
    assert tight.target != WorkloadConfig(3, 1.0)
    assert loose.target == WorkloadConfig(3, 1.0) and not loose.actions


def test_unknown_objective_means_no_action() -> None:
    plan = planner_with(TrueLatency()).plan(context(latency=None))
    assert plan.actions == () and "unknown" in plan.reason


def test_no_scale_in_while_pods_are_replaced() -> None:
    # 12 x 1 cpu -> cheapest is fewer, bigger pods; the resize must not come with a scale-in.
    ctx = context(replicas=12, cpu=1.0, rate=900.0, latency=30.0, cpu_sizes=(1.0, 4.0))
    plan = planner_with(TrueLatency()).plan(ctx)
    assert plan.target.cpu == 4.0 and plan.target.replicas < 12
    by = {a.actuator: a for a in plan.actions}
    assert "cpu" in by
    assert "replicas" not in by or by["replicas"].params["replicas"] >= 12


def _with_pods(ctx: PlanningContext, pods: tuple[PodState, ...]) -> PlanningContext:
    """``ctx`` with the workload's pods replaced (in the snapshot too)."""
    wl = replace(ctx.workload, pods=pods)
    return replace(ctx, workload=wl, snapshot=replace(ctx.snapshot, workloads={"ns/w": wl}))


def test_a_pod_that_cannot_be_scheduled_does_not_hold_a_scale_in_back() -> None:
    """20 x 1 cpu, one of them unschedulable (no node has room), at a load 8 pods carry: the
    planner scales in. Only a shape change's old pods hold a scale-in back (they leave as the
    new ones become ready); a Deployment removes not-ready pods first, so a pending pod of
    the current shape is no reason to wait, and waiting for it would wait for ever."""
    ctx = context(replicas=20, rate=446.0 * 0.7, cpu_sizes=(1.0,))
    pods = (*ctx.workload.pods[:19], PodState("p19", None, 1.0, ready=False))
    ctx = _with_pods(ctx, pods)
    plan = planner_with(TrueLatency()).plan(ctx)
    assert plan.target.replicas == _fewest_holding(446.0 * 0.7 * (1 + SCALE_IN_MARGIN))
    assert "waits for the rollout" not in plan.reason
    by = {a.actuator: a for a in plan.actions}
    assert by["replicas"].params["replicas"] == plan.target.replicas


def test_pods_of_a_scale_out_still_starting_hold_a_scale_in_back() -> None:
    """The same workload with its 20th pod scheduled and starting: the scale-out in flight
    is let finish before a scale-in."""
    ctx = context(replicas=20, rate=446.0 * 0.7, cpu_sizes=(1.0,))
    pods = (*ctx.workload.pods[:19], PodState("p19", "n0", 1.0, ready=False))
    ctx = _with_pods(ctx, pods)
    plan = planner_with(TrueLatency()).plan(ctx)
    assert "scale-in waits for the rollout" in plan.reason
    assert all(a.params.get("replicas", 20) >= 20 for a in plan.actions)


def _rolling(new_ready: int, new_starting: int, new_pending: int) -> PlanningContext:
    """20 x 1 cpu configured at a load 8 pods carry, while 15 ready 2-cpu pods of the shape
    before are still there."""
    ctx = context(replicas=20, rate=446.0 * 0.7, cpu_sizes=(1.0,))
    pods = (*(PodState(f"o{i}", "n0", 2.0) for i in range(15)),
            *(PodState(f"r{i}", "n0", 1.0) for i in range(new_ready)),
            *(PodState(f"s{i}", "n0", 1.0, ready=False) for i in range(new_starting)),
            *(PodState(f"p{i}", None, 1.0, ready=False) for i in range(new_pending)))
    return _with_pods(ctx, pods)


def test_a_shape_change_holds_its_old_pods_while_new_ones_start() -> None:
    """New pods starting: no scale-in yet, the old pods leave as new ones become ready."""
    plan = planner_with(TrueLatency()).plan(_rolling(5, 5, 5))
    assert "scale-in waits for the rollout" in plan.reason
    assert all(a.params.get("replicas", 20) >= 20 for a in plan.actions)


def test_a_rollout_whose_new_pods_cannot_be_scheduled_does_not_hold_a_scale_in_back() -> None:
    """No new pod starting (the old pods hold the room the new ones need): waiting is no
    progress, so the scale-in the load allows goes ahead (the Deployment then removes the
    pending pods and the old ones beyond the new count)."""
    plan = planner_with(TrueLatency()).plan(_rolling(5, 0, 15))
    assert "waits for the rollout" not in plan.reason
    assert plan.target.replicas == _fewest_holding(446.0 * 0.7 * (1 + SCALE_IN_MARGIN))


@on_shared_run(SHOP)
def test_learns_and_stores_models_with_metadata(
        shared_run: Callable[[Path], SharedRun]) -> None:
    """The knowledge base after 30 minutes of diurnal-shop, whose planner is grid (the run
    ``shared_run`` shares with other tests)."""
    shop = shared_run(SHOP)
    assert shop.run.admin.planner == "grid"
    at = shop.snapshot_at(1800, "shop/checkout")
    docs = at["effects"]
    assert docs and all("blob" not in d for d in docs)
    meta = docs[0]["metadata"]
    assert {"training_window", "features", "samples", "validation", "versions"} <= set(meta)
    assert meta["samples"] >= 8 and "scikit-learn" in meta["versions"]
    reasons = [e["plan"]["reason"] for e in at["last_events"]]
    assert any("learned" in r for r in reasons)


def test_corrupt_model_in_effects_falls_back_without_crashing() -> None:
    kb = open_knowledge_base(None)
    start = 1_767_225_600.0
    kb.put_effect({"intent": "shop/checkout", "objective": "p95latency", "timestamp": start,
                   "static": True, "kind": "queueing-latency",
                   "format": "intent-planner/estimator-json", "blob": b"\x80\x04garbage",
                   "metadata": {"features": ["rate", "replicas", "cpu", "gpu", "pool"]}})
    run = ScenarioRun(load_scenario(SHOP), "grid", knowledge=kb, start_time=start)
    report = run.run(duration=600).as_dict()
    assert report["cycles"] == 40
    planner = run.controller.planner_for(run.scenario.intents[0])
    assert isinstance(planner, GridPlanner) and planner.source is not None
    assert planner.source.cache.refusals >= 1


@pytest.mark.slow
def test_characterize_seeds_effects() -> None:
    kb = open_knowledge_base(None)
    res = characterize(load_scenario(SHOP), "shop/checkout", 25, kb, seed=3)
    assert res.recorded == 25
    kinds = {m["kind"] for m in res.models}
    assert "queueing-latency" in kinds
    assert kb.count_events("shop/checkout") == 25
    assert all(e["exploratory"] for e in kb.events("shop/checkout"))


@pytest.mark.slow
def test_characterize_cli_json() -> None:
    res = subprocess.run([sys.executable, "-m", "planner.cli", "characterize", "-s", str(SHOP),
                          "-w", "checkout", "-n", "12", "--json"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["workload"] == "shop/checkout" and data["trials"] == 12
    bad = subprocess.run([sys.executable, "-m", "planner.cli", "characterize", "-s", str(SHOP),
                          "-w", "nope"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "--workload" in bad.stderr


def test_cost_objective_is_a_constraint() -> None:
    from planner.planners.predictors import ComputedCost

    ctx = context(replicas=10, latency=20.0)
    cost_profile = parse_profile({"kind": "KPIProfile", "metadata": {"name": "cost",
                                  "namespace": "ns"}, "spec": {"type": "cost"}})
    intent = ctx.intent.model_copy(update={"spec": ctx.intent.spec.model_copy(update={
        "objectives": [*ctx.intent.spec.objectives,
                       ctx.intent.spec.objectives[0].model_copy(update={
                           "name": "cost", "value": 0.05, "measured_by": "cost"})]})})
    from dataclasses import replace

    ctx = replace(ctx, intent=intent, profiles={**ctx.profiles, "cost": cost_profile},
                  current={"p95": 20.0, "cost": 0.4})
    p = GridPlanner()
    p.predictors = lambda c, mem: {"p95": TrueLatency(),  # type: ignore[method-assign]
                              "cost": ComputedCost(c.snapshot)}
    plan = p.plan(ctx)
    # 300 req/s needs more than 0.05/h of cores: nothing is feasible, the reason says so.
    assert "no configuration is predicted feasible" in plan.reason
    ctx2 = replace(ctx, intent=intent.model_copy(update={"spec": intent.spec.model_copy(update={
        "objectives": [intent.spec.objectives[0], intent.spec.objectives[1].model_copy(
            update={"value": 1.0})]})}))
    plan2 = p.plan(ctx2)
    assert plan2.cost_per_hour is not None and plan2.cost_per_hour <= 1.0


def test_vectorised_prices_match_the_per_configuration_cost() -> None:
    from planner.domain.cost import cost_per_hour
    from planner.planners.search_space import prices

    nodes = (NodeState("a", "p1", "eu", 8, cost_per_core_hour=0.04),
             NodeState("b", "p2", "us", 8, gpus=2, cost_per_core_hour=0.05,
                       cost_per_gpu_hour=2.0))
    snap = ClusterSnapshot(0.0, nodes, {})
    configs = [WorkloadConfig(r, c, d, p) for r in (1, 3) for c in (0.5, 2.0)
               for d in ("cpu", "gpu") for p in (None, "p1", "p2")]
    got = prices(snap, CandidateBatch.of(configs))
    assert got.tolist() == pytest.approx([cost_per_hour(c, snap) for c in configs])


class SeenOneCpuSize(TrueLatency):
    """The same truth, but a model that has only observed 1-cpu pods."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = super().predict(batch, rate)
        return Prediction(p.mean, p.bound, batch.cpu == 1.0)


def at(ctx: PlanningContext, now: float, latency: float, replicas: int | None = None,
       cpu: float | None = None, rate: float = 300.0) -> PlanningContext:
    import dataclasses

    fresh = context(replicas=replicas or ctx.config.replicas, cpu=cpu or ctx.config.cpu,
                    latency=latency, rate=rate)
    return dataclasses.replace(fresh, now=now)


def test_explores_an_unobserved_cheaper_shape_only_when_calm() -> None:
    planner = planner_with(SeenOneCpuSize())
    first = planner.plan(at(context(replicas=7), 1000.0, 40.0))
    assert not first.exploratory          # just met: not watched long enough to be calm
    calm = planner.plan(at(context(replicas=7), 1700.0, 40.0))
    assert calm.exploratory and "exploratory" in calm.reason
    assert calm.target.cpu != 1.0 and calm.cost_per_hour is not None
    assert calm.cost_per_hour < 7 * 0.04 * (1 - EXPLORE_GAIN)
    # Right after a violation: no experiments, the known shape only.
    wary = planner_with(SeenOneCpuSize())
    wary.plan(at(context(replicas=7), 1000.0, 40.0))
    wary.plan(at(context(replicas=7), 1700.0, 80.0))
    later = wary.plan(at(context(replicas=7), 2000.0, 40.0))
    assert not later.exploratory and later.target.cpu == 1.0


def test_trial_shape_is_held_then_abandoned_on_violation() -> None:
    planner = planner_with(SeenOneCpuSize())
    planner.plan(at(context(replicas=7), 0.0, 40.0))
    first = planner.plan(at(context(replicas=7), 1000.0, 40.0))
    shape = first.target
    assert first.exploratory
    # The trial shape runs and holds: it is kept although the model has not learned it yet,
    # and scaled in that shape when the load grows.
    held = planner.plan(at(context(), 1060.0, 45.0, shape.replicas, shape.cpu))
    assert held.target == shape
    grown = planner.plan(at(context(), 1075.0, 45.0, shape.replicas, shape.cpu, rate=900.0))
    assert grown.target.cpu == shape.cpu and grown.target.replicas > shape.replicas
    # It violates: back to the known shape, and not tried again within the retry period.
    back = planner.plan(at(context(), 1120.0, 95.0, shape.replicas, shape.cpu))
    assert back.target.cpu == 1.0 and not back.exploratory
    again = planner.plan(at(context(replicas=7), 1000.0 + 1800.0, 40.0))
    assert not (again.exploratory and again.target.cpu == shape.cpu)


class Optimistic(TrueLatency):
    """A model that predicts half the true latency."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = super().predict(batch, rate)
        return Prediction(p.mean / 2, p.bound / 2, p.supported)


def test_observed_violation_corrects_an_optimistic_model() -> None:
    # 5 x 1 cpu at 300 req/s: the optimistic model says ~34 ms, the workload shows 90 ms.
    one_size = (1.0,)
    ok = planner_with(Optimistic()).plan(context(replicas=5, latency=40.0, cpu_sizes=one_size))
    assert ok.target.replicas <= 5 and "observed violated" not in ok.reason
    plan = planner_with(Optimistic()).plan(context(replicas=5, latency=90.0,
                                                   cpu_sizes=one_size))
    assert "observed violated" in plan.reason
    assert plan.target.replicas > 5


def test_no_correction_while_new_pods_start() -> None:
    import dataclasses

    ctx = context(replicas=5, latency=90.0, cpu_sizes=(1.0,))
    young = tuple(dataclasses.replace(p, started_at=ctx.now - 30.0) for p in ctx.workload.pods)
    ctx = dataclasses.replace(ctx, workload=dataclasses.replace(ctx.workload, pods=young))
    plan = planner_with(Optimistic()).plan(ctx)
    assert "observed violated" not in plan.reason


class SeenSmall(TrueLatency):
    """A model that has seen 1-cpu pods, at most 3 of them."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = super().predict(batch, rate)
        return Prediction(p.mean, p.bound, (batch.cpu == 1.0) & (batch.replicas <= 3))


def test_unknown_only_feasible_with_current_within_tolerance_keeps_current() -> None:
    # Nothing known is feasible at 0 % tolerance; the current one is within 50 %: kept, and
    # the planner's exploration state is untouched (this path once raised KeyError).
    planner = planner_with(SeenSmall())
    plan = planner.plan(context(replicas=3, rate=170.0, tolerance=0.5, latency=40.0))
    assert plan.target == WorkloadConfig(3, 1.0) and not plan.exploratory
    assert plan.memory["explorer"]["trial"] is None


def test_violation_left_over_from_a_passed_peak_is_not_model_error() -> None:
    # An accurate model: 5 x 1 cpu is 78 ms at 300 req/s, 53 ms at 200 req/s; the KPI window
    # still shows 70 ms from the peak.
    planner = planner_with(TrueLatency())
    planner.plan(at(context(replicas=5), 970.0, 70.0, rate=300.0))
    after = planner.plan(at(context(replicas=5), 985.0, 70.0, rate=200.0))
    assert "observed violated" not in after.reason
    fresh = planner_with(TrueLatency()).plan(at(context(replicas=5), 985.0, 70.0, rate=200.0))
    assert "observed violated" in fresh.reason      # without the peak it would read as error


def test_forecast_peak_is_the_highest_recent_rate() -> None:
    from planner.models.forecast import LoadForecast

    f = LoadForecast()
    for t, r in ((0.0, 100.0), (30.0, 300.0), (60.0, 150.0), (90.0, 120.0)):
        f.observe("k", t, r)
    assert f.peak("k", 90.0, 60.0) == 300.0
    assert f.peak("k", 90.0, 45.0) == 150.0
    assert f.peak("other", 90.0, 60.0) is None


class NothingFeasible(Predictor):
    """A model that predicts every configuration just above the target (as the availability
    model that sent the planner to its maximum did)."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = np.full(len(batch), 61.0) - batch.replicas * 1e-3   # more replicas: "less bad"
        return Prediction(p, p, np.ones(len(batch), dtype=bool))


def test_nothing_feasible_sizes_by_the_explicit_estimate_not_the_maximum() -> None:
    ctx = context(replicas=4, cpu=1.0, latency=40.0, rate=300.0)
    plan = planner_with(NothingFeasible()).plan(ctx)
    # Before: the "least violating" point, 40 replicas of the largest size.
    assert plan.target.replicas < ctx.admin.replicas.max
    assert plan.target.cpu == ctx.config.cpu
    assert "no configuration is predicted feasible" in plan.reason


def test_nothing_feasible_with_an_estimate_carries_the_load() -> None:
    from planner.models.queue_estimate import QueueEstimate
    from planner.planners import fallback

    ctx = context(replicas=4, cpu=1.0, latency=40.0, rate=300.0)
    cfg, why = fallback.explicit_sizing(ctx, QueueEstimate(100.0, 3.0), 300.0)
    # 300 req/s at 100 req/s per core: the fewest pods whose p95 by the estimate is <= 60 ms.
    assert 4 <= cfg.replicas <= 10 and cfg.cpu == 1.0
    assert "explicit queueing estimate" in why
    # A target below the base latency: no count meets it, the load is carried at the cap.
    low = context(replicas=4, cpu=1.0, latency=40.0, rate=300.0)
    cfg2, why2 = fallback.explicit_sizing(low, QueueEstimate(100.0, 500.0), 300.0)
    assert cfg2.replicas == 4 and "no count meets" in why2


class Jagged(Predictor):
    """Latency that is not monotone in replicas (a row's value depends on that row alone),
    counting its calls."""

    kind = "learned"

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls += 1
        p = 3000.0 / (batch.replicas * batch.cpu) + 25.0 * np.sin(batch.replicas * 0.37
                                                                    + batch.cpu)
        return Prediction(p, p, np.ones(len(batch), dtype=bool))


def plain_binary_search(planner: GridPlanner, ctx: PlanningContext, space: Any, rate: float,
                        inp: Any) -> tuple[Any, str]:
    """The search as it was before it read several steps per model call (the reference)."""
    cpu, gpu, pools = space.shapes
    reps = np.asarray(space.replicas, dtype=float)
    n = len(pools)

    def at(idx: Any) -> Any:
        return planner.score(ctx, CandidateBatch(reps[idx], cpu, gpu, pools), rate, inp,
                             monotone_only=True)

    lo = np.zeros(n, dtype=np.int64)
    hi = np.full(n, len(reps) - 1, dtype=np.int64)
    possible = at(hi).feasible
    evaluated = n
    while np.any((lo < hi) & possible):
        mid = (lo + hi) // 2
        s = at(mid)
        evaluated += n
        hi = np.where(possible & s.feasible, mid, hi)
        lo = np.where(possible & ~s.feasible, mid + 1, lo)
    final_idx = np.where(possible, lo, len(reps) - 1)
    final = planner.score(ctx, CandidateBatch(reps[final_idx], cpu, gpu, pools), rate, inp)
    return final, f"{evaluated} of {space.size} points searched"


@pytest.mark.parametrize("sizes", [(0.5, 1.0, 2.0, 4.0), (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0,
                                                           6.0, 8.0, 12.0, 16.0, 24.0)])
def test_binary_search_takes_the_same_steps_in_fewer_model_calls(sizes: tuple[float, ...]
                                                                  ) -> None:
    from planner.planners.grid import Inputs
    from planner.planners.search_space import space_for

    ctx = context(replicas=10, cpu=1.0, cpu_sizes=sizes, max_replicas=1500)
    planner = GridPlanner()
    space = space_for(ctx)
    assert space.size > 4000
    for rate in (300.0, 2000.0, 9000.0):
        mine, ref = Jagged(), Jagged()
        got, how = planner._grid(ctx, space, rate, Inputs({"p95": mine}, 0.0))
        want, want_how = plain_binary_search(planner, ctx, space, rate,
                                             Inputs({"p95": ref}, 0.0))
        assert how == want_how
        assert np.array_equal(got.batch.replicas, want.batch.replicas)
        assert np.array_equal(got.batch.cpu, want.batch.cpu)
        assert np.array_equal(got.feasible, want.feasible)
        assert np.array_equal(got.score, want.score)
        if len(sizes) == 4:
            assert mine.calls < ref.calls / 2


def _fewest_holding(rate: float) -> int:
    """Fewest 1-CPU replicas whose bound meets the 60 ms target at ``rate``."""
    return next(r for r in range(1, 200) if TrueLatency().predict(
        CandidateBatch.of([WorkloadConfig(r, 1.0)]), rate).bound[0] <= 60)


def test_scale_in_goes_to_the_fewest_replicas_that_hold_at_the_load_margin() -> None:
    """At 446 req/s 10 pods just meet the target but 10 do not hold at 5 % more load; the
    planner scales in from 40 to the fewest that do (11), not staying at 40 because the very
    cheapest is marginal (with tens of pods one pod is less than the margin, so the cheapest
    is nearly always marginal)."""
    rate = 446.0
    fewest, holding = _fewest_holding(rate), _fewest_holding(rate * (1 + SCALE_IN_MARGIN))
    assert fewest < holding < 40
    plan = planner_with(TrueLatency()).plan(context(replicas=40, rate=rate, cpu_sizes=(1.0,)))
    assert plan.target == WorkloadConfig(holding, 1.0)
    assert "cheapest configuration predicted to meet every objective" in plan.reason


def test_scale_in_keeps_the_current_shape_when_it_already_holds_at_the_margin() -> None:
    """Hysteresis stays: a current configuration within 5 % of the one that holds is kept."""
    rate = 446.0
    holding = _fewest_holding(rate * 1.05)
    plan = planner_with(TrueLatency()).plan(context(replicas=holding, rate=rate,
                                                    cpu_sizes=(1.0,)))
    assert plan.target.replicas == holding and not plan.actions


class Counting(TrueLatency):
    """:class:`TrueLatency` that counts its calls and the rows asked."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        self.calls.append(len(batch))
        return super().predict(batch, rate)


@pytest.mark.parametrize(("replicas", "tolerance"), [(10, 0.0), (3, 0.5), (40, 0.0)])
def test_the_current_configuration_is_judged_from_its_row_of_the_grid(
        replicas: int, tolerance: float) -> None:
    """Judged from the grid's row it is what scoring it on its own gives (its objectives'
    tolerance included), without asking the model again; a configuration the search did not
    score is predicted on its own."""
    from planner.planners.grid import Inputs
    from planner.planners.search_space import space_for

    ctx = context(replicas=replicas, rate=170.0, tolerance=tolerance)
    pred = Counting()
    planner = GridPlanner()
    inp = Inputs({"p95": pred}, 0.0)
    scored, _ = planner._search(ctx, space_for(ctx), 170.0, inp)
    asked = len(pred.calls)
    judged = planner._current(ctx, scored, 170.0, inp)
    assert len(pred.calls) == asked                      # not predicted again
    alone = planner.score(ctx, CandidateBatch.of([ctx.config]), 170.0, inp, slack=1.0)
    for field in ("cost", "feasible", "supported", "excess", "score"):
        assert np.array_equal(getattr(judged, field), getattr(alone, field)), field
    assert np.array_equal(judged.predictions["p95"].bound, alone.predictions["p95"].bound)
    other = planner.score(ctx, CandidateBatch.of([WorkloadConfig(replicas + 1, 1.0)]), 170.0,
                          inp)
    unscored = planner._current(ctx, other, 170.0, inp)
    assert len(pred.calls) == asked + 3                  # alone, other, then on its own
    assert np.array_equal(unscored.score, alone.score)


def test_the_configuration_holding_at_the_margin_is_judged_from_its_row_of_the_search(
        ) -> None:
    """The replica count that holds at the load margin, scored at the planned load: judged
    from the search's row it is what scoring it on its own gives, without asking the model
    again (only the search at the margin asks); without that row it is predicted on its own."""
    from planner.planners.grid import Inputs
    from planner.planners.search_space import space_for

    rate = 446.0
    ctx = context(replicas=40, rate=rate, cpu_sizes=(1.0,))
    pred = Counting()
    planner = GridPlanner()
    inp = Inputs({"p95": pred}, 0.0)
    space = space_for(ctx)
    scored, _ = planner._search(ctx, space, rate, inp)
    cheapest = WorkloadConfig(_fewest_holding(rate), 1.0)
    asked = len(pred.calls)
    held, i = planner._holding(ctx, space, rate, inp, cheapest, scored)
    assert len(pred.calls) == asked + 1                  # the search at the margin alone
    assert i == 0
    assert held.batch.config(0) == WorkloadConfig(_fewest_holding(rate * (1 + SCALE_IN_MARGIN)),
                                                  1.0)
    alone = planner.score(ctx, CandidateBatch.of([held.batch.config(0)]), rate, inp)
    for field in ("cost", "feasible", "supported", "excess", "score"):
        assert np.array_equal(getattr(held, field), getattr(alone, field)), field
    assert np.array_equal(held.predictions["p95"].bound, alone.predictions["p95"].bound)
    assert np.array_equal(held.predictions["p95"].mean, alone.predictions["p95"].mean)
    other = planner.score(ctx, CandidateBatch.of([cheapest]), rate, inp)
    asked = len(pred.calls)
    unscored, _ = planner._holding(ctx, space, rate, inp, cheapest, other)
    assert len(pred.calls) == asked + 2                  # the search, then on its own
    assert np.array_equal(unscored.score, alone.score)


def test_the_explicit_estimate_alone_does_not_move_the_workload_to_another_cpu_size() -> None:
    """With no learned model, the estimate (calibrated on the 1-cpu pods as they run) takes a
    4-cpu pod as four times as fast per request and predicts 4-cpu pods cheaper; that is an
    assumption it never observed, so the workload is sized in its own CPU size."""
    from planner.planners.predictors import CurrentSizeOnly, PredictorMemory, PredictorSource

    ctx = context(replicas=12, cpu=1.0, rate=900.0, latency=30.0, cpu_sizes=(1.0, 4.0))
    preds = PredictorSource(None).predictors(ctx, PredictorMemory())
    assert preds and all(isinstance(p, CurrentSizeOnly) for p in preds.values())
    batch = CandidateBatch.of([WorkloadConfig(12, 1.0), WorkloadConfig(4, 4.0)])
    pred = preds["p95"].predict(batch, 900.0)
    assert pred.supported.tolist() == [True, False]
    assert pred.bound[1] < 60                    # still predicted: exploration may try it
    plan = Remembering(GridPlanner()).plan(ctx)
    assert "explicit" in plan.reason
    assert plan.target.cpu == 1.0 and not any(a.actuator == "cpu" for a in plan.actions)


def test_a_target_the_current_pods_service_time_misses_does_not_move_the_workload_to_a_bigger_size(
) -> None:
    """gen-7779: a p99 target the one-core pods' service time misses by the explicit estimate,
    pods starting, no learned model. The estimate took a 4-cpu pod as one server four times as
    fast per request, predicted 4-cpu pods to meet the target, and the whole workload was moved
    there ("no known configuration is feasible; trying an unexplored one"), where each request
    was slower and p99 stayed violated for 20 minutes. A bigger pod is now more servers as fast
    per request as the current pods: nothing is predicted to meet the target, and the workload
    is sized in its own size."""
    from planner.planners.predictors import PredictorMemory, PredictorSource

    ctx = context(replicas=12, cpu=1.0, rate=300.0, latency=100.0, cpu_sizes=(1.0, 4.0))
    preds = PredictorSource(None).predictors(ctx, PredictorMemory())
    batch = CandidateBatch.of([WorkloadConfig(r, c) for c in (1.0, 4.0) for r in (3, 12, 40)])
    assert not (preds["p95"].predict(batch, 300.0).bound <= 60.0).any()
    plan = Remembering(GridPlanner()).plan(ctx)
    assert "no configuration is predicted feasible" in plan.reason
    assert plan.target.cpu == 1.0 and plan.target.replicas >= 12
    assert not any(a.actuator == "cpu" for a in plan.actions)


class OnlyABiggerSizeMeets(Predictor):
    """A model that observed 1-cpu pods only and extrapolates: every 1-cpu count misses a 60 ms
    target, 4-cpu pods (unobserved, unsupported) meet it."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = np.where(batch.cpu == 1.0, 100.0, 30.0)
        return Prediction(p, p, batch.cpu == 1.0)


def test_a_size_only_an_extrapolation_meets_the_objectives_with_is_tried_beside_the_workload(
) -> None:
    """When no known configuration is feasible and the cheapest predicted to meet the
    objectives is another CPU size on the workload's own device and pool, that size is tried
    as a canary (started although p95 is observed violated: a rescue), and the workload keeps
    its size, sized by the explicit estimate; without a canary it is rolled over to the size,
    as before (section 40, gen-5972, gen-4009 and gen-7779 rolled whole workloads over to
    unobserved sizes this way). Where a canary cannot be judged (no per-pod request rates, as
    on a cluster without per-pod request metrics) or its trial ended unjudged, the workload is
    rolled over as before; while a change of shape rolls out, neither happens yet."""
    def trial(actuators: tuple[str, ...], rates: bool = True, ready: int = 12,
              now: float = 1000.0) -> PlanningContext:
        ctx = context(replicas=12, cpu=1.0, rate=300.0, latency=100.0, cpu_sizes=(1.0, 4.0),
                      actuators=actuators)
        pods = tuple(replace(p, ready=i < ready, cpu_utilization=0.5,
                             request_rate=25.0 if rates else None)
                     for i, p in enumerate(ctx.workload.pods))
        return replace(ctx, workload=replace(ctx.workload, pods=pods), now=now)

    def started(plan: Plan) -> list[dict[str, Any]]:
        return [a.params["canary"] for a in plan.actions
                if a.actuator == "canary" and a.params["canary"]]

    with_canary = ("replicas", "cpu", "canary")
    nxt = planner_with(OnlyABiggerSizeMeets())
    plan = nxt.plan(trial(with_canary))
    assert plan.target.cpu == 1.0 and plan.target.replicas >= 12 and not plan.exploratory
    assert not any(a.actuator == "cpu" for a in plan.actions)
    assert len(started(plan)) == 1 and started(plan)[0]["cpu"] == 4.0
    assert started(plan)[0]["replicas"] < 12
    assert "the cheapest size predicted to meet every objective" in plan.reason
    # The trial is a rescue: the violation already observed does not stop it next cycle.
    again = nxt.plan(trial(with_canary, now=1015.0))
    assert not any(a.actuator == "canary" and not a.params["canary"] for a in again.actions)
    assert again.target.cpu == 1.0 and not started(again)
    assert "(a canary is on trial)" in again.reason
    # Its pods never appear: the trial ends unjudged, and the workload is rolled over.
    late = 1000.0 + trial(with_canary).admin.canary.timeout_s + 30.0
    gone = nxt.plan(trial(with_canary, now=late))
    assert "never appeared" in gone.reason
    moved = nxt.plan(trial(with_canary, now=late + 15.0))
    assert moved.exploratory and moved.target.cpu == 4.0 and not started(moved)
    # No per-pod request rates: no canary could be judged, the workload is rolled over.
    blind = planner_with(OnlyABiggerSizeMeets()).plan(trial(with_canary, rates=False))
    assert blind.exploratory and blind.target.cpu == 4.0 and not started(blind)
    # Pods of another shape still serving (a change of shape rolling out): it waits.
    rolling = trial(with_canary)
    pods = tuple(replace(p, cpu=0.5) if i < 4 else p for i, p in enumerate(rolling.workload.pods))
    rolling = replace(rolling, workload=replace(rolling.workload, pods=pods))
    waits = planner_with(OnlyABiggerSizeMeets()).plan(rolling)
    assert waits.target.cpu == 1.0 and not started(waits) and not waits.exploratory
    assert "once the rollout under way ends" in waits.reason
    # Pods of its own shape starting do not hold it back (a crash-looping pod would for ever).
    starting = planner_with(OnlyABiggerSizeMeets()).plan(trial(with_canary, ready=8))
    assert starting.target.cpu == 1.0 and len(started(starting)) == 1
    # Started while every objective held (the models predicted every known configuration to
    # miss): a violation that follows does not stop it either.
    calm = planner_with(OnlyABiggerSizeMeets())
    first = calm.plan(replace(trial(with_canary), current={"p95": 50.0}))
    assert len(started(first)) == 1
    worse = calm.plan(trial(with_canary, now=1015.0))
    assert not any(a.actuator == "canary" and not a.params["canary"] for a in worse.actions)
    assert worse.target.cpu == 1.0
    rolled = planner_with(OnlyABiggerSizeMeets()).plan(trial(("replicas", "cpu")))
    assert rolled.exploratory and rolled.target.cpu == 4.0


def test_a_gpu_candidate_in_a_pool_without_gpus_fits_nowhere() -> None:
    """gen-2764's plan chose "1 x 2 cpu gpu in ap-south-general", a pool with no GPU node:
    the check counted the cluster's GPUs, not the pool's. Such a candidate fits nowhere; the
    same device unpinned or in the GPU pool does."""
    from planner.domain.state import ClusterSnapshot, NodeState
    from planner.models.predictor import CandidateBatch
    from planner.planners.search_space import gpu_capacity_ok
    nodes = (NodeState("c0", "general", "eu", 8.0, 0.0, 0, 0, 0.05, 0.0),
             NodeState("g0", "gpu", "eu", 32.0, 0.0, 4, 0, 0.05, 3.1))
    snap = ClusterSnapshot(0.0, nodes, {})
    batch = CandidateBatch(np.ones(5), np.full(5, 2.0), np.array([1.0, 1.0, 1.0, 0.0, 1.0]),
                           ("general", "gpu", None, "general", "nowhere"))
    assert gpu_capacity_ok(snap, batch).tolist() == [False, True, True, True, False]


def test_choosing_predictors_remembers_where_each_device_ran() -> None:
    """The predictors' memory keeps the node-pool mix of the unpinned workload's ready pods
    per device, which the learned models use for that device once none of its pods runs."""
    from planner.planners.predictors import PredictorMemory, PredictorSource

    ctx = context(replicas=4)
    pods = tuple(replace(p, ready=True, pool="general") for p in ctx.workload.pods)
    ctx = replace(ctx, workload=replace(ctx.workload, pods=pods))
    mem = PredictorMemory(mixes={"gpu": {"gpu-pool": 1.0}})
    PredictorSource(None).predictors(ctx, mem)
    assert mem.mixes == {"cpu": {"general": 1.0}, "gpu": {"gpu-pool": 1.0}}


def _on_nodes(ctx: PlanningContext, free_on_third: float) -> PlanningContext:
    """``ctx``'s 4 x 1 cpu pods over two 3.5-core nodes (two pods each) and a third node with
    ``free_on_third`` cores."""
    nodes = (NodeState("n0", "general", "eu", 3.5, cpu_allocated=2.0),
             NodeState("n1", "general", "eu", 3.5, cpu_allocated=2.0),
             NodeState("n2", "general", "eu", free_on_third))
    pods = tuple(PodState(f"p{i}", f"n{i // 2}", 1.0) for i in range(4))
    wl = replace(ctx.workload, pods=pods)
    return replace(ctx, workload=wl, snapshot=replace(ctx.snapshot, nodes=nodes,
                                                      workloads={"ns/w": wl}))


def test_the_cheapest_configuration_that_fits_the_cluster_is_chosen_over_one_that_does_not(
        ) -> None:
    """4 x 1 cpu pods at a load they miss the objective at (TrueLatency: 7 x 1, 3 x 2 or
    1 x 4 cpu meet it; one 4-cpu pod is the cheapest), on nodes none of which can hold a 4-cpu
    pod. With 3 free cores on the third node, the plan is the cheapest configuration that fits
    (3 x 2 cpu, one per node), not the 4-cpu pod the safety layer would refuse (keeping the 4
    pods that miss), and it says why. With half a core there, nothing that meets the
    objective fits: the current shape, as many as the model says it needs (the safety layer
    caps it at what the cluster can schedule), not the 4-cpu pod the safety layer would turn
    into the current shape with as many cores (4 pods that miss)."""
    ctx = context(replicas=4, rate=300.0, latency=123.0)
    unconstrained = replace(ctx, snapshot=replace(ctx.snapshot, nodes=(
        NodeState("big", "general", "eu", 64.0, cpu_allocated=4.0),)))
    assert planner_with(TrueLatency()).plan(unconstrained).target == WorkloadConfig(1, 4.0)
    roomy = _on_nodes(ctx, 3.0)
    plan = planner_with(TrueLatency()).plan(roomy)
    assert plan.target == WorkloadConfig(3, 2.0)
    assert "1 x 4 cpu" in plan.reason and "does not fit the cluster (room for 0)" in plan.reason
    assert safety.guard(roomy, plan, {})[0].target == WorkloadConfig(3, 2.0)
    assert not contention.is_capped(plan)     # nothing was capped: no contention planning
    full_ctx = _on_nodes(ctx, 0.5)
    full = planner_with(TrueLatency()).plan(full_ctx)
    assert full.target == WorkloadConfig(7, 1.0)
    assert "no configuration predicted to meet every objective fits the cluster" in full.reason
    assert safety.guard(full_ctx, full, {})[0].target == WorkloadConfig(6, 1.0)


class FlatAvailability(Predictor):
    """An availability model as :class:`planner.models.availability.AvailabilityRegressor`
    is: one value for every count of two or more pods (here below the target), and
    ``gain`` more per pod when given (a model under which more pods do better)."""

    kind = "learned"

    def __init__(self, value: float = 0.976, gain: float = 0.0) -> None:
        self.value, self.gain = value, gain

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        p = np.where(batch.replicas >= 2, self.value + self.gain * batch.replicas, 0.9)
        return Prediction(p, p, np.ones(len(batch), dtype=bool))


def _with_availability(replicas: int, observed: float) -> PlanningContext:
    """:func:`context` at ``replicas`` pods with an availability objective of 0.999 (5 %
    tolerance) as well, observed at ``observed``."""
    ctx = context(replicas=replicas, latency=20.0, rate=300.0)
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 60, "measuredBy": "lat"},
                               {"name": "avail", "value": 0.999, "measuredBy": "av",
                                "tolerance": 0.05}]}})
    av = parse_profile({"kind": "KPIProfile", "metadata": {"name": "av", "namespace": "ns"},
                        "spec": {"type": "availability"}})
    return replace(ctx, intent=intent, profiles={**ctx.profiles, "avail": av},
                   current={"p95": 20.0, "avail": observed})


def _planner_with_availability(avail: Predictor) -> Remembering:
    p = GridPlanner()
    p.predictors = lambda ctx, mem: {"p95": TrueLatency(), "avail": avail}  # type: ignore[method-assign]
    return Remembering(p)


def test_an_objective_no_configuration_does_better_on_than_staying_does_not_lock_the_count(
) -> None:
    # Every count of two or more pods is predicted at 0.976 against a target of 0.999: the
    # current 30 pods meet it only within tolerance, no other configuration meets it, and
    # none does better. The objective cannot choose; latency does (about 5 pods carry
    # 300 req/s): the count falls instead of being held (section 29's lock).
    plan = _planner_with_availability(FlatAvailability()).plan(_with_availability(30, 0.9995))
    assert plan.target.replicas < 30
    assert plan.predicted["p95"] <= 60
    assert "no worse than staying" in plan.reason
    # Where more pods are predicted to do better, the objective still decides: the planner
    # does not scale in to a count predicted worse than the current one.
    better = _planner_with_availability(FlatAvailability(0.90, 0.002)).plan(
        _with_availability(30, 0.9995))
    assert better.target.replicas >= 30 and "no worse than staying" not in better.reason


@pytest.mark.parametrize("observed", [0.90, 0.995])
def test_no_objective_is_judged_against_staying_unless_it_is_observed_meeting_its_target(
        observed: float) -> None:
    # 0.90: violated; 0.995: within the 5 % tolerance, so not violated, but below the target
    # itself: staying is not known to meet it, so it does not vouch for cheaper pods.
    plan = _planner_with_availability(FlatAvailability()).plan(_with_availability(30, observed))
    assert plan.target.replicas >= 30 and "no worse than staying" not in plan.reason


def test_shape_options_judge_an_objective_that_cannot_choose_as_plans_do() -> None:
    # The joint assignment of intents that share a pool asks for each intent's options: an
    # intent whose availability model sits below the target everywhere has the same options
    # as its plan (here the cheapest shape by latency), not none.
    ctx = _with_availability(30, 0.9995)
    planner = _planner_with_availability(FlatAvailability())
    options = planner.planner.shape_options(ctx)
    assert options and min(o.config.replicas for o in options) < 30
    flat_low = _planner_with_availability(FlatAvailability()).planner.shape_options(
        _with_availability(30, 0.995))
    assert not flat_low


def test_while_a_shape_change_waits_the_current_size_is_cut_only_where_the_models_vouch(
        ) -> None:
    """gen-5163 (docs/benchmarks.md section 58): on the way from 1 to 4 cores, one size a
    cycle, 27 two-core pods waited for the last step, and the grid sized them by a model
    that had never seen two-core pods: 9 pods, which saturated. While a shape change waits,
    the current shape is cut only to a count the models vouch for; a model that vouches
    for it sizes it as before."""
    from planner.planners.grid import Inputs

    ctx = context(replicas=20, cpu=2.0, rate=900.0, actuators=("replicas",))
    grid = GridPlanner()
    unseen = Inputs({"p95": SeenOneCpuSize()}, 0.0)
    known = Inputs({"p95": TrueLatency()}, 0.0)
    assert grid._sized_current(ctx, 900.0, unseen) < 20            # what it was sized at
    assert grid._sized_current(ctx, 900.0, unseen, vouched_below=20) == 20
    fewest = grid._sized_current(ctx, 900.0, known)
    assert fewest is not None and fewest < 20
    assert grid._sized_current(ctx, 900.0, known, vouched_below=20) == fewest
    target = WorkloadConfig(3, 4.0)              # no CPU actuator: the resize cannot start
    step, why, _ = grid._safe_step(ctx, target, 900.0, unseen)
    assert step == ctx.config, why
    step, why, _ = grid._safe_step(ctx, target, 900.0, known)
    assert step == ctx.config.with_(replicas=fewest), why
