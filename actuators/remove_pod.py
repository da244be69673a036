"""IDO's ``rmPod``: scale in by deleting chosen pods instead of letting the Deployment
controller pick.

It changes the replica count, so it claims the ``replicas`` knob and the registry refuses to
enable it together with ``replicas`` (two actuators never share a knob). It is a drop-in
replacement: the same bounds (``admin.replicas``), the same scale-out, the same anti-flapping;
only a scale-in differs - it deletes the pods that serve worst: not ready first, then the most
restarted, then idle ones (serving less than half an even share: what a ``squeeze`` dispatch
leaves idle), then those on the most loaded node (allocated / capacity), then the newest.
"""

from __future__ import annotations

from dataclasses import replace

from actuators.replicas import ReplicasActuator
from actuators.topology import ClusterAware
from planner.domain.admin import AdminConfig
from planner.domain.memory import Memory
from planner.domain.plan import Action
from planner.domain.ports import ClusterBackend
from planner.domain.state import ClusterSnapshot, PodState, WorkloadConfig, WorkloadState


class RemovePodActuator(ClusterAware, ReplicasActuator):
    """Scale out like ``replicas``; scale in by removing named pods (at most
    ``admin.replicas.max_step`` per cycle, as one action).

    Picking the pods takes the cycle's snapshot (:mod:`actuators.topology`); without one a
    scale-in falls back to a plain ``scale`` and the reason says so. Candidates (for search
    planners) are the usual scale-out steps and one pod fewer, as IDO's ``rmPod`` proposes.
    """

    name = "remove-pod"
    knobs = ("replicas",)

    def __init__(self, admin: AdminConfig, snapshot: ClusterSnapshot | None = None) -> None:
        ReplicasActuator.__init__(self, admin)
        ClusterAware.__init__(self, snapshot)

    def candidates(self, workload: WorkloadState, current: WorkloadConfig,
                   limit: int = 10) -> list[WorkloadConfig]:
        ups = [c for c in super().candidates(workload, current, limit=limit)
               if c.replicas > current.replicas]
        out: list[WorkloadConfig] = []
        if current.replicas - 1 >= self.admin.replicas.min:
            out.append(current.with_(replicas=current.replicas - 1))
        return (out + ups)[:limit]

    def victims(self, workload: str, count: int) -> list[PodState]:
        """The ``count`` pods to remove, worst first; fewer if the pods are not known."""
        ws = self.workload_state(workload)
        if ws is None or self.snapshot is None:
            return []
        load = {n.name: (n.cpu_allocated / n.cpu_capacity if n.cpu_capacity > 0 else 0.0)
                for n in self.snapshot.nodes}
        idle = idle_pods(ws.pods)
        pods = sorted(ws.pods, key=lambda p: (p.ready, -p.restarts, p.name not in idle,
                                              -load.get(p.node or "", 0.0), -p.started_at,
                                              p.name))
        return pods[:count]

    def steps(self, workload: str, current: WorkloadConfig, target: WorkloadConfig,
              now: float, memory: Memory) -> list[Action]:
        out: list[Action] = []
        for a in super().steps(workload, current, target, now, memory):
            new, old = int(a.params["replicas"]), int(a.params["from"])
            if new >= old:
                out.append(replace(a, actuator=self.name))
                continue
            pods = self.victims(workload, old - new)
            if len(pods) < old - new:
                out.append(replace(a, actuator=self.name,
                                   reason=f"{a.reason} (no pod data: the Deployment controller "
                                          "picks the pods)"))
                continue
            ws = self.workload_state(workload)
            idle = idle_pods(ws.pods) if ws is not None else set()
            named = ", ".join(_describe(p, self.snapshot, idle) for p in pods)
            out.append(Action(self.name, workload,
                              {"pods": [p.name for p in pods], "replicas": new, "from": old},
                              f"remove {named}: {old} -> {new} replicas"))
        return out

    def apply(self, action: Action, backend: ClusterBackend) -> None:
        pods = action.params.get("pods")
        if not pods:
            backend.scale(action.workload, int(action.params["replicas"]))
            return
        for pod in pods:  # a pod already gone is a no-op: idempotent
            backend.remove_pod(action.workload, str(pod))


def idle_pods(pods: tuple[PodState, ...] | list[PodState]) -> set[str]:
    """Ready pods that served less than half an even share of the workload's requests over the
    metrics window (per-pod rates known for every ready pod): the pods a ``squeeze`` dispatch
    policy leaves idle, removed first (their in-flight requests are the fewest)."""
    ready = [p for p in pods if p.ready]
    rates = [p.request_rate for p in ready]
    known = [r for r in rates if r is not None]
    if len(known) < 2 or len(known) < len(rates):
        return set()
    even = sum(known) / len(known)
    return {p.name for p in ready if p.request_rate is not None
            and p.request_rate < 0.5 * even} if even > 0 else set()


def _describe(pod: PodState, snapshot: ClusterSnapshot | None, idle: set[str]) -> str:
    why: list[str] = []
    if not pod.ready:
        why.append("not ready")
    if pod.name in idle:
        why.append(f"idle: {pod.request_rate:.2g} req/s")
    if pod.restarts:
        why.append(f"{pod.restarts} restart(s)")
    if pod.node and snapshot is not None:
        node = next((n for n in snapshot.nodes if n.name == pod.node), None)
        if node is not None and node.cpu_capacity > 0:
            why.append(f"node {node.name} {node.cpu_allocated / node.cpu_capacity:.0%} allocated")
    return f"pod {pod.name}" + (f" ({', '.join(why)})" if why else "")

