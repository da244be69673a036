"""What planners and actuators remember between cycles, as data.

Cooldowns and last-change times, risk margins, load forecasts, exploration trials, online
estimates, dispatch-weight engines: none of it lives in a plugin instance. Each intent has one
:class:`IntentMemory`; the controller passes the relevant part in (``PlanningContext.memory``
for the planner, the ``memory`` argument of the actuator calls), receives the new part back
(``Plan.memory``, the actuators' return values), keeps it, persists it in the knowledge base
and restores it after a restart. A plugin's part is plain JSON-safe data it owns (a mapping
of strings to numbers, strings, booleans, ``None``, lists and mappings), so it can be stored in
MongoDB, shown, and compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

Memory = Mapping[str, Any]
"""One plugin's memory of one intent: JSON-safe data, owned and interpreted by the plugin."""

EMPTY: Memory = MappingProxyType({})
"""An empty memory (read-only)."""


@dataclass(frozen=True)
class IntentMemory:
    """The memory of one intent: its planner's and each actuator's part."""

    intent: str
    planner: str = ""
    """The planner that wrote :attr:`planning` (another planner starts from nothing)."""
    planning: Memory = field(default_factory=dict)
    actuators: Mapping[str, Memory] = field(default_factory=dict)
    """Per actuator name."""
    changes: Mapping[str, float] = field(default_factory=dict)
    """Per actuator name, when it last applied an action (the controller's own record, shown
    in the Intent status as ``lastChangeTimes``, as HPA shows ``lastScaleTime``)."""
    time: float = 0.0
    """When it was last changed (the cycle's time)."""
    safety: Memory = field(default_factory=dict)
    """The safety layer's part (stuck-rollout watch, vetoed shapes): it outlives a change of
    planner."""

    def for_planner(self, name: str) -> Memory:
        """The planner ``name``'s part (empty if another planner wrote it)."""
        return self.planning if self.planner == name else EMPTY

    def for_actuator(self, name: str) -> Memory:
        return self.actuators.get(name, EMPTY)

    def with_planning(self, planner: str, memory: Memory, time: float) -> IntentMemory:
        return replace(self, planner=planner, planning=memory, time=time)

    def with_actuator(self, name: str, memory: Memory, time: float) -> IntentMemory:
        return replace(self, actuators={**self.actuators, name: memory}, time=time)

    def with_change(self, name: str, time: float) -> IntentMemory:
        return replace(self, changes={**self.changes, name: time}, time=time)

    def with_safety(self, memory: Memory, time: float) -> IntentMemory:
        return replace(self, safety=memory, time=time)

    def as_document(self) -> dict[str, Any]:
        return {"intent": self.intent, "planner": self.planner,
                "planning": plain(self.planning),
                "actuators": {k: plain(v) for k, v in sorted(self.actuators.items())},
                "changes": dict(sorted(self.changes.items())), "time": self.time,
                "safety": plain(self.safety)}

    @staticmethod
    def from_document(doc: Mapping[str, Any]) -> IntentMemory:
        """The memory a document holds; a malformed document is a :class:`ValueError`."""
        intent, planner = doc.get("intent"), doc.get("planner", "")
        planning, actuators = doc.get("planning", {}), doc.get("actuators", {})
        time, changes = doc.get("time", 0.0), doc.get("changes", {})
        safety = doc.get("safety") or {}
        if not isinstance(intent, str) or not isinstance(planner, str):
            raise ValueError("memory: intent and planner must be strings")
        if not isinstance(planning, Mapping) or not isinstance(actuators, Mapping) or not all(
                isinstance(k, str) and isinstance(v, Mapping) for k, v in actuators.items()):
            raise ValueError("memory: planning and actuators must be mappings")
        if not isinstance(safety, Mapping):
            raise ValueError("memory: safety must be a mapping")
        if not isinstance(time, int | float) or not math.isfinite(time):
            raise ValueError("memory: time must be a finite number")
        if not isinstance(changes, Mapping) or not all(
                isinstance(k, str) and isinstance(v, int | float) for k, v in changes.items()):
            raise ValueError("memory: changes must map actuator names to times")
        return IntentMemory(intent, planner, dict(planning),
                            {k: dict(v) for k, v in actuators.items()},
                            {k: float(v) for k, v in changes.items()}, float(time),
                            dict(safety))


def plain(value: Any) -> Any:
    """``value`` as JSON-safe data: mappings with string keys, lists, finite numbers (a
    non-finite float becomes ``None``), strings, booleans and ``None``. Anything else is a
    :class:`TypeError` (a plugin that remembers an object must say how to write it down)."""
    kind = type(value)
    # Exact builtin types first (an ABC check per value costs more than the conversion).
    if kind is float:
        return value if math.isfinite(value) else None
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is list or kind is tuple:
        return [plain(v) for v in value]
    if kind is dict:
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    raise TypeError(f"memory holds a {type(value).__name__}: only JSON-safe data can be kept")
