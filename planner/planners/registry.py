"""Registry of planners: built-ins register with a decorator, third parties by entry point
(group ``intent_planner.planners``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points

from planner.domain.errors import SpecError
from planner.planners.base import Planner

ENTRY_POINT_GROUP = "intent_planner.planners"
_REGISTRY: dict[str, type[Planner]] = {}


def register_planner(name: str) -> Callable[[type[Planner]], type[Planner]]:
    def deco(cls: type[Planner]) -> type[Planner]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return deco


def _load() -> None:
    from planner.planners import astar, hpa, optimizer, queueing  # noqa: F401 - register themselves

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            try:
                cls = ep.load()
            except Exception:  # a broken plugin must not take the CLI down
                logging.getLogger(__name__).exception("cannot load plugin %s", ep.value)
                continue
            if isinstance(cls, type) and issubclass(cls, Planner):
                cls.name = ep.name  # the registry key is the name actions carry
                _REGISTRY[ep.name] = cls
            else:
                logging.getLogger(__name__).error("plugin %s is not a Planner subclass",
                                                  ep.value)


def available() -> dict[str, type[Planner]]:
    _load()
    return dict(_REGISTRY)


def create(name: str) -> Planner:
    known = available()
    if name not in known:
        raise SpecError("", "planner", f"unknown planner {name!r}", f"use one of {sorted(known)}")
    return known[name]()
