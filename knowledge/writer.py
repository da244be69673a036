"""The write queue of the knowledge base: what waits to be written, and how it is written.

The controller records one event, one status and (when it changed) one planner memory per
intent per cycle. :class:`WriteQueue` keeps them in memory and :meth:`WriteQueue.write_to`
sends them to a store in batches: one ``record_events`` (the pymongo store: one unordered
``insert_many``), one ``put_statuses`` and one ``put_memories`` (one unordered ``bulk_write``
each) per ``max_batch`` events, instead of one round trip per document.

* Events keep their order; each gets its id when it is queued
  (:meth:`~knowledge.base.KnowledgeBase.new_event_id`), so a batch the store failed part-way
  through can be sent again without storing an event twice (see
  :meth:`~knowledge.base.KnowledgeBase.record_events`).
* Statuses and memories: only the latest per intent is kept (the store keeps one per intent).
* Bounded: at most ``max_events`` events wait (queued plus the batch being written). A caller
  that finds the queue full writes it first (back-pressure, :meth:`full`); when it cannot (the
  store is down) the oldest event is dropped, counted and logged (rate limited).
* A batch that fails because the store is unreachable goes back to the front of the queue
  (then the bound applies again); one the store refuses for another reason is written again
  one document at a time, so that only the refused documents are lost (counted, logged).
* Accounting: every event is written once or counted in :attr:`WriteQueue.dropped`. When a
  connection drops in the middle of a batch nobody knows which of its events arrived; sent
  again they are stored once (the ids), but one dropped from the full queue before that may
  have arrived: those are counted in ``dropped`` and also in :attr:`WriteQueue.unconfirmed`.

Thread-safe: queueing takes a short lock; one ``write_to`` runs at a time (others wait: that
is the back-pressure), and queueing goes on while a batch is being written.
:class:`FlushThread` runs the writes on a thread of their own (live runs).
"""

from __future__ import annotations

import collections
import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from knowledge import base

log = logging.getLogger(__name__)

DEFAULT_MAX_EVENTS = 10_000
DEFAULT_MAX_BATCH = 1_000

Event = tuple[str, base.Document]
"""``(id, event document)``."""


@dataclass
class Batch:
    """Documents taken from the queue to be written; what is left of it after a failure goes
    back to the queue."""

    events: collections.deque[Event] = field(default_factory=collections.deque)
    statuses: dict[str, base.Document] = field(default_factory=dict)
    memories: dict[str, base.Document] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.events or self.statuses or self.memories)


