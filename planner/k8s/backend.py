"""``KubernetesBackend``: observe a cluster from the shared watch cache, act through the API.

**Observe** (:meth:`KubernetesBackend.observe`) reads nodes, pods, Deployments and
StatefulSets from :class:`planner.k8s.watchcache.WatchCache` (no API request per cycle):

* a node's **pool** is its ``intent-planner.io/pool`` label, else its
  ``topology.kubernetes.io/zone`` label; its **region** the ``topology.kubernetes.io/region``
  label (all keys configurable in :class:`LabelKeys`); CPU and GPUs from ``allocatable``;
  cost per core-hour / GPU-hour from the ``intent-planner.io/cost-per-core-hour`` /
  ``-gpu-hour`` label or annotation when present; CPU and GPUs allocated are the requests of
  the running pods bound to it;
* a workload's pods are the non-terminated pods in its namespace matching its
  ``spec.selector``; a pod's CPU is the sum of its containers' CPU requests, its device ``gpu``
  when a container asks for a ``*/gpu`` resource, ``ready`` its ``Ready`` condition, restarts
  the sum of ``containerStatuses[].restartCount``, ``started_at`` its ``startTime``;
* a workload's config: ``spec.replicas``; CPU from the pod template's requests (1 core if it
  has none); device from the template; pool from the template's ``nodeSelector`` on the pool
  (or zone) label. Request rate and CPU utilisation come from an optional
  :class:`planner.k8s.loadmetrics.LoadMetrics` (Prometheus, two queries per cycle); without
  it, or when it fails, they are ``None``.

Workloads are keyed ``namespace/name``; when a Deployment and a StatefulSet share a name the
Deployment wins.

**Act** with the official client: :meth:`~KubernetesBackend.scale` through the ``scale``
subresource; :meth:`~KubernetesBackend.resize` patches the pod template's container CPU
requests (a rolling restart; several containers keep their proportions, limits keep their
ratio to the request) as a JSON merge patch of the whole container list read just before,
guarded by ``metadata.resourceVersion``; :meth:`~KubernetesBackend.place` patches the template's
``nodeSelector`` on the pool label; :meth:`~KubernetesBackend.remove_pod` gives the pod the
lowest ``controller.kubernetes.io/pod-deletion-cost``, scales down by one (so the ReplicaSet
controller removes that pod) and deletes it (a 404 is fine). Every method is a no-op when the
workload already has the value. API failures become temporary or permanent errors
(:mod:`planner.k8s.apierrors`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import ApiClient, AppsV1Api, CoreV1Api

from planner.domain.errors import PermanentError
from planner.domain.ports import ClusterBackend, UnsupportedOperation
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.k8s import resources
from planner.k8s.apierrors import NotFound, api_call
from planner.k8s.loadmetrics import LoadMetrics
from planner.k8s.projections import DELETION_COST
from planner.k8s.quantities import cpu_quantity, parse_quantity, parse_time, selector_matches
from planner.k8s.resources import DEPLOYMENTS, NODES, PODS, STATEFULSETS
from planner.k8s.watchcache import WatchCache

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
LOWEST_DELETION_COST = str(-(2**31))


@dataclass(frozen=True)
class LabelKeys:
    """Node labels the backend reads (and the pool label it writes into ``nodeSelector``)."""

    pool: str = "intent-planner.io/pool"
    zone: str = "topology.kubernetes.io/zone"
    region: str = "topology.kubernetes.io/region"
    cost_per_core_hour: str = "intent-planner.io/cost-per-core-hour"
    cost_per_gpu_hour: str = "intent-planner.io/cost-per-gpu-hour"


def _cpu(value: Any) -> float:
    try:
        return parse_quantity(value)
    except ValueError:
        return 0.0


def containers_cpu(containers: Sequence[Mapping[str, Any]]) -> float:
    """Sum of the containers' CPU requests, in cores."""
    return sum(_cpu(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0))
               for c in containers)


def containers_device(containers: Sequence[Mapping[str, Any]]) -> str:
    for c in containers:
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for k, v in (res.get(part) or {}).items():
                if str(k).endswith("/gpu") and _cpu(v) > 0:
                    return "gpu"
    return "cpu"


def _gpus(resources_: Mapping[str, Any]) -> int:
    return int(sum(_cpu(v) for k, v in resources_.items() if str(k).endswith("/gpu")))


