"""The :class:`Actuator` extension point."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from planner.domain.admin import AdminConfig
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import WorkloadConfig, WorkloadState


class Actuator(ABC):
    """One kind of change to a workload (replicas, CPU size, device, placement, ...).

    Contract:

    * ``name`` is the registry name; ``knobs`` are the :class:`WorkloadConfig` fields this
      actuator changes. Two enabled actuators never share a knob.
    * :meth:`candidates` proposes neighbouring configurations reachable in one action, within
      the admin's bounds (used by search planners such as A*). At most ``limit`` of them.
    * Everything it remembers between cycles (last change, cooldown, engine state) is its
      ``memory`` of the intent: JSON-safe data passed in and returned, never kept in the
      instance (:mod:`planner.domain.memory`). The controller persists it and restores it
      after a restart. An actuator with nothing to remember ignores it.
    * :meth:`observe` is called once per cycle for each intent before planning; it returns the
      memory after taking in the cycle's observation (default: unchanged).
    * :meth:`steps` returns the actions that move ``current`` towards ``target`` this cycle,
      clipped to the admin's bounds (range, step size, cooldown). It is pure with respect to
      ``memory`` and may return an empty list (nothing to change, or held back - the reason is
      in ``held``, this call's output, read by the same planner right after).
    * :meth:`apply` performs one of its own actions on a backend; it is idempotent.
    * :meth:`applied` returns the memory after an action was carried out at ``now``.
    """

    name: ClassVar[str]
    knobs: ClassVar[tuple[str, ...]]

    def __init__(self, admin: AdminConfig) -> None:
        self.admin = admin
        self.held: dict[str, str] = {}
        """Per workload, why the last :meth:`steps` call held a change back."""

    @abstractmethod
    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]: ...

    def observe(self, workload: str, now: float, memory: Memory) -> Memory:
        """The memory after this cycle's observation of ``workload`` (default: unchanged)."""
        return memory

    @abstractmethod
    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]: ...

    @abstractmethod
    def apply(self, action: Action, backend: ClusterBackend) -> None: ...

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        """The memory after :meth:`apply` succeeded (default: unchanged)."""
        return memory

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        """``config`` with this actuator's knobs forced into the admin's bounds."""
        return config
