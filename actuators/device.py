"""Device choice: run a workload's pods on CPU nodes or on GPU nodes."""

from __future__ import annotations

from actuators.base import Actuator
from actuators.cooldown import Cooldown
from actuators.topology import ClusterAware
from planner.domain.admin import AdminConfig
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, WorkloadConfig, WorkloadState


class DeviceActuator(ClusterAware, Actuator):
    """Sets the device (``cpu`` or ``gpu``; one GPU per pod).

    Bounds: the device is one of ``admin.devices``; ``gpu`` only where the cluster has GPU
    nodes (in the workload's pool, or anywhere when it is not pinned) and at least one GPU per
    replica - so it needs the cluster's topology (:mod:`actuators.topology`); without it, it
    proposes no GPU and holds a switch to GPU back. A switch restarts every pod, so after one
    no further switch for ``admin.cpu.cooldown_s`` (the same restart budget as CPU sizes).
    """

    name = "device"
    knobs = ("device",)

    def __init__(self, admin: AdminConfig, snapshot: ClusterSnapshot | None = None) -> None:
        Actuator.__init__(self, admin)
        ClusterAware.__init__(self, snapshot)
        self.cooldown = Cooldown(admin.cpu.cooldown_s)

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        allowed = self.admin.devices
        if not allowed or config.device in allowed:
            return config
        return config.with_(device="cpu" if "cpu" in allowed else allowed[0])

    def _gpu_problem(self, config: WorkloadConfig) -> str | None:
        """Why ``config`` cannot run on GPUs, or ``None`` if it can."""
        if self.topology is None:
            return "no cluster topology observed yet"
        gpus = self.topology.gpus(config.pool)
        where = f"pool {config.pool}" if config.pool is not None else "the cluster"
        if gpus == 0:
            return f"{where} has no GPU nodes"
        if gpus < config.replicas:
            return f"{where} has {gpus} GPU(s) for {config.replicas} replica(s)"
        return None

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        out: list[WorkloadConfig] = []
        for d in self.admin.devices:
            cand = current.with_(device=d)
            if d == current.device or (d == "gpu" and self._gpu_problem(cand) is not None):
                continue
            out.append(cand)
        return out[:limit]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        self.held.pop(workload, None)
        want = self.clip(target).device
        if want == current.device:
            return []
        what = f"device {current.device} -> {want}"
        if want == "gpu":
            problem = self._gpu_problem(target.with_(device="gpu"))
            if problem is not None:
                self.held[workload] = f"{what} held: {problem}"
                return []
        held = self.cooldown.why_held(memory, now, what)
        if held is not None:
            self.held[workload] = held
            return []
        nodes = "GPU nodes, one GPU per pod" if want == "gpu" else "CPU nodes"
        return [Action(self.name, workload, {"device": want, "from": current.device},
                       f"switch {what}: restarts {current.replicas} pod(s) on {nodes}")]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        backend.set_device(action.workload, str(action.params["device"]))

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        return self.cooldown.record(memory, now)
