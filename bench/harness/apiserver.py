"""Test support: kmock's ``KubernetesEmulator`` with the API-server behaviour our code relies on.

kmock 0.8's emulator stores objects and serves list/watch/fetch/create/patch/delete over real
HTTP, but it has no resource versions (a list says ``resourceVersion: "..."``), ignores
``?resourceVersion=`` on watches (every watch replays all objects as ``ADDED``), never answers
410 Gone, has no server-side watch timeout, and treats the ``scale`` and ``status``
subresources as plain patches of the whole object. :class:`Apiserver` adds the minimal pieces:

* a global, monotonically increasing ``metadata.resourceVersion`` stamped on every write, plus
  ``uid``, ``namespace``, ``creationTimestamp`` and ``generation`` (bumped when ``spec``
  changes); lists carry the current resource version and page with ``limit``/``continue``;
* an event log per resource: a watch from ``resourceVersion=N`` replays the events after
  ``N``; a watch from a version older than the log (after :meth:`Apiserver.compact`) gets the
  ``ERROR`` event with a 410 ``Expired`` status, as the real API server sends it;
* ``timeoutSeconds`` ends a watch stream server-side; ``allowWatchBookmarks`` with
  ``bookmark_interval`` sends ``BOOKMARK`` events; :meth:`Apiserver.drop_watches` ends every
  open stream (a dropped connection); :attr:`Apiserver.watch_outage` makes list and watch
  answer 503 (an API server restarting);
* the ``scale`` subresource (``autoscaling/v1`` ``Scale`` in and out), the ``status``
  subresource (a patch there changes only ``status``; a patch of the main resource ignores
  ``status`` for resources that declare the subresource), JSON-patch and merge-patch bodies,
  the ``metadata.resourceVersion`` precondition (409 Conflict), finalizers and
  ``deletionTimestamp``;
* the Pod ``resize`` subresource (a patch there changes only the containers' ``resources``
  and ``resizePolicy``, as the API server's resize strategy keeps only those) and ``eviction``
  (a POST deletes the pod; no disruption budgets); ``/version`` answers
  :attr:`Apiserver.server_version` (kmock's own says 1.26);
* :meth:`Apiserver.fail` injects an API error (status, reason, message) for the next matching
  requests; :attr:`Apiserver.calls` records every resource request with its parameters.

Requests for resources (reads and writes) are served by :class:`Apiserver` itself, not through
kmock's reaction matching (which costs time proportional to the requests served so far);
kmock serves discovery (``/api``, ``/apis/...``) and any other path as usual.
:class:`RunningApiserver` runs the server on its own event loop in a background thread so that
synchronous clients (the ``kubernetes`` client, kopf in its own thread, httpx) can talk to it
from the test thread, and :class:`Kube` is a tiny synchronous REST client for test set-up and
assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp.web
import attrs
import httpx
import jsonpatch
from kmock import KubernetesEmulator, KubernetesError, ResourceInfo, Server, action, resource
from kmock._internal import dicts, rendering

BUILTIN_RESOURCES: dict[str, ResourceInfo] = {
    "v1/pods": ResourceInfo(kind="Pod", namespaced=True,
                            subresources={"status", "resize", "eviction"},
                            verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "v1/nodes": ResourceInfo(kind="Node", namespaced=False, subresources={"status"},
                             verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "v1/services": ResourceInfo(kind="Service", namespaced=True, subresources={"status"},
                                verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "v1/configmaps": ResourceInfo(kind="ConfigMap", namespaced=True,
                                  verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "v1/events": ResourceInfo(kind="Event", namespaced=True,
                              verbs={"get", "list", "watch", "create", "patch"}),
    "v1/namespaces": ResourceInfo(kind="Namespace", namespaced=False,
                                  verbs={"get", "list", "watch", "create"}),
    "apps/v1/deployments": ResourceInfo(
        kind="Deployment", namespaced=True, subresources={"status", "scale"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "apps/v1/replicasets": ResourceInfo(
        kind="ReplicaSet", namespaced=True, subresources={"status", "scale"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "apps/v1/statefulsets": ResourceInfo(
        kind="StatefulSet", namespaced=True, subresources={"status", "scale"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "discovery.k8s.io/v1/endpointslices": ResourceInfo(
        kind="EndpointSlice", namespaced=True,
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "intent-planner.io/v1alpha1/intents": ResourceInfo(
        kind="Intent", singular="intent", namespaced=True, subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "intent-planner.io/v1alpha1/kpiprofiles": ResourceInfo(
        kind="KPIProfile", singular="kpiprofile", namespaced=True, subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "network.openyurt.io/v1alpha1/poolservices": ResourceInfo(
        kind="PoolService", singular="poolservice", namespaced=True, subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
    "apps.openyurt.io/v1beta1/nodepools": ResourceInfo(
        kind="NodePool", singular="nodepool", namespaced=False, subresources={"status"},
        verbs={"get", "list", "watch", "create", "patch", "delete"}),
}

_DROP = object()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "code": code, "reason": reason, "message": message}


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    reason: str
    message: str
    times: int


@dataclass(frozen=True)
class Call:
    """One Kubernetes request as the server saw it (verb: list, watch, fetch, create, ...)."""

    verb: str
    resource: str
    namespace: str | None
    params: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    subresource: str | None = None


@attrs.define(kw_only=True)
class Apiserver(KubernetesEmulator):
    """A :class:`kmock.KubernetesEmulator` with resource versions, watch resume, 410 Gone, ...

    See the module docstring for what it adds and why.
    """

    bookmark_interval: float | None = None
    log_limit: int = 100_000
    history_limit: int = 3
    watch_outage: bool = False
    server_version: tuple[str, str] = ("1", "26")
    """``(major, minor)`` that ``/version`` answers."""
    calls: list[Call] = attrs.field(factory=list)
    """Every Kubernetes request (reads and writes), in arrival order."""
    _rv: int = attrs.field(default=0, init=False)
    _oldest: int = attrs.field(default=0, init=False)
    _log: dict[Any, list[tuple[int, dict[str, Any]]]] = attrs.field(
        factory=lambda: defaultdict(list), init=False)
    _watchers: dict[Any, set[asyncio.Queue[Any]]] = attrs.field(
        factory=lambda: defaultdict(set), init=False)
    _faults: list[Fault] = attrs.field(factory=list, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback["get /version/"] << self._serve_server_version  # the python client's
        for key, info in BUILTIN_RESOURCES.items():
            self.resources[key] = copy.deepcopy(info)

    # ------------------------------------------------------------------ test controls
    def fail(self, method: str, path_regex: str, status: int, message: str = "injected",
             reason: str = "InternalError", times: int = 1) -> None:
        """Answer the next ``times`` matching requests with this API error."""
        self._faults.append(Fault(method.upper(), re.compile(path_regex), status, reason,
                                  message, times))

    async def drop_watches(self) -> None:
        """End every open watch stream, as a dropped connection would."""
        for queues in self._watchers.values():
            for q in queues:
                q.put_nowait(_DROP)

    async def compact(self) -> None:
        """Forget the event log: watches from any version seen so far get 410 Gone."""
        async with self._lock:
            self._rv += 1
            self._oldest = self._rv
            self._log.clear()

    @property
    def resource_version(self) -> int:
        return self._rv

    def watch_calls(self, plural: str) -> list[Call]:
        return [c for c in self.calls if c.verb == "watch" and c.resource == plural]

    def list_calls(self, plural: str) -> list[Call]:
        return [c for c in self.calls if c.verb == "list" and c.resource == plural]

    def writes(self, plural: str | None = None, subresource: str | None = None) -> list[Call]:
        """Create, update (patch) and delete requests, optionally of one resource/subresource."""
        return [c for c in self.calls if c.verb in ("create", "update", "delete")
                and (plural is None or c.resource == plural)
                and (subresource is None or c.subresource == subresource)]

    # ------------------------------------------------------------------ request handling
    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        major, minor = self.server_version
        return {"major": major, "minor": minor, "gitVersion": f"v{major}.{minor}.0",
                "platform": "linux/amd64"}

    def _info(self, res: Any) -> ResourceInfo:
        return self.resources[res]

    def _check_faults(self, request: rendering.Request) -> None:
        for f in list(self._faults):
            if f.method == str(request.method.value).upper() and f.path.search(request.url.path):
                f.times -= 1
                if f.times <= 0:
                    self._faults.remove(f)
                raise KubernetesError(status=f.status, reason=f.reason, message=f.message,
                                      details={})

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None or not request.resource.plural:
            return await super()._handle(request)  # discovery and non-Kubernetes paths
        act = request.action
        verb = str(act.value).lower() if act is not None else str(request.method.value).lower()
        evict = request.subresource == "eviction" and verb in ("post", "create")
        if evict:
            verb = "create"
        self.calls.append(Call(verb, str(request.resource.plural), request.namespace,
                               dict(request.params), request.name, request.subresource))
        self._check_faults(request)
        if act in (action.LIST, action.WATCH) and self.watch_outage:
            raise KubernetesError(status=503, reason="ServiceUnavailable",
                                  message="the API server is restarting", details={})
        if evict and request.name is not None:
            return await self._evict(request)
        if act == action.CREATE:
            return await self._create(request)
        if act == action.UPDATE and request.name is not None:
            return await self._update(request)
        if act == action.DELETE and request.name is not None:
            return await self._delete(request)
        if act == action.FETCH and request.name is not None:
            async with self._lock:
                obj = self._get(request.resource, request.namespace, str(request.name))
            return aiohttp.web.json_response(
                self._scale(obj) if request.subresource == "scale" else obj)
        if act == action.LIST:
            return aiohttp.web.Response(body=json.dumps(await self._serve_list(request)),
                                        content_type="application/json")
        if act == action.WATCH:
            return await self._stream(request)
        return await super(KubernetesEmulator, self)._handle(request)

    async def _stream(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """A watch response: one JSON line per event, written as events happen."""
        raw = request._raw_request
        assert raw is not None
        resp = aiohttp.web.StreamResponse(status=200)
        resp.content_type = "application/json"
        await resp.prepare(raw)
        events = self._serve_watch(request)
        try:
            async for ev in events:
                if isinstance(ev, Mapping):
                    await resp.write(json.dumps(ev).encode() + b"\n")
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionResetError, RuntimeError):
            pass  # the client went away
        finally:
            await events.aclose()
        return resp

    def _get(self, res: Any, namespace: str | None, name: str) -> dict[str, Any]:
        key = (res, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            raise KubernetesError(status=404, reason="NotFound",
                                  message=f'{res.plural} "{name}" not found', details={})
        return copy.deepcopy(self.objects[key].raw)

    def _emit(self, res: Any, kind: str, obj: dict[str, Any]) -> None:
        event = {"type": kind, "object": obj}
        log = self._log[res]
        log.append((self._rv, event))
        if len(log) > self.log_limit:
            drop = len(log) - self.log_limit
            self._oldest = max(self._oldest, log[drop - 1][0])
            del log[:drop]
        for q in self._watchers[res]:
            q.put_nowait(event)

    def _store(self, res: Any, namespace: str | None, name: str, obj: dict[str, Any]) -> None:
        key = (res, namespace, name)
        if key in self.objects:
            o = self.objects[key]
            o.create(obj)
            if len(o.history) > self.history_limit:
                del o.history[: len(o.history) - self.history_limit]
        else:
            self.objects[key] = obj

    def _kind(self, res: Any) -> tuple[str, str]:
        info = self._info(res)
        api_version = f"{res.group}/{res.version}" if res.group else str(res.version)
        return api_version, info.kind or str(res.plural).capitalize()

    async def _create(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        obj = copy.deepcopy(request.data or {})
        meta = obj.setdefault("metadata", {})
        namespace = request.namespace or meta.get("namespace")
        if not self._info(res).namespaced:
            namespace = None
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["generateName"] + uuid.uuid4().hex[:5]
            meta["name"] = name
        if not name:
            raise KubernetesError(status=422, reason="Invalid",
                                  message="metadata.name: Required value", details={})
        api_version, kind = self._kind(res)
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
        async with self._lock:
            key = (res, namespace, name)
            if key in self.objects and not self.objects[key].deleted:
                raise KubernetesError(status=409, reason="AlreadyExists",
                                      message=f'{res.plural} "{name}" already exists',
                                      details={})
            self._rv += 1
            if namespace is not None:
                meta["namespace"] = namespace
            meta["resourceVersion"] = str(self._rv)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now()
            meta["generation"] = 1
            self._store(res, namespace, name, obj)
            self._emit(res, "ADDED", copy.deepcopy(obj))
        return aiohttp.web.json_response(obj, status=201)

    async def _update(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        body = await self.apply(request.resource, request.namespace, str(request.name),
                                request.data, request.subresource)
        return aiohttp.web.json_response(body)

    async def apply(self, res: Any, namespace: str | None, name: str, patch: Any,
                    sub: str | None = None) -> dict[str, Any]:
        """Patch one object (merge patch, or JSON patch when ``patch`` is a list), as a PATCH
        request would; returns the new object (a ``Scale`` for ``sub="scale"``)."""
        res = resource(res) if isinstance(res, str) else res
        async with self._lock:
            old = self._get(res, namespace, name)
            if isinstance(patch, list):
                try:
                    new = jsonpatch.apply_patch(old, patch, in_place=False)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise KubernetesError(status=422, reason="Invalid", message=str(exc),
                                          details={}) from None
            elif isinstance(patch, Mapping):
                want = dict(patch)
                if sub == "status":
                    want = {"status": want.get("status")} if "status" in want else {}
                elif sub == "scale":
                    replicas = (want.get("spec") or {}).get("replicas")
                    want = {"spec": {"replicas": replicas}} if replicas is not None else {}
                elif "status" in self._info(res).subresources:
                    want.pop("status", None)
                precondition = (want.get("metadata") or {}).get("resourceVersion")
                if precondition is not None and precondition != old["metadata"].get(
                        "resourceVersion"):
                    raise KubernetesError(
                        status=409, reason="Conflict",
                        message=f'Operation cannot be fulfilled on {res.plural} "{name}": the '
                                f"object has been modified; please apply your changes to the "
                                f"latest version and try again", details={})
                try:
                    new = dict(dicts.merge_patch_dict(old, want))
                except ValueError as exc:
                    raise KubernetesError(status=422, reason="Invalid", message=str(exc),
                                          details={}) from None
            else:
                raise KubernetesError(status=400, reason="BadRequest",
                                      message="the patch body is not JSON", details={})
            if sub == "resize":
                new = _resize_only(old, new)
            new = copy.deepcopy(new)
            meta = new.setdefault("metadata", {})
            for k in ("uid", "creationTimestamp", "namespace", "name"):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
            if new.get("spec") != old.get("spec"):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            if new == old:
                return self._scale(new) if sub == "scale" else new
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                self.objects[(res, namespace, name)].delete()
                self._emit(res, "DELETED", copy.deepcopy(new))
            else:
                self._store(res, namespace, name, new)
                self._emit(res, "MODIFIED", copy.deepcopy(new))
        return self._scale(new) if sub == "scale" else new

    async def put_objects(self, res: Any, objects: list[dict[str, Any]]) -> None:
        """Create many objects in-process (fast seeding for benchmarks), as POSTs would."""
        res = resource(res) if isinstance(res, str) else res
        api_version, kind = self._kind(res)
        async with self._lock:
            for obj in objects:
                obj = copy.deepcopy(obj)
                meta = obj.setdefault("metadata", {})
                namespace = meta.get("namespace") if self._info(res).namespaced else None
                self._rv += 1
                meta.update(resourceVersion=str(self._rv), uid=str(uuid.uuid4()),
                            creationTimestamp=_now(), generation=1)
                obj.setdefault("apiVersion", api_version)
                obj.setdefault("kind", kind)
                self._store(res, namespace, meta["name"], obj)
                self._emit(res, "ADDED", copy.deepcopy(obj))

    async def _delete(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        name = str(request.name)
        async with self._lock:
            obj = self._get(res, request.namespace, name)
            meta = obj["metadata"]
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            if meta.get("finalizers"):
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = _now()
                    self._store(res, request.namespace, name, obj)
                    self._emit(res, "MODIFIED", copy.deepcopy(obj))
            else:
                self.objects[(res, request.namespace, name)].delete()
                self._emit(res, "DELETED", copy.deepcopy(obj))
        return aiohttp.web.json_response(obj)

    async def _evict(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        """``POST pods/NAME/eviction``: the pod is deleted (no disruption budgets here)."""
        res, name = request.resource, str(request.name)
        async with self._lock:
            obj = self._get(res, request.namespace, name)
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self.objects[(res, request.namespace, name)].delete()
            self._emit(res, "DELETED", copy.deepcopy(obj))
        return aiohttp.web.json_response(
            {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success",
             "code": 201}, status=201)

    def _scale(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata", {})
        spec = obj.get("spec", {})
        labels = (spec.get("selector") or {}).get("matchLabels") or {}
        return {
            "apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "resourceVersion": meta.get("resourceVersion"), "uid": meta.get("uid")},
            "spec": {"replicas": int(spec.get("replicas", 1))},
            "status": {"replicas": int((obj.get("status") or {}).get("replicas", 0)),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(labels.items()))},
        }

    # ------------------------------------------------------------------ reads
    # Stored objects and logged events are never mutated in place (writes store new dicts),
    # so reads serialise them without copying.
    def _matching(self, request: rendering.Request) -> list[dict[str, Any]]:
        out = []
        for (res, namespace, name), obj in self.objects.items():
            if res != request.resource or obj.deleted:
                continue
            if request.namespace is not None and namespace != request.namespace:
                continue
            if request.name is not None and name != request.name:
                continue
            out.append(obj.raw)
        return out

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        res = request.resource
        async with self._lock:
            items = sorted(self._matching(request), key=lambda o: (
                o.get("metadata", {}).get("namespace") or "", o["metadata"]["name"]))
            rv = self._rv
            limit = int(request.params.get("limit") or 0)
            cont = request.params.get("continue") or ""
            offset = 0
            if cont:
                snap, _, off = cont.partition(":")
                rv, offset = int(snap), int(off)
            page = items[offset: offset + limit] if limit else items[offset:]
        api_version, kind = self._kind(res)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and offset + limit < len(items):
            meta["continue"] = f"{rv}:{offset + limit}"
        return {"apiVersion": api_version, "kind": f"{kind}List", "metadata": meta,
                "items": page}

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""
        res = request.resource
        params = request.params
        since = params.get("resourceVersion") or ""
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        bookmarks = params.get("allowWatchBookmarks") == "true" and self.bookmark_interval
        queue: asyncio.Queue[Any] = asyncio.Queue()
        gone = False
        backlog: list[dict[str, Any]] = []
        async with self._lock:
            if since not in ("", "0"):
                if int(since) < self._oldest:
                    gone = True
                else:
                    backlog = [ev for rv, ev in self._log[res] if rv > int(since)]
            else:
                backlog = [{"type": "ADDED", "object": o} for o in self._matching(request)]
            self._watchers[res].add(queue)
        try:
            if gone:
                yield {"type": "ERROR", "object": _status(
                    410, "Expired", f"too old resource version: {since} ({self._oldest})")}
                return
            for ev in backlog:
                if self._visible(request, ev):
                    yield ev
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout if timeout else None
            while True:
                wait: float | None = None
                if deadline is not None:
                    wait = deadline - loop.time()
                    if wait <= 0:
                        return
                if bookmarks:
                    wait = min(wait, float(bookmarks)) if wait is not None else float(bookmarks)
                try:
                    ev = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if bookmarks:
                        api_version, kind = self._kind(res)
                        yield {"type": "BOOKMARK", "object": {
                            "apiVersion": api_version, "kind": kind,
                            "metadata": {"resourceVersion": str(self._rv)}}}
                    continue
                if ev is _DROP:
                    return
                if self._visible(request, ev):
                    yield ev
        finally:
            self._watchers[res].discard(queue)

    @staticmethod
    def _visible(request: rendering.Request, event: Mapping[str, Any]) -> bool:
        meta = event.get("object", {}).get("metadata", {})
        if request.namespace is not None and meta.get("namespace") != request.namespace:
            return False
        return request.name is None or meta.get("name") == request.name

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        async with self._lock:
            return self._get(request.resource, request.namespace, str(request.name))


class RunningApiserver:
    """An :class:`Apiserver` served on 127.0.0.1 from its own event loop in a daemon thread."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""
        self.server: Apiserver
        self._thread = threading.Thread(target=self._run, name="apiserver", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced in start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with Apiserver(**self._options) as srv, Server(srv) as http:
            self.server = srv
            self.url = str(http.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()
            await srv.drop_watches()
            await asyncio.sleep(0.05)

    def start(self) -> RunningApiserver:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        return self

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``await fn(*args)`` on the server's loop and return the result."""
        async def _call() -> Any:
            return await fn(*args)
        return asyncio.run_coroutine_threadsafe(_call(), self._loop).result(10)

    def drop_watches(self) -> None:
        self.call(self.server.drop_watches)

    def compact(self) -> None:
        self.call(self.server.compact)

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def __enter__(self) -> RunningApiserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def running_apiserver(**options: Any) -> Iterator[RunningApiserver]:
    with RunningApiserver(**options) as api:
        yield api


def _resize_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``old`` with only the containers' ``resources`` and ``resizePolicy`` of ``new`` (by
    container name): what the API server keeps of a patch of the ``resize`` subresource."""
    out = copy.deepcopy(dict(old))
    patched = {c.get("name"): c for c in (new.get("spec") or {}).get("containers") or ()}
    for c in (out.get("spec") or {}).get("containers") or ():
        src = patched.get(c.get("name"))
        if src is None:
            continue
        for key in ("resources", "resizePolicy"):
            if key in src:
                c[key] = copy.deepcopy(src[key])
            else:
                c.pop(key, None)
    return out


# ---------------------------------------------------------------------- a small REST client
def path_of(api_version: str, plural: str, namespace: str | None = None,
            name: str | None = None, sub: str | None = None) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace is not None:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name is not None:
        base += f"/{name}"
    if sub is not None:
        base += f"/{sub}"
    return base


PLURALS = {"Pod": ("v1", "pods"), "Node": ("v1", "nodes"), "Service": ("v1", "services"),
           "ConfigMap": ("v1", "configmaps"),
           "Deployment": ("apps/v1", "deployments"),
           "ReplicaSet": ("apps/v1", "replicasets"),
           "StatefulSet": ("apps/v1", "statefulsets"),
           "EndpointSlice": ("discovery.k8s.io/v1", "endpointslices"),
           "Intent": ("intent-planner.io/v1alpha1", "intents"),
           "KPIProfile": ("intent-planner.io/v1alpha1", "kpiprofiles"),
           "PoolService": ("network.openyurt.io/v1alpha1", "poolservices"),
           "NodePool": ("apps.openyurt.io/v1beta1", "nodepools")}


class Kube:
    """A synchronous REST client for the emulator (set-up and assertions in tests)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=10)

    def close(self) -> None:
        self.http.close()

    def _path(self, kind: str, namespace: str | None, name: str | None = None,
              sub: str | None = None) -> str:
        api_version, plural = PLURALS[kind]
        return path_of(api_version, plural, namespace, name, sub)

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        ns = obj.get("metadata", {}).get("namespace")
        r = self.http.post(self._path(str(obj["kind"]), ns), json=dict(obj))
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def get(self, kind: str, namespace: str | None, name: str,
            sub: str | None = None) -> dict[str, Any]:
        r = self.http.get(self._path(kind, namespace, name, sub))
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def patch(self, kind: str, namespace: str | None, name: str, body: Any,
              sub: str | None = None) -> dict[str, Any]:
        r = self.http.patch(self._path(kind, namespace, name, sub), content=json.dumps(body),
                            headers={"Content-Type": "application/merge-patch+json"})
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def delete(self, kind: str, namespace: str | None, name: str) -> None:
        self.http.delete(self._path(kind, namespace, name)).raise_for_status()


