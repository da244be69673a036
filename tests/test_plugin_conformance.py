"""Every registered planner and actuator (built-ins and a third party's, installed by entry
point) passes the plugin contract of ``tests/plugin_conformance.py``."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from actuators import registry as actuator_registry
from planner.planners import registry as planner_registry
from planner.planners.base import PlanningContext
from tests import plugin_conformance as pc

PLANNERS = sorted([*planner_registry.available(), "toy-keep"])
ACTUATORS = sorted([*actuator_registry.available(), "toy-note"])
_CONTEXTS: dict[tuple[str, ...], list[PlanningContext]] = {}


@pytest.fixture(autouse=True, scope="module")
def toy_plugins() -> Iterator[None]:
    """The third party is installed for this module only (other tests see the built-ins)."""
    where = pc.install_toy_plugins()
    yield
    pc.uninstall_toy_plugins(where)


def test_the_third_party_plugins_are_found_by_entry_point() -> None:
    assert "toy-keep" in planner_registry.available()
    assert "toy-note" in actuator_registry.available()
    assert {"grid", "queueing", "astar", "hpa"} <= set(PLANNERS)
    assert {"replicas", "remove-pod", "cpu", "device", "placement", "weights"} <= set(ACTUATORS)


def test_names_lists_the_plugins_without_importing_them() -> None:
    """What scenario validation checks admin names against (``validate`` stays quick)."""
    for registry, toy in ((planner_registry.REGISTRY, "toy-keep"),
                          (actuator_registry.REGISTRY, "toy-note")):
        registry.refresh()
        sys.modules.pop("toy_plugins", None)
        assert toy in registry.names()
        assert "toy_plugins" not in sys.modules
        assert registry.names() == sorted(registry.available())
        assert "toy_plugins" in sys.modules


HPA_BYPASSES_STEPS = pytest.mark.xfail(strict=True, reason=(
    "hpa reproduces the Kubernetes HPA controller (its own scale-up limit and stabilisation "
    "window) and writes its replica action itself, bypassing the admin's step and cooldown; "
    "routing it through the replicas actuator changes the HPA baseline (heterogeneous, seed 1: "
    "58 -> 25 violation-minutes), which the layered-shape restructuring must not do"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=HPA_BYPASSES_STEPS) if n == "hpa" else n
                                  for n in PLANNERS])
def test_planner_keeps_the_contract(name: str) -> None:
    ctxs = pc.actuator_contexts("placement", _CONTEXTS, actuator_registry.available()["cpu"])
    pc.PlannerConformance().check(planner_registry.available()[name], ctxs)


@pytest.mark.parametrize("name", ACTUATORS)
def test_actuator_keeps_the_contract(name: str) -> None:
    plugin = actuator_registry.available()[name]
    pc.ActuatorConformance().check(name, pc.actuator_contexts(name, _CONTEXTS, plugin))


def test_the_suite_catches_a_planner_with_hidden_state() -> None:
    """The check can fail: a planner that counts cycles in the instance is caught."""
    from dataclasses import replace

    toy = planner_registry.available()["toy-keep"]

    class Counting(toy):  # type: ignore[misc,valid-type]
        seen = 0

        def plan(self, ctx: PlanningContext):  # type: ignore[no-untyped-def]
            Counting.seen += 1
            plan = super().plan(ctx)
            return replace(plan, memory={"cycles": Counting.seen})

    Counting.name = "counting"
    ctxs = pc.actuator_contexts("placement", _CONTEXTS, actuator_registry.available()["cpu"])
    with pytest.raises(AssertionError):
        pc.PlannerConformance().check(Counting, ctxs)
