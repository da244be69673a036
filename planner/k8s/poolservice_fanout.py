"""The PoolService fan-out: one Service reconciled through the API (``docs/poolservice.md``).

:meth:`PoolServiceFanout.reconcile` reads the Service, every NodePool and the PoolServices of
the Service's namespace from the shared watch cache, asks
:func:`planner.k8s.poolservice_desired.desired` for the writes and applies them:

1. the Service's ``metadata`` (finalizer, ``aggregated.*`` annotations and labels): a merge
   patch with the ``resourceVersion`` it was computed from as precondition;
2. PoolServices deleted (``uid`` precondition; already gone is fine), created, repaired
   (``resourceVersion`` precondition);
3. the Service's ``status.loadBalancer.ingress`` through the ``status`` subresource.

A **conflict** (409: the object changed since it was read, or a PoolService to create already
exists) means the cache was behind: the world is read again from the API server itself and the
writes computed again, up to ``attempts`` times. Other **temporary errors** (429, 5xx, no
answer, cache not ready) are retried with exponential backoff, then raised as
:class:`planner.domain.errors.TemporaryError` for the caller to requeue. **Permanent errors**
(403 without the RBAC of ``deploy/optional/poolservice-fanout-rbac.yaml``, 422) are raised as
they are. Events are posted after the writes succeed, through an
:class:`planner.k8s.k8sevents.EventPoster` (repeats filtered).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import ApiClient

from planner.domain.errors import TemporaryError
from planner.k8s.apierrors import KubernetesTemporaryError, NotFound
from planner.k8s.k8sevents import EventPoster
from planner.k8s.k8srequest import MERGE_PATCH, json_request
from planner.k8s.poolservice_desired import FanoutWrites, desired
from planner.k8s.resources import NODEPOOLS, POOLSERVICES, SERVICES
from planner.k8s.watchcache import WatchCache

log = logging.getLogger(__name__)

World = tuple[Mapping[str, Any] | None, list[Mapping[str, Any]], list[Mapping[str, Any]]]


def _conflict(exc: BaseException) -> bool:
    return isinstance(exc, KubernetesTemporaryError) and exc.status == 409


class PoolServiceFanout:
    """Reconciles one Service at a time (thread-safe: no state but the collaborators)."""

    def __init__(self, cache: WatchCache, api_client: ApiClient,
                 events: EventPoster | None = None, *, attempts: int = 4,
                 backoff_s: float = 0.2, timeout: float = 30.0, ready_wait_s: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cache = cache
        self.api_client = api_client
        self.events = events if events is not None else EventPoster(api_client)
        self.attempts = max(1, attempts)
        self.backoff_s = backoff_s
        self.timeout = timeout
        self.ready_wait_s = ready_wait_s
        self.sleep = sleep

    # ------------------------------------------------------------------ reading
    def start(self) -> None:
        """Start the cache's reflectors of Services, NodePools and PoolServices."""
        self.cache.start(SERVICES, NODEPOOLS, POOLSERVICES)

    def _from_cache(self, ns: str, name: str) -> World:
        wait = self.ready_wait_s
        service = self.cache.get(SERVICES, ns, name, wait=wait)
        if service is None:
            return None, [], []
        return (service, list(self.cache.list(NODEPOOLS, wait=wait)),
                list(self.cache.list(POOLSERVICES, ns, wait=wait)))

    def _get(self, path: str, what: str) -> dict[str, Any]:
        return json_request(self.api_client, "GET", path, what, timeout=self.timeout)

    def _from_api(self, ns: str, name: str) -> World:
        try:
            service = self._get(SERVICES.path(ns, name), f"read Service {ns}/{name}")
        except NotFound:
            return None, [], []
        pools = self._get(NODEPOOLS.path(), "list NodePools").get("items") or []
        pss = self._get(POOLSERVICES.path(ns), f"list PoolServices in {ns}").get("items") or []
        return service, list(pools), list(pss)

    # ------------------------------------------------------------------ the reconcile
    def reconcile(self, ns: str, name: str) -> FanoutWrites | None:
        """Bring Service ``ns/name`` and its PoolServices to the desired state; the writes
        made (``None``: no such Service)."""
        fresh = False
        last: TemporaryError | None = None
        for attempt in range(self.attempts):
            try:
                service, pools, pss = self._from_api(ns, name) if fresh \
                    else self._from_cache(ns, name)
                if service is None:
                    return None
                writes = desired(service, pools, pss)
                self.apply(writes)
            except TemporaryError as exc:
                last = exc
                if _conflict(exc):
                    log.debug("Service %s/%s: %s; reading it again", ns, name, exc)
                    fresh = True
                    continue
                if attempt + 1 < self.attempts:
                    self.sleep(self.backoff_s * 2 ** attempt)
                continue
            for note in writes.events:
                self.events.post(note)
            if writes:
                log.info("Service %s/%s: %d write(s); pools %s", ns, name, writes.writes,
                         ", ".join(writes.pools) or "none")
            return writes
        raise TemporaryError(f"PoolService fan-out of Service {ns}/{name}: gave up after "
                             f"{self.attempts} attempts: {last}")

    # ------------------------------------------------------------------ writing
    def apply(self, w: FanoutWrites) -> None:
        """Make the writes of ``w`` (see the module docstring for the order)."""
        ns, name = w.namespace, w.service
        rv = w.service_resource_version
        if w.service_metadata is not None:
            meta = {**w.service_metadata, "resourceVersion": rv}
            out = json_request(self.api_client, "PATCH", SERVICES.path(ns, name),
                               f"update Service {ns}/{name} (finalizer, aggregated keys)",
                               {"metadata": meta}, MERGE_PATCH, self.timeout)
            rv = (out.get("metadata") or {}).get("resourceVersion", rv)
        for d in w.delete:
            body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if d.uid:
                body["preconditions"] = {"uid": d.uid}
            with contextlib.suppress(NotFound):  # already gone
                json_request(self.api_client, "DELETE", POOLSERVICES.path(ns, d.name),
                             f"delete PoolService {ns}/{d.name}", body, timeout=self.timeout)
        for manifest in w.create:
            ps = manifest["metadata"]["name"]
            json_request(self.api_client, "POST", POOLSERVICES.path(ns),
                         f"create PoolService {ns}/{ps}", manifest, timeout=self.timeout)
        for r in w.repair:
            patch = {**r.patch, "metadata": {**r.patch.get("metadata", {}),
                                             "resourceVersion": r.resource_version}}
            json_request(self.api_client, "PATCH", POOLSERVICES.path(ns, r.name),
                         f"repair PoolService {ns}/{r.name}", patch, MERGE_PATCH, self.timeout)
        if w.service_ingress is not None:
            body = {"metadata": {"resourceVersion": rv},
                    "status": {"loadBalancer": {"ingress": w.service_ingress}}}
            json_request(self.api_client, "PATCH", SERVICES.path(ns, name, "status"),
                         f"write the load balancer status of Service {ns}/{name}", body,
                         MERGE_PATCH, self.timeout)
