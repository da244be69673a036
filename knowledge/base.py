"""The :class:`KnowledgeBase` interface.

Documents are plain JSON-safe dicts so that any store can hold them. Shapes:

``events`` (one per intent per cycle)::

    {"time": float (seconds), "intent": "ns/name", "workload": "ns/name",
     "current": {objective: value | None}, "desired": {objective: target},
     "config": {"replicas", "cpu", "device", "pool"}, "load": {"request_rate": float | None},
     "pod_groups": [{"pool", "device", "cpu", "ready", "scheduled", "count", "restarts"}],
     "node_pools": {pool: {"region", "nodes", "cpu_capacity", ...}},
     "resources": {...}, "plan": {...} | None, "exploratory": bool, "planner": str,
     "pods": [...], "nodes": {...}}   # pods and nodes only when they changed (sampled)

``effects`` (one model per intent and objective; the newest static or non-stale wins)::

    {"intent": "ns/name", "objective": str, "timestamp": float, "static": bool,
     "kind": str (model family), "format": str (serialisation), "blob": bytes | None,
     "metadata": {...}}

``status`` (the last reported status per intent)::

    {"intent": "ns/name", "time": float, "status": {...}}
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from knowledge import documents
from planner.domain.errors import TemporaryError

Document = dict[str, Any]


class KnowledgeBaseUnavailable(TemporaryError):
    """The store could not be reached; the caller degrades (buffers, skips) and retries later."""


class KnowledgeBase(ABC):
    """Stores events, effect models and intent statuses.

    Contract (checked by ``tests/kb_conformance.py`` against every implementation):

    * ``record_event`` stores a copy: later changes to the argument do not change the store.
      It returns an id (string). Documents come back without store-internal keys (``_id``).
    * ``events`` returns documents of one intent (or all) with ``since <= time < until``,
      newest first, at most ``limit`` (0 = no limit), skipping ``skip``. Events with the same
      ``time`` come most recently recorded first, so pages (``skip``/``limit``) never overlap.
    * ``put_effect`` never overwrites: each call adds a version.
    * ``effect(intent, objective, now, lookback_s)`` returns the newest document that is
      either ``static`` or has ``now - lookback_s <= timestamp <= now``; ``None`` if there is
      none (so asking again with the same ``now`` gives the same model, also after newer
      versions were stored). Versions with the same ``timestamp``: the one stored last wins.
    * ``effects`` lists versions newest first; without ``with_blobs`` the ``blob`` key is
      absent (not ``None``, which would mean "no model bytes").
    * ``put_status`` keeps one document per intent: the last call wins.
    * ``put_memory`` keeps one document per intent (what the planner and actuators remember,
      :mod:`planner.domain.memory`): the last call wins; ``memory`` returns it or ``None``.
    * ``apply_retention(now)`` deletes events older than the retention and returns how many:
      those with ``time < now - retention``; effects and statuses are kept.
    * Values are stored as plain data (``knowledge.documents``): NaN/inf become ``None``,
      numpy values become Python ones, ``bytes`` come back as ``bytes``; what cannot be
      stored (or an event without ``time``/``intent``) raises ``documents.InvalidDocument``.
    * A store that cannot be reached raises :class:`KnowledgeBaseUnavailable`, nothing else.
    * An effect's ``timestamp`` after :meth:`effect_horizon` is refused by ``put_effect``
      (``documents.InvalidDocument``), and a static version stored with one (by an older
      version or by hand) is never returned by ``effect``: "the newest" must not be a model
      from the future, which would stay the newest for good.
    """

    _followed_clock: Callable[[], float] | None = None

    def follow_clock(self, clock: Callable[[], float]) -> None:
        """Also count ``clock`` (a writer's, e.g. a simulated cluster running ahead of the wall
        clock) as "now" for :meth:`effect_horizon`."""
        self._followed_clock = clock

    def now(self) -> float:
        """The later of the wall clock and the followed clock."""
        wall = time.time()
        clock = self._followed_clock
        if clock is None:
            return wall
        try:
            return max(wall, float(clock()))
        except Exception:  # a clock that fails is ignored, the wall clock remains
            return wall

    def effect_horizon(self) -> float:
        """The latest acceptable effect ``timestamp``: :meth:`now` plus the clock tolerance."""
        return self.now() + documents.FUTURE_TOLERANCE_S

    @abstractmethod
    def record_event(self, event: Mapping[str, Any]) -> str: ...

    @abstractmethod
    def events(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[Document]: ...

    @abstractmethod
    def count_events(self, intent: str | None = None) -> int: ...

    @abstractmethod
    def put_effect(self, effect: Mapping[str, Any]) -> str: ...

    @abstractmethod
    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> Document | None:
        """The newest static or non-stale model of ``intent``'s ``objective`` at ``now``;
        ``with_blob=False`` leaves the serialised model out (what a cache needs to tell whether
        the model it holds is still the newest)."""

    @abstractmethod
    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[Document]:
        """Every effect document (newest first); blobs stripped unless asked for."""

    @abstractmethod
    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def statuses(self) -> dict[str, Document]: ...

    @abstractmethod
    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def memory(self, intent: str) -> Document | None: ...

    @abstractmethod
    def apply_retention(self, now: float) -> int: ...

    def prepare(self) -> None:  # noqa: B027 - optional
        """Make the store ready (create indexes...); idempotent, may be called again later.

        Raises :class:`KnowledgeBaseUnavailable` if the store cannot be reached; wrappers such
        as ``knowledge.resilient.ResilientKnowledgeBase`` call it again until it succeeds.
        """

    def close(self) -> None:  # noqa: B027 - optional
        """Release connections."""
