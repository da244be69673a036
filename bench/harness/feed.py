"""An in-memory upstream for the watch cache: synthetic lists and watch events, no HTTP.

:class:`FeedTransport` is a :class:`planner.k8s.transport.Transport` that serves each resource's
list from objects given up front (generated page by page, so 200,000 pods need not be held twice)
and streams the events pushed with :meth:`FeedTransport.push` to the watch. Every event gets the
next resource version; :meth:`FeedTransport.wait_synced` blocks until the cache has applied
everything pushed so far. Used by the tests (the incremental snapshot against the full one) and
by ``bench/observe.py`` at full size; the HTTP path is :mod:`bench.harness.apiserver`.
"""

from __future__ import annotations

import itertools
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from planner.k8s.resources import ResourceType
from planner.k8s.transport import Transport, WatchStream
from planner.k8s.watchcache import WatchCache


class _Stream(WatchStream):
    def __init__(self, events: queue.Queue[bytes]) -> None:
        self._events = events
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        while not self._closed:
            try:
                yield self._events.get(timeout=0.05)
            except queue.Empty:
                continue

    def close(self) -> None:
        self._closed = True


class FeedTransport(Transport):
    """Lists from given objects, watches from pushed events; see the module doc."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rv = 1
        self._lists: dict[str, Callable[[], Iterable[Mapping[str, Any]]]] = {}
        self._pages: dict[str, Iterator[Mapping[str, Any]]] = {}
        self._events: dict[str, queue.Queue[bytes]] = {}
        self._pushed: dict[str, int] = {}
        self._tokens = itertools.count(1)

    def seed(self, rtype: ResourceType, objects: Callable[[], Iterable[Mapping[str, Any]]]
             ) -> None:
        """What a list of ``rtype`` returns (called once per list: may generate lazily)."""
        self._lists[rtype.path(None)] = objects

    def _queue(self, path: str) -> queue.Queue[bytes]:
        with self._lock:
            return self._events.setdefault(path, queue.Queue())

    def push(self, rtype: ResourceType, kind: str, obj: Mapping[str, Any]) -> int:
        """Send ``ADDED``/``MODIFIED``/``DELETED`` of ``obj`` (stamped with the next version)."""
        path = rtype.path(None)
        with self._lock:
            self._rv += 1
            rv = self._rv
            self._pushed[path] = rv
        meta = {**(obj.get("metadata") or {}), "resourceVersion": str(rv)}
        line = json.dumps({"type": kind, "object": {**obj, "metadata": meta}})
        self._queue(path).put(line.encode() + b"\n")
        return rv

    def wait_synced(self, cache: WatchCache, rtypes: Iterable[ResourceType],
                    timeout: float = 30.0) -> None:
        """Block until the cache has applied every event pushed for ``rtypes``."""
        deadline = time.monotonic() + timeout
        for rtype in rtypes:
            want = self._pushed.get(rtype.path(None))
            if want is None:
                continue
            while cache.stats(rtype).resource_version != str(want):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{rtype}: cache not at version {want}")
                time.sleep(0.0005)

    # ------------------------------------------------------------------ Transport
    def list(self, path: str, params: Mapping[str, str], timeout: float) -> bytes:
        limit = int(params.get("limit") or 0)
        token = params.get("continue")
        with self._lock:
            rv = self._rv
            if token is None:
                source = self._lists.get(path)
                pages: Iterator[Mapping[str, Any]] = iter(source() if source else ())
            else:
                pages = self._pages.pop(token)
        items = list(itertools.islice(pages, limit) if limit else pages)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and len(items) == limit:
            nxt = str(next(self._tokens))
            with self._lock:
                self._pages[nxt] = pages
            meta["continue"] = nxt
        stamped = [{**o, "metadata": {**(o.get("metadata") or {}), "resourceVersion": str(rv)}}
                   for o in items]
        return json.dumps({"kind": "List", "metadata": meta, "items": stamped}).encode()

    def watch(self, path: str, params: Mapping[str, str], timeout: float) -> WatchStream:
        return _Stream(self._queue(path))
