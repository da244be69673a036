"""Driving the PoolService fan-out from the shared watch cache (one thread, one queue).

:class:`FanoutLoop` subscribes to the cache's Services, NodePools and PoolServices (the same
upstream watches every other consumer shares) and turns their events into Service keys to
reconcile, de-duplicated in a queue:

* a **Service** event: that Service, if it is selected or carries the fan-out's finalizer;
* a **PoolService** event: the Service named by its service-name label, and any Service of
  its namespace whose ``<service>-`` prefixes its name (an edited label still finds its owner);
* a **NodePool** event (added, relabelled, deleted): every selected Service and every Service
  with the finalizer (NodePools change rarely; OpenYurt's controller does the same);
* a ``RESYNC`` (a subscriber that fell behind): every Service as above.

Each key is reconciled by :meth:`planner.k8s.poolservice_fanout.PoolServiceFanout.reconcile`;
a temporary failure requeues it after a backoff (doubling up to ``max_backoff_s``), a
permanent one is logged and waits for the next change. While ``active()`` is false (the
operator not started yet) keys accumulate and nothing is written.

:func:`api_serves` tells whether the API server serves PoolServices and NodePools (the CRDs in
``crds/`` or OpenYurt's) and whether this service account may list them; the operator starts
the loop only then, so a cluster without them keeps a ready operator without the fan-out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubernetes.client import ApiClient

from planner.domain.errors import IntentPlannerError, TemporaryError
from planner.k8s.k8srequest import json_request
from planner.k8s.openyurt import SERVICE_NAME_LABEL
from planner.k8s.poolservice_desired import has_finalizer, is_selected
from planner.k8s.poolservice_fanout import PoolServiceFanout
from planner.k8s.resources import NODEPOOLS, POOLSERVICES, SERVICES
from planner.k8s.watchcache import RESYNC, NotReady, Subscription, WatchEvent

log = logging.getLogger(__name__)

Key = tuple[str, str]


def api_serves(api_client: ApiClient, timeout: float = 10.0) -> str | None:
    """``None`` when PoolServices and NodePools can be listed; else why not."""
    for rtype in (NODEPOOLS, POOLSERVICES):
        try:
            json_request(api_client, "GET", rtype.path(), f"list {rtype}", timeout=timeout,
                         query=[("limit", "1")])
        except IntentPlannerError as exc:
            return str(exc)
    return None


class FanoutLoop:
    """The fan-out's work queue and its thread (see the module docstring)."""

    def __init__(self, fanout: PoolServiceFanout, active: Callable[[], bool] = lambda: True,
                 poll_s: float = 0.05, backoff_s: float = 0.5, max_backoff_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fanout = fanout
        self.cache = fanout.cache
        self.active = active
        self.poll_s = poll_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.clock = clock
        self._pending: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._subs: list[Subscription] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reconciles = 0
        self.failures = 0
        self.last_error: str | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FanoutLoop:
        self.fanout.start()
        self._subs = [self.cache.subscribe(r) for r in (SERVICES, NODEPOOLS, POOLSERVICES)]
        self._thread = threading.Thread(target=self._run, name="poolservice-fanout",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for sub in self._subs:
            sub.close()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout)

    def idle(self) -> bool:
        """Nothing queued, nothing due (for tests)."""
        return not self._pending and not any(s._queue.qsize() for s in self._subs)

    # ------------------------------------------------------------------ keys from events
    def enqueue(self, key: Key, delay: float = 0.0) -> None:
        due = self.clock() + delay
        self._pending[key] = min(self._pending.get(key, due), due)

    def _services(self) -> list[Mapping[str, Any]]:
        return list(self.cache.list(SERVICES))

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> Key:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def _all_relevant(self) -> Iterable[Key]:
        return [self._key(s) for s in self._services() if is_selected(s) or has_finalizer(s)]

    def keys_for(self, event: WatchEvent) -> Iterable[Key]:
        obj = event.object
        if event.type == RESYNC or event.resource == NODEPOOLS.plural:
            return self._all_relevant()
        if event.resource == SERVICES.plural:
            return [self._key(obj)] if is_selected(obj) or has_finalizer(obj) else []
        ns, name = self._key(obj)
        keys: set[Key] = set()
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL)
        if owner:
            keys.add((ns, str(owner)))
        for svc in self._services():
            sns, sname = self._key(svc)
            if sns == ns and name.startswith(f"{sname}-") and (
                    is_selected(svc) or has_finalizer(svc)):
                keys.add((sns, sname))
        return keys

    # ------------------------------------------------------------------ the thread
    def _drain(self) -> None:
        for sub in self._subs:
            for ev in sub.drain():
                try:
                    for key in self.keys_for(ev):
                        self.enqueue(key)
                except NotReady:  # services not listed yet: their replay comes later
                    if ev.resource != SERVICES.plural:
                        self._resync_later()

    def _resync_later(self) -> None:
        self.enqueue(("", ""), self.backoff_s)  # the empty key stands for "all services"

    def _due(self) -> list[Key]:
        now = self.clock()
        due = sorted(k for k, t in self._pending.items() if t <= now)
        for k in due:
            del self._pending[k]
        return due

    def _run(self) -> None:
        while not self._stop.is_set():
            self._drain()
            if not self.active():
                self._stop.wait(self.poll_s)
                continue
            due = self._due()
            if not due:
                self._stop.wait(self.poll_s)
                continue
            for key in due:
                if self._stop.is_set():
                    return
                self._reconcile(key)

    def _reconcile(self, key: Key) -> None:
        if key == ("", ""):
            try:
                for k in self._all_relevant():
                    self.enqueue(k)
            except NotReady:
                self._resync_later()
            return
        try:
            self.fanout.reconcile(*key)
            self.reconciles += 1
            self._failures.pop(key, None)
        except TemporaryError as exc:
            self._failed(key, exc)
            n = self._failures[key] = self._failures.get(key, 0) + 1
            self.enqueue(key, min(self.max_backoff_s, self.backoff_s * 2 ** (n - 1)))
        except Exception as exc:  # permanent, or a bug: wait for the next change
            self._failed(key, exc)
            log.exception("PoolService fan-out of Service %s/%s failed", *key)

    def _failed(self, key: Key, exc: Exception) -> None:
        self.failures += 1
        self.last_error = f"{key[0]}/{key[1]}: {type(exc).__name__}: {exc}"
        log.warning("PoolService fan-out: %s", self.last_error)
