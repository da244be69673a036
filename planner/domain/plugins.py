"""One plugin registry for every extension point: planners, actuators, weight policies.

A :class:`Registry` finds plugins through Python entry points (the group names the kind) and,
in-process, through its :meth:`Registry.register` decorator (tests, notebooks). Built-in plugins
are declared as entry points in the project's own ``pyproject.toml``, exactly as a third party
declares theirs::

    [project.entry-points."intent_planner.actuators"]
    my-actuator = "mypkg.module:MyActuator"

A registry imports no plugin module until a plugin is asked for, so extension points and their
implementations never import each other in a cycle. The entry point's name is the plugin's name
(the class attribute ``name`` is set to it). A plugin that fails to load is logged and left out;
it never takes the caller down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar, cast

from planner.domain.errors import SpecError

log = logging.getLogger(__name__)

T = TypeVar("T")


class Registry(Generic[T]):
    """Plugins of one kind: subclasses of ``base`` found under the entry-point ``group``."""

    def __init__(self, group: str, base: type, kind: str) -> None:
        self.group = group
        self.base = base
        self.kind = kind
        """What a plugin of this registry is called in messages (``planner``, ...)."""
        self._registered: dict[str, type[T]] = {}
        self._discovered: dict[str, type[T]] | None = None
        self._names: list[str] | None = None
        self._lock = threading.Lock()

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: register ``cls`` under ``name`` in this process. A name already
        taken by another class is refused (:class:`ValueError`)."""

        def decorate(cls: type[T]) -> type[T]:
            taken = self.available().get(name)
            if taken is not None and taken is not cls:
                raise ValueError(f"{self.kind} {name!r} already registered by {taken!r}")
            cls.name = name  # type: ignore[attr-defined]
            self._registered[name] = cls
            return cls

        return decorate

    def unregister(self, name: str) -> None:
        """Forget a plugin registered in this process (entry points stay)."""
        self._registered.pop(name, None)

    def refresh(self) -> None:
        """Look the entry points up again (after installing a package in this process)."""
        with self._lock:
            self._discovered = None
            self._names = None

    def available(self) -> dict[str, type[T]]:
        """Every plugin by name: entry points first, then those registered in this process."""
        return {**self._entry_points(), **self._registered}

    def names(self) -> list[str]:
        """The names of every plugin (entry points and those registered in this process),
        sorted, without importing any plugin module: for checks of names only. A plugin that
        fails to load is listed here; :meth:`available` and :meth:`get` leave it out."""
        with self._lock:
            if self._names is None:
                self._names = [ep.name for ep in entry_points(group=self.group)]
            declared = self._names
        return sorted({*declared, *self._registered})

    def get(self, name: str, field: str, source: str = "") -> type[T]:
        """The plugin ``name``; an unknown name is a :class:`SpecError` for ``field``."""
        known = self.available()
        if name not in known:
            raise SpecError(source, field, f"unknown {self.kind} {name!r}",
                            f"use one of {sorted(known)}")
        return known[name]

    def _entry_points(self) -> dict[str, type[T]]:
        with self._lock:
            if self._discovered is None:
                found: dict[str, type[T]] = {}
                for ep in entry_points(group=self.group):
                    try:
                        cls: Any = ep.load()
                    except Exception:  # a broken plugin must not take the CLI down
                        log.exception("cannot load %s plugin %s", self.kind, ep.value)
                        continue
                    if isinstance(cls, type) and issubclass(cls, self.base):
                        cls.name = ep.name  # type: ignore[attr-defined]
                        found[ep.name] = cast("type[T]", cls)
                    else:
                        log.error("%s plugin %s is not a %s subclass", self.kind, ep.value,
                                  self.base.__name__)
                self._discovered = found
            return self._discovered
