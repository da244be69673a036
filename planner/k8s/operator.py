"""The kopf operator: Intent and KPIProfile handlers, the planning trigger, peering, health.

**Handlers** (:func:`register_handlers`):

* ``intents`` and ``kpiprofiles`` **indexes** (``intent_index``, ``kpiprofile_index``): kopf's
  own watch of the two custom resources is the only upstream watch of them in the process; its
  indexes are the stores :class:`planner.k8s.source.KubernetesIntentSource` reads (kopf fills
  them completely before it runs any other handler, which gates planning on the initial list);
* Intent **create / update / resume**: validate (an invalid Intent gets ``Invalid=True`` with
  the field) and ask for a planning cycle that starts after the change;
* KPIProfile **create / update / resume**: write its ``status`` (``resolved``, ``reason``,
  ``query``);
* a per-Intent **timer** with the admin's ``cycleSeconds``.

**Planning trigger - the choice.** Every Intent has a kopf timer, but a tick does not plan that
one intent: it runs :meth:`planner.control.controller.IntentController.cycle` for all of them, at
most
once per interval however many timers tick (:class:`planner.k8s.runner.CycleRunner`). Why:

1. the controller's unit of work is the cycle: one ``observe()`` (a snapshot of every node,
   pod and workload) and the intents reconciled in priority order, so that the important ones
   get scarce capacity first; per-intent reconciles would rebuild the snapshot per intent
   (1000 intents x 200,000 pods) and lose the ordering;
2. kopf timers are what kopf peering pauses in a standby replica and what deletion stops; a
   plain background loop would keep planning in a paused replica. With no Intent there is no
   timer and nothing to plan.

Blocking work (cycles, status writes) runs in one worker thread, never in kopf's event loop.

**Peering**: ``--peering NAME`` makes peering mandatory (kopf pauses every replica but the one
with the highest priority); ``--standalone`` disables it; by default kopf uses the ``default``
ClusterKopfPeering when it exists (``deploy/kopf-peering-default.yaml``).

**PoolService fan-out** (``docs/poolservice.md``; ``poolservice_fanout``, on by default,
``--poolservice-fanout off`` for clusters running OpenYurt's own controller): at start-up, when
the API server serves PoolServices and NodePools and lets this service account list them
(:func:`planner.k8s.poolservice_loop.api_serves`), a
:class:`planner.k8s.poolservice_loop.FanoutLoop` reads Services, NodePools and PoolServices
through the shared watch cache and keeps one PoolService per selected pool; otherwise it stays
off with a warning in the log. It is not paused by kopf peering: in several replicas each runs
it, and their level-based writes with ``resourceVersion`` preconditions converge on the same
objects.

**Health**: :class:`planner.k8s.health.HealthServer` serves ``/healthz`` (the event loop beats),
``/readyz`` (the watch cache has its initial lists and kopf started) and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf
from kubernetes.client import ApiClient, Configuration

from knowledge.base import KnowledgeBase
from planner.control import wiring
from planner.domain.admin import AdminConfig
from planner.domain.intents import API_GROUP
from planner.domain.ports import KPISource
from planner.k8s import poolservice_lb_kopf
from planner.k8s.backend import KubernetesBackend, LabelKeys
from planner.k8s.client_demand import PrometheusClientDemand
from planner.k8s.configmaps import configmap_applier
from planner.k8s.kpi import KubernetesKPISource
from planner.k8s.loadmetrics import LoadMetrics, PrometheusLoadMetrics
from planner.k8s.poolservice_fanout import PoolServiceFanout
from planner.k8s.poolservice_lb_settings import DISABLED as LB_DISABLED
from planner.k8s.poolservice_lb_settings import HAProxyLBSettings
from planner.k8s.poolservice_loop import FanoutLoop, api_serves
from planner.k8s.projections import project_custom
from planner.k8s.runner import CycleRunner
from planner.k8s.settings import DEFAULT as DEFAULT_SETTINGS
from planner.k8s.settings import KubernetesSettings
from planner.k8s.source import KubernetesIntentSource
from planner.k8s.watchcache import WatchCache
from planner.kpi.prometheus import DEFAULT_DEADLINE_S, PrometheusKPISource

log = logging.getLogger(__name__)

VERSION = "v1alpha1"
HEARTBEAT_S = 2.0
STALL_S = 30.0
READY_WAIT_S = 30.0
"""How long a changed Intent waits for the watch cache before leaving planning to its timer."""
T = TypeVar("T")


@dataclass(frozen=True)
class OperatorConfig:
    """What ``intent-planner operator`` is told on the command line."""

    namespaces: tuple[str, ...] = ()
    kb: str = "memory"
    prometheus_url: str = "http://prometheus:9090"
    kpi_endpoints: tuple[str, ...] = ()
    """Other Prometheus servers a KPIProfile's ``spec.endpoint`` may name (admin allow-list)."""
    kpi_deadline_s: float = DEFAULT_DEADLINE_S
    """Time one cycle's KPI queries may take together; later answers count as unknown."""
    peering: str | None = None
    standalone: bool = False
    health_port: int = 8080
    admin: AdminConfig = field(default_factory=AdminConfig)
    labels: LabelKeys = field(default_factory=LabelKeys)
    kubernetes: KubernetesSettings = DEFAULT_SETTINGS
    """GPUs, in-place resize and GPU metric names (``--backend-settings``)."""
    poolservice_fanout: bool = True
    """Run the PoolService fan-out (``--poolservice-fanout on|off``); off where OpenYurt's
    yurt-manager runs its own ``load-balancer-set`` controller."""
    haproxy_lb: HAProxyLBSettings = LB_DISABLED
    """The reference load balancer for PoolServices of class ``intent-planner.io/haproxy``
    (``--haproxy-lb``; :mod:`planner.k8s.poolservice_lb`); off unless enabled."""


