"""Horizontal scaling within the admin's bounds: range, step per cycle, anti-flapping."""

from __future__ import annotations

from actuators.base import Actuator
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import WorkloadConfig, WorkloadState


class ReplicasActuator(Actuator):
    """Sets the replica count.

    Bounds from ``admin.replicas``: ``min``/``max``, at most ``max_step`` replicas per cycle,
    and no scale-down within ``cooldown_s`` of a scale-up (scale-up is never held back: the
    SLO comes first). Memory: ``{"last_up": time}`` of the last scale-up.
    """

    name = "replicas"
    knobs = ("replicas",)

    def clip(self, config: WorkloadConfig) -> WorkloadConfig:
        b = self.admin.replicas
        return config.with_(replicas=min(b.max, max(b.min, config.replicas)))

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        b = self.admin.replicas
        deltas = sorted({1, 2, max(1, b.max_step // 2), b.max_step})
        out: list[WorkloadConfig] = []
        for d in deltas:
            for r in (current.replicas + d, current.replicas - d):
                if b.min <= r <= b.max and r != current.replicas:
                    cfg = current.with_(replicas=r)
                    if cfg not in out:
                        out.append(cfg)
        return out[:limit]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        self.held.pop(workload, None)
        b = self.admin.replicas
        want = min(b.max, max(b.min, target.replicas))
        if want == current.replicas:
            return []
        if want < current.replicas:
            last_up = memory.get("last_up")
            if last_up is not None and now - last_up < b.cooldown_s:
                self.held[workload] = (f"scale-down to {want} held: {now - last_up:.0f}s since "
                                       f"the last scale-up < cooldown {b.cooldown_s:.0f}s")
                return []
        step = max(-b.max_step, min(b.max_step, want - current.replicas))
        new = current.replicas + step
        verb = "scale out" if step > 0 else "scale in"
        clipped = "" if new == want else f" (towards {want}, max step {b.max_step})"
        return [Action("replicas", workload, {"replicas": new, "from": current.replicas},
                       f"{verb} {current.replicas} -> {new}{clipped}")]

    def finish_rollout(self, workload: str, current: WorkloadConfig,
                       replicas: int) -> Action:
        """The action that ends a rollout whose new pods already number ``replicas``: the
        replica count drops to them at once and only pods of the old shape leave, as a
        Deployment's rollout removes its old pods (no scale-in step, so ``max_step`` and the
        scale-down cooldown do not apply)."""
        b = self.admin.replicas
        want = min(b.max, max(b.min, replicas))
        return Action(self.name, workload, {"replicas": want, "from": current.replicas},
                      f"rollout finished: {current.replicas} -> {want}, the old pods leave")

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        backend.scale(action.workload, int(action.params["replicas"]))

    def applied(self, action: Action, now: float, memory: Memory) -> Memory:
        if int(action.params["replicas"]) > int(action.params.get("from", 0)):
            return {**memory, "last_up": now}
        return memory
