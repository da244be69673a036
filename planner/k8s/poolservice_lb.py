"""The reference load balancer for PoolServices of class ``intent-planner.io/haproxy``.

OpenYurt's model has two layers: a fan-out controller creates one PoolService per (Service,
NodePool) and copies the Service's ``loadBalancerClass`` into it, and a vendor controller per
class provisions a load balancer for the pool and writes the PoolService's status. This is
ours: one HAProxy per pool (:mod:`planner.k8s.poolservice_lb_settings` says which), whose
backend for a Service holds exactly the Service's ready endpoints in that pool, weighted by the
dispatch-weight engine.

:meth:`HAProxyPoolLB.reconcile` is level-based and idempotent. It reads the PoolService, its
Service, the Service's EndpointSlices, the nodes and the engine's weights; computes the
desired servers (:mod:`planner.k8s.poolservice_backends`); makes the pool's HAProxy hold them
through its runtime API, sending only the differences
(:class:`actuators.dataplanes.haproxy_servers.ServerSetWriter`); and writes the PoolService's
status through the status subresource, only when it changed:

* ``loadBalancer.ingress``: the pool's HAProxy frontend (``ip`` or ``hostname``) with the
  Service's ports (kept as it was while HAProxy cannot be reached; empty when the pool has
  no HAProxy configured);
* ``conditions``: ``Ready`` with ``observedGeneration``; ``lastTransitionTime`` changes only
  when the status flips. Reasons: ``BackendsSynced`` (True), ``NoReadyEndpoints``,
  ``HAProxyUnreachable``, ``HAProxyRefused``, ``HAProxyBackendMissing``,
  ``HAProxyBackendUnusable`` (a static server in the backend) (temporary: retried
  at the next resync), ``PoolNotConfigured``, ``ServiceNotFound``, ``NotOwned`` (labels
  missing), ``BackendConflict`` (permanent until the settings or objects change);
* ``aggregateToAnnotations``: ``intent-planner.io/haproxy-backends: <pool>=<n>`` (the fan-out
  controller aggregates it to the Service as ``aggregated.intent-planner.io/haproxy-backends``,
  one ``pool=n`` per pool).

A deleted PoolService of the class has its HAProxy backend emptied (:meth:`HAProxyPoolLB.release`;
in the operator, kopf's finalizer holds the deletion until then, a few retries at most), unless
another live PoolService of the class still holds that backend in that pool.

**One backend, one Service.** The ``backend`` template may give two Services the same backend
name in one pool (``{namespace}-{name}`` gives ``a-b`` / ``c`` and ``a`` / ``b-c`` the same
``a-b-c``; the default ``{namespace}.{name}`` cannot collide: neither name has a dot).
Syncing both would make the backend flap between their servers and send
one tenant's clients to the other's pods; so the oldest PoolService (creation time, then
namespace and name) keeps the backend and every other Service's is ``Ready=False``
``BackendConflict``, with nothing sent to HAProxy.
A PoolService of another class is not touched (no read of anything else, no write). The
reconcile keeps nothing between calls: what HAProxy holds is read back from HAProxy, what the
status says from the PoolService.

**Weights.** The weights actuator runs the engine every planning cycle and publishes its
weights, pod -> weight, as ConfigMaps (``admin.dispatch.configmap``; label
``app.kubernetes.io/managed-by: intent-planner``, JSON under ``key``). :class:`ConfigMapWeights`
reads every such ConfigMap of the Service's namespace (pod names are unique in a namespace, so
no workload-to-Service mapping is needed). A pod without a published weight gets the
engine's weight for a new endpoint (:func:`planner.k8s.poolservice_backends.pool_weights`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from actuators.dataplanes import configmap as configmap_plane
from actuators.dataplanes import haproxy_servers
from planner.domain.status import FALSE, TRUE, Condition, merge_conditions
from planner.k8s import openyurt
from planner.k8s import poolservice_backends as backends
from planner.k8s.poolservice_lb_settings import HAProxyLBSettings
from planner.k8s.resources import ENDPOINTSLICES, NODES, POOLSERVICES, SERVICES, ResourceType

log = logging.getLogger(__name__)

READY = "Ready"
BACKENDS_ANNOTATION = "intent-planner.io/haproxy-backends"
"""Key in ``status.aggregateToAnnotations``: ``<pool>=<number of servers>``."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"


