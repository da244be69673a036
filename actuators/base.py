"""The :class:`Actuator` extension point."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from planner.domain.admin import AdminConfig
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
    * :meth:`steps` returns the actions that move ``current`` towards ``target`` this cycle,
      clipped to the admin's bounds (range, step size, cooldown). It does not mutate state and
      may return an empty list (nothing to change, or held back - the reason is in ``held``).
    * :meth:`apply` performs one of its own actions on a backend; it is idempotent.
    * :meth:`applied` records that an action was carried out at ``now`` (cooldown bookkeeping).
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

    @abstractmethod
    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float) -> list[Action]: ...

    @abstractmethod
    def apply(self, action: Action, backend: ClusterBackend) -> None: ...

    def applied(self, action: Action, now: float) -> None:  # noqa: B027 - optional hook
        """Called after :meth:`apply` succeeded."""

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        """``config`` with this actuator's knobs forced into the admin's bounds."""
        return config
