"""What the API serves from: the controller and the pieces it drives.

A :class:`Runtime` gives the API the controller (its backend, KPI source, intent source, admin
config, planners and actuators) and the knowledge base, plus a lock that serialises the
controller's cycles with the moments a preview reads live state. Build one with
:meth:`Runtime.from_controller` (any backend, e.g. Kubernetes); the embedded default (simulated
cluster + controller) is built by the front-end that owns the simulation
(:func:`planner.cli.embedded.scenario_runtime`).

Why a lock: a preview reads the controller's memory of an intent, copies the live actuators
and observes the cluster; doing that while a cycle changes them (or while the simulator steps)
would read a half-updated state. Whoever builds a runtime wraps the method that drives the
controller (``IntentController.cycle``, a simulation's step) with :meth:`Runtime.guard` so that
it holds :attr:`Runtime.lock`. Build the runtime before handing ``controller.cycle`` to
whatever drives it (e.g. the operator's cycle runner), so that
the driver calls the guarded method.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from knowledge.base import KnowledgeBase
from planner.control.controller import IntentController
from planner.domain.intents import Intent, KPIProfile
from planner.domain.ports import ClusterBackend, IntentSource, KPISource

Measure = Callable[[Intent, KPIProfile], "float | None"]


def _guard(obj: object, method: str, lock: threading.RLock) -> None:
    """Make ``obj.method`` hold ``lock`` (idempotent)."""
    inner = getattr(obj, method)
    if getattr(inner, "__intent_planner_guarded__", None) is lock:
        return

    @functools.wraps(inner)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return inner(*args, **kwargs)

    locked.__intent_planner_guarded__ = lock  # type: ignore[attr-defined]
    setattr(obj, method, locked)


@dataclass
class Runtime:
    controller: IntentController
    lock: threading.RLock = field(default_factory=threading.RLock)
    looping: bool = True
    """Whether something keeps running controller cycles (``run``); ``False`` for ``serve``,
    which serves a cluster frozen after its warm-up."""
    description: str = ""
    peek: Callable[[], Any] | None = None
    """Context manager factory: KPI measurements inside it leave no trace (see
    :meth:`measure`)."""
    closers: list[Callable[[], None]] = field(default_factory=list)

    # -------------------------------------------------------------- pieces
    @property
    def backend(self) -> ClusterBackend:
        return self.controller.backend

    @property
    def kpis(self) -> KPISource:
        return self.controller.kpis

    @property
    def source(self) -> IntentSource:
        return self.controller.source

    @property
    def knowledge(self) -> KnowledgeBase:
        return self.controller.knowledge

    @property
    def cycles(self) -> int:
        return self.controller.cycles

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        """The KPI's current value, read without side effects on the run.

        The simulator draws measurement noise from its random stream; a preview must not
        advance that stream (the next cycle would measure something else), so for the
        embedded default the stream's state is restored afterwards.
        """
        if self.peek is None:
            return self.kpis.measure(intent, profile)
        with self.peek():
            return self.kpis.measure(intent, profile)

    def guard(self, obj: object, method: str) -> None:
        """Make ``obj.method`` hold :attr:`lock` (idempotent)."""
        _guard(obj, method, self.lock)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()

    # -------------------------------------------------------------- constructors
    @classmethod
    def from_controller(cls, controller: IntentController, *, looping: bool = True,
                        description: str = "") -> Runtime:
        rt = cls(controller, looping=looping, description=description or
                 f"{controller.backend.name} backend")
        _guard(controller, "cycle", rt.lock)
        return rt
