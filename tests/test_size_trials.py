"""Another CPU size tried beside the workload (a canary), not by rolling every pod over to it;
the explicit estimate read only from pods that served the whole window.

The scenario: one-core pods of a service whose rate grows as ``cpu ** 0.6`` (a 4-core pod
serves 2.3x, not 4x, and each of its four servers is slower than a one-core pod), a p90
objective, admin sizes 1 and 4. A learned model seeing one size assumes its prior exponent
(0.9) for the other, and predicts 4-core pods about half the price.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from actuators import registry
from planner.domain.admin import AdminConfig
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import (
    ClusterSnapshot,
    NodeState,
    PodState,
    WorkloadConfig,
    WorkloadState,
)
from planner.models.effects import KIND_LATENCY, EffectModel, LearnedLatency
from planner.models.latency import QueueingLatencyRegressor
from planner.models.predictor import CandidateBatch
from planner.models.queue_estimate import QueueEstimate
from planner.models.sojourn import sojourn_quantile
from planner.planners import canary
from planner.planners.base import PlanningContext
from planner.planners.feedback import Canary, Explorer, Measured, Tried
from planner.planners.online import updated_estimate
from simulator.cluster import SimulatedCluster
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

EXPONENT = 0.6


def _scenario(minutes: int = 40, canaries: bool = True) -> dict[str, Any]:
    """300 req/s (5 % noise) on 20 one-core pods (30 req/s per core, 2 ms base), rate
    growing as ``cpu ** 0.6``; sizes 1 and 4; p90 <= 110 ms: about 40-45 one-core pods."""
    return {
        "name": "size-trial",
        "duration": f"{minutes}m",
        "step_s": 15,
        "cluster": {
            "pools": [{"name": "general", "nodes": 6, "cpu": 32, "cost_per_core_hour": 0.05}]
        },
        "workloads": [
            {
                "name": "search",
                "namespace": "web",
                "replicas": 20,
                "cpu": 1,
                "service": {
                    "rate_per_core": 30,
                    "base_latency_ms": 2,
                    "cpu_exponent": EXPONENT,
                    "startup_s": "30s",
                },
                "trace": {"kind": "constant", "rate": 300, "noise": 0.05},
            }
        ],
        "admin": {
            "actuators": ["replicas", "cpu"],
            "cpu": {"sizes": [1, 4]},
            "canary": {"enabled": canaries},
            "replicas": {"min": 2, "max": 150, "maxStep": 20},
            "cycleSeconds": 15,
        },
        "manifests": [
            {
                "apiVersion": "intent-planner.io/v1alpha1",
                "kind": "KPIProfile",
                "metadata": {"name": "p90", "namespace": "web"},
                "spec": {"type": "latency", "percentile": 90},
            },
            {
                "apiVersion": "intent-planner.io/v1alpha1",
                "kind": "Intent",
                "metadata": {"name": "search", "namespace": "web"},
                "spec": {
                    "targetRef": {"kind": "Deployment", "name": "search"},
                    "objectives": [{"name": "p90", "value": 110, "measuredBy": "p90"}],
                },
            },
        ],
    }


def test_the_cpu_actuator_brings_the_canary_with_it() -> None:
    on = AdminConfig(actuators=("replicas", "cpu"))
    assert "canary" in registry.enabled_names(on)
    off = AdminConfig.model_validate(
        {"actuators": ["replicas", "cpu"], "canary": {"enabled": False}}
    )
    assert "canary" not in registry.enabled_names(off)
    assert "canary" not in registry.enabled_names(AdminConfig(actuators=("replicas",)))


def test_a_canary_of_another_size_is_measured_against_the_workloads_own_pods() -> None:
    sim = SimulatedCluster(parse_scenario(_scenario(), "t"), seed=3, start_time=0.0)
    sim.set_canary("web/search", WorkloadConfig(2, 4.0, "cpu", None))
    for _ in range(12):
        sim.step(15.0)
    w = sim.observe().workloads["web/search"]
    assert w.canary is not None and all(p.cpu == 4.0 and p.ready for p in w.canary.pods)
    assert canary.capacity_ratio(w.canary, w, versus=1.0) == pytest.approx(4**EXPONENT, rel=0.05)
    # Against pods of its own size there is nothing to compare with.
    assert canary.capacity_ratio(w.canary, w) is None


def _learned() -> LearnedLatency:
    """A learned p95 model of M/M/1 pods at 50 req/s, 5 ms base, seen on one-core pods only
    (its CPU exponent is the prior, 0.9)."""
    rng = np.random.default_rng(3)
    X = np.column_stack(
        [rng.uniform(20, 300, 60), rng.integers(4, 20, 60), np.ones(60), np.zeros(60), -np.ones(60)]
    )
    y = 5.0 + sojourn_quantile(0.95, X[:, 0] / X[:, 1], np.full(60, 50.0), np.ones(60))
    ok = np.isfinite(y)
    est = QueueingLatencyRegressor(n_bootstrap=3).fit(X[ok], y[ok])
    return LearnedLatency(EffectModel("web/search", "p95", KIND_LATENCY, est, (), 0.0))


def test_a_measured_size_keeps_its_own_servers() -> None:
    """A 4-core pod measured 2.3x a one-core pod serves 2.3x the requests, four at a time,
    each at 2.3 / 4 of a one-core pod's speed: predicted as the model's own 4-core pods at
    that rate (not as one server 2.3x as fast, which would say each request takes 2.3x
    less), vouched for where the one-core pods are."""
    inner = _learned()
    four_cores = np.array([[100.0, 4, 4.0, 0.0, -1.0]])
    assert not inner.model.estimator.supported(four_cores)[0]
    speed = 4**EXPONENT
    lat = canary.MeasuredShapes(
        inner, {(4.0, "cpu", None): canary.Speed(("cpu", None), speed, 1.0)}
    )
    batch = CandidateBatch(
        np.array([4.0, 4.0, 4.0]), np.array([1.0, 4.0, 2.0]), np.zeros(3), (None, None, None)
    )
    pr = lat.predict(batch, 100.0)
    assert pr.supported.tolist() == [True, True, False]  # 2 cores: not measured
    assert pr.mean[0] == pytest.approx(
        float(inner.predict(batch.take(np.array([0])), 100.0).mean[0])
    )
    # What the pods are: M/M/4 at 50 x 2.3 req/s in all, 25 req/s each, plus the base.
    truth = 5.0 + float(
        sojourn_quantile(0.95, np.array([25.0]), np.array([50.0 * speed]), np.array([4.0]))[0]
    )
    assert pr.mean[1] == pytest.approx(truth, rel=0.05)
    one_fast_server = 5.0 + float(
        sojourn_quantile(0.95, np.array([25.0]), np.array([50.0 * speed]), np.ones(1))[0]
    )
    assert one_fast_server < 0.6 * truth  # what the reference's remap says
    means = lat.predict_mean_rates(batch, [100.0, 150.0])
    assert means[0, 1] == pytest.approx(float(pr.mean[1]), rel=1e-9)
    assert means[1, 1] > means[0, 1]


def test_a_shape_measurement_overrides_its_places() -> None:
    inner = _learned()
    speeds: dict[Tried, canary.Speed] = {
        ("cpu", "b"): canary.Speed(("cpu", None), 2.0),
        (4.0, "cpu", "b"): canary.Speed(("cpu", None), 5.0, 1.0),
    }
    batch = CandidateBatch(np.array([4.0, 4.0]), np.array([1.0, 4.0]), np.zeros(2), ("b", "b"))
    pr = canary.MeasuredShapes(inner, speeds).predict(batch, 100.0)
    place = canary.MeasuredShapes(inner, {("cpu", "b"): speeds[("cpu", "b")]}).predict(batch, 100.0)
    assert pr.mean[0] == place.mean[0]  # one core: the pool's speed
    assert pr.mean[1] != place.mean[1]  # four cores: measured apart
    own = inner.predict_faster(batch.take(np.array([1])), 100.0, 5.0 / inner.cpu_speedup(4.0, 1.0))
    assert pr.mean[1] == pytest.approx(float(own.mean[0]))


def test_size_trials_are_remembered_in_the_old_format_too() -> None:
    e = Explorer()
    e.canaries["a/b"] = Canary((4.0, "cpu", None), 100.0, 130.0, versus=1.0)
    e.speeds["a/b"] = {
        (4.0, "cpu", None): Measured(("cpu", None), 2.3, 250.0, 1.0),
        ("gpu", "g"): Measured(("cpu", None), 9.0, 260.0),
        ("gpu", None): Measured(("cpu", None), 38.6, 270.0, cpu=4.0),   # the size it ran at
    }
    again = Explorer()
    again.recall("a/b", e.remember("a/b"))
    assert again.canaries == e.canaries and again.speeds == e.speeds
    # Written before size trials: a canary of five fields, a speed of four.
    old = Explorer()
    old.recall(
        "a/c",
        {
            "canary": [[1.0, "gpu", None], 10.0, None, None, False],
            "speeds": [[["gpu", None], ["cpu", None], 7.5, 20.0]],
        },
    )
    assert old.canaries["a/c"].versus is None
    assert old.speeds["a/c"] == {("gpu", None): Measured(("cpu", None), 7.5, 20.0)}
    # Written before a place kept the CPU size it was measured at (six fields): unknown.
    old.recall("a/d", {"speeds": [[["gpu", None], ["cpu", None], 7.5, 20.0, None, None]]})
    assert old.speeds["a/d"][("gpu", None)].cpu is None


def _context(pods: tuple[PodState, ...], now: float) -> PlanningContext:
    intent = parse_intent(
        {
            "kind": "Intent",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {
                "targetRef": {"name": "w"},
                "objectives": [{"name": "p90", "value": 110, "measuredBy": "p90"}],
            },
        }
    )
    prof = parse_profile(
        {
            "kind": "KPIProfile",
            "metadata": {"name": "p90", "namespace": "ns"},
            "spec": {"type": "latency", "percentile": 90},
        }
    )
    ready = [p for p in pods if p.ready]
    util = sum(p.cpu_utilization or 0.0 for p in ready) / len(ready)
    wl = WorkloadState(
        "ns", "w", WorkloadConfig(len(pods), 1.0), pods, request_rate=300.0, cpu_utilization=util
    )
    admin = AdminConfig()
    return PlanningContext(
        intent,
        {"p90": prof},
        wl,
        ClusterSnapshot(now, (NodeState("n", "a", "eu", 64.0, 40.0),), {"ns/w": wl}),
        {"p90": 150.0},
        admin,
        registry.create(admin.actuators, admin),
        None,
        now,
    )


def test_the_explicit_estimate_is_not_read_from_pods_that_served_part_of_the_window() -> None:
    """The scenario's first minute, traced: 20 pods scaled out to 60; the cycle the new pods
    are ready the workload reports about 300 req/s and 24 % mean utilisation over the 60 (the
    new ones served a part of the window): 300 / (60 x 0.24) = 21 req/s a core, where a core
    serves 30. Read from that, no count of one-core pods was predicted feasible and the
    planner rolled the workload over to a size it had never seen."""
    old = tuple(PodState(f"o{i}", "n", 1.0, started_at=0.0, cpu_utilization=0.5) for i in range(20))
    new = tuple(
        PodState(f"n{i}", "n", 1.0, started_at=960.0, cpu_utilization=0.113) for i in range(40)
    )
    before = QueueEstimate(30.0, 5.0, {"p90": 5.0})
    ctx = _context(old + new, 1000.0)
    assert updated_estimate(ctx, before) is before
    fresh = updated_estimate(ctx, None)  # nothing known yet: read it anyway
    assert fresh is not None and fresh.mu_per_core < 22.0
    settled = _context(old + new, 1100.0)  # the new pods served 140 s
    moved = updated_estimate(settled, before)
    assert moved is not None and moved is not before
    # Not-ready pods serve nothing and hold nothing back.
    waiting = tuple(PodState(f"w{i}", None, 1.0, ready=False, started_at=990.0) for i in range(5))
    assert updated_estimate(_context(old + waiting, 1000.0), before) is not before


def _run(canaries: bool, minutes: int = 40) -> dict[str, Any]:
    run = ScenarioRun(parse_scenario(_scenario(minutes, canaries), "size-trial"), "grid", 1)
    out: dict[str, Any] = {"sizes": [], "violated": [], "started": [], "judged": []}
    while run.elapsed < minutes * 60:
        for o in run.advance() or ():
            if o.plan is None:
                continue
            out["sizes"].append(o.plan.current.cpu)
            out["violated"].append(any(v is False for v in o.met.values()))
            for a in o.plan.actions:
                if a.actuator == "canary" and a.params["canary"]:
                    out["started"].append(
                        a.params["canary"] | {"replicas_then": o.plan.current.replicas}
                    )
            out["judged"].extend(p.text for p in o.plan.reason_parts if "judged:" in p.text)
    out["violation_minutes"] = run.report(0.0).as_dict()["totals"]["violation_minutes"]
    return out


def test_a_size_the_model_extrapolates_to_is_tried_beside_the_workload() -> None:
    """The learned model predicts 4-core pods about half the price of the one-core fleet. The
    size is tried as a canary of a tenth of the pods, judged 2.3x a one-core pod, and the
    workload stays on one core: no pod of it is ever resized. With canaries off (the behaviour
    before) the whole fleet is rolled over to 4 cores, violates the objective and stays
    there."""
    out = _run(canaries=True)
    assert [s["cpu"] for s in out["started"]] == [4.0], out["started"]
    trial = out["started"][0]
    assert trial["replicas"] <= math.ceil(0.1 * trial["replicas_then"])
    assert len(out["judged"]) == 1 and "2.30x" in out["judged"][0], out["judged"]
    assert set(out["sizes"]) == {1.0}
    assert not any(out["violated"][-40:])  # the last ten minutes
    before = _run(canaries=False)
    assert 4.0 in before["sizes"] and not before["started"]
    assert before["violation_minutes"] > out["violation_minutes"] + 10
