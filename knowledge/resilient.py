"""A knowledge base that keeps the controller running while the store is down.

:class:`ResilientKnowledgeBase` wraps another :class:`~knowledge.base.KnowledgeBase` and absorbs
:class:`~knowledge.base.KnowledgeBaseUnavailable`:

* ``record_event``: the event goes to a bounded in-memory buffer (oldest dropped first, counted
  and logged); the buffer is written back, in order, before the next write that reaches the
  store. A buffered event gets a provisional id ``buffered:<n>``.
* ``put_status`` and ``put_memory``: the latest document per intent is kept and written back
  the same way.
* reads (``events``, ``count_events``, ``effect``, ``effects``, ``statuses``) and
  ``apply_retention`` raise :class:`~knowledge.base.KnowledgeBaseUnavailable`, as the wrapped
  store does: an empty result would read as "no data" (no events, no model) and make the caller
  drop what it knows. Callers degrade on :class:`~planner.domain.errors.TemporaryError` (the
  effect cache keeps serving its last good model, the API answers 503, training waits).
  ``memory`` raises too ("nothing remembered" must not be mistaken for "cannot tell": a
  controller would forget its cooldowns); a memory still waiting to be written back is
  returned from the buffer.
* ``put_effect`` re-raises :class:`~knowledge.base.KnowledgeBaseUnavailable`: a model is large
  and will be learned again; the caller keeps using the one it has in memory.

After a failure the store is not tried again before a back-off delay (``retry_interval_s``,
doubling up to ``max_retry_interval_s``): with a down MongoDB each attempt blocks for the server
selection timeout, and a cycle over 1000 intents must not wait 1000 times. Calls in between go
straight to the buffer, or raise without waiting (reads). The wrapped store's
:meth:`~KnowledgeBase.prepare` (index creation) is retried lazily until it succeeds once.

Errors that are not about availability (an invalid document, a bad argument) still raise.
Thread-safe: writes and the buffer are serialised by a lock; reads run concurrently.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from knowledge import base, documents

T = TypeVar("T")

DEFAULT_BUFFER_SIZE = 10_000

log = logging.getLogger(__name__)


class ResilientKnowledgeBase(base.KnowledgeBase):
    """Buffers writes while ``inner`` raises ``KnowledgeBaseUnavailable``; reads fail fast."""

    def __init__(
        self,
        inner: base.KnowledgeBase,
        *,
        buffer_size: int = DEFAULT_BUFFER_SIZE,
        retry_interval_s: float = 1.0,
        max_retry_interval_s: float = 60.0,
        drop_warning_interval_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if buffer_size < 1:
            raise ValueError("buffer_size must be >= 1")
        if retry_interval_s < 0 or max_retry_interval_s < retry_interval_s:
            raise ValueError("need 0 <= retry_interval_s <= max_retry_interval_s")
        self.inner = inner
        self.buffer_size = buffer_size
        self.retry_interval_s = retry_interval_s
        self.max_retry_interval_s = max_retry_interval_s
        self.drop_warning_interval_s = drop_warning_interval_s
        self._clock = clock
        self._lock = threading.RLock()
        self._buffer: collections.deque[base.Document] = collections.deque()
        self._pending_status: dict[str, tuple[float, base.Document]] = {}
        self._pending_memory: dict[str, base.Document] = {}
        self._prepared = False
        self._healthy = True
        self._delay = 0.0
        self._next_attempt = 0.0
        self._last_error: str | None = None
        self._last_drop_warning: float | None = None
        self._sequence = 0
        self._dropped = 0
        self._flushed = 0
        self._failures = 0
        self._skipped_reads = 0
        self._lost_at_close = (0, 0, 0)

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
        """Events waiting in the buffer now."""
        return len(self._buffer)

    @property
    def dropped(self) -> int:
        """Events lost so far (buffer full, or rejected by the store when written back)."""
        return self._dropped

    @property
    def flushed(self) -> int:
        """Buffered events written back to the store so far."""
        return self._flushed

    @property
    def last_error(self) -> str | None:
        """Message of the last ``KnowledgeBaseUnavailable`` (kept after recovery)."""
        return self._last_error

    def counters(self) -> dict[str, int]:
        """Counters for metrics and status reports."""
        return {
            "buffered": len(self._buffer),
            "pending_statuses": len(self._pending_status),
            "pending_memories": len(self._pending_memory),
            "dropped": self._dropped,
            "flushed": self._flushed,
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
                    "knowledge base unavailable during %s, buffering writes: %s", operation, exc
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
                    "knowledge base reachable again (%d events written back, %d dropped)",
                    self._flushed,
                    self._dropped,
                )
            self._healthy = True
            self._delay = 0.0

    def _ensure_prepared(self) -> None:
        if not self._prepared:
            self.inner.prepare()
            self._prepared = True

    # -- buffer -----------------------------------------------------------------------------

    def _enqueue(self, doc: base.Document) -> str:
        with self._lock:
            if len(self._buffer) >= self.buffer_size:
                self._buffer.popleft()
                self._count_drop("the buffer is full")
            self._buffer.append(doc)
            self._sequence += 1
            return f"buffered:{self._sequence}"

    def _count_drop(self, why: str) -> None:
        self._dropped += 1
        now = self._clock()
        last = self._last_drop_warning
        if last is None or now - last >= self.drop_warning_interval_s:
            self._last_drop_warning = now
            log.warning(
                "knowledge base unavailable: dropped the oldest buffered event (%s); "
                "%d dropped so far, buffer size %d",
                why,
                self._dropped,
                self.buffer_size,
            )

    def _flush_locked(self) -> None:
        """Write back buffered events then pending statuses, in order; raise on unavailability."""
        self._ensure_prepared()
        while self._buffer:
            doc = self._buffer[0]
            try:
                self.inner.record_event(doc)
            except base.KnowledgeBaseUnavailable:
                raise
            except Exception as exc:  # a poison event must not block the buffer forever
                log.error("knowledge base rejected a buffered event, dropping it: %s", exc)
                self._buffer.popleft()
                self._dropped += 1
                continue
            self._buffer.popleft()
            self._flushed += 1
        while self._pending_status:
            intent, (when, status) = next(iter(self._pending_status.items()))
            try:
                self.inner.put_status(intent, when, status)
            except base.KnowledgeBaseUnavailable:
                raise
            except Exception as exc:
                log.error("knowledge base rejected a pending status, dropping it: %s", exc)
            del self._pending_status[intent]
        while self._pending_memory:
            intent, memory = next(iter(self._pending_memory.items()))
            try:
                self.inner.put_memory(intent, memory)
            except base.KnowledgeBaseUnavailable:
                raise
            except Exception as exc:
                log.error("knowledge base rejected a pending memory, dropping it: %s", exc)
            del self._pending_memory[intent]

    def _unwritten(self) -> bool:
        return bool(self._buffer or self._pending_status or self._pending_memory)

    def flush(self, force: bool = False) -> bool:
        """Write the buffer back now (``force``: even during the back-off delay).

        Returns True when nothing is left to write.
        """
        with self._lock:
            if not (self._unwritten() or not self._prepared):
                return True
            if not (force or self._may_try()):
                return False
            try:
                self._flush_locked()
            except base.KnowledgeBaseUnavailable as exc:
                self._failed(exc, "flush")
                return False
            self._succeeded()
            return True

    # -- writes -----------------------------------------------------------------------------

    def prepare(self) -> None:
        """Try to prepare the wrapped store now; on failure log and retry later (no raise)."""
        with self._lock:
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
        with self._lock:
            if self._may_try():
                try:
                    self._flush_locked()
                    ident = self.inner.record_event(doc)
                except base.KnowledgeBaseUnavailable as exc:
                    self._failed(exc, "record_event")
                else:
                    self._succeeded()
                    return ident
            return self._enqueue(doc)

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        doc = documents.status_document(intent, time, status)
        with self._lock:
            # Newest call wins, also over a status still waiting from an outage.
            self._pending_status.pop(intent, None)
            self._pending_status[intent] = (doc["time"], doc["status"])
            if not self._may_try():
                return
            try:
                self._flush_locked()
            except base.KnowledgeBaseUnavailable as exc:
                self._failed(exc, "put_status")
            else:
                self._succeeded()

    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None:
        doc = documents.memory_document(intent, memory)
        with self._lock:
            self._pending_memory.pop(intent, None)
            self._pending_memory[intent] = doc
            if not self._may_try():
                return
            try:
                self._flush_locked()
            except base.KnowledgeBaseUnavailable as exc:
                self._failed(exc, "put_memory")
            else:
                self._succeeded()

    def memory(self, intent: str) -> base.Document | None:
        with self._lock:
            pending = self._pending_memory.get(intent)
            if pending is not None:
                return dict(pending)
            if not self._may_try():
                raise base.KnowledgeBaseUnavailable(
                    f"knowledge base unavailable, memory not read: {self._last_error}")
            try:
                self._flush_locked()
                found = self.inner.memory(intent)
            except base.KnowledgeBaseUnavailable as exc:
                self._failed(exc, "memory")
                raise
            self._succeeded()
            return found

    def put_effect(self, effect: Mapping[str, Any]) -> str:
        with self._lock:
            if not self._may_try():
                raise base.KnowledgeBaseUnavailable(
                    f"knowledge base unavailable, effect not stored: {self._last_error}"
                )
            try:
                self._flush_locked()
                ident = self.inner.put_effect(effect)
            except base.KnowledgeBaseUnavailable as exc:
                self._failed(exc, "put_effect")
                raise
            self._succeeded()
            return ident

    def apply_retention(self, now: float) -> int:
        return self._read("apply_retention", lambda: self.inner.apply_retention(now))

    # -- reads ------------------------------------------------------------------------------

    def _read(self, operation: str, call: Callable[[], T]) -> T:
        """``call()``; raise ``KnowledgeBaseUnavailable`` (without trying the store during the
        back-off delay) while the store cannot be reached."""
        if not self._may_try():
            with self._lock:
                self._skipped_reads += 1
            raise base.KnowledgeBaseUnavailable(
                f"knowledge base unavailable, {operation} not read: {self._last_error}"
            )
        try:
            if self._unwritten() or not self._prepared:
                with self._lock:  # reads see what was written before them
                    self._flush_locked()
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

    def count_events(self, intent: str | None = None) -> int:
        return self._read("count_events", lambda: self.inner.count_events(intent))

    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> base.Document | None:
        return self._read("effect", lambda: self.inner.effect(intent, objective, now, lookback_s,
                                                              with_blob))

    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[base.Document]:
        return self._read("effects", lambda: self.inner.effects(intent, with_blobs))

    def statuses(self) -> dict[str, base.Document]:
        return self._read("statuses", self.inner.statuses)

    # -- lifecycle --------------------------------------------------------------------------

    def lost(self) -> dict[str, int]:
        """What never reached the store: ``events`` (dropped from the full buffer, refused
        when written back, or still buffered when :meth:`close` could not write them),
        ``statuses`` and ``memories`` (still pending at :meth:`close`)."""
        return {"events": self._dropped + self._lost_at_close[0],
                "statuses": self._lost_at_close[1], "memories": self._lost_at_close[2]}

    def close(self) -> None:
        """Try a last write-back (even during the back-off), then close the wrapped store.
        What could not be written is lost: logged at WARNING and counted in :meth:`lost`."""
        with self._lock:
            if self._unwritten() and not self.flush(force=True):
                self._lost_at_close = (len(self._buffer), len(self._pending_status),
                                       len(self._pending_memory))
                log.warning(
                    "closing the knowledge base: %d buffered events, %d statuses and %d "
                    "planner memories could not be written and are lost (%d events dropped "
                    "before); last error: %s",
                    *self._lost_at_close, self._dropped, self._last_error,
                )
                self._buffer.clear()
                self._pending_status.clear()
                self._pending_memory.clear()
        try:
            self.inner.close()
        except base.KnowledgeBaseUnavailable as exc:
            log.warning("closing the knowledge base: %s", exc)
