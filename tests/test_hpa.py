from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.errors import SpecError
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState
from planner.planners.base import Planner, PlanningContext
from planner.planners.hpa import HPAPlanner
from tests.support.memory import Remembering

INTENT = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                       "spec": {"targetRef": {"name": "w"}, "objectives": [
                           {"name": "p95", "value": 50, "measuredBy": "lat"}]}})
SHOP = Path(__file__).resolve().parents[1] / "examples/scenarios/diurnal-shop.yaml"
PROFILE = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                         "spec": {"type": "latency"}})


def ctx(replicas: int, util: float, now: float, max_replicas: int = 100) -> PlanningContext:
    pods = tuple(PodState(f"p{i}", "n", 1.0) for i in range(replicas))
    wl = WorkloadState("ns", "w", WorkloadConfig(replicas), pods, cpu_utilization=util)
    admin = AdminConfig(replicas=ReplicaBounds(min=1, max=max_replicas))
    return PlanningContext(INTENT, {"p95": PROFILE}, wl, ClusterSnapshot(now, (), {"ns/w": wl}),
                           {"p95": 10.0}, admin, {}, None, now)


def replicas_of(plan_ctx: PlanningContext, hpa: Planner | Remembering) -> int:
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


def test_target_option_changes_the_decision() -> None:
    """``plannerOptions.hpa.targetCPUUtilizationPercentage`` (and the spec ``hpa@50``) set the
    target: at 60 % CPU on 4 pods, HPA at 80 % scales in, at 50 % it scales out."""
    from planner.planners import registry

    at_80 = registry.create("hpa")
    at_50 = registry.create("hpa", {"targetCPUUtilizationPercentage": 50})
    assert isinstance(at_50, HPAPlanner) and at_50.target == 0.5
    assert replicas_of(ctx(4, 0.6, 0), at_80) == 3     # ceil(4 * 0.6 / 0.8)
    assert replicas_of(ctx(4, 0.6, 0), at_50) == 5     # ceil(4 * 0.6 / 0.5)
    name, options = registry.parse_spec("hpa@50")
    assert (name, options) == ("hpa", {"targetCPUUtilizationPercentage": 50.0})
    admin = registry.with_spec(AdminConfig(), "hpa@50")
    assert admin.planner == "hpa"
    assert replicas_of(ctx(4, 0.6, 0), registry.create_for(admin, "hpa")) == 5


@pytest.mark.parametrize("options, field", [
    ({"targetCPUUtilizationPercentage": 0}, "plannerOptions.hpa.targetCPUUtilizationPercentage"),
    ({"targetCPUUtilizationPercentage": 120},
     "plannerOptions.hpa.targetCPUUtilizationPercentage"),
    ({"targetUtilization": 0.6}, "plannerOptions.hpa.targetUtilization"),
])
def test_bad_target_option_names_the_field(options: dict[str, Any], field: str) -> None:
    from planner.planners import registry

    with pytest.raises(SpecError) as err:
        registry.create("hpa", options)
    assert err.value.field == field
    assert "targetCPUUtilizationPercentage" in err.value.field + err.value.fix or \
        "value" in err.value.fix


@pytest.mark.parametrize("spec, words", [
    ("hpa@0", "> 0"), ("hpa@abc", "number"), ("hpa@", "hpa@60"), ("grid@5", "plain name"),
])
def test_bad_planner_spec_names_the_field(spec: str, words: str) -> None:
    from planner.planners import registry

    with pytest.raises(SpecError) as err:
        registry.parse_spec(spec, "--planner")
    assert err.value.field == "--planner"
    assert words in err.value.problem + err.value.fix


def test_planner_without_options_refuses_them() -> None:
    from planner.planners import registry

    with pytest.raises(SpecError) as err:
        registry.create("grid", {"target": 1})
    assert err.value.field == "plannerOptions.grid" and "no options" in err.value.problem


def test_scenario_admin_validates_planner_options() -> None:
    """A scenario's ``admin.plannerOptions`` is checked when the scenario is parsed."""
    from simulator.scenario import parse_scenario

    doc = yaml.safe_load(SHOP.read_text())
    doc["admin"]["plannerOptions"] = {"hpa": {"targetCPUUtilizationPercentage": 60}}
    sc = parse_scenario(doc, "shop", SHOP.parent)
    assert sc.spec.admin.planner_options == {"hpa": {"targetCPUUtilizationPercentage": 60}}
    doc["admin"]["plannerOptions"] = {"hpa": {"targetCPUUtilizationPercentage": -1}}
    with pytest.raises(SpecError) as err:
        parse_scenario(doc, "shop", SHOP.parent)
    assert err.value.field == "admin.plannerOptions.hpa.targetCPUUtilizationPercentage"
    doc["admin"]["plannerOptions"] = {"magic": {}}
    with pytest.raises(SpecError) as err:
        parse_scenario(doc, "shop", SHOP.parent)
    assert err.value.field == "admin.plannerOptions.magic"