# ---------------------------------------------------------------------- object builders
_pod_seq = itertools.count()


def node(name: str, pool: str, region: str = "eu-1", cpu: str = "8",
         labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "intent-planner.io/pool": pool, "topology.kubernetes.io/region": region,
            "topology.kubernetes.io/zone": f"{region}a", **(labels or {})}},
        "spec": {},
        "status": {"capacity": {"cpu": cpu, "memory": "32Gi"},
                   "allocatable": {"cpu": cpu, "memory": "30Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def deployment(namespace: str, name: str, replicas: int, cpu: str = "500m",
               kind: str = "Deployment") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
            },
        },
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def pod(namespace: str, app: str, node_name: str | None, cpu: str = "500m", ready: bool = True,
        restarts: int = 0, name: str | None = None,
        extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    n = next(_pod_seq)
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name or f"{app}-{n:05d}", "namespace": namespace,
            "labels": {"app": app, "pod-template-hash": "abc123", **(extra_labels or {})},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": f"{app}-abc123", "uid": "rs-uid", "controller": True}],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{
                "name": "app", "image": "registry.example/app:1",
                "resources": {"requests": {"cpu": cpu, "memory": "256Mi"},
                              "limits": {"cpu": "2", "memory": "1Gi"}},
                "env": [{"name": "MODE", "value": "production"}],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            }],
        },
        "status": {
            "phase": "Running",
            "startTime": "2024-01-01T00:00:00Z",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ],
            "containerStatuses": [{"name": "app", "ready": ready, "restartCount": restarts,
                                   "image": "registry.example/app:1"}],
        },
    }


def profile(namespace: str, name: str, kpi_type: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": kpi_type, **spec}}


def intent(namespace: str, name: str, target: str | None, objectives: list[dict[str, Any]],
           target_kind: str = "Deployment", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"objectives": objectives, **spec}
    if target is not None:
        body["targetRef"] = {"kind": target_kind, "name": target}
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
            "metadata": {"name": name, "namespace": namespace}, "spec": body}


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``predicate()`` until it returns a truthy value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


__all__ = ["Apiserver", "Kube", "RunningApiserver", "deployment", "intent", "node", "pod",
           "profile", "resource", "running_apiserver", "wait_until"]
