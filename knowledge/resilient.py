"""The knowledge base the front-ends open: writes queued and written in batches, off the
controller's path, and a store that is down does not stop the controller.

:class:`ResilientKnowledgeBase` wraps another :class:`~knowledge.base.KnowledgeBase`:

* ``record_event``, ``put_status`` and ``put_memory`` only queue (:class:`knowledge.writer.
  WriteQueue`: bounded, the latest status and memory per intent); :meth:`flush` writes the
  queue in batches. The controller calls ``flush(wait=False)`` once at the end of each cycle:
  with ``background=True`` (live runs) a writer thread of the wrapper does the writing and
  the cycle does not wait; otherwise (simulations: deterministic) it is written there and
  then. A full queue is written by the caller first (back-pressure); :meth:`close` writes what
  is left. An event's id is final when it is queued.
* While the store is down the queue keeps what it holds, up to its bound: beyond it the
  oldest events are dropped, counted (:meth:`counters`, :meth:`lost`) and logged. One queue,
  one drop policy, whether the writes wait for the end of the cycle or for the store.
* Reads see every write made before them: ``events``, ``count_events``, ``statuses`` and
  ``apply_retention`` write the queue first (on the reader's thread, waiting for a batch the
  writer thread is writing); ``memory`` answers from the queue when it holds the intent's
  memory (also while the store is down), else writes the queue first too. ``effect`` and
  ``effects`` read at once: effects are never queued (``put_effect`` writes through).
* Reads and ``apply_retention`` raise :class:`~knowledge.base.KnowledgeBaseUnavailable`, as
  the wrapped store does: an empty result would read as "no data" (no events, no model) and
  make the caller drop what it knows. Callers degrade on
  :class:`~planner.domain.errors.TemporaryError` (the effect cache keeps serving its last good
  model, the API answers 503, training waits). ``memory`` raises too ("nothing remembered"
  must not be mistaken for "cannot tell": a controller would forget its cooldowns).
* ``put_effect`` re-raises :class:`~knowledge.base.KnowledgeBaseUnavailable`: a model is large
  and will be learned again; the caller keeps using the one it has in memory.

After a failure the store is not tried again before a back-off delay (``retry_interval_s``,
doubling up to ``max_retry_interval_s``): with a down MongoDB each attempt blocks for the server
selection timeout, and a cycle over 1000 intents must not wait 1000 times. Flushes in between
return at once (the queue keeps the writes), reads raise without waiting. The wrapped store's
:meth:`~KnowledgeBase.prepare` (index creation) is retried lazily until it succeeds once.

Errors that are not about availability (an invalid document, a bad argument) still raise, from
the call that queues the document (it is checked there).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from knowledge import base, documents, writer

T = TypeVar("T")

DEFAULT_BUFFER_SIZE = writer.DEFAULT_MAX_EVENTS

log = logging.getLogger(__name__)



class ResilientKnowledgeBase(base.KnowledgeBase):
    """Queues writes and writes them in batches (see the module docstring); while ``inner``
    raises ``KnowledgeBaseUnavailable`` the queue keeps them (``buffer_size`` events at most)
    and reads fail fast. ``background``: :meth:`flush` with ``wait=False`` hands the queue to
    a writer thread."""

    def __init__(
        self,
        inner: base.KnowledgeBase,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        max_batch: int = writer.DEFAULT_MAX_BATCH,
        retry_interval_s: float = 1.0,
        max_retry_interval_s: float = 60.0,
        drop_warning_interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        background: bool = False,
    ) -> None:
        if buffer_size < 1:
            raise ValueError("buffer_size must be >= 1")
        if retry_interval_s < 0 or max_retry_interval_s < retry_interval_s:
            raise ValueError("need 0 <= retry_interval_s <= max_retry_interval_s")
        self.inner = inner
        self.buffer_size = buffer_size
        self.retry_interval_s = retry_interval_s
        self.max_retry_interval_s = max_retry_interval_s
        self._clock = clock
        self._queue = writer.WriteQueue(buffer_size, max_batch, drop_warning_interval_s, clock)
        self._lock = threading.RLock()
        self._prepared = False
        self._healthy = True
        self._delay = 0.0
        self._next_attempt = 0.0
        self._last_error: str | None = None
        self._failures = 0
        self._skipped_reads = 0
        self._lost_at_close = (0, 0, 0)
        self._thread = writer.FlushThread(self.flush) if background else None

    def follow_clock(self, clock: Callable[[], float]) -> None:
        super().follow_clock(clock)
        self.inner.follow_clock(clock)  # the wrapped store checks the effects it is given

    # -- state ------------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False from a failed store call until the next successful one."""
        return self._healthy

    @property
    def buffered(self) -> int:
        """Events waiting in the queue now."""
        return self._queue.events

    @property
    def dropped(self) -> int:
        """Events lost so far (queue full while the store was down, or refused by it)."""
        return self._queue.dropped

    @property
    def flushed(self) -> int:
        """Events written to the store so far."""
        return self._queue.written

    @property
    def last_error(self) -> str | None:
        """Message of the last ``KnowledgeBaseUnavailable`` (kept after recovery)."""
        return self._last_error

    def counters(self) -> dict[str, int]:
        """Counters for metrics and status reports."""
        q = self._queue
        return {
            "buffered": q.events,
            "pending_statuses": q.statuses,
            "pending_memories": q.memories,
            "dropped": q.dropped,
            "unconfirmed": q.unconfirmed,
            "flushed": q.written,
            "batches": q.batches,
            "failures": self._failures,
            "skipped_reads": self._skipped_reads,
        }

    # -- circuit ----------------------------------------------------------------------------

    def _may_try(self) -> bool:
        with self._lock:
            return self._healthy or self._clock() >= self._next_attempt

    def _failed(self, exc: base.KnowledgeBaseUnavailable, operation: str) -> None:
        with self._lock:
            self._failures += 1
            self._last_error = str(exc)
            if self._healthy:
                self._delay = self.retry_interval_s
                log.warning(
                    "knowledge base unavailable during %s, queueing writes: %s", operation, exc
                )
            else:
                self._delay = min(self.max_retry_interval_s, self._delay * 2)
                log.warning(
                    "knowledge base still unavailable during %s (next try in %.1f s): %s",
                    operation,
                    self._delay,
                    exc,
                )
            self._healthy = False
            self._next_attempt = self._clock() + self._delay

    def _succeeded(self) -> None:
        with self._lock:
            if not self._healthy:
                log.info(
                    "knowledge base reachable again (%d events written, %d dropped)",
                    self._queue.written,
                    self._queue.dropped,
                )
            self._healthy = True
            self._delay = 0.0

    def _ensure_prepared(self) -> None:
        with self._lock:
            if not self._prepared:
                self.inner.prepare()
                self._prepared = True

    # -- writing the queue ------------------------------------------------------------------

    def _write_queue(self) -> None:
        """Prepare the store if needed and write the queue; raise on unavailability."""
        self._ensure_prepared()
        self._queue.write_to(self.inner)

    def flush(self, wait: bool = True, *, force: bool = False) -> bool:
        """Write the queue now (``force``: even during the back-off delay); with ``wait``
        false and a writer thread, hand it the queue and return at once.

        Returns True when nothing is left to write."""
        if not wait and self._thread is not None:
            self._thread.wake()
            return not self._queue.unwritten()
        if not (self._queue.unwritten() or not self._prepared):
            return True
        if not (force or self._may_try()):
            return False
        try:
            self._write_queue()
        except base.KnowledgeBaseUnavailable as exc:
            self._failed(exc, "flush")
            return False
        self._succeeded()
        return not self._queue.unwritten()

    # -- writes -----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Try to prepare the wrapped store now; on failure log and retry later (no raise)."""
        if self._prepared or not self._may_try():
            return
        try:
            self._ensure_prepared()
        except base.KnowledgeBaseUnavailable as exc:
            self._failed(exc, "prepare")
        else:
            self._succeeded()

    def record_event(self, event: Mapping[str, Any]) -> str:
        doc = documents.event_document(event)  # the copy; invalid documents raise here
        ident = self.inner.new_event_id()
        self._queue_event(ident, doc)
        return ident

    def record_events(
        self, events: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None
    ) -> list[str]:
        base._check_ids(events, ids)
        docs = [documents.event_document(e, where=f"events[{i}]") for i, e in enumerate(events)]
        idents = list(ids) if ids is not None else [self.inner.new_event_id() for _ in docs]
        for ident, doc in zip(idents, docs, strict=True):
            self._queue_event(ident, doc)
        return idents

    def _queue_event(self, ident: str, doc: base.Document) -> None:
        if self._queue.full():  # back-pressure: write before queueing more
            self.flush()
        self._queue.add_event(ident, doc)

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        self._queue.put_status(intent, documents.status_document(intent, time, status))

    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None:
        self._queue.put_memory(intent, documents.memory_document(intent, memory))

    def put_effect(self, effect: Mapping[str, Any]) -> str:
        if not self._may_try():
            raise base.KnowledgeBaseUnavailable(
                f"knowledge base unavailable, effect not stored: {self._last_error}"
            )
        try:
            self._ensure_prepared()
            ident = self.inner.put_effect(effect)
        except base.KnowledgeBaseUnavailable as exc:
            self._failed(exc, "put_effect")
            raise
        self._succeeded()
        return ident

    def apply_retention(self, now: float) -> int:
        return self._read("apply_retention", lambda: self.inner.apply_retention(now))

    # -- reads ------------------------------------------------------------------------------

    def _read(self, operation: str, call: Callable[[], T], write_first: bool = True) -> T:
        """``call()`` (after writing the queue, with ``write_first``); raise
        ``KnowledgeBaseUnavailable`` (without trying the store during the back-off delay)
        while the store cannot be reached."""
        if not self._may_try():
            with self._lock:
                self._skipped_reads += 1
            raise base.KnowledgeBaseUnavailable(
                f"knowledge base unavailable, {operation} not read: {self._last_error}"
            )
        try:
            if write_first and self._queue.unwritten():
                self._write_queue()  # reads see what was written before them
            else:
                self._ensure_prepared()
            result = call()
        except base.KnowledgeBaseUnavailable as exc:
            self._failed(exc, operation)
            with self._lock:
                self._skipped_reads += 1
            raise
        self._succeeded()
        return result

    def events(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._read("events", lambda: self.inner.events(intent, since, until, limit, skip))

    def pod_details(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._read("pod_details",
                          lambda: self.inner.pod_details(intent, since, until, limit, skip))

    def count_events(self, intent: str | None = None) -> int:
        return self._read("count_events", lambda: self.inner.count_events(intent))

    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> base.Document | None:
        return self._read("effect", lambda: self.inner.effect(intent, objective, now, lookback_s,
                                                              with_blob),
                          write_first=False)

    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[base.Document]:
        return self._read("effects", lambda: self.inner.effects(intent, with_blobs),
                          write_first=False)

    def statuses(self) -> dict[str, base.Document]:
        return self._read("statuses", self.inner.statuses)

    def memory(self, intent: str) -> base.Document | None:
        queued = self._queue.memory(intent)
        if queued is not None:
            return queued
        try:
            return self._read("memory", lambda: self.inner.memory(intent))
        except base.KnowledgeBaseUnavailable:
            queued = self._queue.memory(intent)  # a batch that failed came back to the queue
            if queued is not None:
                return queued
            raise

    # -- lifecycle --------------------------------------------------------------------------

    def lost(self) -> dict[str, int]:
        """What never reached the store: ``events`` (dropped from the full queue, refused by
        the store, or still queued when :meth:`close` could not write them), ``statuses`` and
        ``memories`` (refused, or still queued at :meth:`close`)."""
        q = self._queue
        return {"events": q.dropped + self._lost_at_close[0],
                "statuses": q.refused_statuses + self._lost_at_close[1],
                "memories": q.refused_memories + self._lost_at_close[2]}

    def close(self) -> None:
        """Stop the writer thread, try a last write (even during the back-off), then close the
        wrapped store. What could not be written is lost: logged at WARNING and counted in
        :meth:`lost`."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self._queue.unwritten() and not self.flush(force=True):
            self._lost_at_close = self._queue.clear()
            log.warning(
                "closing the knowledge base: %d queued events, %d statuses and %d "
                "planner memories could not be written and are lost (%d events dropped "
                "before; %d of the lost events were sent when the connection failed and may "
                "have arrived); last error: %s",
                *self._lost_at_close, self._queue.dropped, self._queue.unconfirmed,
                self._last_error,
            )
        try:
            self.inner.close()
        except base.KnowledgeBaseUnavailable as exc:
            log.warning("closing the knowledge base: %s", exc)
