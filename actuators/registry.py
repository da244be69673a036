"""Registry of actuators: built-ins register with a decorator, third parties by entry point.

Third-party packages declare ``[project.entry-points."intent_planner.actuators"]``
``myname = "mypkg.module:MyActuator"``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points

from actuators.base import Actuator
from planner.domain.admin import AdminConfig
from planner.domain.errors import SpecError

ENTRY_POINT_GROUP = "intent_planner.actuators"
_REGISTRY: dict[str, type[Actuator]] = {}


def register_actuator(name: str) -> Callable[[type[Actuator]], type[Actuator]]:
    def deco(cls: type[Actuator]) -> type[Actuator]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls
    return deco


def _load_builtins() -> None:
    from actuators import (  # noqa: F401 - register
        cpu,
        device,
        placement,
        remove_pod,
        replicas,
        weights,
    )


def _load_entry_points() -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            try:
                cls = ep.load()
            except Exception:  # a broken plugin must not take the CLI down
                logging.getLogger(__name__).exception("cannot load plugin %s", ep.value)
                continue
            if isinstance(cls, type) and issubclass(cls, Actuator):
                cls.name = ep.name  # the registry key is the name actions carry
                _REGISTRY[ep.name] = cls
            else:
                logging.getLogger(__name__).error("plugin %s is not a Actuator subclass",
                                                  ep.value)


def available() -> dict[str, type[Actuator]]:
    _load_builtins()
    _load_entry_points()
    return dict(_REGISTRY)


def create(names: Iterable[str], admin: AdminConfig) -> dict[str, Actuator]:
    """Instantiate the enabled actuators; an unknown name is a :class:`SpecError`."""
    known = available()
    out: dict[str, Actuator] = {}
    claimed: dict[str, str] = {}
    for name in names:
        if name not in known:
            raise SpecError("admin", "actuators", f"unknown actuator {name!r}",
                            f"use one of {sorted(known)}")
        act = known[name](admin)
        for knob in act.knobs:
            if knob in claimed:
                raise SpecError("admin", "actuators",
                                f"{name!r} and {claimed[knob]!r} both change {knob}",
                                "enable only one of them")
            claimed[knob] = name
        out[name] = act
    return out