class WriteQueue:
    """Events, statuses and memories waiting to be written (see the module docstring).

    ``max_events`` bounds the events waiting; ``max_batch`` the events one ``record_events``
    call sends; ``drop_warning_interval_s`` rate-limits the warning about dropped events.
    """

    def __init__(self, max_events: int = DEFAULT_MAX_EVENTS,
                 max_batch: int = DEFAULT_MAX_BATCH, drop_warning_interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_events < 1:
            raise ValueError("max_events must be >= 1")
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.max_events = max_events
        self.max_batch = max_batch
        self.drop_warning_interval_s = drop_warning_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._writing = threading.Lock()
        self._events: collections.deque[Event] = collections.deque()
        self._statuses: dict[str, base.Document] = {}
        self._memories: dict[str, base.Document] = {}
        self._in_flight = 0
        self._sent: set[str] = set()
        """Ids of waiting events sent in a batch whose outcome is unknown (may be stored)."""
        self._last_drop_warning: float | None = None
        self.dropped = 0
        """Events lost: dropped from the full queue, or refused by the store."""
        self.unconfirmed = 0
        """Of the dropped events, those that had been sent when the connection failed: they
        may have reached the store all the same."""
        self.refused_statuses = 0
        self.refused_memories = 0
        self.written = 0
        """Events written to the store."""
        self.batches = 0
        """Batches written (one ``record_events``/``put_statuses``/``put_memories`` round)."""

    # -- state ------------------------------------------------------------------------------

    @property
    def events(self) -> int:
        """Events waiting (not counting a batch being written)."""
        return len(self._events)

    @property
    def statuses(self) -> int:
        return len(self._statuses)

    @property
    def memories(self) -> int:
        return len(self._memories)

    def unwritten(self) -> bool:
        """Whether anything waits (a batch being written counts)."""
        return bool(self._events or self._statuses or self._memories or self._in_flight)

    def full(self) -> bool:
        """Whether the next event would drop the oldest: write first if you can."""
        return len(self._events) + self._in_flight >= self.max_events

    def memory(self, intent: str) -> base.Document | None:
        """A copy of the memory of ``intent`` waiting in the queue, if any."""
        with self._lock:
            doc = self._memories.get(intent)
        return None if doc is None else copy.deepcopy(doc)

    # -- queueing ---------------------------------------------------------------------------

    def add_event(self, ident: str, doc: base.Document) -> None:
        """Queue an event (a sanitized document, see :mod:`knowledge.documents`); when the
        queue is full the oldest waiting event is dropped and counted."""
        with self._lock:
            while self._events and len(self._events) + self._in_flight >= self.max_events:
                self._drop(self._events.popleft()[0], "the write queue is full")
            self._events.append((ident, doc))

    def put_status(self, intent: str, doc: base.Document) -> None:
        """Queue a status document (``{"intent", "time", "status"}``); it replaces the one
        waiting for the same intent."""
        with self._lock:
            self._statuses.pop(intent, None)
            self._statuses[intent] = doc

    def put_memory(self, intent: str, doc: base.Document) -> None:
        """Queue a memory document; it replaces the one waiting for the same intent."""
        with self._lock:
            self._memories.pop(intent, None)
            self._memories[intent] = doc

    def clear(self) -> tuple[int, int, int]:
        """Forget what waits; returns how many events, statuses and memories that was."""
        with self._lock:
            counts = len(self._events), len(self._statuses), len(self._memories)
            self.unconfirmed += len(self._sent)
            self._sent.clear()
            self._events.clear()
            self._statuses.clear()
            self._memories.clear()
        return counts

    def _drop(self, ident: str, why: str) -> None:
        self.dropped += 1
        if ident in self._sent:
            self._sent.discard(ident)
            self.unconfirmed += 1
        now = self._clock()
        last = self._last_drop_warning
        if last is None or now - last >= self.drop_warning_interval_s:
            self._last_drop_warning = now
            log.warning("knowledge base: dropped the oldest queued event (%s); %d dropped so "
                        "far, queue bound %d events", why, self.dropped, self.max_events)

    # -- writing ----------------------------------------------------------------------------

    def write_to(self, store: base.KnowledgeBase) -> None:
        """Write what waits now to ``store``, in batches; what is queued meanwhile waits for
        the next call. Raises :class:`~knowledge.base.KnowledgeBaseUnavailable` when the store
        cannot be reached, with what was not written back in the queue."""
        with self._writing:
            with self._lock:
                remaining = len(self._events)
            first = True
            while first or remaining > 0:
                batch = self._take(min(remaining, self.max_batch), with_upserts=first)
                if not batch:
                    return
                remaining -= len(batch.events)
                first = False
                try:
                    self._write(store, batch)
                finally:
                    self._restore(batch)

    def _take(self, n: int, with_upserts: bool) -> Batch:
        with self._lock:
            batch = Batch(collections.deque(self._events.popleft() for _ in range(n)))
            if with_upserts:
                batch.statuses, self._statuses = self._statuses, {}
                batch.memories, self._memories = self._memories, {}
            self._in_flight = len(batch.events)
        return batch

    def _restore(self, batch: Batch) -> None:
        """Put what was not written back: events at the front (the bound applies again: the
        oldest beyond it are dropped), statuses and memories unless a newer one is waiting."""
        with self._lock:
            self._in_flight = 0
            self._events.extendleft(reversed(batch.events))
            while len(self._events) > self.max_events:
                self._drop(self._events.popleft()[0],
                           "the store is unreachable and the write queue is full")
            for intent, doc in batch.statuses.items():
                self._statuses.setdefault(intent, doc)
            for intent, doc in batch.memories.items():
                self._memories.setdefault(intent, doc)

    def _write(self, store: base.KnowledgeBase, batch: Batch) -> None:
        """Write ``batch``, removing from it what was written (or refused for good)."""
        if batch.events:
            self._write_events(store, batch.events)
        if batch.statuses:
            statuses = batch.statuses
            try:
                store.put_statuses([(i, d["time"], d["status"]) for i, d in statuses.items()])
            except base.KnowledgeBaseUnavailable:
                raise
            except Exception as exc:
                log.error("knowledge base refused a batch of statuses; writing them one by "
                          "one: %s", exc)
                self.refused_statuses += _one_by_one(
                    statuses, lambda i, d: store.put_statuses([(i, d["time"], d["status"])]),
                    "status")
            statuses.clear()
        if batch.memories:
            memories = batch.memories
            try:
                store.put_memories(list(memories.items()))
            except base.KnowledgeBaseUnavailable:
                raise
            except Exception as exc:
                log.error("knowledge base refused a batch of memories; writing them one by "
                          "one: %s", exc)
                self.refused_memories += _one_by_one(
                    memories, lambda i, d: store.put_memories([(i, d)]), "memory")
            memories.clear()
        self.batches += 1

    def _write_events(self, store: base.KnowledgeBase, events: collections.deque[Event]
                      ) -> None:
        try:
            store.record_events([doc for _, doc in events], [ident for ident, _ in events])
        except base.PartialWrite as exc:
            self._written(events, exc.stored)
            raise
        except base.KnowledgeBaseUnavailable:
            with self._lock:  # which of them arrived is unknown
                self._sent.update(ident for ident, _ in events)
            raise
        except Exception as exc:  # a document the store refuses must not block the others
            log.error("knowledge base refused a batch of %d events; writing them one by one: "
                      "%s", len(events), exc)
        else:
            self._written(events, len(events))
            return
        while events:
            ident, doc = events[0]
            try:
                store.record_events([doc], [ident])
            except base.PartialWrite:
                raise
            except base.KnowledgeBaseUnavailable:
                with self._lock:
                    self._sent.add(ident)
                raise
            except Exception as exc:
                log.error("knowledge base refused an event of %s, dropping it: %s",
                          doc.get("intent"), exc)
                events.popleft()
                with self._lock:
                    self._sent.discard(ident)
                    self.dropped += 1
                continue
            self._written(events, 1)

    def _written(self, events: collections.deque[Event], n: int) -> None:
        with self._lock:
            for _ in range(n):
                self._sent.discard(events.popleft()[0])
            self.written += n
            self._in_flight = len(events)


def _one_by_one(docs: dict[str, base.Document],
                write: Callable[[str, base.Document], None], what: str) -> int:
    """Write each of ``docs`` alone (removing it once written or refused); how many were
    refused. Raises ``KnowledgeBaseUnavailable`` with the rest left in ``docs``."""
    refused = 0
    for intent, doc in list(docs.items()):
        try:
            write(intent, doc)
        except base.KnowledgeBaseUnavailable:
            raise
        except Exception as exc:
            log.error("knowledge base refused the %s of %s, dropping it: %s", what, intent, exc)
            refused += 1
        del docs[intent]
    return refused


class FlushThread:
    """Calls ``flush`` on a daemon thread of its own after each :meth:`wake` (wakes that come
    while it runs are coalesced into one more call). A failing ``flush`` is logged."""

    def __init__(self, flush: Callable[[], object], name: str = "kb-writer") -> None:
        self._flush = flush
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._flush()
            except Exception:
                log.exception("writing the knowledge base's queue failed")

    def stop(self) -> None:
        """Let a write in progress finish, then end the thread (what waits stays queued)."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
