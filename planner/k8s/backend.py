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
  ``spec.selector``, except canary pods (labelled ``intent-planner.io/canary: "true"``); a
  pod's CPU is the sum of its containers' CPU requests, its device ``gpu`` when a container
  asks for a ``*/gpu`` resource, ``ready`` its ``Ready`` condition, restarts the sum of
  ``containerStatuses[].restartCount``, ``started_at`` its ``startTime``;
* a workload's canary is the Deployment ``<name>-canary`` carrying that label, reported as
  :attr:`~planner.domain.state.WorkloadState.canary` (its config read as a workload's, the pods
  its selector matches), not as a workload of its own (:mod:`planner.k8s.canary`);
* a workload's config: ``spec.replicas``; CPU from the pod template's requests (1 core if it
  has none); device from the template; pool from the template's ``nodeSelector`` on the pool
  (or zone) label. Request rate and CPU utilisation come from an optional
  :class:`planner.k8s.loadmetrics.LoadMetrics` (Prometheus, two queries per cycle; two more
  for the GPU pods' utilisation and memory from the DCGM exporter when there are GPU pods);
  without it, or when it fails, they are ``None``;
* :attr:`~planner.domain.state.ClusterSnapshot.in_place_resize`: the ``inPlaceResize``
  setting's ``on``/``off``, or (``auto``) the API server's ``/version`` is 1.33 or later;
  ``False`` for good once the cluster refused an in-place resize (403, or no ``resize``
  subresource: :attr:`KubernetesBackend.in_place_off`);
* then every in-place resize under way goes one step further
  (:meth:`KubernetesBackend.advance_resizes`: a Deployment a resize left paused, a pod whose
  node has not resized it), so that a resize cut short resumes and a pod the node cannot
  resize is replaced even when the planner asks for nothing more.

Workloads are keyed ``namespace/name``; when a Deployment and a StatefulSet share a name the
Deployment wins.

Each cycle only what changed is converted again (:mod:`planner.k8s.snapshot_builder`: pods from
the cache's event stream, :mod:`planner.k8s.changefeed`; nodes and workloads compared by
identity); :meth:`KubernetesBackend.observe_full` converts everything (the reference).

**Act** with the official client: :meth:`~KubernetesBackend.scale` through the ``scale``
subresource; :meth:`~KubernetesBackend.resize` sets the CPU requests (several containers keep
their proportions, limits keep their ratio to the request): where the cluster resizes in place,
the running pods through their ``resize`` subresource and the template without a rollout
(:mod:`planner.k8s.resizer`: a Deployment is paused while its ReplicaSet gets the new size
first; a pod the node cannot resize is evicted once the template has the new size); elsewhere,
or without the permission (``deploy/optional/in-place-resize-rbac.yaml``), by patching the pod
template (a rolling restart) as a JSON merge patch of the whole container list read just
before, guarded by ``metadata.resourceVersion``; :meth:`~KubernetesBackend.set_device` makes
the pods GPU pods and back (:mod:`planner.k8s.devices`: the GPU resource, node selector,
tolerations and CPU of :class:`planner.k8s.settings.GpuSettings`, recorded in the workload's
``intent-planner.io/gpu`` annotation so the way back removes exactly what was added; a
rollout); :meth:`~KubernetesBackend.place` patches the template's
``nodeSelector`` on the pool label; :meth:`~KubernetesBackend.remove_pod` gives the pod the
lowest ``controller.kubernetes.io/pod-deletion-cost``, scales down by one (so the ReplicaSet
controller removes that pod) and deletes it (a 404 is fine);
:meth:`~KubernetesBackend.set_canary` creates, patches or deletes the Deployment
``<name>-canary`` (:mod:`planner.k8s.canary`; RBAC in ``deploy/optional/canary-rbac.yaml``),
of another device too (its template made as ``set_device`` would make the workload's).
Settings (GPUs, in-place resize, GPU metric names, exposure): :mod:`planner.k8s.settings`,
given to the operator with ``--backend-settings``. With ``exposure.latencyMs`` set, each
snapshot also carries the geography, and each workload whose Service is exposed per pool its
current exposure and client demand per region (:mod:`planner.k8s.exposure_observer`; Services
then watched too).
Every method is a no-op when the workload already has the value. API failures become temporary
or permanent errors (:mod:`planner.k8s.apierrors`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import (
    ApiClient,
    AppsV1Api,
    CoreV1Api,
    V1DeleteOptions,
    V1Preconditions,
    VersionApi,
)

from planner.domain.errors import IntentPlannerError, PermanentError
from planner.domain.ports import ClusterBackend, UnsupportedOperation
from planner.domain.state import (
    ClusterSnapshot,
    PodState,
    WorkloadConfig,
    WorkloadState,
    serving_utilization,
)
from planner.k8s import canary as canaries
from planner.k8s import convert, devices, inplace, k8srequest, openyurt, resources
from planner.k8s.apierrors import KubernetesPermanentError, NotFound, api_call
from planner.k8s.apierrors import read_body as _read
from planner.k8s.changefeed import ChangeFeed
from planner.k8s.convert import LabelKeys as LabelKeys
from planner.k8s.exposure_observer import Demand, ExposureObserver, current_exposure
from planner.k8s.loadmetrics import Load, LoadMetrics
from planner.k8s.projections import DELETION_COST
from planner.k8s.resizer import (
    InPlaceResizer,
    InPlaceUnavailable,
    container_names,
    paused_by_us,
    resume_fields,
)
from planner.k8s.resources import DEPLOYMENTS, NODEPOOLS, NODES, PODS, SERVICES, STATEFULSETS
from planner.k8s.settings import DEFAULT as DEFAULT_SETTINGS
from planner.k8s.settings import KubernetesSettings
from planner.k8s.snapshot_builder import SnapshotBuilder
from planner.k8s.snapshot_full import full_snapshot
from planner.k8s.templates import containers_with_cpu, merge_patch, node_selector_on
from planner.k8s.watchcache import WatchCache

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
LOWEST_DELETION_COST = str(-(2**31))


containers_cpu = convert.containers_cpu
containers_device = convert.containers_device


def _split(workload: str) -> tuple[str, str]:
    ns, sep, name = workload.partition("/")
    if not sep or not ns or not name:
        raise PermanentError(f"workload {workload!r}: expected namespace/name")
    return ns, name


def _utilized(pods: tuple[PodState, ...], load: Load) -> tuple[PodState, ...]:
    """``pods`` with the CPU (and GPU) utilisation measured per pod, where there is one."""
    cpu, gpu, mem = load.pod_utilization, load.pod_gpu_utilization, load.pod_gpu_memory
    if not gpu and not mem:
        return tuple(dataclasses.replace(p, cpu_utilization=cpu.get(p.name, p.cpu_utilization))
                     for p in pods)
    return tuple(dataclasses.replace(
        p, cpu_utilization=cpu.get(p.name, p.cpu_utilization),
        gpu_utilization=gpu.get(p.name, p.gpu_utilization),
        gpu_memory_utilization=mem.get(p.name, p.gpu_memory_utilization)) for p in pods)


class KubernetesBackend(ClusterBackend):
    """A :class:`planner.domain.ports.ClusterBackend` over a real cluster; see the module doc."""

    name = "kubernetes"
    OBSERVED = (NODES, PODS, DEPLOYMENTS, STATEFULSETS)

    def __init__(self, cache: WatchCache, api_client: ApiClient, labels: LabelKeys | None = None,
                 *, load: LoadMetrics | None = None,
                 clock: Callable[[], float] = time.time, ready_wait_s: float = 0.0,
                 request_timeout_s: float = 15.0, field_manager: str = "intent-planner",
                 settings: KubernetesSettings = DEFAULT_SETTINGS,
                 client_demand: Demand | None = None) -> None:
        self.cache = cache
        self.settings = settings
        self.server_version: tuple[int, int] | None = None
        """``(major, minor)`` from ``/version``, read once (``None``: not read yet)."""
        self.labels = labels or LabelKeys()
        self.load = load
        self.clock = clock
        self.ready_wait_s = ready_wait_s
        self.timeout = request_timeout_s
        self.field_manager = field_manager
        self.api_client = api_client
        self.apps = AppsV1Api(api_client)
        self.core = CoreV1Api(api_client)
        self.last_snapshot: ClusterSnapshot | None = None
        cache.start(*self.OBSERVED)
        self.exposure: ExposureObserver | None = None
        """Exposure, geography and client demand (:mod:`planner.k8s.exposure_observer`),
        when the settings give the round trips (``exposure.latencyMs``); ``client_demand``
        answers the demand per client region of a Service."""
        if settings.exposure.enabled:
            cache.start(SERVICES)
            self.exposure = ExposureObserver(cache, settings.exposure, client_demand,
                                             self.labels.region, ready_wait_s)
        self.pod_feed = ChangeFeed(cache, PODS)
        self.builder = SnapshotBuilder(self.labels)
        self.resizer = InPlaceResizer(self)
        self._version_error: str | None = None
        self.in_place_off: str | None = None
        """Why in-place resize was turned off for good (``None``: it was not): the cluster
        refused it (403: no permission; 404: no ``resize`` subresource). From then on
        :meth:`in_place` is ``False`` and the snapshot says so (the planner prices a CPU
        change as a restart); a new backend (a restarted planner) tries again."""

    def now(self) -> float:
        return self.clock()

    def in_place(self) -> bool:
        """Whether :meth:`resize` resizes running pods in place: the setting's ``on`` /
        ``off``, or (``auto``) the API server's ``/version`` is 1.33 or later. The version is
        read once; while it cannot be read the answer is ``False`` (a rollout, the safe side)
        and the next call asks again. ``False`` for good once the cluster refused an in-place
        resize (:attr:`in_place_off`)."""
        if self.in_place_off is not None:
            return False
        mode = self.settings.in_place_resize.mode
        if mode == "auto" and self.server_version is None:
            try:
                with api_call("read the API server's /version"):
                    body = _read(VersionApi(self.api_client).get_code(
                        _preload_content=False, _request_timeout=self.timeout))
                self.server_version = inplace.server_version(body) or (0, 0)
                self._version_error = None
            except IntentPlannerError as exc:
                if self._version_error != str(exc):
                    log.warning("in-place resize off for now: %s", exc)
                self._version_error = str(exc)
                return False
        return inplace.supports_in_place(self.server_version, mode)

    # ------------------------------------------------------------------ observe
    def observe(self) -> ClusterSnapshot:
        """The snapshot, updated from what changed since the last call
        (:mod:`planner.k8s.snapshot_builder`; pods through :mod:`planner.k8s.changefeed`)."""
        wait = self.ready_wait_s
        raw_nodes = self.cache.list(NODES, wait=wait)
        pod_changes = self.pod_feed.poll(wait)
        raw_workloads = self._raw_workloads()
        snap = self.builder.update(self.now(), pod_changes, raw_nodes, raw_workloads)
        snap = self._measured(snap)
        self.advance_resizes(snap, raw_workloads)
        return snap

    def advance_resizes(self, snap: ClusterSnapshot,
                        raw_workloads: list[tuple[str, Mapping[str, Any]]] | None = None
                        ) -> list[str]:
        """Take every in-place resize under way one step further (:meth:`resize` to the size
        it is going to), whatever the planner asks this cycle: a Deployment we paused
        (the size in our annotation), a workload with a pod whose spec has the template's size
        and whose kubelet reports it running with another (:func:`inplace.resize_pending`:
        the node may have deferred it or found it infeasible, and only :meth:`resize` looks at
        that and replaces the pod). The workloads taken up; a failure is logged (the next
        cycle tries again). Cost: nothing but watch-cache reads for pods whose running CPU
        differs from their template's, API requests only for a resize under way.
        ``raw_workloads``: the workloads as :meth:`observe` read them from the watch cache.
        Without in-place resize (turned off since, or by the settings) only a Deployment left
        paused is taken up: :meth:`resize` then rolls its template out and resumes it."""
        raw: dict[str, tuple[str, Mapping[str, Any]]] = {}
        for kind, obj in reversed(raw_workloads if raw_workloads is not None
                                  else self._raw_workloads()):  # a Deployment wins
            raw[convert.workload_key(obj)] = (kind, obj)
        taken = []
        for key, wl in snap.workloads.items():
            if key not in raw:
                continue
            cpu = self._resize_under_way(key, wl, *raw[key], pods=snap.in_place_resize)
            if cpu is None:
                continue
            taken.append(key)
            try:
                self.resize(key, cpu)
            except IntentPlannerError as exc:
                log.warning("resize %s in place to %g CPU: %s (next cycle again)", key, cpu,
                            exc)
        return taken

    def _resize_under_way(self, key: str, wl: WorkloadState, kind: str,
                          obj: Mapping[str, Any], *, pods: bool) -> float | None:
        """The size an in-place resize of ``key`` (``obj``, a ``kind``) is going to
        (``None``: none under way); ``pods``: look at the pods too, not only at a pause."""
        ns = convert.namespace_of(obj)
        if kind == "Deployment" and paused_by_us(obj):
            value = ((obj.get("metadata") or {}).get("annotations") or {}).get(
                inplace.PAUSED_ANNOTATION)
            cpu = convert.quantity(value)
            if cpu > 0:
                return cpu
        cpu = wl.config.cpu
        if not pods or all(abs(p.cpu - cpu) < inplace.CPU_EPSILON for p in wl.pods):
            return None
        tspec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        if containers_cpu(tspec.get("containers") or ()) <= 0:
            return None
        names = container_names(obj)
        for p in wl.pods:
            if abs(p.cpu - cpu) < inplace.CPU_EPSILON:
                continue
            raw = self.cache.get(PODS, ns, p.name)
            if raw is not None and inplace.resize_pending(raw, cpu, names):
                return cpu
        return None

    def observe_full(self) -> ClusterSnapshot:
        """The snapshot converted from every object (:mod:`planner.k8s.snapshot_full`): the
        reference :meth:`observe` equals, and the baseline it is measured against."""
        wait = self.ready_wait_s
        raw_nodes = self.cache.list(NODES, wait=wait)
        raw_pods = self.cache.list(PODS, wait=wait)
        raw_workloads = self._raw_workloads()
        snap = full_snapshot(self.now(), raw_nodes, raw_pods, raw_workloads, self.labels)
        return self._measured(snap)

    def _raw_workloads(self) -> list[tuple[str, Mapping[str, Any]]]:
        wait = self.ready_wait_s
        raw: list[tuple[str, Mapping[str, Any]]] = [
            ("Deployment", d) for d in self.cache.list(DEPLOYMENTS, wait=wait)]
        raw += [("StatefulSet", s) for s in self.cache.list(STATEFULSETS, wait=wait)]
        return raw

    def _measured(self, snap: ClusterSnapshot) -> ClusterSnapshot:
        """``snap`` with the request rate and CPU utilisation of the load source, if any, and
        the pods' GPU utilisation, which says how busy GPU pods are (:attr:`WorkloadState.busy`)."""
        workloads = snap.workloads
        if self.load is not None and workloads:
            workloads = dict(workloads)
            loads = self.load(workloads)
            for key, load in loads.items():
                if key in workloads:
                    wl = workloads[key]
                    canary = None if wl.canary is None else dataclasses.replace(
                        wl.canary, pods=_utilized(wl.canary.pods, load))
                    pods = _utilized(wl.pods, load)
                    workloads[key] = dataclasses.replace(
                        wl, pods=pods, canary=canary,
                        request_rate=load.request_rate, cpu_utilization=load.cpu_utilization,
                        utilization=serving_utilization(pods))
            snap = ClusterSnapshot(snap.time, snap.nodes, workloads)
        if self.exposure is not None:
            snap = self.exposure.apply(snap)
        in_place = self.in_place()
        if snap.in_place_resize != in_place:
            snap = dataclasses.replace(snap, in_place_resize=in_place)
        self.last_snapshot = snap
        return snap

    def close(self) -> None:
        """Stop following the cache's pod events (the cache itself is the caller's)."""
        self.pod_feed.close()

    def workload(self, key: str) -> WorkloadState | None:
        """The workload from the last snapshot (observing now if there is none yet)."""
        snap = self.last_snapshot or self.observe()
        return snap.workload(key)

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

    def read_workload(self, kind: str, ns: str, name: str) -> dict[str, Any]:
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
        """Set the CPU request of every pod. Where the cluster resizes in place
        (:meth:`in_place`), running pods are resized through their ``resize`` subresource and
        the template without a rollout (:mod:`planner.k8s.resizer`); otherwise the template is
        patched and rolls out."""
        if not cpu > 0:
            raise PermanentError(f"resize {workload}: cpu must be > 0, got {cpu!r}")
        kind, ns, name, _ = self._find(workload)
        fresh = self.read_workload(kind, ns, name)
        tspec = ((fresh.get("spec") or {}).get("template") or {}).get("spec") or {}
        if not tspec.get("containers"):
            raise PermanentError(f"resize {workload}: the pod template has no containers")
        if self.in_place():
            try:
                self.resizer.resize(kind, ns, name, fresh, cpu)
                return
            except InPlaceUnavailable as exc:
                self.in_place_off = str(exc)
                log.warning("resize %s: in-place resize off from now on, rolling out instead: "
                            "%s", workload, exc)
            except KubernetesPermanentError as exc:
                if exc.status != 403:
                    raise
                self.in_place_off = str(exc)
                log.warning("resize %s: in place is not allowed (%s); in-place resize off from "
                            "now on, rolling out instead. Fix: apply "
                            "deploy/optional/in-place-resize-rbac.yaml and restart the "
                            "planner, or set inPlaceResize.mode: off", workload, exc)
            fresh = self.read_workload(kind, ns, name)
        self.patch_template_cpu(kind, ns, name, fresh, cpu)

    def patch_template_cpu(self, kind: str, ns: str, name: str, fresh: Mapping[str, Any],
                            cpu: float) -> None:
        """Patch the template's container CPU to ``cpu`` (no request when it has it): a
        rollout, except where the workload's controller replaces no pod for a template change
        (a paused Deployment, a StatefulSet ``OnDelete``)."""
        tspec = ((fresh.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = tspec.get("containers") or ()
        meta, spec = resume_fields(fresh)
        if abs(containers_cpu(containers) - cpu) < inplace.CPU_EPSILON and not spec:
            return
        meta["resourceVersion"] = (fresh.get("metadata") or {}).get("resourceVersion")
        spec["template"] = {"spec": {"containers": containers_with_cpu(containers, cpu)}}
        self._patch_workload(kind, ns, name, {"metadata": meta, "spec": spec},
                             f"resize {kind} {ns}/{name} to {cpu:g} CPU per pod")

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
        meta, spec = resume_fields(obj)
        spec["template"] = {"spec": {"nodeSelector": selector}}
        body: dict[str, Any] = {"spec": spec, **({"metadata": meta} if meta else {})}
        self._patch_workload(kind, ns, name, body, f"place {kind} {workload} on pool {pool}")

    def expose(self, workload: str, pools: tuple[str, ...]) -> None:
        """Write the pool selector of the workload's Service (the Service of the workload's
        name, in its namespace): OpenYurt's ``service.openyurt.io/nodepool-labelselector``
        annotation selecting ``pools`` (:func:`planner.k8s.openyurt.pool_selector`); the
        PoolService fan-out (OpenYurt's or our operator's) does the rest. Unchanged: no write.
        Where the NodePools are watched, a selector that would not select every pool asked for
        (a NodePool without the label carrying its name) is refused (``PermanentError``, the
        fix named) rather than written: it would withdraw the Service from those pools."""
        ns, name = _split(workload)
        if not pools:
            raise PermanentError(f"expose {workload}: give at least one pool")
        value = openyurt.pool_selector(pools)
        self._check_selects(workload, value, pools)
        kw: dict[str, Any] = {"_preload_content": False, "_request_timeout": self.timeout}
        with api_call(f"read Service {ns}/{name}"):
            svc = _read(self.core.read_namespaced_service(name, ns, **kw))
        current = ((svc.get("metadata") or {}).get("annotations") or {}).get(
            openyurt.POOL_SELECTOR_ANNOTATION)
        if current == value:
            return
        body = {"metadata": {"annotations": {openyurt.POOL_SELECTOR_ANNOTATION: value}}}
        with api_call(f"expose Service {ns}/{name} in pools {', '.join(sorted(pools))}"):
            _read(self.core.patch_namespaced_service(
                name, ns, body, _content_type=MERGE_PATCH, field_manager=self.field_manager,
                **kw))

    def _check_selects(self, workload: str, value: str, pools: tuple[str, ...]) -> None:
        """Where the watch cache has the NodePools (the PoolService fan-out watches them), a
        ``PermanentError`` when selector ``value`` would not select every pool of ``pools``:
        written, it would withdraw the Service from those pools instead of exposing it."""
        if not self.cache.ready(NODEPOOLS):
            return
        service = {"metadata": {"annotations": {openyurt.POOL_SELECTOR_ANNOTATION: value}}}
        selected, _ = current_exposure(service, self.cache.list(NODEPOOLS))
        missing = sorted(set(pools) - set(selected or ()))
        if missing:
            raise PermanentError(
                f"expose {workload} in pools {', '.join(sorted(pools))}: the selector "
                f"{value!r} selects no NodePool for {', '.join(missing)} (no NodePool of that "
                f"name labelled {openyurt.NODEPOOL_NAME_LABEL}=<its name>); the Service's "
                f"selection is left as it is; fix: kubectl label nodepool {missing[0]} "
                f"{openyurt.NODEPOOL_NAME_LABEL}={missing[0]} (docs/regions.md)")

    def set_device(self, workload: str, device: str) -> None:
        """Make the workload's pods GPU pods (``gpu``) or take back exactly what that added
        (``cpu``): :mod:`planner.k8s.devices` with the settings' ``gpu`` section; what was
        added is recorded in the workload's annotation :data:`devices.GPU_ANNOTATION`. A
        rollout (new pods on other nodes). A GPU workload that the planner did not make one
        stays as it is for ``gpu``, and is refused for ``cpu`` (nothing recorded to undo)."""
        if device not in ("cpu", "gpu"):
            raise UnsupportedOperation(f"set_device {workload}: unknown device {device!r} "
                                       f"(cpu or gpu)")
        kind, ns, name, _ = self._find(workload)
        fresh = self.read_workload(kind, ns, name)
        meta = fresh.get("metadata") or {}
        tspec = ((fresh.get("spec") or {}).get("template") or {}).get("spec") or {}
        if not tspec.get("containers"):
            raise PermanentError(f"set_device {workload}: the pod template has no containers")
        record = devices.read_record(meta)
        base = devices.without_gpu(tspec, record) if record is not None else dict(tspec)
        if record is None and convert.containers_device(tspec.get("containers") or ()) == "gpu":
            if device == "gpu":
                return
            raise UnsupportedOperation(
                f"set_device {workload}: its GPUs were not added by intent-planner (no "
                f"{devices.GPU_ANNOTATION} annotation): not removing them; fix: remove the GPU "
                f"resource from the pod template by hand")
        want, new_record = (devices.with_gpu(base, self.settings.gpu,
                                             keep_cpu=self._cpu_changed(workload, tspec, record))
                            if device == "gpu" else (base, None))
        old_keys = {k: tspec[k] for k in devices.TEMPLATE_KEYS if k in tspec}
        new_keys = {k: want[k] for k in devices.TEMPLATE_KEYS if k in want}
        tpatch = merge_patch(old_keys, new_keys)
        annotation = devices.dump_record(new_record) if new_record is not None else None
        current = (meta.get("annotations") or {}).get(devices.GPU_ANNOTATION)
        if not tpatch and annotation == current:
            return
        pmeta, spec = resume_fields(fresh)
        pmeta["resourceVersion"] = meta.get("resourceVersion")
        annotations = pmeta.setdefault("annotations", {})
        annotations[devices.GPU_ANNOTATION] = annotation
        if tpatch:
            spec["template"] = {"spec": tpatch}
        body: dict[str, Any] = {"metadata": pmeta, **({"spec": spec} if spec else {})}
        self._patch_workload(kind, ns, name, body, f"set the device of {kind} {workload} to "
                                                   f"{device}")

    def _cpu_changed(self, workload: str, tspec: Mapping[str, Any],
                     record: devices.Record | None) -> bool:
        """Whether the template's CPU was changed since the GPU switch (it differs from what
        the record says ``cpuPerPod`` set) or since the last observation (the CPU actuator
        resized the workload in this plan): then ``set_device`` leaves the CPU alone."""
        if record is not None and devices.cpu_changed(tspec, record):
            return True
        seen = self.last_snapshot.workload(workload) if self.last_snapshot else None
        cpu = containers_cpu(tspec.get("containers") or ())
        return seen is not None and cpu > 0 and abs(seen.config.cpu - cpu) >= inplace.CPU_EPSILON

    def remove_pod(self, workload: str, pod: str) -> None:
        kind, ns, name, _ = self._find(workload)
        if self.cache.get(PODS, ns, pod, wait=self.ready_wait_s) is None:
            return
        # Read the count fresh: removing several pods in a row must not scale from the watch
        # cache's count, which has not seen the previous removal's scale yet.
        replicas = int((self.read_workload(kind, ns, name).get("spec") or {}).get("replicas", 1))
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

    # ------------------------------------------------------------------ canary
    def set_canary(self, workload: str, canary: WorkloadConfig | None) -> None:
        """Create, update or delete the Deployment ``<name>-canary`` (:mod:`planner.k8s.canary`);
        no request but reads when it already is as asked."""
        if canary is None or canary.replicas == 0:
            self._delete_canary(*_split(workload))
            return
        if canary.replicas < 0 or not canary.cpu > 0:
            raise PermanentError(f"set_canary {workload}: replicas must be >= 0 and cpu > 0, "
                                 f"got {canary.replicas} x {canary.cpu!r}")
        kind, ns, name, obj = self._find(workload)
        self._check_canary_target(workload, kind, obj, canary)
        main = self._with_device(workload, self.read_workload(kind, ns, name), canary.device)
        tspec = ((main.get("spec") or {}).get("template") or {}).get("spec") or {}
        if not tspec.get("containers"):
            raise PermanentError(f"set_canary {workload}: the pod template has no containers")
        selector = node_selector_on(
            tspec.get("nodeSelector") or {}, (self.labels.pool, self.labels.zone),
            self._pool_label(canary.pool) if canary.pool is not None else None, canary.pool)
        want = canaries.desired(main, canary, selector)
        cname = canaries.canary_name(name)
        current = self._read_canary(ns, name)
        if current is None:
            self.request("POST", DEPLOYMENTS.path(ns), f"create canary Deployment {ns}/{cname}",
                          want)
            return
        body = canaries.patch(current, want)
        if body:
            self._patch_workload("Deployment", ns, cname, body,
                                 f"update canary Deployment {ns}/{cname}")

    def _check_canary_target(self, workload: str, kind: str, obj: Mapping[str, Any],
                             canary: WorkloadConfig) -> None:
        if kind != "Deployment":
            raise UnsupportedOperation(f"set_canary {workload}: a canary runs beside a "
                                       f"Deployment, and {workload} is a {kind}")
        if canaries.is_canary(obj):
            raise PermanentError(f"set_canary {workload}: {workload} is itself a canary")
        if canary.device not in ("cpu", "gpu"):
            raise UnsupportedOperation(f"set_canary {workload}: unknown device "
                                       f"{canary.device!r}")

    def _with_device(self, workload: str, main: Mapping[str, Any], device: str
                     ) -> dict[str, Any]:
        """``main`` (a workload read from the API server) as the canary starts from it: its
        template made a ``device`` template the way :meth:`set_device` would, without the
        annotation an in-place resize gives the template (it names ``main``'s ReplicaSet)."""
        tmpl = dict((main.get("spec") or {}).get("template") or {})
        tmeta = dict(tmpl.get("metadata") or {})
        annotations = {k: v for k, v in (tmeta.get("annotations") or {}).items()
                       if k != inplace.TEMPLATE_ANNOTATION}
        if annotations != (tmeta.get("annotations") or {}):
            tmeta["annotations"] = annotations
            if not annotations:
                del tmeta["annotations"]
            tmpl["metadata"] = tmeta
        tspec = tmpl.get("spec") or {}
        current = convert.containers_device(tspec.get("containers") or ())
        if current == device:  # the GPU record is not read: it only matters for the way back
            return {**main, "spec": {**(main.get("spec") or {}), "template": tmpl}}
        if device == "gpu":
            want, _ = devices.with_gpu(tspec, self.settings.gpu)
        elif (record := devices.read_record(main.get("metadata") or {})) is not None:
            want = devices.without_gpu(tspec, record)
        else:
            raise UnsupportedOperation(
                f"set_canary {workload}: a cpu canary of a GPU workload whose GPUs intent-planner "
                f"did not add (no {devices.GPU_ANNOTATION} annotation) cannot be made; fix: ask "
                f"for a gpu canary, or take the GPU resource out of the pod template by hand "
                f"(then the workload is a cpu workload)")
        return {**main, "spec": {**(main.get("spec") or {}),
                                 "template": {**tmpl, "spec": want}}}

    def _read_canary(self, ns: str, name: str) -> dict[str, Any] | None:
        """The canary Deployment of ``ns/name`` read from the API server (``None``: absent);
        :class:`PermanentError` for a Deployment of that name that is not a canary."""
        cname = canaries.canary_name(name)
        try:
            current = self.read_workload("Deployment", ns, cname)
        except NotFound:
            return None
        if not canaries.is_canary(current):
            raise PermanentError(
                f"Deployment {ns}/{cname} exists but is not an intent-planner canary (no "
                f"{canaries.CANARY_LABEL}={canaries.CANARY_VALUE} label): not touching it")
        return current

    def _delete_canary(self, ns: str, name: str) -> None:
        current = self._read_canary(ns, name)
        if current is None:
            return
        cname = canaries.canary_name(name)
        uid = (current.get("metadata") or {}).get("uid")
        options = V1DeleteOptions(propagation_policy="Background",
                                  preconditions=V1Preconditions(uid=uid))
        try:
            with api_call(f"delete canary Deployment {ns}/{cname}"):
                _read(self.apps.delete_namespaced_deployment(
                    cname, ns, body=options, _preload_content=False,
                    _request_timeout=self.timeout))
        except NotFound:
            pass

    def request(self, method: str, path: str, what: str, body: Any = None) -> dict[str, Any]:
        """One JSON request without the client's models (a Deployment copied from the API
        server keeps every field, even those this client version does not know)."""
        return k8srequest.json_request(self.api_client, method, path, what, body,
                                       timeout=self.timeout, field_manager=self.field_manager)
