"""Projected Kubernetes objects -> domain state: one pod, one node, one workload's config.

Pure functions shared by the full snapshot (:mod:`planner.k8s.snapshot_full`) and the
incremental one (:mod:`planner.k8s.snapshot_builder`), so both read an object the same way:

* a pod's CPU is the sum of its containers' CPU requests (as the kubelet reports them
  running, in ``containerStatuses[].resources``, where it does: Kubernetes >= 1.33), its
  device ``gpu`` when a container asks for a ``*/gpu`` resource (the domain's pod has a device,
  not a number of GPUs: a node's GPUs allocated count **one per GPU pod**, whatever the pod
  asks for; with ``gpu.count`` > 1 the planner under-counts the GPUs taken), ``ready`` its ``Ready``
  condition, restarts the sum of ``containerStatuses[].restartCount``, ``started_at`` its
  ``startTime`` (else its ``creationTimestamp``); a pod counts only while it runs (no
  ``deletionTimestamp``, phase neither ``Succeeded`` nor ``Failed``);
* a node's pool is its pool label, else its zone label, else ``default``; its region the region
  label, else ``unknown``; CPU and GPUs from ``allocatable`` (else ``capacity``); costs from the
  cost label or annotation; the CPU and GPUs allocated are summed by the caller over the running
  pods bound to it (:func:`allocated`, exactly rounded so that the order of the pods does not
  matter);
* a workload's config: ``spec.replicas``; CPU from the pod template's requests (1 core if it
  has none); device from the template; pool from the template's ``nodeSelector`` on the pool
  (or zone) label.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planner.domain.state import NodeState, PodState, WorkloadConfig
from planner.k8s.quantities import parse_quantity, parse_time

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelKeys:
    """Node labels the backend reads (and the pool label it writes into ``nodeSelector``)."""

    pool: str = "intent-planner.io/pool"
    zone: str = "topology.kubernetes.io/zone"
    region: str = "topology.kubernetes.io/region"
    cost_per_core_hour: str = "intent-planner.io/cost-per-core-hour"
    cost_per_gpu_hour: str = "intent-planner.io/cost-per-gpu-hour"


_QUANTITIES: dict[str, float] = {}
_TIMES: dict[str, float | None] = {}
_MEMO_SIZE = 4096
"""Parsed quantity and timestamp strings kept (pods repeat a few: ``"500m"``, start times)."""


def quantity(value: Any) -> float:
    """A quantity in its unit; 0 when it is not one."""
    if isinstance(value, str):
        out = _QUANTITIES.get(value)
        if out is None:
            out = _parse(value)
            if len(_QUANTITIES) >= _MEMO_SIZE:
                _QUANTITIES.clear()
            _QUANTITIES[value] = out
        return out
    return _parse(value)


def _parse(value: Any) -> float:
    try:
        return parse_quantity(value)
    except ValueError:
        return 0.0


def timestamp(value: Any) -> float | None:
    """An RFC 3339 timestamp in seconds since the epoch (``None`` if absent or malformed)."""
    if not isinstance(value, str):
        return parse_time(value)
    if value in _TIMES:
        return _TIMES[value]
    out = _TIMES[value] = parse_time(value)
    if len(_TIMES) > _MEMO_SIZE:
        _TIMES.clear()
    return out


def containers_cpu(containers: Sequence[Mapping[str, Any]]) -> float:
    """Sum of the containers' CPU requests, in cores."""
    return sum(quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
               for c in containers)


def running_cpu(containers: Sequence[Mapping[str, Any]], status: Mapping[str, Any]) -> float:
    """The CPU a pod runs with: the kubelet's ``containerStatuses[].resources`` where it
    reports them for every container (Kubernetes >= 1.33; behind the spec while an in-place
    resize is pending or deferred), else the spec's requests."""
    statuses = {c.get("name"): c for c in status.get("containerStatuses") or ()}
    running = []
    for c in containers:
        cpu = (((statuses.get(c.get("name")) or {}).get("resources") or {})
               .get("requests") or {}).get("cpu")
        if cpu is None:
            return containers_cpu(containers)
        running.append(quantity(cpu))
    return sum(running) if running else containers_cpu(containers)


