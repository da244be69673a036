"""What the controller observes: nodes, workloads, pods. Backend-neutral, plain data."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from planner.domain.cluster_facts import ClusterFacts
from planner.domain.geography import Geography


def _set_attributes(obj: object, values: dict[str, Any]) -> None:
    """``obj``'s attribute dictionary replaced by ``values`` (anything set before is dropped:
    for ``__init__`` only), frozen dataclass or not."""
    object.__setattr__(obj, "__dict__", values)


@dataclass(frozen=True)
class NodeState:
    name: str
    pool: str
    region: str
    cpu_capacity: float
    cpu_allocated: float = 0.0
    gpus: int = 0
    gpus_allocated: int = 0
    cost_per_core_hour: float = 0.04
    cost_per_gpu_hour: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    schedulable: bool = True
    """False for a node that takes no new pods (cordoned: ``spec.unschedulable``)."""


@dataclass(frozen=True)
class WorkloadConfig:
    """The knobs the planner turns: what a plan changes."""

    replicas: int
    cpu: float = 1.0
    device: str = "cpu"
    pool: str | None = None

    def with_(self, **changes: Any) -> WorkloadConfig:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return {"replicas": self.replicas, "cpu": self.cpu, "device": self.device,
                "pool": self.pool}


@dataclass(frozen=True, init=False)
class PodState:
    """One pod as observed. Frozen; built with one write of its attribute dictionary (the
    generated ``__init__`` of a frozen dataclass sets each field through
    ``object.__setattr__``, twice the cost, and a backend builds one per pod per cycle). The
    price: each pod holds a dictionary of its own (336 bytes against 168 with the generated
    ``__init__``). A ``__post_init__`` would not be called."""

    name: str
    node: str | None
    cpu: float
    device: str = "cpu"
    ready: bool = True
    restarts: int = 0
    started_at: float = 0.0
    cpu_utilization: float | None = None
    pool: str | None = None
    """Node pool of the pod's node, if scheduled."""
    request_rate: float | None = None
    """Requests per second the pod served over the metrics window, if known (per-pod request
    metrics: a service mesh's or the application's own)."""
    gpu_utilization: float | None = None
    """Fraction of the time the pod's GPUs were busy (mean over its GPUs), if known."""
    gpu_memory_utilization: float | None = None
    """Fraction of its GPUs' memory in use, if known."""

    def __init__(self, name: str, node: str | None, cpu: float, device: str = "cpu",
                 ready: bool = True, restarts: int = 0, started_at: float = 0.0,
                 cpu_utilization: float | None = None, pool: str | None = None,
                 request_rate: float | None = None, gpu_utilization: float | None = None,
                 gpu_memory_utilization: float | None = None) -> None:
        _set_attributes(self, {"name": name, "node": node, "cpu": cpu, "device": device,
                               "ready": ready, "restarts": restarts, "started_at": started_at,
                               "cpu_utilization": cpu_utilization, "pool": pool,
                               "request_rate": request_rate,
                               "gpu_utilization": gpu_utilization,
                               "gpu_memory_utilization": gpu_memory_utilization})

    @property
    def busy(self) -> float | None:
        """How busy the device that serves the pod's requests was: its GPUs' utilisation for a
        GPU pod that reports one, else its CPU utilisation. A GPU-bound pod can sit at a few
        percent of its CPU request while its GPU is saturated: its CPU says nothing of how
        many more requests it can take."""
        if self.device == "gpu" and self.gpu_utilization is not None:
            return self.gpu_utilization
        return self.cpu_utilization

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "cpu": self.cpu, "device": self.device,
                "ready": self.ready, "restarts": self.restarts, "started_at": self.started_at,
                "cpu_utilization": self.cpu_utilization, "pool": self.pool,
                "request_rate": self.request_rate, "gpu_utilization": self.gpu_utilization,
                "gpu_memory_utilization": self.gpu_memory_utilization}


@dataclass(frozen=True)
class CanaryState:
    """A canary beside a workload: a few pods of another shape (CPU size, device, pool) behind
    the same Service, run as a second Deployment, so a shape no model has observed is tried on
    a bounded share of the load (:mod:`planner.planners.canary`). ``config.replicas`` is the
    canary's pod count."""

    config: WorkloadConfig
    pods: tuple[PodState, ...] = ()


PodGroup = tuple[float, str, "str | None", bool, bool]
"""Pods alike as the planners count them: CPU size, device, pool, scheduled (on a node),
ready."""


@dataclass(frozen=True)
class PodCensus:
    """A workload's pods summed up in one pass (:attr:`WorkloadState.pod_counts` and the
    properties beside it)."""

    counts: dict[PodGroup, int]
    newest_ready_start: float
    newest_start: float
    restarts: int


