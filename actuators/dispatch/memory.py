"""What the ``weights`` actuator remembers of an intent, as JSON-safe data.

The layout (one mapping, the actuator's part of :class:`planner.domain.memory.IntentMemory`) is
described in :mod:`actuators.weights`; :class:`WeightsMemory` reads it (checking its shape) and
writes it back, leaving out what is empty.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actuators.dispatch.sinks import BACKEND, Delivery
from planner.domain.memory import Memory


@dataclass(frozen=True)
class WeightsMemory:
    """The ``weights`` actuator's memory of one intent (see :mod:`actuators.weights`)."""

    workload: str = ""
    at: float | None = None
    """When the engine last took in samples."""
    engine: Mapping[str, Any] = field(default_factory=dict)
    """:meth:`actuators.dispatch.WeightEngine.state`."""
    decisions: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Per pod whose weight differs from what the first sink holds: status and reason."""
    delivered: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Per sink, the weights it holds."""
    failures: Mapping[str, str] = field(default_factory=dict)
    """Per sink, why its last write failed."""
    no_backend: bool = False
    """The backend refused dispatch weights: the data planes are the only sinks."""

    @property
    def policy(self) -> str | None:
        """The name of the policy whose state the engine holds."""
        name = self.engine.get("policy")
        return name if isinstance(name, str) else None

    def weights(self) -> dict[str, int]:
        """The weights the engine holds (the last update's), per pod (0: not ready)."""
        endpoints = self.engine.get("endpoints", {})
        if not isinstance(endpoints, Mapping):
            return {}
        return {str(pod): _int(state.get("weight")) if isinstance(state, Mapping) else 0
                for pod, state in endpoints.items()}

    def delivered_to(self, delivery: Delivery) -> WeightsMemory:
        """This memory after ``delivery``: each sink written holds what it accepted, a sink's
        failure replaces its last one, a success clears it."""
        delivered = {s: dict(held) for s, held in self.delivered.items()}
        for sink, held in delivery.held.items():
            delivered[sink] = {**delivered.get(sink, {}), **held}
        written = set(delivery.held) | set(delivery.failures)
        failures = {s: m for s, m in self.failures.items() if s not in written}
        failures.update(delivery.failures)
        no_backend = self.no_backend or delivery.no_backend
        if no_backend:
            delivered.pop(BACKEND, None)
            failures.pop(BACKEND, None)
        return WeightsMemory(self.workload, self.at, self.engine, self.decisions, delivered,
                             failures, no_backend)

    def as_memory(self) -> dict[str, Any]:
        out: dict[str, Any] = {"workload": self.workload}
        if self.at is not None:
            out["at"] = self.at
        for key, value in (("engine", self.engine), ("decisions", self.decisions),
                           ("delivered", self.delivered), ("failures", self.failures)):
            if value:
                out[key] = {k: dict(v) if isinstance(v, Mapping) else v
                            for k, v in value.items()}
        if self.no_backend:
            out["no_backend"] = True
        return out

    @staticmethod
    def of(memory: Memory, workload: str) -> WeightsMemory:
        """``memory`` read for ``workload`` (a memory of another workload: a fresh one); a
        malformed memory is a :class:`ValueError`."""
        if memory.get("workload") != workload:
            return WeightsMemory(workload)
        at, engine = memory.get("at"), memory.get("engine", {})
        decisions, delivered = memory.get("decisions", {}), memory.get("delivered", {})
        failures, no_backend = memory.get("failures", {}), memory.get("no_backend", False)
        if at is not None and not _number(at):
            raise ValueError("at must be a finite number")
        if not isinstance(engine, Mapping) or not isinstance(no_backend, bool):
            raise ValueError("engine must be a mapping, no_backend a boolean")
        if not _mapping_of(decisions, lambda d: _mapping_of(d, _str)):
            raise ValueError("decisions must map pods to {status, reason}")
        if not _mapping_of(delivered, lambda d: _mapping_of(d, _integer)):
            raise ValueError("delivered must map sinks to {pod: weight}")
        if not _mapping_of(failures, _str):
            raise ValueError("failures must map sinks to messages")
        return WeightsMemory(workload, None if at is None else float(at), engine, decisions,
                             delivered, failures, no_backend)


def _mapping_of(value: object, check: Callable[[object], bool]) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and check(v) for k, v in value.items())


def _str(value: object) -> bool:
    return isinstance(value, str)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