def containers_device(containers: Sequence[Mapping[str, Any]]) -> str:
    for c in containers:
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for k, v in (res.get(part) or {}).items():
                if str(k).endswith("/gpu") and quantity(v) > 0:
                    return "gpu"
    return "cpu"


def _gpus(resources_: Mapping[str, Any]) -> int:
    return int(sum(quantity(v) for k, v in resources_.items() if str(k).endswith("/gpu")))


def ready(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def running(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def namespace_of(obj: Mapping[str, Any]) -> str:
    """The namespace pods and selectors are grouped by (``""`` when absent)."""
    return str((obj.get("metadata") or {}).get("namespace") or "")


def workload_key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace')}/{meta['name']}"


def pod_state(p: Mapping[str, Any], pool_of: Mapping[str, str] | None = None) -> PodState:
    """The pod; its pool is its node's in ``pool_of`` (none without it)."""
    spec = p.get("spec") or {}
    status = p.get("status") or {}
    containers = spec.get("containers") or ()
    started = timestamp(status.get("startTime")) or timestamp(
        (p.get("metadata") or {}).get("creationTimestamp")) or 0.0
    node = spec.get("nodeName")
    return PodState(
        name=str(p["metadata"]["name"]), node=node,
        cpu=running_cpu(containers, status), device=containers_device(containers),
        ready=ready(p),
        restarts=sum(int(c.get("restartCount") or 0)
                     for c in status.get("containerStatuses") or ()),
        started_at=started,
        pool=pool_of.get(node) if node and pool_of is not None else None)


def allocated(pods: Iterable[PodState]) -> tuple[float, int]:
    """CPU (exactly rounded sum, independent of the order) and GPUs taken by ``pods``."""
    cpus: list[float] = []
    gpus = 0
    for p in pods:
        cpus.append(p.cpu)
        gpus += p.device == "gpu"
    return math.fsum(cpus), gpus


_NODE = NodeState("", "", "", 0.0)
"""Defaults of the fields a node may not set (cost per core-hour and GPU-hour)."""


def _number(value: Any, default: float, node: str, key: str) -> float:
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        log.warning("node %s: %s is not a number: %r", node, key, value)
        return default


def node_pool(n: Mapping[str, Any], keys: LabelKeys) -> str:
    labels = (n.get("metadata") or {}).get("labels") or {}
    pool: str = labels.get(keys.pool) or labels.get(keys.zone) or "default"
    return pool


def node_name(n: Mapping[str, Any]) -> str:
    return str((n.get("metadata") or {}).get("name"))


def node_state(n: Mapping[str, Any], keys: LabelKeys, cpu_allocated: float = 0.0,
               gpus_allocated: int = 0) -> NodeState:
    """The node with the given allocation (see :func:`allocated`)."""
    meta = n.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    status = n.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    name = str(meta.get("name"))
    annotations = meta.get("annotations") or {}
    costs = [_number(labels.get(k, annotations.get(k)), default, name, k)
             for k, default in ((keys.cost_per_core_hour, _NODE.cost_per_core_hour),
                                (keys.cost_per_gpu_hour, _NODE.cost_per_gpu_hour))]
    return NodeState(
        name=name,
        pool=node_pool(n, keys),
        region=labels.get(keys.region) or "unknown",
        cpu_capacity=quantity(alloc.get("cpu", 0)),
        cpu_allocated=cpu_allocated,
        gpus=_gpus(alloc),
        gpus_allocated=gpus_allocated,
        cost_per_core_hour=costs[0], cost_per_gpu_hour=costs[1], labels=labels,
        schedulable=not bool((n.get("spec") or {}).get("unschedulable")))


def workload_config(w: Mapping[str, Any], keys: LabelKeys) -> WorkloadConfig:
    spec = w.get("spec") or {}
    tspec = ((spec.get("template") or {}).get("spec") or {})
    containers = tspec.get("containers") or ()
    cpu = containers_cpu(containers)
    selector = tspec.get("nodeSelector") or {}
    pool = selector.get(keys.pool) or selector.get(keys.zone)
    return WorkloadConfig(replicas=int(spec.get("replicas", 1)), cpu=cpu if cpu > 0 else 1.0,
                          device=containers_device(containers), pool=pool)
