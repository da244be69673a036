"""A shared watch cache: one upstream list+watch per resource type, any number of consumers.

Every consumer in the process (the controller through :class:`planner.k8s.backend`, the
actuators, the intent source, an API) reads from one :class:`WatchCache`. The first consumer
that asks for a resource type starts its reflector; later consumers share it, so the API server
sees exactly one list+watch per resource type (per namespace when the cache is restricted to
namespaces) however many consumers there are.

A reflector (one daemon thread per resource type) works like client-go's:

1. **list** the resource in pages (``limit``/``continue``), remember the list's
   ``resourceVersion``, replace the store (consumers get the differences as events), and
   become **ready**;
2. **watch** from that version with ``allowWatchBookmarks`` and a server-side
   ``timeoutSeconds``; apply ``ADDED``/``MODIFIED``/``DELETED``, advance the version on every
   event and ``BOOKMARK``;
3. when the stream ends or the connection drops, **resume** the watch from the last version
   seen (no relist); on **410 Gone** (the version was compacted away) **relist**; on other
   errors back off exponentially (with jitter) and retry.

Readiness gating: :meth:`WatchCache.list` and :meth:`WatchCache.get` raise :class:`NotReady`
(a :class:`planner.domain.errors.TemporaryError`) until the initial list is in, optionally after
waiting for it; :meth:`WatchCache.wait_ready` blocks. Consumers take a **snapshot**
(:meth:`WatchCache.list`) or **subscribe** (:meth:`WatchCache.subscribe`) to a stream of
events, optionally starting with the current objects as ``ADDED``.

Memory: the cache stores the per-resource projection of each object
(:mod:`planner.k8s.projections`), not the object. Stored objects are shared with consumers and
must be treated as read-only.

Metrics (:class:`ResourceStats`, and as Prometheus metrics in :attr:`WatchCache.registry`):
upstream list and watch requests, upstream bytes and objects received, relists by reason,
watch resumes, errors; objects and bytes served to consumers. "Bytes served" is the upstream
wire size of each object handed out (a listed object counts its share of the list body), i.e.
what that consumer would have downloaded itself without the cache.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry

from planner.domain.errors import TemporaryError
from planner.k8s import cachemetrics
from planner.k8s.cachestats import ResourceStats
from planner.k8s.projections import PROJECTIONS, Interner, Projection, project_all
from planner.k8s.resources import ResourceType
from planner.k8s.transport import Gone, Transport, UpstreamError, WatchStream

log = logging.getLogger(__name__)

Key = tuple[str | None, str]
"""``(namespace, name)``; namespace ``None`` for cluster-scoped objects."""

RESYNC = "RESYNC"
"""Event type telling a subscriber it fell behind and lost events: take a fresh snapshot."""


class NotReady(TemporaryError):
    """The resource's initial list is not in yet (or the cache is stopped)."""


@dataclass(frozen=True)
class CacheSettings:
    page_size: int = 500
    """Objects per list page (``limit``); 0 lists everything in one response."""
    watch_timeout_s: float = 300.0
    """Server-side ``timeoutSeconds`` of a watch, randomised up to twice this (as client-go)."""
    read_timeout_slack_s: float = 30.0
    """A watch read may take this much longer than ``timeoutSeconds`` before it is dropped."""
    request_timeout_s: float = 60.0
    backoff_initial_s: float = 0.2
    backoff_max_s: float = 30.0
    queue_size: int = 10_000
    """Events buffered per subscriber; beyond that it gets one ``RESYNC`` event instead."""


class WatchEvent(NamedTuple):
    """One change delivered to a subscriber. ``object`` is the projection (read-only)."""

    type: str
    object: dict[str, Any]
    resource: str


