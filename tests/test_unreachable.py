"""A latency target below what the service can do at all (below its base latency) is reported
as the condition ``TargetsReachable`` false, and not chased with the cluster (issue 12)."""

from __future__ import annotations

from typing import Any

from planner.domain.plan import Plan, ReasonPart
from planner.domain.state import WorkloadConfig
from planner.domain.status import reachable_condition
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


def _scenario(target_ms: float) -> dict[str, Any]:
    return {
        "name": "floor", "duration": "12m", "step_s": 5,
        "cluster": {"pools": [{"name": "main", "nodes": 8, "cpu": 16}]},
        "workloads": [{"name": "api", "namespace": "shop", "replicas": 4, "cpu": 1,
                       "service": {"rate_per_core": 100, "base_latency_ms": 20,
                                   "startup_s": "10s"},
                       "trace": {"kind": "constant", "rate": 150, "noise": 0.05}}],
        "admin": {"replicas": {"min": 1, "max": 60, "maxStep": 20}, "cycleSeconds": 15},
        "manifests": [
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
             "metadata": {"name": "p95", "namespace": "shop"},
             "spec": {"type": "latency", "percentile": 95}},
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
             "metadata": {"name": "api", "namespace": "shop"},
             "spec": {"targetRef": {"kind": "Deployment", "name": "api"},
                      "objectives": [{"name": "p95", "value": target_ms,
                                      "measuredBy": "p95"}]}}],
    }


def _run(target_ms: float) -> tuple[list[dict[str, Any]], int]:
    """Every status condition ``TargetsReachable`` over 12 simulated minutes (the first model
    is trained after about 5), and the most replicas planned."""
    run = ScenarioRun(parse_scenario(_scenario(target_ms), "floor"), "grid", 1)
    seen, most = [], 0
    while run.elapsed < 12 * 60:
        for o in run.advance() or ():
            if o.plan is not None:
                most = max(most, o.plan.target.replicas)
                cond = {c["type"]: c for c in o.status["conditions"]}
                seen.append(cond["TargetsReachable"])
    return seen, most


def test_a_target_below_the_base_latency_is_reported_not_chased() -> None:
    seen, most = _run(5.0)                       # the service needs 20 ms at least
    below = [c for c in seen if c["status"] == "False"]
    assert below, "the learned model never reported the target unreachable"
    assert below[-1]["reason"] == "BelowServiceFloor"
    assert "p95 target 5 is below what the service can do" in below[-1]["message"]
    assert seen[-1]["status"] == "False"         # it stays reported
    assert most <= 20, f"{most} replicas planned for 150 req/s: chased with the cluster"


def test_a_reachable_target_is_reported_reachable() -> None:
    plan = Plan("shop/api", "grid", WorkloadConfig(2), WorkloadConfig(3), (),
                reason_parts=(ReasonPart("choice", "cheapest"),))
    assert reachable_condition(plan).status == "True"
    unreachable = Plan("shop/api", "grid", WorkloadConfig(2), WorkloadConfig(3), (),
                       reason_parts=(ReasonPart("unreachable", "p95 target 5 ..."),))
    cond = reachable_condition(unreachable)
    assert (cond.status, cond.reason, cond.message) == ("False", "BelowServiceFloor",
                                                         "p95 target 5 ...")