@dataclass(frozen=True)
class WorkloadState:
    namespace: str
    name: str
    config: WorkloadConfig
    pods: tuple[PodState, ...] = ()
    kind: str = "Deployment"
    request_rate: float | None = None
    """Requests per second arriving at the workload, if known."""
    cpu_utilization: float | None = None
    """Mean CPU usage over ready pods as a fraction of their CPU request, if known."""
    canary: CanaryState | None = None
    """The workload's canary, if one runs; its pods are not in :attr:`pods`."""
    exposure: tuple[str, ...] | None = None
    """The node pools whose load balancers expose the workload's Service (sorted), where the
    Service is exposed per pool (OpenYurt's PoolService, :mod:`planner.domain.geography`);
    ``None``: one Service for the whole cluster, as before."""
    client_demand: dict[str, float] | None = None
    """Requests per second arriving from each client region, where the backend knows it."""
    exposure_note: str | None = None
    """Why the backend reports no (or partial) exposure facts for a workload exposed per pool
    this cycle (the client demand could not be measured: Prometheus down...); the exposure
    decision then does not run and the plan's reason carries this note."""
    utilization: float | None = None
    """Mean :attr:`PodState.busy` of the ready pods, where some of them report a GPU's
    utilisation (:func:`serving_utilization`); ``None``: :attr:`cpu_utilization` says how busy
    the pods are (CPU pods, or GPU pods whose GPUs are not measured). The simulator measures
    one busy fraction per pod and reports a GPU pod's as its GPU's, so there this is
    :attr:`cpu_utilization` wherever a GPU pod is ready."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def busy(self) -> float | None:
        """How busy the pods' serving devices are, as the planners read saturation and service
        rates: :attr:`utilization` where known, else :attr:`cpu_utilization`."""
        return self.cpu_utilization if self.utilization is None else self.utilization

    @property
    def ready_replicas(self) -> int:
        return sum(n for (_, _, _, _, ready), n in self.pod_counts.items() if ready)

    @property
    def pod_counts(self) -> dict[PodGroup, int]:
        """The pods counted by :data:`PodGroup` (CPU size, device, pool, scheduled, ready),
        computed on first use and kept: the planner and the safety layer ask several
        questions of one intent's pods in a cycle, and a few groups answer them all."""
        return self._census.counts

    @property
    def newest_ready_start(self) -> float:
        """The latest ``started_at`` of a ready pod (``-inf``: none is ready); kept as
        :attr:`pod_counts` is."""
        return self._census.newest_ready_start

    @property
    def newest_start(self) -> float:
        """The latest ``started_at`` of any pod (``-inf``: no pod); kept as :attr:`pod_counts`
        is."""
        return self._census.newest_start

    @property
    def restarts(self) -> int:
        """The pods' restarts, summed; kept as :attr:`pod_counts` is."""
        return self._census.restarts

    @cached_property
    def _census(self) -> PodCensus:
        """One pass over the pods for what the planners ask of them all."""
        counts: dict[PodGroup, int] = {}
        newest_ready = newest = -math.inf
        restarts = 0
        for p in self.pods:
            ready = bool(p.ready)
            key = (p.cpu, p.device, p.pool, p.node is not None, ready)
            counts[key] = counts.get(key, 0) + 1
            start = p.started_at
            if start > newest:
                newest = start
            if ready and start > newest_ready:
                newest_ready = start
            restarts += p.restarts
        return PodCensus(counts, newest_ready, newest, restarts)


@dataclass(frozen=True)
class ClusterSnapshot:
    """One consistent read of the cluster at ``time`` (seconds since the epoch or sim start)."""

    time: float
    nodes: tuple[NodeState, ...]
    workloads: dict[str, WorkloadState]
    in_place_resize: bool = False
    """The cluster changes a running pod's CPU without restarting it (Kubernetes >= 1.33, the
    Pod ``resize`` subresource; the simulator when its scenario says so). A CPU change alone then
    costs no restart; a resize the node has no room for is deferred and, past a limit, rolled
    out (:meth:`planner.domain.ports.ClusterBackend.resize`)."""
    geography: Geography | None = None
    """Round trips between client regions and pool regions, and what a pool's load balancer
    costs, where the backend knows them (:mod:`planner.domain.geography`)."""
    memo: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """Values other layers derive from ``nodes`` and keep with this snapshot (the free room per
    pod shape, :mod:`planner.planners.capacity`); a snapshot with other nodes starts without
    them unless the layer that derived them carries them over."""

    def workload(self, key: str) -> WorkloadState | None:
        return self.workloads.get(key)

    @cached_property
    def facts(self) -> ClusterFacts:
        """Prices, totals and pool names, computed on first use and kept with the snapshot
        (every intent planned on it reads them)."""
        return ClusterFacts.of(self.nodes)

    @cached_property
    def node_index(self) -> dict[str, NodeState]:
        """Nodes by name, built on first use (per-intent readers look up their own pods' nodes
        instead of scanning the cluster)."""
        return {n.name: n for n in self.nodes}

    @cached_property
    def node_positions(self) -> dict[str, int]:
        """Where each node is in :attr:`nodes`, by name (the last of equal names), built on
        first use and carried to a snapshot that differs only in allocations."""
        return {n.name: i for i, n in enumerate(self.nodes)}

    def nodes_named(self, names: Iterable[str]) -> list[NodeState]:
        """The nodes called ``names`` that exist, in the order given."""
        nodes, at = self.nodes, self.node_positions
        return [nodes[at[n]] for n in names if n in at]

    def with_allocation(self, nodes: tuple[NodeState, ...]) -> ClusterSnapshot:
        """This snapshot with ``nodes`` (the same nodes in the same order, other allocations:
        room taken by plans); facts and node positions computed already carry over (neither
        depends on allocation);
        :attr:`memo` does not (its owners carry over what they can update)."""
        out = replace(self, nodes=nodes)
        for name in ("facts", "node_positions"):
            if name in self.__dict__:
                out.__dict__[name] = self.__dict__[name]
        return out

    def pools(self) -> dict[str, list[NodeState]]:
        out: dict[str, list[NodeState]] = {}
        for n in self.nodes:
            out.setdefault(n.pool, []).append(n)
        return out


def serving_utilization(pods: Sequence[PodState]) -> float | None:
    """The mean :attr:`PodState.busy` of the ready ``pods`` that report one, where at least one
    of them is a GPU pod that reports its GPU's utilisation (``None`` otherwise: the CPU
    utilisation measured for the workload stands)."""
    ready = [p for p in pods if p.ready]
    if not any(p.device == "gpu" and p.gpu_utilization is not None for p in ready):
        return None
    busy = [b for p in ready if (b := p.busy) is not None]
    return sum(busy) / len(busy)