class Subscription:
    """A consumer's stream of events of one resource type (thread-safe, bounded)."""

    def __init__(self, resource: str, maxsize: int, on_close: Any) -> None:
        self.resource = resource
        self._queue: queue.Queue[WatchEvent] = queue.Queue(maxsize)
        self._on_close = on_close
        self.closed = False
        self.overflowed = False

    def _offer(self, event: WatchEvent) -> bool:
        if self.closed:
            return False
        try:
            self._queue.put_nowait(event)
            return True
        except queue.Full:
            self.overflowed = True
            with self._queue.mutex:
                self._queue.queue.clear()
            self._queue.put_nowait(WatchEvent(RESYNC, {}, self.resource))
            return False

    def get(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event, or ``None`` after ``timeout`` seconds without one."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self) -> list[WatchEvent]:
        """Every event queued now, without waiting."""
        out: list[WatchEvent] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def __iter__(self) -> Iterator[WatchEvent]:
        while not self.closed:
            ev = self.get(timeout=0.5)
            if ev is not None:
                yield ev

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._on_close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Reflector:
    """One resource type (in one namespace or cluster-wide): list, watch, store, fan out."""

    def __init__(self, rtype: ResourceType, namespace: str | None, projection: Projection,
                 transport: Transport, settings: CacheSettings) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.projection = projection
        self.transport = transport
        self.settings = settings
        self.path = rtype.path(namespace)
        self.lock = threading.Lock()
        self.objects: dict[Key, dict[str, Any]] = {}
        self.sizes: dict[Key, int] = {}
        self.rv: str | None = None
        self.ready = threading.Event()
        self.stats = ResourceStats(rtype.plural)
        self.subscribers: list[Subscription] = []
        self.interner = Interner()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        where = namespace or "all"
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"watch-{rtype.plural}-{where}")

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _run(self) -> None:
        need_list, reason = True, "initial"
        delay = self.settings.backoff_initial_s
        while not self._stop.is_set():
            phase = "list" if need_list else "watch"
            try:
                if need_list:
                    self._list(reason)
                    need_list = False
                self._watch()
                delay = self.settings.backoff_initial_s
                if not self._stop.is_set():
                    self.stats.resumes += 1
                continue
            except Gone as exc:
                log.info("%s: %s; listing again", self.rtype, exc)
                need_list, reason = True, "gone"
                continue
            except UpstreamError as exc:
                self._failed(phase, exc)
                if phase == "watch" and exc.status not in (None, 429, 500, 502, 503, 504):
                    need_list, reason = True, "error"
            except Exception as exc:  # a bug or a malformed answer: keep the thread alive
                log.exception("%s: unexpected error while %sing", self.rtype, phase)
                self._failed(phase, exc)
                need_list, reason = True, "error"
            if self._stop.wait(delay * random.uniform(0.8, 1.2)):
                break
            delay = min(delay * 2, self.settings.backoff_max_s)

    def _failed(self, phase: str, exc: Exception) -> None:
        self.stats.errors += 1
        self.stats.last_error = f"{phase}: {exc}"
        if not self._stop.is_set():
            log.warning("%s: %s failed: %s", self.rtype, phase, exc)

    # ---------------------------------------------------------------- list
    def _list(self, reason: str) -> None:
        items: dict[Key, dict[str, Any]] = {}
        sizes: dict[Key, int] = {}
        params: dict[str, str] = {}
        if self.settings.page_size:
            params["limit"] = str(self.settings.page_size)
        rv: str | None = None
        while True:
            self.stats.list_requests += 1
            body = self.transport.list(self.path, params, self.settings.request_timeout_s)
            self.stats.upstream_bytes += len(body)
            data = json.loads(body)
            page = data.get("items") or []
            share = len(body) // max(1, len(page))
            for raw in page:
                key = key_of(raw)
                items[key] = self.projection(raw, self.interner)
                sizes[key] = share
            self.stats.upstream_objects += len(page)
            meta = data.get("metadata") or {}
            rv = meta.get("resourceVersion") or rv
            cont = meta.get("continue")
            if not cont or self._stop.is_set():
                break
            params = {**params, "continue": str(cont)}
        self._replace(items, sizes, rv)
        self.stats.relists[reason] = self.stats.relists.get(reason, 0) + 1

    def _replace(self, items: dict[Key, dict[str, Any]], sizes: dict[Key, int],
                 rv: str | None) -> None:
        with self.lock:
            old = self.objects
            for key, obj in items.items():
                before = old.get(key)
                if before is None:
                    self._fanout("ADDED", obj, sizes[key])
                elif _version(before) != _version(obj) or _version(obj) is None:
                    self._fanout("MODIFIED", obj, sizes[key])
            for key, obj in old.items():
                if key not in items:
                    self._fanout("DELETED", obj, self.sizes.get(key, 0))
            self.objects, self.sizes, self.rv = items, sizes, rv
            self.stats.objects = len(items)
            self.stats.resource_version = rv
        self.ready.set()
        self.stats.ready = True

    # ---------------------------------------------------------------- watch
    def _watch(self) -> None:
        timeout = int(self.settings.watch_timeout_s * random.uniform(1.0, 2.0))
        params = {"allowWatchBookmarks": "true", "timeoutSeconds": str(max(1, timeout))}
        if self.rv is not None:
            params["resourceVersion"] = self.rv
        self.stats.watch_requests += 1
        stream = self.transport.watch(self.path, params,
                                      timeout + self.settings.read_timeout_slack_s)
        self._stream = stream
        try:
            if self._stop.is_set():
                return
            for line in stream:
                self.stats.upstream_bytes += len(line)
                event = json.loads(line)
                kind = event.get("type")
                raw = event.get("object") or {}
                if kind == "ERROR":
                    code = raw.get("code")
                    status = int(code) if isinstance(code, int) else None
                    reason, message = str(raw.get("reason", "")), str(raw.get("message", ""))
                    if status == 410:
                        raise Gone(410, reason, message)
                    raise UpstreamError(status, reason, message)
                if kind == "BOOKMARK":
                    rv = (raw.get("metadata") or {}).get("resourceVersion")
                    if rv:
                        self.rv = rv
                        self.stats.resource_version = rv
                    continue
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.stats.upstream_objects += 1
                    self._apply(kind, raw, len(line))
        finally:
            self._stream = None
            stream.close()

    def _apply(self, kind: str, raw: Mapping[str, Any], size: int) -> None:
        key = key_of(raw)
        obj = self.projection(raw, self.interner)
        with self.lock:
            if kind == "DELETED":
                old = self.objects.pop(key, None)
                self.sizes.pop(key, None)
                if old is not None:
                    self._fanout("DELETED", obj, size)
            else:
                kind = "MODIFIED" if key in self.objects else "ADDED"
                self.objects[key] = obj
                self.sizes[key] = size
                self._fanout(kind, obj, size)
            rv = (raw.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.rv = rv
                self.stats.resource_version = rv
            self.stats.objects = len(self.objects)

    def _fanout(self, kind: str, obj: dict[str, Any], size: int) -> None:
        """Deliver to subscribers; the caller holds :attr:`lock`."""
        if not self.subscribers:
            return
        ev = WatchEvent(kind, obj, self.rtype.plural)
        for sub in self.subscribers:
            if sub._offer(ev):
                self.stats.served_objects += 1
                self.stats.served_bytes += size

    # ---------------------------------------------------------------- consumers
    def snapshot(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            if namespace is None:
                out = list(self.objects.values())
                served = sum(self.sizes.values())
            else:
                keys = [k for k in self.objects if k[0] == namespace]
                out = [self.objects[k] for k in keys]
                served = sum(self.sizes[k] for k in keys)
            self.stats.served_objects += len(out)
            self.stats.served_bytes += served
        return out

    def get(self, key: Key) -> dict[str, Any] | None:
        with self.lock:
            obj = self.objects.get(key)
            if obj is not None:
                self.stats.served_objects += 1
                self.stats.served_bytes += self.sizes.get(key, 0)
        return obj

    def subscribe(self, sub: Subscription, replay: bool) -> None:
        with self.lock:
            if replay:
                for key, obj in self.objects.items():
                    if sub._offer(WatchEvent("ADDED", obj, self.rtype.plural)):
                        self.stats.served_objects += 1
                        self.stats.served_bytes += self.sizes.get(key, 0)
            self.subscribers.append(sub)
            self.stats.subscribers = len(self.subscribers)

    def unsubscribe(self, sub: Subscription) -> None:
        with self.lock:
            if sub in self.subscribers:
                self.subscribers.remove(sub)
            self.stats.subscribers = len(self.subscribers)


def key_of(raw: Mapping[str, Any]) -> Key:
    meta = raw.get("metadata") or {}
    return meta.get("namespace"), str(meta.get("name"))


def _version(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


class WatchCache:
    """One reflector per resource type (per namespace), started on first use; see the module doc.

    ``namespaces``: ``None`` watches namespaced resources cluster-wide (one watch each);
    a list watches each of those namespaces (one watch per resource and namespace).
    ``projections`` overrides the default projection per plural (``None`` keeps whole objects).
    """

    def __init__(self, transport: Transport, namespaces: Sequence[str] | None = None,
                 projections: Mapping[str, Projection | None] | None = None,
                 settings: CacheSettings | None = None) -> None:
        self.transport = transport
        self.namespaces = tuple(dict.fromkeys(namespaces)) if namespaces else None
        self.settings = settings or CacheSettings()
        self._projections: dict[str, Projection] = dict(PROJECTIONS)
        for plural, proj in (projections or {}).items():
            self._projections[plural] = proj if proj is not None else project_all
        self._lock = threading.Lock()
        self._reflectors: dict[str, list[_Reflector]] = {}
        self._stopped = False
        self.registry = CollectorRegistry()
        self.registry.register(cachemetrics.CacheCollector(self.all_stats))

    # ---------------------------------------------------------------- lifecycle
    def ensure(self, rtype: ResourceType) -> list[_Reflector]:
        """The reflectors of ``rtype``, started now if this is the first request for it."""
        refl = self._reflectors.get(rtype.plural)
        if refl is not None:
            return refl
        with self._lock:
            refl = self._reflectors.get(rtype.plural)
            if refl is not None:
                return refl
            if self._stopped:
                raise NotReady(f"{rtype}: the watch cache is stopped")
            scopes: Iterable[str | None] = (
                self.namespaces if rtype.namespaced and self.namespaces else (None,))
            proj = self._projections.get(rtype.plural, project_all)
            refl = [_Reflector(rtype, ns, proj, self.transport, self.settings) for ns in scopes]
            for r in refl:
                r.start()
            self._reflectors[rtype.plural] = refl
            return refl

    def start(self, *resources: ResourceType) -> WatchCache:
        for r in resources:
            self.ensure(r)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopped = True
            reflectors = [r for rs in self._reflectors.values() for r in rs]
        for r in reflectors:
            r.stop()
        deadline = time.monotonic() + timeout
        for r in reflectors:
            r.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> WatchCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- readiness
    def ready(self, *resources: ResourceType) -> bool:
        """Whether the given resources (default: every started one) have their initial list."""
        if resources:
            groups = [self._reflectors.get(r.plural) for r in resources]
            if any(g is None for g in groups):
                return False
            refl = [r for g in groups if g is not None for r in g]
        else:
            refl = [r for rs in list(self._reflectors.values()) for r in rs]
        return not self._stopped and all(r.ready.is_set() for r in refl)

    def wait_ready(self, resources: Iterable[ResourceType] = (),
                   timeout: float | None = None) -> bool:
        """Start ``resources`` and block until all started resources are ready (or timeout)."""
        for r in resources:
            self.ensure(r)
        deadline = None if timeout is None else time.monotonic() + timeout
        for refl in [r for rs in list(self._reflectors.values()) for r in rs]:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not refl.ready.wait(left):
                return False
        return not self._stopped

    def not_ready(self) -> list[str]:
        """Started resources still waiting for their initial list (for ``/readyz``)."""
        return sorted({r.rtype.plural for rs in list(self._reflectors.values()) for r in rs
                       if not r.ready.is_set()})

    def _ready_reflectors(self, rtype: ResourceType, wait: float | None) -> list[_Reflector]:
        refl = self.ensure(rtype)
        deadline = time.monotonic() + (wait or 0.0)
        for r in refl:
            if not r.ready.wait(max(0.0, deadline - time.monotonic())):
                raise NotReady(f"{rtype}: initial list not received yet"
                               + (f" ({r.stats.last_error})" if r.stats.last_error else ""))
        if self._stopped:
            raise NotReady(f"{rtype}: the watch cache is stopped")
        return refl

    # ---------------------------------------------------------------- consumers
    def list(self, rtype: ResourceType, namespace: str | None = None,
             wait: float | None = None) -> list[dict[str, Any]]:
        """A snapshot of the (projected, read-only) objects; :class:`NotReady` until listed.

        ``wait`` seconds are spent waiting for the initial list before giving up.
        """
        out: list[dict[str, Any]] = []
        for r in self._ready_reflectors(rtype, wait):
            if namespace is None or r.namespace is None:
                out.extend(r.snapshot(namespace))
            elif r.namespace == namespace:
                out.extend(r.snapshot(None))
        return out

    def get(self, rtype: ResourceType, namespace: str | None, name: str,
            wait: float | None = None) -> dict[str, Any] | None:
        key: Key = (namespace if rtype.namespaced else None, name)
        for r in self._ready_reflectors(rtype, wait):
            if r.namespace is None or r.namespace == namespace:
                obj = r.get(key)
                if obj is not None:
                    return obj
        return None

    def subscribe(self, rtype: ResourceType, replay: bool = True,
                  maxsize: int | None = None) -> Subscription:
        """A stream of this resource's events; ``replay`` first sends every object as ADDED."""
        refl = self.ensure(rtype)
        def unsubscribe(s: Subscription) -> None:
            for r in refl:
                r.unsubscribe(s)

        sub = Subscription(rtype.plural, maxsize or self.settings.queue_size, unsubscribe)
        for r in refl:
            r.subscribe(sub, replay)
        return sub

    # ---------------------------------------------------------------- metrics
    def stats(self, rtype: ResourceType) -> ResourceStats:
        refl = self._reflectors.get(rtype.plural) or []
        out = ResourceStats(rtype.plural)
        if not refl:
            return out
        out = replace(refl[0].stats, relists=dict(refl[0].stats.relists))
        for r in refl[1:]:
            out = out.merge(r.stats)
        return out

    def all_stats(self) -> dict[str, ResourceStats]:
        return {plural: self.stats(rs[0].rtype)
                for plural, rs in list(self._reflectors.items())}