class Reader(Protocol):
    """Reads cluster objects (the watch cache, or direct lists)."""

    def list(self, rtype: ResourceType, namespace: str | None = None
             ) -> list[dict[str, Any]]: ...

    def get(self, rtype: ResourceType, namespace: str | None, name: str
            ) -> dict[str, Any] | None: ...


class StatusWriter(Protocol):
    """Merge-patches a PoolService's status subresource with ``{"status": patch}``."""

    def __call__(self, namespace: str, name: str, patch: dict[str, Any]) -> None: ...


class WeightSource(Protocol):
    """The engine's weights (pod -> weight) of one namespace."""

    def __call__(self, namespace: str) -> Mapping[str, int]: ...


class ConfigMapWeights:
    """Weights from the ConfigMaps the weights actuator writes (module docstring).

    ``list_configmaps(namespace)`` returns the ConfigMaps of a namespace (a label selector may
    pre-filter them; the label is checked here too). A malformed one is logged and skipped.
    """

    def __init__(self, list_configmaps: Callable[[str], list[dict[str, Any]]],
                 key: str = configmap_plane.DEFAULT_KEY) -> None:
        self.list_configmaps = list_configmaps
        self.key = key

    def __call__(self, namespace: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for cm in self.list_configmaps(namespace):
            meta = cm.get("metadata") or {}
            if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) != configmap_plane.MANAGED_BY:
                continue
            text = (cm.get("data") or {}).get(self.key)
            if text is None:
                continue
            try:
                data = json.loads(text)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                log.warning("weights ConfigMap %s/%s: %s is not pod -> weight JSON (%s)",
                            namespace, meta.get("name"), self.key, exc)
                continue
            out.update({str(k): v for k, v in data.items()
                        if isinstance(v, int) and not isinstance(v, bool)})
        return out


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One reconcile: whether the PoolService is ours, what was sent to HAProxy, whether the
    status was written, and whether a temporary error asks for a retry."""

    namespace: str
    name: str
    handled: bool
    ready: bool = False
    reason: str = ""
    commands: tuple[str, ...] = ()
    status_written: bool = False
    retry: bool = False


@dataclasses.dataclass(frozen=True)
class _Verdict:
    ready: bool
    reason: str
    message: str
    ingress: list[dict[str, Any]] | None = None
    """``None``: keep what the status says."""
    backends: str | None = None
    """``<pool>=<servers>`` for ``aggregateToAnnotations`` (``None``: keep)."""
    commands: tuple[str, ...] = ()
    retry: bool = False


class HAProxyPoolLB:
    """Serves ``loadBalancerClass`` :data:`planner.k8s.openyurt.HAPROXY_LB_CLASS` (module doc).

    ``reference_weight``: the engine's mean weight (``admin.dispatch.engine.referenceWeight``),
    the weight of a pod the engine has not weighed yet.
    """

    def __init__(self, settings: HAProxyLBSettings, reader: Reader, write_status: StatusWriter,
                 weights: WeightSource, *, reference_weight: int = 64,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.reader = reader
        self.write_status = write_status
        self.weights = weights
        self.reference_weight = reference_weight
        self.clock = clock

    @staticmethod
    def ours(poolservice: Mapping[str, Any]) -> bool:
        spec = poolservice.get("spec") or {}
        return bool(spec.get("loadBalancerClass") == openyurt.HAPROXY_LB_CLASS)

    def reconcile_all(self) -> list[Outcome]:
        """Reconcile every PoolService of our class."""
        return [self.reconcile_object(ps) for ps in self.reader.list(POOLSERVICES)
                if self.ours(ps)]

    def reconcile(self, namespace: str, name: str) -> Outcome:
        """Reconcile one PoolService (gone or of another class: nothing is done)."""
        ps = self.reader.get(POOLSERVICES, namespace, name)
        if ps is None:
            return Outcome(namespace, name, False)
        return self.reconcile_object(ps)

    def reconcile_object(self, ps: Mapping[str, Any]) -> Outcome:
        meta = ps.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if not self.ours(ps) or meta.get("deletionTimestamp"):
            return Outcome(ns, name, False)
        verdict = self._verdict(ns, ps)
        status = ps.get("status") or {}
        new = self._status(status, verdict, int(meta.get("generation") or 0))
        written = False
        if any(status.get(k) != v for k, v in new.items()):
            self.write_status(ns, name, new)
            written = True
            log.info("PoolService %s/%s: Ready=%s %s: %s", ns, name, verdict.ready,
                     verdict.reason, verdict.message)
        return Outcome(ns, name, True, verdict.ready, verdict.reason, verdict.commands, written,
                       verdict.retry)

    def release(self, ps: Mapping[str, Any]) -> Outcome:
        """A deleted PoolService of our class: empty its backend in the pool's HAProxy (the
        pool no longer exposes the Service). ``retry`` when HAProxy could not be reached."""
        meta = ps.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if not self.ours(ps):
            return Outcome(ns, name, False)
        labels = meta.get("labels") or {}
        service, pool = labels.get(openyurt.SERVICE_NAME_LABEL), labels.get(
            openyurt.POOL_NAME_LABEL)
        lb = self.settings.pools.get(str(pool)) if service and pool else None
        if lb is None:
            return Outcome(ns, name, True, reason="PoolNotConfigured")
        backend = self.settings.backend_of(ns, str(service), str(pool))
        holder = self._holder(ps, backend, str(pool), other_service_only=False)
        if holder is not None:
            hmeta = holder.get("metadata") or {}
            log.info("PoolService %s/%s deleted: HAProxy backend %s of pool %s left as it is "
                     "(PoolService %s/%s holds it)", ns, name, backend, pool,
                     hmeta.get("namespace"), hmeta.get("name"))
            return Outcome(ns, name, True, reason="BackendInUse")
        result = haproxy_servers.ServerSetWriter(
            backend, lb.parsed_runtime_api(), timeout=lb.timeout_s).sync({})
        if not result.reachable or result.failed:
            return Outcome(ns, name, True, reason="HAProxyUnreachable" if not result.reachable
                           else "HAProxyRefused", commands=result.sent, retry=True)
        log.info("PoolService %s/%s deleted: HAProxy backend %s at %s emptied", ns, name,
                 backend, lb.runtime_api)
        return Outcome(ns, name, True, reason="Released", commands=result.sent)

    # ------------------------------------------------------------------ the decision
    def _verdict(self, ns: str, ps: Mapping[str, Any]) -> _Verdict:
        labels = (ps.get("metadata") or {}).get("labels") or {}
        service, pool = labels.get(openyurt.SERVICE_NAME_LABEL), labels.get(
            openyurt.POOL_NAME_LABEL)
        if not service or not pool:
            return _Verdict(False, "NotOwned", f"labels {openyurt.SERVICE_NAME_LABEL} and "
                            f"{openyurt.POOL_NAME_LABEL} are needed to know the Service and "
                            "the pool; fix: let the fan-out controller create PoolServices",
                            ingress=[])
        lb = self.settings.pools.get(pool)
        if lb is None:
            return _Verdict(False, "PoolNotConfigured", f"no HAProxy for pool {pool}; fix: add "
                            f"pools.{pool} (runtimeAPI, address) to the haproxy-lb settings",
                            ingress=[])
        backend = self.settings.backend_of(ns, service, pool)
        holder = self._holder(ps, backend, pool, other_service_only=True)
        if holder is not None:
            hmeta = holder.get("metadata") or {}
            # another namespace's objects are not named in this one's status
            who = (f"PoolService {hmeta.get('name')} of Service "
                   f"{_labels(holder).get(openyurt.SERVICE_NAME_LABEL)}"
                   if hmeta.get("namespace") == ns else "a PoolService of another namespace")
            return _Verdict(False, "BackendConflict", f"HAProxy backend {backend} of pool {pool} "
                            f"is held by {who}, older: the backend template "
                            f"{self.settings.backend!r} names both Services the same; fix (the "
                            "admin): a template that keeps them apart, e.g. '{namespace}.{name}'",
                            ingress=[])
        svc = self.reader.get(SERVICES, ns, service)
        if svc is None:
            return _Verdict(False, "ServiceNotFound", f"Service {ns}/{service} not found",
                            ingress=[])
        port_name = backends.service_port_name(svc)
        endpoints = backends.in_pool(
            backends.ready_endpoints(self.reader.list(ENDPOINTSLICES, ns), service, port_name),
            backends.pool_nodes(self.reader.list(NODES), pool))
        weights = backends.pool_weights(endpoints, self.weights(ns), self.reference_weight)
        desired, problems = backends.desired_servers(endpoints, weights)
        writer = haproxy_servers.ServerSetWriter(backend, lb.parsed_runtime_api(),
                                                 timeout=lb.timeout_s)
        result = writer.sync(desired)
        where = f"HAProxy backend {backend} at {lb.runtime_api}"
        if result.no_backend:
            return _Verdict(False, "HAProxyBackendMissing", f"{result.message}; fix: add "
                            f"'backend {backend}' (balance roundrobin, no servers) to the "
                            f"HAProxy configuration of pool {pool}", commands=result.sent,
                            retry=True)
        if result.unusable:
            return _Verdict(False, "HAProxyBackendUnusable", f"{where}: {result.message}",
                            commands=result.sent, retry=True)
        if not result.reachable:
            return _Verdict(False, "HAProxyUnreachable", f"{where}: {result.message}",
                            commands=result.sent, retry=True)
        ingress = [lb.ingress(_ports(svc))]
        servers = f"{pool}={len(result.servers)}"
        if result.failed:
            return _Verdict(False, "HAProxyRefused", f"{where}: {result.message}", ingress,
                            servers, result.sent, retry=True)
        skipped = f"; left out: {'; '.join(problems)}" if problems else ""
        if not desired:
            return _Verdict(False, "NoReadyEndpoints", f"no ready endpoint of Service "
                            f"{ns}/{service} in pool {pool}; {where} has no server{skipped}",
                            ingress, servers, result.sent)
        return _Verdict(True, "BackendsSynced", f"{where} holds the {len(desired)} ready "
                        f"endpoint(s) of pool {pool}{skipped}", ingress, servers, result.sent)

    def _holder(self, ps: Mapping[str, Any], backend: str, pool: str, *,
                other_service_only: bool) -> Mapping[str, Any] | None:
        """Another live PoolService of our class whose Service the template gives ``backend``
        in ``pool``. ``other_service_only``: only one of another Service, and only if it is
        older than ``ps`` (it keeps the backend); else any other one (the backend is still
        in use)."""
        meta = ps.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        service = _labels(ps).get(openyurt.SERVICE_NAME_LABEL)
        me = _age(ps)
        found: list[Mapping[str, Any]] = []
        for other in self.reader.list(POOLSERVICES):
            labels = _labels(other)
            if labels.get(openyurt.POOL_NAME_LABEL) != pool:  # most of them: cheap first
                continue
            ometa = other.get("metadata") or {}
            ons = str(ometa.get("namespace") or "")
            if (ons, ometa.get("name")) == (ns, meta.get("name")) or not self.ours(other) \
                    or ometa.get("deletionTimestamp"):
                continue
            osvc = labels.get(openyurt.SERVICE_NAME_LABEL)
            if not osvc or self.settings.backend_of(ons, osvc, pool) != backend:
                continue
            if other_service_only and ((ons, osvc) == (ns, service) or _age(other) >= me):
                continue
            found.append(other)
        return min(found, key=_age) if found else None

    def _status(self, previous: Mapping[str, Any], v: _Verdict, generation: int
                ) -> dict[str, Any]:
        """The status fields this load balancer owns, as they should be now."""
        conditions = [c for c in previous.get("conditions") or () if isinstance(c, Mapping)]
        mine = merge_conditions([dict(c) for c in conditions if c.get("type") == READY],
                                [Condition(READY, TRUE if v.ready else FALSE, v.reason,
                                           v.message)], generation, self.clock())
        others = [dict(c) for c in conditions if c.get("type") != READY]
        out: dict[str, Any] = {"conditions": [*others, *mine]}
        if v.ingress is not None:
            out["loadBalancer"] = {"ingress": v.ingress} if v.ingress else {}
        if v.backends is not None:
            out["aggregateToAnnotations"] = {**dict(previous.get("aggregateToAnnotations") or {}),
                                             BACKENDS_ANNOTATION: v.backends}
        return out


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _age(ps: Mapping[str, Any]) -> tuple[str, str, str]:
    """Older first: creation time (RFC 3339, the API server's one format), namespace, name."""
    meta = ps.get("metadata") or {}
    return (str(meta.get("creationTimestamp") or "~"), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""))


def _ports(service: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Service's ports as ``status.loadBalancer.ingress[].ports`` lists them."""
    return [{"port": int(p["port"]), "protocol": str(p.get("protocol") or "TCP")}
            for p in (service.get("spec") or {}).get("ports") or () if "port" in p]
