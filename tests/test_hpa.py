from __future__ import annotations

from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState
from planner.planners.base import PlanningContext
from planner.planners.hpa import HPAPlanner
from tests.support.memory import Remembering

INTENT = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                       "spec": {"targetRef": {"name": "w"}, "objectives": [
                           {"name": "p95", "value": 50, "measuredBy": "lat"}]}})
PROFILE = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                         "spec": {"type": "latency"}})


def ctx(replicas: int, util: float, now: float, max_replicas: int = 100) -> PlanningContext:
    pods = tuple(PodState(f"p{i}", "n", 1.0) for i in range(replicas))
    wl = WorkloadState("ns", "w", WorkloadConfig(replicas), pods, cpu_utilization=util)
    admin = AdminConfig(replicas=ReplicaBounds(min=1, max=max_replicas))
    return PlanningContext(INTENT, {"p95": PROFILE}, wl, ClusterSnapshot(now, (), {"ns/w": wl}),
                           {"p95": 10.0}, admin, {}, None, now)


def replicas_of(plan_ctx: PlanningContext, hpa: HPAPlanner | Remembering) -> int:
    return hpa.plan(plan_ctx).target.replicas


def test_proportional_rule_and_tolerance() -> None:
    hpa = HPAPlanner()
    assert replicas_of(ctx(4, 1.2, 0), hpa) == 6          # ceil(4 * 1.2 / 0.8)
    assert replicas_of(ctx(4, 0.85, 100), HPAPlanner()) == 4   # within 10 % of target


def test_scale_up_limit() -> None:
    assert replicas_of(ctx(2, 8.0, 0), HPAPlanner()) == 6     # max(2*2, 2+4)
    assert replicas_of(ctx(10, 8.0, 0), HPAPlanner()) == 20   # max(+100 %, +4)


def test_scale_down_waits_for_stabilisation_window() -> None:
    hpa = Remembering(HPAPlanner())
    assert replicas_of(ctx(10, 0.8, 0), hpa) == 10
    assert replicas_of(ctx(10, 0.2, 60), hpa) == 10   # highest recommendation in 300 s is 10
    assert replicas_of(ctx(10, 0.2, 200), hpa) == 10
    assert replicas_of(ctx(10, 0.2, 301), hpa) == 3   # ceil(10 * 0.2 / 0.8)


def test_bounds() -> None:
    assert replicas_of(ctx(4, 8.0, 0, max_replicas=5), HPAPlanner()) == 5
