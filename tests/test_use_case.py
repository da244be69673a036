"""An Intent's use case (``spec.useCase``): validation, the pins the planner keeps (device,
replica count), the weight policy per workload, and the status that lists them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from actuators import registry
from actuators import weights as weights_actuator
from actuators.weights import WeightsActuator
from planner.domain.admin import AdminConfig
from planner.domain.errors import SpecError
from planner.domain.intents import Intent, parse_intent
from planner.domain.state import WorkloadConfig
from planner.domain.use_case import (
    dispatch_policy,
    fixed_knobs,
    pin_notes,
    planning_admin,
    use_case_status,
)
from planner.planners.base import without_knobs
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
MULTI = ROOT / "examples/scenarios/multi-tenant.yaml"


def _intent(use_case: dict[str, Any] | None, name: str = "inference",
            target: str = "inference") -> Intent:
    spec: dict[str, Any] = {"targetRef": {"name": target},
                            "objectives": [{"name": "p95", "value": 50, "measuredBy": "p95"}]}
    if use_case is not None:
        spec["useCase"] = use_case
    return parse_intent({"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
                         "metadata": {"name": name, "namespace": "ml"}, "spec": spec})


@pytest.mark.parametrize(("use_case", "field"), [
    ({"class": "ai", "name": "detect", "device": "tpu"}, "spec.useCase.device"),
    ({"class": "AI", "name": "detect"}, "spec.useCase.class"),
    ({"name": "detect"}, "spec.useCase.class"),
    ({"class": "ai", "name": "detect", "dispatch": "random"}, "spec.useCase.dispatch"),
    ({"class": "ai", "name": "detect", "dispatchParams": {"threshold": 0.8}},
     "spec.useCase.dispatchParams"),
    ({"class": "ai", "name": "detect", "horizontallyScalable": "no"},
     "spec.useCase.horizontallyScalable"),
    ({"class": "ai", "name": "detect", "gpu": True}, "spec.useCase"),
])
def test_a_bad_use_case_names_its_field(use_case: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        _intent(use_case)
    assert field in str(err.value) and "fix" in str(err.value)


def test_defaults_and_round_trip() -> None:
    uc = _intent({"class": "media", "name": "transcode"}).spec.use_case
    assert uc is not None
    assert uc.as_dict() == {"class": "media", "name": "transcode", "device": "auto",
                            "dispatch": "balance", "dispatchParams": {},
                            "horizontallyScalable": True}
    assert _intent(uc.as_dict()).spec.use_case == uc


def test_pins_narrow_the_admin_for_that_intent_only() -> None:
    admin = AdminConfig.model_validate({"replicas": {"min": 1, "max": 40, "maxStep": 4}})
    current = WorkloadConfig(replicas=6, cpu=2.0, device="cpu")
    assert planning_admin(admin, _intent(None), current) is admin
    assert planning_admin(admin, _intent({"class": "ai", "name": "x"}), current) is admin
    gpu = planning_admin(admin, _intent({"class": "ai", "name": "x", "device": "gpu"}), current)
    assert gpu.devices == ("gpu",) and gpu.replicas == admin.replicas
    fixed = planning_admin(admin, _intent({"class": "ai", "name": "x",
                                           "horizontallyScalable": False}), current)
    assert (fixed.replicas.min, fixed.replicas.max) == (6, 6)
    assert fixed.replicas.max_step == 4 and fixed.devices == admin.devices
    # The admin's guardrails win over the owner's pins.
    cpu_only = admin.model_copy(update={"devices": ("cpu",)})
    uc = _intent({"class": "ai", "name": "x", "device": "gpu"}).spec.use_case
    assert planning_admin(cpu_only, _intent(uc.as_dict() if uc else None), current) is cpu_only
    assert "admin allows only cpu" in pin_notes(uc, cpu_only, has_gpu=True)[0]
    assert "no GPU node" in pin_notes(uc, admin, has_gpu=False)[0]
    assert pin_notes(uc, admin, has_gpu=True) == []
    # A count outside the admin's bounds (or none) leaves the bounds as they are: the replicas
    # actuators are left out of the planning context instead (fixed_knobs), so nothing widens.
    fixed_intent = _intent({"class": "ai", "name": "x", "horizontallyScalable": False})
    for outside in (60, 0):
        cfg = WorkloadConfig(replicas=outside, cpu=2.0, device="cpu")
        assert planning_admin(admin, fixed_intent, cfg).replicas == admin.replicas
    tight = admin.model_copy(update={"replicas": admin.replicas.model_copy(update={"min": 2})})
    one = WorkloadConfig(replicas=1, cpu=2.0, device="cpu")
    assert planning_admin(tight, fixed_intent, one).replicas == tight.replicas
    assert fixed_knobs(fixed_intent) == {"replicas"}
    assert fixed_knobs(_intent({"class": "ai", "name": "x"})) == frozenset()
    assert fixed_knobs(_intent(None)) == frozenset()
    acts = registry.create(("remove-pod", "cpu", "device"), admin)
    assert set(without_knobs(acts, fixed_knobs(fixed_intent))) == {"cpu", "device"}
    assert without_knobs(acts, frozenset()) is acts


def test_dispatch_policy_balance_is_the_admins() -> None:
    admin = AdminConfig.model_validate({"dispatch": {"policy": "lvs",
                                                     "policyParams": {"gain": 0.3}}})
    assert dispatch_policy(None, admin) == ("lvs", {"gain": 0.3})
    balance = _intent({"class": "ai", "name": "x"}).spec.use_case
    assert dispatch_policy(balance, admin) == ("lvs", {"gain": 0.3})
    squeeze = _intent({"class": "ai", "name": "x", "dispatch": "squeeze",
                       "dispatchParams": {"utilisationThreshold": 0.7}}).spec.use_case
    assert dispatch_policy(squeeze, admin) == ("squeeze", {"utilisationThreshold": 0.7})


def test_status_lists_the_current_and_every_use_case_of_the_workload() -> None:
    a = _intent({"class": "ai", "name": "detect", "device": "gpu"}, name="detect")
    b = _intent({"class": "ai", "name": "classify"}, name="classify")
    other = _intent({"class": "media", "name": "transcode"}, name="tx", target="video")
    plain = _intent(None, name="plain")
    cfg = WorkloadConfig(replicas=3, cpu=1.0, device="gpu")
    status = use_case_status(a, [a, b, other, plain], cfg, ["a note"])
    assert status is not None
    assert status["current"]["name"] == "detect" and status["current"]["runningOn"] == "gpu"
    assert status["current"]["replicas"] == 3
    assert [u["intent"] for u in status["all"]] == ["ml/classify", "ml/detect"]
    assert status["notes"] == ["a note"]
    assert use_case_status(plain, [plain], cfg) is None
    # An intent without a use case on a workload that has some still lists them.
    listed = use_case_status(plain, [a, plain], cfg)
    assert listed is not None and "current" not in listed and len(listed["all"]) == 1


def test_weights_actuator_uses_each_workloads_policy() -> None:
    act = WeightsActuator(AdminConfig.model_validate({"actuators": ["replicas", "weights"]}))
    assert act.engine(workload="ml/a").policy.name == "slo"
    weights_actuator.observe_dispatch([act], {"ml/a": ("lvs", {"gain": 0.2})})
    assert act.engine(workload="ml/a").policy.name == "lvs"
    assert act.engine(workload="ml/b").policy.name == "slo"
    assert act.policy_name("ml/a") == "lvs" and act.policy_name("ml/b") == "slo"
    weights_actuator.observe_dispatch([act], {})
    assert act.engine(workload="ml/a").policy.name == "slo"
    assert weights_actuator.use_case_problem("lvs", {"gain": 0.2}) is None
    bad = weights_actuator.use_case_problem("lvs", {"nonsense": 1})
    assert bad is not None and bad.startswith("spec.useCase.dispatchParams")
    unknown = weights_actuator.use_case_problem("no-such-policy", {})
    assert unknown is not None and unknown.startswith("spec.useCase.dispatch:")


def _multi_tenant(use_case: dict[str, Any] | None, gpu_speedup: float | None = None,
                  planner: str | None = None) -> ScenarioRun:
    doc = yaml.safe_load(MULTI.read_text())
    if gpu_speedup is not None:            # and GPUs nearly free: they pay at any load
        doc["workloads"][0]["service"]["gpu_speedup"] = gpu_speedup
        doc["cluster"]["pools"][1]["cost_per_gpu_hour"] = 0.01
    for m in doc["manifests"]:
        if m["kind"] == "Intent" and m["metadata"]["name"] == "inference" and use_case:
            m["spec"]["useCase"] = use_case
    return ScenarioRun(parse_scenario(doc, str(MULTI), MULTI.parent), planner)


def test_not_horizontally_scalable_keeps_the_replica_count() -> None:
    free = _multi_tenant(None)
    free.run(duration=1200)
    changed = {e["config"]["replicas"] for e in free.knowledge.events("ml/inference")}
    assert len(changed) > 1                       # the planner does scale this workload
    pinned = _multi_tenant({"class": "ai", "name": "infer", "horizontallyScalable": False})
    pinned.run(duration=1200)
    events = pinned.knowledge.events("ml/inference")
    assert {e["config"]["replicas"] for e in events} == {6}
    assert all(e["use_case"] == {"class": "ai", "name": "infer", "device": "auto"}
               for e in events)
    status = pinned.controller.status("ml/inference")
    assert status is not None and status["useCase"]["current"]["replicas"] == 6
    assert status["useCase"]["current"]["horizontallyScalable"] is False


@pytest.mark.parametrize(("device", "gpu_speedup"), [("cpu", 100.0), ("gpu", None)])
def test_a_pinned_device_is_the_only_one_planned(device: str, gpu_speedup: float | None
                                                 ) -> None:
    """Left to choose, the planner runs the other device (GPUs so fast that they pay, or too
    slow to); pinned, it runs the pinned one."""
    free = _multi_tenant(None, gpu_speedup)
    free.run(duration=1800)
    assert free.sim.workloads["ml/inference"].config.device != device
    run = _multi_tenant({"class": "ai", "name": "infer", "device": device}, gpu_speedup)
    run.run(duration=900)
    targets = {e["plan"]["target"]["device"] for e in run.knowledge.events("ml/inference")
               if e.get("plan") and e["plan"]["actions"]}
    assert targets == {device}
    assert run.sim.workloads["ml/inference"].config.device == device
    status = run.controller.status("ml/inference")
    assert status is not None and status["useCase"]["current"]["runningOn"] == device


def test_an_unusable_dispatch_policy_makes_the_intent_invalid() -> None:
    run = _multi_tenant({"class": "ai", "name": "infer", "dispatch": "manual",
                         "dispatchParams": {"noSuchRule": 1}})
    run.run(duration=300)
    status = run.controller.status("ml/inference")
    assert status is not None
    invalid = {c["type"]: c for c in status["conditions"]}["Invalid"]
    assert invalid["status"] == "True" and "spec.useCase.dispatch" in invalid["message"]
    assert "no_such_rule" in invalid["message"]
    assert not run.knowledge.events("ml/inference")          # neither planned nor applied
    assert run.knowledge.events("search/api")                # the other intent carries on


@pytest.mark.parametrize("planner", ["astar", "queueing", "hpa@60"])
def test_every_planner_keeps_the_replica_count_of_a_non_scalable_workload(planner: str) -> None:
    free = _multi_tenant(None, planner=planner)
    free.run(duration=900)
    assert len({e["config"]["replicas"] for e in free.knowledge.events("ml/inference")}) > 1
    pinned = _multi_tenant({"class": "ai", "name": "infer", "horizontallyScalable": False},
                           planner=planner)
    pinned.run(duration=900)
    assert {e["config"]["replicas"] for e in pinned.knowledge.events("ml/inference")} == {6}


def test_astar_plans_only_the_pinned_device() -> None:
    """Left alone, A* keeps this workload on CPU (its first goal state); pinned to GPU it
    plans GPU states only."""
    free = _multi_tenant(None, 100.0, planner="astar")
    free.run(duration=900)
    assert {e["config"]["device"] for e in free.knowledge.events("ml/inference")} == {"cpu"}
    pinned = _multi_tenant({"class": "ai", "name": "infer", "device": "gpu"}, 100.0,
                           planner="astar")
    pinned.run(duration=900)
    targets = {e["plan"]["target"]["device"] for e in pinned.knowledge.events("ml/inference")
               if e.get("plan") and e["plan"]["actions"]}
    assert targets == {"gpu"}
    assert pinned.sim.workloads["ml/inference"].config.device == "gpu"


def test_squeeze_from_the_use_case_weights_the_workload() -> None:
    doc = yaml.safe_load(MULTI.read_text())
    doc["admin"]["actuators"] = ["replicas", "weights"]
    for m in doc["manifests"]:
        if m["kind"] == "Intent" and m["metadata"]["name"] == "inference":
            m["spec"]["useCase"] = {"class": "ai", "name": "infer", "dispatch": "squeeze",
                                    "dispatchParams": {"utilisationThreshold": 0.7}}
    run = ScenarioRun(parse_scenario(doc, str(MULTI), MULTI.parent))
    run.run(duration=900)
    policies = {a["params"]["policy"] for e in run.knowledge.events("ml/inference")
                if e.get("plan") for a in e["plan"]["actions"] if a["actuator"] == "weights"}
    assert policies == {"squeeze"}
    others = {a["params"]["policy"] for e in run.knowledge.events("search/api")
              if e.get("plan") for a in e["plan"]["actions"] if a["actuator"] == "weights"}
    assert others == {"slo"}                     # the other workload keeps the admin's policy


def test_the_dispatch_policy_is_the_highest_priority_active_intents() -> None:
    """Two intents on one workload: the higher priority's policy weights it; a shadow intent's
    policy weights nothing (it acts on nothing)."""
    from planner.control.controller import IntentController

    def on_api(name: str, priority: float, policy: str, active: bool = True) -> Intent:
        return parse_intent({"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
                             "metadata": {"name": name, "namespace": "ml"},
                             "spec": {"targetRef": {"name": "api"}, "priority": priority,
                                      "active": active,
                                      "objectives": [{"name": "p95", "value": 50,
                                                      "measuredBy": "p95"}],
                                      "useCase": {"class": "web", "name": name,
                                                  "dispatch": policy}}})

    act = WeightsActuator(AdminConfig())
    ctl = object.__new__(IntentController)           # only the use-case bookkeeping is used
    ctl.admin, ctl.actuators = AdminConfig(), {"weights": act}
    ctl._use_cases([on_api("high", 0.9, "manual"), on_api("low", 0.2, "squeeze")])
    assert act.policy_name("ml/api") == "manual"
    ctl._use_cases([on_api("shadow", 0.9, "manual", active=False),
                    on_api("low", 0.2, "squeeze")])
    assert act.policy_name("ml/api") == "squeeze"
    ctl._use_cases([on_api("shadow", 0.9, "manual", active=False)])
    assert act.policy_name("ml/api") == "slo"
