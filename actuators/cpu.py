"""CPU rightsizing: the CPU request of every pod, one size of ``admin.cpu.sizes`` at a time."""

from __future__ import annotations

import bisect

from actuators.base import Actuator
from actuators.cooldown import Cooldown
from actuators.topology import ClusterAware
from planner.domain.admin import AdminConfig
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, WorkloadConfig, WorkloadState


class CpuActuator(ClusterAware, Actuator):
    """Sets the CPU request (cores per pod).

    Bounds from ``admin.cpu``: the size is one of ``sizes``; a plan moves at most one size per
    cycle; after any CPU change no further change for ``cooldown_s``. The change restarts every
    pod (as IDO's rightsizing does) unless the cluster resizes running pods in place (the
    cycle's snapshot says so: :attr:`ClusterSnapshot.in_place_resize`); the reason says which.
    """

    name = "cpu"
    knobs = ("cpu",)

    def __init__(self, admin: AdminConfig, snapshot: ClusterSnapshot | None = None) -> None:
        Actuator.__init__(self, admin)
        ClusterAware.__init__(self, snapshot)
        self.sizes: tuple[float, ...] = tuple(sorted(set(admin.cpu.sizes)))
        self.cooldown = Cooldown(admin.cpu.cooldown_s)

    def nearest(self, cpu: float) -> float:
        """The allowed size closest to ``cpu`` (the larger one on a tie: the SLO first)."""
        return min(self.sizes, key=lambda s: (abs(s - cpu), -s))

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        return config if config.cpu in self.sizes else config.with_(cpu=self.nearest(config.cpu))

    def _neighbours(self, cpu: float) -> tuple[float | None, float | None]:
        """The next allowed size below and above ``cpu`` (``None`` at either end)."""
        lo = bisect.bisect_left(self.sizes, cpu)
        hi = bisect.bisect_right(self.sizes, cpu)
        below = self.sizes[lo - 1] if lo > 0 else None
        above = self.sizes[hi] if hi < len(self.sizes) else None
        return below, above

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        below, above = self._neighbours(current.cpu)
        out = [current.with_(cpu=c) for c in (above, below) if c is not None]
        return out[:limit]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        self.held.pop(workload, None)
        want = self.clip(target).cpu
        if want == current.cpu:
            return []
        held = self.cooldown.why_held(memory, now, f"resize {current.cpu:g} -> {want:g} cpu")
        if held is not None:
            self.held[workload] = held
            return []
        below, above = self._neighbours(current.cpu)
        new = above if want > current.cpu else below
        if new is None:  # cannot happen: want is an allowed size on that side
            return []
        towards = "" if new == want else f" (towards {want:g}, one size per cycle)"
        verb = "more" if new > current.cpu else "less"
        how = (f"in place on {current.replicas} running pod(s)"
               if self.snapshot is not None and self.snapshot.in_place_resize
               else f"restarts {current.replicas} pod(s)")
        return [Action(self.name, workload, {"cpu": new, "from": current.cpu},
                       f"resize {current.cpu:g} -> {new:g} cpu{towards}: {verb} CPU per pod, "
                       f"{how}")]

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        backend.resize(action.workload, float(action.params["cpu"]))

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        return self.cooldown.record(memory, now)
