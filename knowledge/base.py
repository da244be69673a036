"""The :class:`KnowledgeBase` interface.

Documents are plain JSON-safe dicts so that any store can hold them. Shapes:

``events`` (one per intent per cycle)::

    {"time": float (seconds), "intent": "ns/name", "workload": "ns/name",
     "current": {objective: value | None}, "desired": {objective: target},
     "config": {"replicas", "cpu", "device", "pool"}, "load": {"request_rate": float | None},
     "pod_groups": {"pool": [...], "device": [...], "cpu": [...], "ready": [...],
                    "scheduled": [...], "count": [...], "restarts": [...]},   # a table
     "node_pools": {"pool": [...], "region": [...], "nodes": [...], "cpu_capacity": [...], ...},
     "resources": {...}, "plan": {...} | None, "exploratory": bool, "planner": str,
     "pod_detail": true}   # only when the event was recorded with "pods" or "nodes"

``pod_details`` (an event's ``pods`` and ``nodes``, recorded when the pods changed, sampled)::

    {"time": float, "intent": "ns/name", "workload": "ns/name",
     "pods": {"name": [...], "node": [...], ...}, "nodes": {"name": [...], "pool": [...], ...}}

``effects`` (one model per intent and objective; the newest static or non-stale wins)::

    {"intent": "ns/name", "objective": str, "timestamp": float, "static": bool,
     "kind": str (model family), "format": str (serialisation), "blob": bytes | None,
     "metadata": {...}}

``status`` (the last reported status per intent)::

    {"intent": "ns/name", "time": float, "status": {...}}

Batches: ``record_events``, ``put_statuses`` and ``put_memories`` write many documents at once
(the pymongo store: one unordered ``insert_many`` / ``bulk_write``); their default
implementations loop over the single-document methods, so a store that only implements those
keeps working. :meth:`KnowledgeBase.flush` writes what a store queued (the resilient wrapper
queues every event, status and memory and writes them in batches: ``knowledge.resilient``).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import bson

from knowledge import documents
from planner.domain.errors import TemporaryError

Document = dict[str, Any]


class KnowledgeBaseUnavailable(TemporaryError):
    """The store could not be reached; the caller degrades (buffers, skips) and retries later."""


class PartialWrite(KnowledgeBaseUnavailable):
    """A batch of events stopped part-way: exactly the first ``stored`` events were stored."""

    def __init__(self, message: str, stored: int) -> None:
        super().__init__(message)
        self.stored = stored


StatusUpdate = tuple[str, float, Mapping[str, Any]]
"""``(intent, time, status)``: the arguments of one :meth:`KnowledgeBase.put_status`."""
MemoryUpdate = tuple[str, Mapping[str, Any]]
"""``(intent, memory)``: the arguments of one :meth:`KnowledgeBase.put_memory`."""


class KnowledgeBase(ABC):
    """Stores events, effect models and intent statuses.

    Contract (checked by ``tests/kb_conformance.py`` against every implementation):

    * ``record_event`` stores a copy: later changes to the argument do not change the store.
      It returns an id (string). Documents come back without store-internal keys (``_id``).
    * An event recorded with ``pods`` or ``nodes`` is stored without them and with
      ``pod_detail: true``; they are stored as one ``pod_details`` document with the event's
      ``time``, ``intent`` and ``workload`` (:func:`knowledge.documents.split_event`).
      ``pod_details`` reads those documents as ``events`` reads events (same arguments, same
      order); retention and eviction treat an event and its detail as one (both are kept or
      neither; MongoDB's TTL indexes prune the two collections each on its own, eventually
      alike). The event is written first: a batch stopped part-way may leave an event
      without its detail until it is sent again, never a detail without its event. A
      detail the store refuses (too large) is dropped and logged, and its event loses the
      mark; an event recorded without ``pods`` or ``nodes`` is stored without the mark. (Events
      stored before this split keep their pods inline; ``planner.domain.events.records``
      reads both forms.)
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
    * ``record_events(events)`` stores them as ``record_event`` would, in order (ties in
      ``time`` come back most recently recorded first), and returns their ids; an invalid one
      raises ``documents.InvalidDocument`` naming ``events[i]`` and nothing is stored. With
      ``ids`` (from :meth:`new_event_id`, one per event) a batch can be sent again after a
      failure without storing an event twice: a store either skips an id it already holds
      (the pymongo store) or, failing part-way, raises :class:`PartialWrite` saying how many
      of the first events it stored (the default implementation).
    * ``put_statuses`` / ``put_memories`` are ``put_status`` / ``put_memory`` for each item
      (a later item for the same intent wins); sending them again changes nothing.
    * ``flush()`` writes what the store queued and says whether nothing is left; a store that
      writes through has nothing queued (the default).
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

    def new_event_id(self) -> str:
        """A fresh event id for :meth:`record_events` (ids made later sort later)."""
        return str(bson.ObjectId())

    def record_events(
        self, events: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None
    ) -> list[str]:
        """Store ``events`` in order (see the class docstring); returns their ids.

        This default checks every event first, then calls :meth:`record_event` for each (so
        ``ids`` are not the stored ids) and, when the store fails part-way, raises
        :class:`PartialWrite` with the number stored: sending the rest again stores each once.
        """
        _check_ids(events, ids)
        for i, event in enumerate(events):
            documents.event_document(event, where=f"events[{i}]")
        stored: list[str] = []
        for event in events:
            try:
                stored.append(self.record_event(event))
            except KnowledgeBaseUnavailable as exc:
                raise PartialWrite(str(exc), len(stored)) from exc
        return stored

    def put_statuses(self, statuses: Sequence[StatusUpdate]) -> None:
        """``put_status`` for each ``(intent, time, status)``; all are checked first."""
        for i, (intent, when, status) in enumerate(statuses):
            documents.status_document(intent, when, status, where=f"statuses[{i}]")
        for intent, when, status in statuses:
            self.put_status(intent, when, status)

    def put_memories(self, memories: Sequence[MemoryUpdate]) -> None:
        """``put_memory`` for each ``(intent, memory)``; all are checked first."""
        for i, (intent, memory) in enumerate(memories):
            documents.memory_document(intent, memory, where=f"memories[{i}]")
        for intent, memory in memories:
            self.put_memory(intent, memory)

    def flush(self, wait: bool = True) -> bool:
        """Write what this store queued; True when nothing is left to write. With ``wait``
        false a store that writes on a thread of its own hands the queue to it and returns
        at once (False: not written yet); others write now. This default queues nothing."""
        return True

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
    def pod_details(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[Document]:
        """The ``pods`` and ``nodes`` of the events that carried them (see the class
        docstring), as :meth:`events` selects and orders events."""

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


def _check_ids(events: Sequence[Mapping[str, Any]], ids: Sequence[str] | None) -> None:
    if ids is not None and len(ids) != len(events):
        raise ValueError(f"ids: {len(ids)} ids for {len(events)} events; give one per event")
