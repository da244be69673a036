"""Posting Kubernetes Events (``core/v1``) about objects, with a repeat filter.

A level-based reconcile sees the same problem (no matching pool, a PoolService that is not
ours) every time it runs; client-go's event recorder folds repeats into a count. Here an
identical event (same object, type, reason and message) is posted once per
``repeat_s`` seconds (default 10 minutes), so a second reconcile of an unchanged world posts
nothing. A failure to post is logged, never raised: events are reports, not state; the event
then counts as not posted, so the next reconcile that sees the problem posts it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient

from planner.domain.errors import IntentPlannerError
from planner.k8s.k8srequest import json_request
from planner.k8s.poolservice_desired import EventNote

log = logging.getLogger(__name__)

COMPONENT = "intent-planner"


class EventPoster:
    """Posts :class:`~planner.k8s.poolservice_desired.EventNote` s as core/v1 Events."""

    def __init__(self, api_client: ApiClient, component: str = COMPONENT,
                 repeat_s: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 timeout: float = 30.0, max_remembered: int = 10_000) -> None:
        self.api_client = api_client
        self.component = component
        self.repeat_s = repeat_s
        self.clock = clock
        self.timeout = timeout
        self.max_remembered = max_remembered
        self._last: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        self.posted = 0

    @staticmethod
    def _key(note: EventNote) -> tuple[str, ...]:
        return (note.kind, note.namespace, note.name, note.type, note.reason, note.message)

    def _due(self, note: EventNote) -> bool:
        key = self._key(note)
        now = self.clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.repeat_s:
                return False
            if len(self._last) >= self.max_remembered:
                cutoff = now - self.repeat_s
                self._last = {k: t for k, t in self._last.items() if t >= cutoff}
            self._last[key] = now
        return True

    def post(self, note: EventNote) -> bool:
        """Post ``note`` unless an identical one was posted less than ``repeat_s`` ago."""
        if not self._due(note):
            return False
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        involved: dict[str, Any] = {"apiVersion": note.api_version, "kind": note.kind,
                                    "name": note.name, "namespace": note.namespace}
        if note.uid:
            involved["uid"] = note.uid
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{note.name}.", "namespace": note.namespace},
                "involvedObject": involved, "type": note.type, "reason": note.reason,
                "message": note.message[:1024], "source": {"component": self.component},
                "firstTimestamp": stamp,
                "lastTimestamp": stamp, "count": 1}
        try:
            json_request(self.api_client, "POST", f"/api/v1/namespaces/{note.namespace}/events",
                         f"post event {note.reason} on {note.kind} {note.namespace}/{note.name}",
                         body, timeout=self.timeout)
        except IntentPlannerError as exc:
            log.warning("%s", exc)
            with self._lock:
                self._last.pop(self._key(note), None)
            return False
        self.posted += 1
        return True
