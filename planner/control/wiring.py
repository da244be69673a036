"""The one place a controller is assembled: the simulator, the operator and ``serve`` all call
:func:`build_controller` with their own backend, KPI source and intent source.

It creates the enabled actuators from the admin's configuration (plugin names checked), the
controller, and the training hook when a configured planner reads learned models. Every
configured planner is created once first, so that a bad ``plannerOptions`` entry is an error
here rather than in a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from actuators import registry as actuator_registry
from knowledge.base import KnowledgeBase
from planner.control.controller import IntentController
from planner.control.heap import HeapKeeper
from planner.control.training import Trainer
from planner.domain.admin import AdminConfig
from planner.domain.ports import ClusterBackend, IntentSource, KPISource
from planner.planners import registry as planner_registry


@dataclass
class Assembly:
    """A controller and the hooks built with it; :meth:`close` stops what runs beside it."""

    controller: IntentController
    trainer: Trainer | None
    heap: HeapKeeper | None = None

    def close(self) -> None:
        if self.trainer is not None:
            self.trainer.close()
        if self.heap is not None:
            self.heap.close()


def needs_training(admin: AdminConfig) -> bool:
    """Whether any planner the admin configured reads learned effect models."""
    known = planner_registry.available()
    names = {admin.planner, *admin.planners_by_namespace.values()}
    return any(known[n].uses_models for n in names if n in known)


def build_controller(backend: ClusterBackend, kpis: KPISource, source: IntentSource,
                     knowledge: KnowledgeBase, admin: AdminConfig, *,
                     threaded_training: bool = False, keep_heap: bool = False) -> Assembly:
    """A controller over ``backend`` with the admin's actuators, and a :class:`Trainer` hook
    when a configured planner learns (``threaded_training``: fits off the cycle's thread, for
    live runs; simulations train inline so they stay deterministic; the admin's
    ``training.executor`` may name another place, e.g. worker processes or a Dask cluster).
    ``keep_heap``: a :class:`HeapKeeper` hook, for a process that runs the controller (it
    changes the process's garbage collector)."""
    planner_registry.check_admin(admin)
    knowledge.follow_clock(backend.now)  # effects stamped by this clock are not "the future"
    actuators = actuator_registry.create(actuator_registry.enabled_names(admin), admin)
    controller = IntentController(backend, kpis, source, knowledge, admin, actuators=actuators)
    trainer = None
    if needs_training(admin):
        trainer = Trainer(knowledge, source, threaded=threaded_training,
                          settings=admin.training)
        controller.hooks.append(trainer)
    heap = None
    if keep_heap:
        heap = HeapKeeper()
        controller.hooks.append(heap)
    return Assembly(controller, trainer, heap)
