"""Canaries: a few pods of another shape (CPU size, device, node pool) beside a workload,
behind the same Service, run as a second Deployment (:meth:`ClusterBackend.set_canary`).

The planner starts and stops a canary to try a shape no model has observed on a bounded
share of the load (:mod:`planner.planners.canary`); this actuator carries its actions out. It
turns no knob of the workload's own configuration, so target-driven planning never asks it
for steps. Enabled with the ``cpu``, ``device`` or ``placement`` actuator unless
``canary.enabled`` is off (:func:`actuators.registry.enabled_names`).
"""

from __future__ import annotations

from actuators.base import Actuator
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import WorkloadConfig, WorkloadState


def describe(cfg: WorkloadConfig) -> str:
    return (f"{cfg.replicas} x {cfg.cpu:g} cpu {cfg.device}"
            + (f" in {cfg.pool}" if cfg.pool else ""))


class CanaryActuator(Actuator):
    """Starts, resizes and stops a workload's canary."""

    name = "canary"
    knobs = ()

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        return []

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        return []

    def start(self, workload: str, canary: WorkloadConfig, why: str) -> Action:
        """The action that runs ``canary`` beside ``workload``."""
        return Action(self.name, workload, {"canary": canary.as_dict()},
                      f"canary {describe(canary)}: {why}")

    def stop(self, workload: str, why: str) -> Action:
        """The action that removes ``workload``'s canary."""
        return Action(self.name, workload, {"canary": None}, f"canary stopped: {why}")

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        spec = action.params.get("canary")
        if spec is None:
            backend.set_canary(action.workload, None)
            return
        backend.set_canary(action.workload, WorkloadConfig(
            int(spec["replicas"]), float(spec["cpu"]), str(spec["device"]),
            None if spec.get("pool") is None else str(spec["pool"])))