class IndexStore:
    """A :class:`planner.k8s.source.CRStore` over a kopf index.

    :meth:`refresh` copies the index in kopf's event-loop thread (kopf mutates it there); the
    planning thread reads the copy.
    """

    def __init__(self) -> None:
        self._objects: list[Mapping[str, Any]] = []
        self.bound = False

    def refresh(self, index: Mapping[Any, Iterable[Mapping[str, Any]]]) -> None:
        self._objects = [obj for store in index.values() for obj in store]
        self.bound = True

    def objects(self) -> list[Mapping[str, Any]]:
        return list(self._objects)


class OperatorRuntime:
    """Everything the handlers use, built once: cache, backend, source, controller, runner."""

    def __init__(self, config: OperatorConfig, api_client: ApiClient, cache: WatchCache,
                 knowledge: KnowledgeBase, *, kpis: KPISource | None = None,
                 load: LoadMetrics | None = None) -> None:
        self.config = config
        self.cache = cache
        self._prometheus: PrometheusKPISource | None = None
        self._load: PrometheusLoadMetrics | None = None
        if load is None:
            load = self._load = PrometheusLoadMetrics(config.prometheus_url,
                                                      gpu=config.kubernetes.gpu_metrics)
        self._demand: PrometheusClientDemand | None = None
        if config.kubernetes.exposure.enabled:
            self._demand = PrometheusClientDemand(config.prometheus_url,
                                                  config.kubernetes.exposure)
        self.backend = KubernetesBackend(cache, api_client, config.labels, load=load,
                                         settings=config.kubernetes,
                                         client_demand=self._demand)
        self.intents = IndexStore()
        self.profiles = IndexStore()
        self.source = KubernetesIntentSource(api_client, self.intents, self.profiles)
        if kpis is None:
            self._prometheus = PrometheusKPISource(config.prometheus_url,
                                                   allowed_endpoints=config.kpi_endpoints,
                                                   deadline=config.kpi_deadline_s)
            kpis = KubernetesKPISource(self._prometheus, self.backend.workload)
        built = wiring.build_controller(self.backend, kpis, self.source, knowledge, config.admin,
                                        threaded_training=True, keep_heap=True)
        self.controller = built.controller
        self.trainer = built.trainer
        self.heap = built.heap
        apply_configmap = configmap_applier(api_client)
        for act in self.controller.actuators.values():
            attach = getattr(act, "attach_configmap", None)
            if callable(attach):  # the dispatch-weight ConfigMap output
                attach(apply_configmap)
        self.runner = CycleRunner(self.controller.cycle, config.admin.cycle_s,
                                  ready=lambda: cache.ready(*KubernetesBackend.OBSERVED))
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planner")
        self.haproxy_lb = (poolservice_lb_kopf.build(config.haproxy_lb, config.admin, api_client,
                                                     cache) if config.haproxy_lb.enabled else None)
        self.heartbeat: float | None = None
        self.beat_task: asyncio.Task[None] | None = None
        self.started = False
        self.api_client = api_client
        self.fanout: FanoutLoop | None = None

    def start_fanout(self) -> str | None:
        """Start the PoolService fan-out if configured and served; why not, else ``None``."""
        if not self.config.poolservice_fanout:
            return "switched off (--poolservice-fanout off)"
        if self.fanout is not None:
            return None
        reason = api_serves(self.api_client)
        if reason is not None:
            log.warning("PoolService fan-out off: %s (install crds/ and "
                        "deploy/optional/poolservice-fanout-rbac.yaml to enable it)", reason)
            return reason
        self.fanout = FanoutLoop(PoolServiceFanout(self.cache, self.api_client),
                                 active=lambda: self.started).start()
        return None

    def refresh(self, intents: Mapping[Any, Any], profiles: Mapping[Any, Any]) -> None:
        self.intents.refresh(intents)
        self.profiles.refresh(profiles)

    async def in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def intent_changed(self, raw: Mapping[str, Any], ticket: int) -> str | None:
        """Validate one Intent (reporting it if invalid), then plan (coalesced) once the
        watch cache has its initial lists (or at the next timer tick)."""
        problem = self.source.validate_intent(raw)
        self.cache.wait_ready(KubernetesBackend.OBSERVED, timeout=READY_WAIT_S)
        self.runner.run(ticket)
        return problem

    def live(self) -> bool:
        beat = self.heartbeat
        return beat is None or time.monotonic() - beat < STALL_S

    def ready(self) -> tuple[bool, str]:
        if not self.started or not (self.intents.bound and self.profiles.bound):
            return False, "operator starting"
        waiting = self.cache.not_ready()
        if waiting or not self.cache.ready(*KubernetesBackend.OBSERVED):
            return False, f"watch cache: initial list pending for {', '.join(waiting) or '?'}"
        return True, "ok"

    def close(self) -> None:
        if self.fanout is not None:
            self.fanout.stop()
        self.executor.shutdown(wait=True, cancel_futures=True)
        if self.haproxy_lb is not None:
            self.haproxy_lb.close()
        if self.trainer is not None:
            self.trainer.close()
        if self.heap is not None:
            self.heap.close()
        if self._prometheus is not None:
            self._prometheus.close()
        if self._load is not None:
            self._load.close()
        if self._demand is not None:
            self._demand.close()


