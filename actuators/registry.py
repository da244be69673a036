"""The actuator registry (entry-point group ``intent_planner.actuators``; built-ins are declared
in the project's ``pyproject.toml`` like any third party's, see :mod:`planner.domain.plugins`).
"""

from __future__ import annotations

from collections.abc import Iterable

from actuators.base import Actuator
from planner.domain.admin import AdminConfig
from planner.domain.errors import SpecError
from planner.domain.plugins import Registry

ENTRY_POINT_GROUP = "intent_planner.actuators"
REGISTRY: Registry[Actuator] = Registry(ENTRY_POINT_GROUP, Actuator, "actuator")
register_actuator = REGISTRY.register
available = REGISTRY.available


EXPLORING = ("cpu", "device", "placement")
"""Actuators whose unobserved shapes are tried through a canary first."""


def enabled_names(admin: AdminConfig) -> tuple[str, ...]:
    """The admin's actuators, plus ``canary`` where a shape is tried before the workload moves
    to it (``cpu``, ``device`` or ``placement`` enabled, ``canary.enabled`` on)."""
    names = tuple(admin.actuators)
    if (admin.canary.enabled and "canary" not in names
            and any(n in names for n in EXPLORING)):
        names = (*names, "canary")
    return names


def create(names: Iterable[str], admin: AdminConfig) -> dict[str, Actuator]:
    """Instantiate the enabled actuators; an unknown name is a :class:`SpecError`."""
    out: dict[str, Actuator] = {}
    claimed: dict[str, str] = {}
    for name in names:
        act = REGISTRY.get(name, "actuators", "admin")(admin)
        for knob in act.knobs:
            if knob in claimed:
                raise SpecError("admin", "actuators",
                                f"{name!r} and {claimed[knob]!r} both change {knob}",
                                "enable only one of them")
            claimed[knob] = name
        out[name] = act
    return out
