"""What a plan carries: structured reasons joined into ``Plan.reason``, a compact JSON-safe
``as_dict``, and plans of a planner without predictors (HPA) saying so."""

from __future__ import annotations

import json
import math

import pytest

from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.plan import ModelInfo, ObjectivePrediction, Plan, PlanStep, ReasonPart
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState
from planner.planners.base import PlanningContext
from planner.planners.hpa import HPAPlanner

CFG = WorkloadConfig(2, 1.0)


def test_reason_is_the_parts_joined() -> None:
    parts = (ReasonPart("choice", "cheapest; tried while every objective holds"),
             ReasonPart("held", "cooldown 30 s"))
    plan = Plan("ns/w", "x", CFG, CFG, reason_parts=parts)
    assert plan.reason == "cheapest; tried while every objective holds; cooldown 30 s"
    assert plan.reason_parts == parts


def test_a_plain_reason_becomes_note_parts() -> None:
    plan = Plan("ns/w", "x", CFG, CFG, reason="a; b")
    assert plan.reason_parts == (ReasonPart("note", "a"), ReasonPart("note", "b"))
    with pytest.raises(ValueError, match="reason differs"):
        Plan("ns/w", "x", CFG, CFG, reason="a", reason_parts=(ReasonPart("note", "b"),))


def test_as_dict_is_json_safe() -> None:
    step = PlanStep(CFG, {"p95": ObjectivePrediction(math.inf, math.inf)}, 0.08)
    plan = Plan("ns/w", "x", CFG, CFG.with_(replicas=3), planned_rate=120.0,
                steps=(step,), models=(ModelInfo("p95", "learned", "queueing-latency", 40,
                                                 1.0, {"mape": math.nan}),),
                reason_parts=(ReasonPart("choice", "c"),))
    d = json.loads(json.dumps(plan.as_dict(), allow_nan=False))
    assert d["steps"][0]["predicted"] == {"p95": {"mean": None, "bound": None}}
    assert d["models"][0]["validation"] == {"mape": None}
    assert d["planned_rate"] == 120.0 and d["chosen"] is None
    assert d["reason_parts"] == [{"kind": "choice", "text": "c"}]


def test_hpa_sizes_for_no_load_and_predicts_nothing() -> None:
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 50, "measuredBy": "lat"}]}})
    profile = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                             "spec": {"type": "latency"}})
    pods = tuple(PodState(f"p{i}", "n", 1.0) for i in range(4))
    wl = WorkloadState("ns", "w", WorkloadConfig(4), pods, cpu_utilization=1.2)
    ctx = PlanningContext(intent, {"p95": profile}, wl, ClusterSnapshot(0.0, (), {"ns/w": wl}),
                          {"p95": 10.0}, AdminConfig(replicas=ReplicaBounds(min=1, max=100)), {},
                          None, 0.0)
    plan = HPAPlanner().plan(ctx)
    assert plan.planned_rate is None
    assert [s.config.replicas for s in plan.steps] == [4, 6]
    assert all(not s.predicted and s.cost_per_hour is not None for s in plan.steps)
    assert [(m.objective, m.source) for m in plan.models] == [("p95", "none")]
    assert [p.kind for p in plan.reason_parts] == ["choice"]