def _raw(body: Mapping[str, Any]) -> dict[str, Any]:
    return project_custom(copy.deepcopy(dict(body)))


def register_handlers(registry: kopf.OperatorRegistry, runtime: OperatorRuntime,
                      login: Callable[..., Any] | None = None) -> None:
    """Register the handlers (see the module docstring) on ``registry``."""
    group = API_GROUP
    interval = runtime.config.admin.cycle_s

    # kopf passes every argument by keyword; handlers take what they need from ``kw``.
    @kopf.index(group, VERSION, "intents", id="intent_index", registry=registry)
    def intent_index(**kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
        return {(kw["namespace"], kw["name"]): _raw(kw["body"])}

    @kopf.index(group, VERSION, "kpiprofiles", id="kpiprofile_index", registry=registry)
    def kpiprofile_index(**kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
        return {(kw["namespace"], kw["name"]): _raw(kw["body"])}

    def refresh(kw: Mapping[str, Any]) -> None:
        runtime.refresh(kw["intent_index"], kw["kpiprofile_index"])

    @kopf.on.startup(registry=registry)
    async def started(**kw: Any) -> None:
        refresh(kw)

        async def beat() -> None:
            while True:
                runtime.heartbeat = time.monotonic()
                await asyncio.sleep(HEARTBEAT_S)

        runtime.beat_task = asyncio.create_task(beat())
        await runtime.in_worker(runtime.start_fanout)
        runtime.started = True

    @kopf.on.cleanup(registry=registry)
    async def stopping(**_: Any) -> None:
        runtime.started = False
        if runtime.beat_task is not None:
            runtime.beat_task.cancel()

    @kopf.on.resume(group, VERSION, "intents", registry=registry)
    @kopf.on.create(group, VERSION, "intents", registry=registry)
    @kopf.on.update(group, VERSION, "intents", field="spec", registry=registry)
    async def intent_changed(**kw: Any) -> None:
        refresh(kw)
        ticket = runtime.runner.request()
        problem = await runtime.in_worker(runtime.intent_changed, _raw(kw["body"]), ticket)
        if problem:
            kw["logger"].warning("Invalid: %s", problem)

    @kopf.timer(group, VERSION, "intents", interval=interval, id="plan", registry=registry)
    async def plan(**kw: Any) -> None:
        if not runtime.runner.due():
            return
        refresh(kw)
        await runtime.in_worker(runtime.runner.run)

    @kopf.on.resume(group, VERSION, "kpiprofiles", registry=registry)
    @kopf.on.create(group, VERSION, "kpiprofiles", registry=registry)
    @kopf.on.update(group, VERSION, "kpiprofiles", field="spec", registry=registry)
    async def profile_changed(**kw: Any) -> None:
        refresh(kw)
        await runtime.in_worker(runtime.source.sync_profiles)

    if runtime.haproxy_lb is not None:
        poolservice_lb_kopf.register(registry, runtime.haproxy_lb)

    if login is not None:
        kopf.on.login(registry=registry)(login)


def configure(settings: kopf.OperatorSettings) -> kopf.OperatorSettings:
    """kopf settings for this operator: quiet events, bounded watches and requests."""
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 30
    settings.persistence.finalizer = f"{API_GROUP}/planner"
    return settings


def kube_api_client() -> ApiClient:
    """An official-client ApiClient: in-cluster service account, else the kubeconfig."""
    from kubernetes import config as kube_config

    cfg = Configuration()
    incluster: Any = kube_config.load_incluster_config
    kubeconfig: Any = kube_config.load_kube_config
    try:
        incluster(client_configuration=cfg)
    except kube_config.ConfigException:
        kubeconfig(client_configuration=cfg)
    cfg.connection_pool_maxsize = 32
    return ApiClient(cfg)


def run(config: OperatorConfig) -> None:
    """Run the operator until SIGINT/SIGTERM (the body of ``intent-planner operator``)."""
    from knowledge.connect import open_knowledge_base
    from planner.k8s import kbmetrics
    from planner.k8s.health import HealthServer
    from planner.k8s.transport import ApiClientTransport

    api_client = kube_api_client()
    cache = WatchCache(ApiClientTransport(api_client), namespaces=config.namespaces or None)
    knowledge = open_knowledge_base(config.kb, resilient=True, background=True)
    runtime = OperatorRuntime(config, api_client, cache, knowledge)
    registry = kopf.OperatorRegistry()
    register_handlers(registry, runtime, login=kopf.login_via_client)
    health = HealthServer(config.health_port, runtime.live, runtime.ready,
                          [cache.registry, kbmetrics.registry(knowledge)]).start()
    log.info("intent-planner operator: namespaces %s, health on :%d",
             ", ".join(config.namespaces) or "all", health.port)
    try:
        kopf.run(registry=registry, settings=configure(kopf.OperatorSettings()),
                 standalone=True if config.standalone else None, peering_name=config.peering,
                 clusterwide=not config.namespaces, namespaces=config.namespaces)
    finally:
        health.stop()
        runtime.close()
        knowledge.close()   # writes what the last cycles queued; logs what it could not
        cache.stop()
        close: Any = api_client.close
        close()
