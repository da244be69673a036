"""In-place CPU resize of running pods, as the kubelet does it (Kubernetes >= 1.33).

With ``cluster.in_place_resize`` on, :meth:`simulator.cluster.SimulatedCluster.resize` does not
roll the workload's pods over: each pod of the workload's device and pool is resized where it
runs (``resizePolicy: NotRequired``: no restart, the pod stays ready and keeps its requests'
worth of traffic).

* **Admission.** A resize is admitted when the pod's node has room for the change: a decrease
  always, an increase when the node's free CPU covers it. An admitted increase reserves its room
  at once (the scheduler counts a resizing pod at the larger of its desired and allocated
  requests, so no other pod takes that room meanwhile); a decrease gives its room back when it
  lands.
* **Delay.** The new size lands ``cluster.resize_delay_s`` after admission: from then the pod
  serves at the new size (its service rate and servers change) and is accounted at it.
* **Deferral.** An increase the node has no room for is *Deferred*: the pod keeps serving at
  its old size and the resize is retried at every step, admitted as soon as the node has room.
  An increase beyond the node's whole capacity is *Infeasible* and can never be admitted there.
* **Fallback.** A resize Deferred for ``cluster.resize_deferred_limit_s``, or Infeasible, is
  given up: the pod is evicted and its Deployment starts a pod of the new size in its place,
  scheduled wherever there is room (one pod restarts, not all of them as a rollout would),
  as the Kubernetes backend does (:mod:`planner.k8s.resizer`, which evicts such a pod; its
  ``deferredSeconds`` is 300 s by default, as is ``resize_deferred_limit_s``).
* A pod waiting for room (Pending, on no node) holds no room: its request is changed at once.

A pod of another device or pool than the workload's is not resized in place: a device or pool
change is always a rollout. What happened is counted per workload (:class:`DisruptionCounts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.domain.state import WorkloadConfig
    from simulator.objects import SimNode, SimPod
    from simulator.scheduling import NodeIndex


@dataclass
class DisruptionCounts:
    """Per workload, what its resizes and rollouts did to its pods."""

    restarts: int = 0
    """Pods started in place of a running pod of another shape (a rollout's replacements, an
    in-place resize's fallbacks included): each one a pod restarted at the new shape. A
    scale-in that removes old pods without replacing them is not counted, nor a container
    restarted by a failure (:attr:`simulator.cluster.SimPod.restarts`)."""
    in_place: int = 0
    """In-place resizes that landed (the pod kept running at the new size)."""
    deferrals: int = 0
    """In-place resizes Deferred for lack of room on the pod's node (each counted once)."""
    fallbacks: int = 0
    """In-place resizes given up (Deferred past the limit, or Infeasible): the pod is evicted
    and replaced (each also a restart)."""

    def as_dict(self) -> dict[str, Any]:
        return {"restarts": self.restarts, "in_place_resizes": self.in_place,
                "resize_deferrals": self.deferrals, "resize_fallbacks": self.fallbacks}


def free_cpu(node: SimNode) -> float:
    return node.pool.cpu - node.cpu_allocated


@dataclass(frozen=True)
class InPlaceResizer:
    """The kubelet's side of an in-place resize (see the module docstring)."""

    delay_s: float
    deferred_limit_s: float

    @staticmethod
    def resizable(pod: SimPod, cfg: WorkloadConfig) -> bool:
        """Whether ``pod`` is resized in place to ``cfg``'s CPU size: it differs from ``cfg``
        in its CPU size alone."""
        return pod.device == cfg.device and pod.pool == cfg.pool and pod.cpu != cfg.cpu

    def advance(self, pods: list[SimPod], cfg: WorkloadConfig, t: float, index: NodeIndex,
                counts: DisruptionCounts) -> list[SimPod]:
        """Move every pod's in-place resize towards ``cfg``'s CPU size at time ``t``; returns
        the pods to evict (their resize given up)."""
        evict: list[SimPod] = []
        for pod in pods:
            if not self.resizable(pod, cfg):
                self._cancel(pod, index)
                continue
            if pod.resize_to != cfg.cpu:            # a new resize (or another size asked)
                self._cancel(pod, index)
                pod.resize_to = cfg.cpu
            node = pod.node
            if node is None:                        # Pending: no room held, no kubelet yet
                pod.cpu = cfg.cpu
                pod.resize_to = None
                continue
            if math.isinf(pod.resize_at) and not self._admit(pod, node, t, index, counts):
                evict.append(pod)
            elif pod.resize_at <= t:
                self._land(pod, node, index, counts)
        return evict

    def _admit(self, pod: SimPod, node: SimNode, t: float, index: NodeIndex,
               counts: DisruptionCounts) -> bool:
        """Admit the pending resize if ``node`` has room for it, else defer it; ``False``
        when it is given up (past the limit, or at once when the node could never hold it)."""
        assert pod.resize_to is not None
        grow = pod.resize_to - pod.cpu
        if grow <= free_cpu(node) + 1e-9:
            if grow > 0:
                node.cpu_allocated += grow
                pod.reserved = grow
                index.changed(node)
            pod.resize_at = t + self.delay_s
            pod.deferred_since = None
            return True
        if pod.deferred_since is None:
            pod.deferred_since = t
            counts.deferrals += 1
        infeasible = pod.resize_to > node.pool.cpu + 1e-9
        if infeasible or t - pod.deferred_since >= self.deferred_limit_s - 1e-9:
            counts.fallbacks += 1
            counts.restarts += 1
            return False
        return True

    @staticmethod
    def _land(pod: SimPod, node: SimNode, index: NodeIndex, counts: DisruptionCounts) -> None:
        """The admitted resize takes effect: the pod runs at its new size."""
        assert pod.resize_to is not None
        shrink = pod.cpu - pod.resize_to
        if shrink > 0:
            node.cpu_allocated -= shrink
            index.changed(node)
        pod.cpu = pod.resize_to
        pod.reserved = 0.0
        pod.resize_to = None
        pod.resize_at = math.inf
        counts.in_place += 1

    @staticmethod
    def _cancel(pod: SimPod, index: NodeIndex) -> None:
        """Forget ``pod``'s pending resize (none asked now, or another size): the room an
        admitted increase reserved is given back."""
        if pod.resize_to is None:
            return
        if pod.reserved and pod.node is not None:
            pod.node.cpu_allocated -= pod.reserved
            index.changed(pod.node)
        pod.reserved = 0.0
        pod.resize_to = None
        pod.resize_at = math.inf
        pod.deferred_since = None