def _ready(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def _running(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return not meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed")


def _split(workload: str) -> tuple[str, str]:
    ns, sep, name = workload.partition("/")
    if not sep or not ns or not name:
        raise PermanentError(f"workload {workload!r}: expected namespace/name")
    return ns, name


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


def _read(resp: Any) -> dict[str, Any]:
    """The JSON body of a ``_preload_content=False`` response (and release the connection)."""
    try:
        data = resp.data
    finally:
        release = getattr(resp, "release_conn", None)
        if callable(release):
            release()
    out: dict[str, Any] = json.loads(data) if data else {}
    return out


class KubernetesBackend(ClusterBackend):
    """A :class:`planner.domain.ports.ClusterBackend` over a real cluster; see the module doc."""

    name = "kubernetes"
    OBSERVED = (NODES, PODS, DEPLOYMENTS, STATEFULSETS)

    def __init__(self, cache: WatchCache, api_client: ApiClient, labels: LabelKeys | None = None,
                 *, load: LoadMetrics | None = None,
                 clock: Callable[[], float] = time.time, ready_wait_s: float = 0.0,
                 request_timeout_s: float = 15.0, field_manager: str = "intent-planner") -> None:
        self.cache = cache
        self.labels = labels or LabelKeys()
        self.load = load
        self.clock = clock
        self.ready_wait_s = ready_wait_s
        self.timeout = request_timeout_s
        self.field_manager = field_manager
        self.apps = AppsV1Api(api_client)
        self.core = CoreV1Api(api_client)
        self.last_snapshot: ClusterSnapshot | None = None
        cache.start(*self.OBSERVED)

    def now(self) -> float:
        return self.clock()

    # ------------------------------------------------------------------ observe
    def observe(self) -> ClusterSnapshot:
        wait = self.ready_wait_s
        raw_nodes = self.cache.list(NODES, wait=wait)
        raw_pods = self.cache.list(PODS, wait=wait)
        raw_workloads = [("Deployment", d) for d in self.cache.list(DEPLOYMENTS, wait=wait)]
        raw_workloads += [("StatefulSet", s) for s in self.cache.list(STATEFULSETS, wait=wait)]
        now = self.now()

        pods_by_node: dict[str, list[PodState]] = {}
        groups: dict[str, dict[int, tuple[Mapping[str, str], list[PodState]]]] = {}
        for p in raw_pods:
            if not _running(p):
                continue
            state = self._pod(p)
            meta = p["metadata"]
            labels = meta.get("labels") or {}
            ns_groups = groups.setdefault(meta.get("namespace") or "", {})
            entry = ns_groups.get(id(labels))
            if entry is None:
                entry = ns_groups[id(labels)] = (labels, [])
            entry[1].append(state)
            if state.node:
                pods_by_node.setdefault(state.node, []).append(state)

        nodes = tuple(sorted((self._node(n, pods_by_node) for n in raw_nodes),
                             key=lambda n: n.name))
        pool_of = {n.name: n.pool for n in nodes}
        workloads: dict[str, WorkloadState] = {}
        for kind, w in sorted(raw_workloads, key=lambda kw: kw[0] != "Deployment"):
            meta = w["metadata"]
            key = f"{meta.get('namespace')}/{meta['name']}"
            if key in workloads:
                continue
            selector = (w.get("spec") or {}).get("selector") or {}
            pods: list[PodState] = []
            for labels, members in groups.get(meta.get("namespace") or "", {}).values():
                if selector_matches(selector, labels):
                    pods.extend(members)
            pods = [dataclasses.replace(p, pool=pool_of.get(p.node)) if p.node else p
                    for p in pods]
            pods.sort(key=lambda p: p.name)
            workloads[key] = WorkloadState(str(meta.get("namespace")), str(meta["name"]),
                                           self._config(w), tuple(pods), kind=kind)
        if self.load is not None and workloads:
            loads = self.load(workloads)
            for key, load in loads.items():
                if key in workloads:
                    wl = workloads[key]
                    measured = tuple(dataclasses.replace(
                        p, cpu_utilization=load.pod_utilization.get(p.name, p.cpu_utilization))
                        for p in wl.pods)
                    workloads[key] = dataclasses.replace(
                        wl, pods=measured, request_rate=load.request_rate,
                        cpu_utilization=load.cpu_utilization)
        snap = ClusterSnapshot(now, nodes, workloads)
        self.last_snapshot = snap
        return snap

    def workload(self, key: str) -> WorkloadState | None:
        """The workload from the last snapshot (observing now if there is none yet)."""
        snap = self.last_snapshot or self.observe()
        return snap.workload(key)

    def _pod(self, p: Mapping[str, Any]) -> PodState:
        spec = p.get("spec") or {}
        status = p.get("status") or {}
        containers = spec.get("containers") or ()
        started = parse_time(status.get("startTime")) or parse_time(
            (p.get("metadata") or {}).get("creationTimestamp")) or 0.0
        return PodState(
            name=str(p["metadata"]["name"]), node=spec.get("nodeName"),
            cpu=containers_cpu(containers), device=containers_device(containers),
            ready=_ready(p),
            restarts=sum(int(c.get("restartCount") or 0)
                         for c in status.get("containerStatuses") or ()),
            started_at=started)

    def _node(self, n: Mapping[str, Any], pods_by_node: Mapping[str, list[PodState]]) -> NodeState:
        meta = n.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        status = n.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        name = str(meta.get("name"))
        pods = pods_by_node.get(name, ())
        annotations = meta.get("annotations") or {}
        costs = [_number(labels.get(k, annotations.get(k)), default, name, k)
                 for k, default in ((self.labels.cost_per_core_hour, _NODE.cost_per_core_hour),
                                    (self.labels.cost_per_gpu_hour, _NODE.cost_per_gpu_hour))]
        return NodeState(
            name=name,
            pool=labels.get(self.labels.pool) or labels.get(self.labels.zone) or "default",
            region=labels.get(self.labels.region) or "unknown",
            cpu_capacity=_cpu(alloc.get("cpu", 0)),
            cpu_allocated=sum(p.cpu for p in pods),
            gpus=_gpus(alloc),
            gpus_allocated=sum(1 for p in pods if p.device == "gpu"),
            cost_per_core_hour=costs[0], cost_per_gpu_hour=costs[1], labels=labels,
            schedulable=not bool((n.get("spec") or {}).get("unschedulable")))

    def _config(self, w: Mapping[str, Any]) -> WorkloadConfig:
        spec = w.get("spec") or {}
        tspec = ((spec.get("template") or {}).get("spec") or {})
        containers = tspec.get("containers") or ()
        cpu = containers_cpu(containers)
        selector = tspec.get("nodeSelector") or {}
        pool = selector.get(self.labels.pool) or selector.get(self.labels.zone)
        return WorkloadConfig(replicas=int(spec.get("replicas", 1)), cpu=cpu if cpu > 0 else 1.0,
                              device=containers_device(containers), pool=pool)

    # ------------------------------------------------------------------ act
    def _find(self, workload: str) -> tuple[str, str, str, Mapping[str, Any]]:
        ns, name = _split(workload)
        for kind, rtype in resources.WORKLOADS.items():
            obj = self.cache.get(rtype, ns, name, wait=self.ready_wait_s)
            if obj is not None:
                return kind, ns, name, obj
        raise NotFound(f"no Deployment or StatefulSet {workload!r}")

    def _patch_scale(self, kind: str, ns: str, name: str, replicas: int) -> None:
        body = {"spec": {"replicas": replicas}}
        kw: dict[str, Any] = {"_content_type": MERGE_PATCH, "_preload_content": False,
                              "_request_timeout": self.timeout,
                              "field_manager": self.field_manager}
        resp: Any
        with api_call(f"scale {kind} {ns}/{name} to {replicas}"):
            if kind == "StatefulSet":
                resp = self.apps.patch_namespaced_stateful_set_scale(name, ns, body, **kw)
            else:
                resp = self.apps.patch_namespaced_deployment_scale(name, ns, body, **kw)
            _read(resp)

    def _patch_workload(self, kind: str, ns: str, name: str, body: dict[str, Any],
                        what: str) -> None:
        kw: dict[str, Any] = {"_content_type": MERGE_PATCH, "_preload_content": False,
                              "_request_timeout": self.timeout,
                              "field_manager": self.field_manager}
        resp: Any
        with api_call(what):
            if kind == "StatefulSet":
                resp = self.apps.patch_namespaced_stateful_set(name, ns, body, **kw)
            else:
                resp = self.apps.patch_namespaced_deployment(name, ns, body, **kw)
            _read(resp)

    def _read_workload(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        kw: dict[str, Any] = {"_preload_content": False, "_request_timeout": self.timeout}
        with api_call(f"read {kind} {ns}/{name}"):
            if kind == "StatefulSet":
                return _read(self.apps.read_namespaced_stateful_set(name, ns, **kw))
            return _read(self.apps.read_namespaced_deployment(name, ns, **kw))

    def scale(self, workload: str, replicas: int) -> None:
        if replicas < 0:
            raise PermanentError(f"scale {workload}: replicas must be >= 0, got {replicas}")
        kind, ns, name, obj = self._find(workload)
        if int((obj.get("spec") or {}).get("replicas", 1)) == replicas:
            return
        self._patch_scale(kind, ns, name, int(replicas))

    def resize(self, workload: str, cpu: float) -> None:
        if not cpu > 0:
            raise PermanentError(f"resize {workload}: cpu must be > 0, got {cpu!r}")
        kind, ns, name, _ = self._find(workload)
        fresh = self._read_workload(kind, ns, name)
        tspec = ((fresh.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = [dict(c) for c in tspec.get("containers") or ()]
        if not containers:
            raise PermanentError(f"resize {workload}: the pod template has no containers")
        total = containers_cpu(containers)
        if abs(total - cpu) < 0.0005:
            return
        for i, c in enumerate(containers):
            res = {k: dict(v) for k, v in (c.get("resources") or {}).items()}
            requests, limits = res.setdefault("requests", {}), res.get("limits")
            old = _cpu(requests.get("cpu", 0))
            if total > 0:
                if old <= 0:
                    continue
                new = max(0.001, cpu * old / total)
            elif i == 0:
                new = cpu
            else:
                continue
            requests["cpu"] = cpu_quantity(new)
            if limits and "cpu" in limits and old > 0:
                limits["cpu"] = cpu_quantity(max(new, _cpu(limits["cpu"]) * new / old))
            c["resources"] = res
            containers[i] = c
        body = {"metadata": {"resourceVersion": (fresh.get("metadata") or {}).get(
                    "resourceVersion")},
                "spec": {"template": {"spec": {"containers": containers}}}}
        self._patch_workload(kind, ns, name, body,
                             f"resize {kind} {workload} to {cpu:g} CPU per pod")

    def _pool_label(self, pool: str) -> str:
        for n in self.cache.list(NODES, wait=self.ready_wait_s):
            labels = (n.get("metadata") or {}).get("labels") or {}
            if labels.get(self.labels.pool) == pool:
                return self.labels.pool
        for n in self.cache.list(NODES, wait=self.ready_wait_s):
            labels = (n.get("metadata") or {}).get("labels") or {}
            if labels.get(self.labels.zone) == pool:
                return self.labels.zone
        raise PermanentError(f"no node pool {pool!r} (no node has {self.labels.pool}={pool} "
                             f"or {self.labels.zone}={pool})")

    def place(self, workload: str, pool: str | None) -> None:
        kind, ns, name, obj = self._find(workload)
        tspec = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
        current = tspec.get("nodeSelector") or {}
        selector: dict[str, str | None]
        if pool is None:
            selector = {k: None for k in (self.labels.pool, self.labels.zone) if k in current}
            if not selector:
                return
        else:
            label = self._pool_label(pool)
            if current.get(label) == pool:
                return
            selector = {label: pool}
        body = {"spec": {"template": {"spec": {"nodeSelector": selector}}}}
        self._patch_workload(kind, ns, name, body, f"place {kind} {workload} on pool {pool}")

    def remove_pod(self, workload: str, pod: str) -> None:
        kind, ns, name, _ = self._find(workload)
        if self.cache.get(PODS, ns, pod, wait=self.ready_wait_s) is None:
            return
        # Read the count fresh: removing several pods in a row must not scale from the watch
        # cache's count, which has not seen the previous removal's scale yet.
        replicas = int((self._read_workload(kind, ns, name).get("spec") or {}).get("replicas", 1))
        if kind == "StatefulSet":
            ordinal = pod.rsplit("-", 1)[-1]
            if pod != f"{name}-{replicas - 1}" or not ordinal.isdigit():
                raise UnsupportedOperation(
                    f"remove_pod {workload}: a StatefulSet only removes its highest ordinal "
                    f"({name}-{replicas - 1}), not {pod}")
            self._patch_scale(kind, ns, name, max(0, replicas - 1))
            return
        try:
            with api_call(f"mark pod {ns}/{pod} for removal"):
                _read(self.core.patch_namespaced_pod(
                    pod, ns, {"metadata": {"annotations": {DELETION_COST: LOWEST_DELETION_COST}}},
                    _content_type=MERGE_PATCH, _preload_content=False,
                    _request_timeout=self.timeout, field_manager=self.field_manager))
        except NotFound:
            return
        self._patch_scale(kind, ns, name, max(0, replicas - 1))
        try:
            with api_call(f"delete pod {ns}/{pod}"):
                _read(self.core.delete_namespaced_pod(pod, ns, _preload_content=False,
                                                      _request_timeout=self.timeout))
        except NotFound:
            pass
