"""The reference load balancer in the operator: API adapters and kopf handlers.

:func:`build` makes an :class:`LBRuntime` from the operator's configuration: the reconciler
(:class:`planner.k8s.poolservice_lb.HAProxyPoolLB`) reading PoolServices, Services,
EndpointSlices and nodes from the shared watch cache, weights from the weights actuator's
ConfigMaps (one list per namespace per reconcile, by label), and writing status through the
PoolService ``status`` subresource. :func:`register` adds two kopf handlers on PoolServices of
our class: every watch event (created, changed: reconcile at once), a timer every
``resyncSeconds`` (endpoints, nodes and weights change without the PoolService changing;
kopf pauses timers in a standby replica, as it does the planning timer), and deletion (the
pool's HAProxy backend is emptied). The timer and the deletion handler make kopf keep its
finalizer (``intent-planner.io/planner``) on our PoolServices, as a cloud provider's service
controller keeps one on a Service until its load balancer is released; an HAProxy that cannot
be reached holds the deletion for at most :data:`RELEASE_RETRIES` retries, then lets it go.
Reconciles run in a worker thread of their own, never in kopf's event loop or behind a
planning cycle.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi

from actuators.dataplanes import configmap as configmap_plane
from planner.domain.admin import AdminConfig
from planner.domain.errors import IntentPlannerError
from planner.k8s import openyurt
from planner.k8s.apierrors import NotFound, api_call, read_body
from planner.k8s.poolservice_lb import (
    MANAGED_BY_LABEL,
    ConfigMapWeights,
    HAProxyPoolLB,
    Outcome,
    Reader,
)
from planner.k8s.poolservice_lb_settings import HAProxyLBSettings
from planner.k8s.resources import ENDPOINTSLICES, NODES, POOLSERVICES, SERVICES, ResourceType
from planner.k8s.transport import Transport

log = logging.getLogger(__name__)
MERGE_PATCH = "application/merge-patch+json"


class ApiReader:
    """A :class:`~planner.k8s.poolservice_lb.Reader` that lists through the API every time
    (tests, tools; the operator reads the watch cache)."""

    def __init__(self, transport: Transport, timeout: float = 10.0) -> None:
        self.transport = transport
        self.timeout = timeout

    def list(self, rtype: ResourceType, namespace: str | None = None) -> list[dict[str, Any]]:
        body = json.loads(self.transport.list(rtype.path(namespace), {}, self.timeout))
        items: list[dict[str, Any]] = body.get("items") or []
        return items

    def get(self, rtype: ResourceType, namespace: str | None, name: str
            ) -> dict[str, Any] | None:
        return next((o for o in self.list(rtype, namespace)
                     if (o.get("metadata") or {}).get("name") == name), None)


def status_patcher(api_client: ApiClient, timeout: float = 10.0) -> Any:
    """A :class:`~planner.k8s.poolservice_lb.StatusWriter` over the official client (a
    PoolService deleted meanwhile is not an error)."""
    api = CustomObjectsApi(api_client)

    def write(namespace: str, name: str, patch: dict[str, Any]) -> None:
        try:
            with api_call(f"write status of PoolService {namespace}/{name}"):
                resp: Any = api.patch_namespaced_custom_object_status(
                    openyurt.POOLSERVICE_GROUP, openyurt.POOLSERVICE_VERSION, namespace,
                    openyurt.POOLSERVICE_PLURAL, name, {"status": patch},
                    _content_type=MERGE_PATCH, _preload_content=False,
                    _request_timeout=timeout)
                resp.release_conn()
        except NotFound:
            log.info("PoolService %s/%s is gone; status not written", namespace, name)

    return write


def configmap_lister(api_client: ApiClient, timeout: float = 10.0) -> Any:
    """The weights actuator's ConfigMaps of one namespace (by its managed-by label)."""
    core = CoreV1Api(api_client)

    def list_configmaps(namespace: str) -> list[dict[str, Any]]:
        with api_call(f"list weight ConfigMaps of {namespace}"):
            resp: Any = core.list_namespaced_config_map(
                namespace, label_selector=f"{MANAGED_BY_LABEL}={configmap_plane.MANAGED_BY}",
                _preload_content=False, _request_timeout=timeout)
        items: list[dict[str, Any]] = read_body(resp).get("items") or []
        return items

    return list_configmaps


class LBRuntime:
    """The reconciler and the thread it runs in."""

    def __init__(self, lb: HAProxyPoolLB) -> None:
        self.lb = lb
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="haproxy-lb")

    def reconcile(self, namespace: str, name: str) -> Outcome | None:
        try:
            return self.lb.reconcile(namespace, name)
        except IntentPlannerError as exc:  # temporary (cache not ready, API down): the timer
            log.warning("PoolService %s/%s: %s (retried)", namespace, name, exc)
            return None

    async def in_worker(self, namespace: str, name: str) -> Outcome | None:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.reconcile, namespace, name)

    async def release(self, body: Mapping[str, Any]) -> Outcome:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.lb.release, body)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


def build(settings: HAProxyLBSettings, admin: AdminConfig, api_client: ApiClient,
          reader: Reader) -> LBRuntime:
    """The load balancer as the operator runs it (``reader``: the shared watch cache)."""
    key = admin.dispatch.configmap.key if admin.dispatch.configmap else configmap_plane.DEFAULT_KEY
    lb = HAProxyPoolLB(settings, reader, status_patcher(api_client),
                       ConfigMapWeights(configmap_lister(api_client), key),
                       reference_weight=admin.dispatch.engine.reference_weight)
    return LBRuntime(lb)


RELEASE_RETRIES = 5
RELEASE_BACKOFF_S = 2.0

WATCHED = (POOLSERVICES, SERVICES, ENDPOINTSLICES, NODES)
"""What the reconciler reads from the watch cache."""


def _ours(spec: Mapping[str, Any], **_: Any) -> bool:
    return bool(spec.get("loadBalancerClass") == openyurt.HAPROXY_LB_CLASS)


def register(registry: kopf.OperatorRegistry, runtime: LBRuntime) -> None:
    """The kopf handlers (module docstring) on ``registry``."""
    group, version = openyurt.POOLSERVICE_GROUP, openyurt.POOLSERVICE_VERSION
    plural = openyurt.POOLSERVICE_PLURAL

    @kopf.on.event(group, version, plural, when=_ours, registry=registry, id="haproxy_lb_event")
    async def changed(**kw: Any) -> None:
        if kw.get("type") in ("ADDED", "MODIFIED", None):
            await runtime.in_worker(kw["namespace"], kw["name"])

    @kopf.timer(group, version, plural, interval=runtime.lb.settings.resync_s, when=_ours,
                registry=registry, id="haproxy_lb_resync")
    async def resync(**kw: Any) -> None:
        await runtime.in_worker(kw["namespace"], kw["name"])

    @kopf.on.delete(group, version, plural, when=_ours, registry=registry,
                    id="haproxy_lb_release", retries=RELEASE_RETRIES, backoff=RELEASE_BACKOFF_S)
    async def released(**kw: Any) -> None:
        out = await runtime.release(kw["body"])
        if out.retry:
            raise kopf.TemporaryError(f"{out.reason}: HAProxy backend not emptied yet",
                                      delay=RELEASE_BACKOFF_S)
