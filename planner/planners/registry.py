"""The planner registry (entry-point group ``intent_planner.planners``; built-ins are declared
in the project's ``pyproject.toml`` like any third party's, see :mod:`planner.domain.plugins`).
"""

from __future__ import annotations

from planner.domain.plugins import Registry
from planner.planners.base import Planner

ENTRY_POINT_GROUP = "intent_planner.planners"
REGISTRY: Registry[Planner] = Registry(ENTRY_POINT_GROUP, Planner, "planner")
register_planner = REGISTRY.register
available = REGISTRY.available


def create(name: str) -> Planner:
    """A new instance of the planner ``name``; an unknown name is a :class:`SpecError`."""
    return REGISTRY.get(name, "planner")()
