"""The in-process knowledge base (``--kb memory``, simulations, tests): indexed, bounded.

mongomock, which the embedded default used before, answers every query by scanning and deep
copying every stored document: reading one intent's recent events cost more with every event
any intent recorded, and an hour of a large cluster's events did not fit in memory as Python
dicts. This store keeps, per intent, its events in time order as BSON bytes (about a tenth of
the memory of the same document as Python objects, decoded only when read), so:

* ``record_event`` appends (O(log n) when an event arrives out of time order); an event's pod
  detail (:func:`knowledge.documents.split_event`) is held beside it, read by ``pod_details``
  and dropped with it;
* ``events(intent, since, until, limit, skip)`` bisects the intent's own events and decodes
  only the ones returned; ``count_events`` is a length; without ``intent`` the intents' events
  are merged newest first;
* ``apply_retention`` cuts each intent's events at the retention cut-off;
* ``max_events_per_intent`` bounds memory: past it, the intent's oldest event is dropped and
  counted (:meth:`lost`, ``events_evicted``), never silently;
* ``max_event_bytes`` bounds all events together (their BSON, pod details included): past
  it, the oldest events of any intent are dropped first, and counted the same way. A process
  cannot hold a large cluster's events for the retention window (at 1,000 intents about
  1.5 GiB an hour, section 27 of ``docs/benchmarks.md``): the in-memory store keeps the newest
  it can hold, and the directory store or MongoDB keep the rest;
* effects per (intent, objective) in (timestamp, insertion) order, statuses and memories per
  intent; ``max_effects_per_objective`` bounds the versions kept: past it, the oldest trained
  (non-static) version is dropped and counted (:meth:`lost`, ``effects_evicted``). Without it
  every fit of a long run stayed in memory (issue 13: a version every training interval per
  intent and objective, a few KiB each, never deleted).

It follows the contract of :class:`knowledge.base.KnowledgeBase` exactly as the pymongo store
does (the conformance suite runs on both); documents go through :mod:`knowledge.documents` as
there. ``mongomock://`` still opens the pymongo store over mongomock, for anyone who wants that
code path in process. Thread-safe: one lock (the REST API reads while the controller writes).
Nothing persists: ``--kb ./DIRECTORY`` or MongoDB for that.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import bson

from knowledge import base, documents
from knowledge.mongo import DEFAULT_RETENTION_S, INTERNAL_FIELDS

DEFAULT_MAX_EVENTS_PER_INTENT = 100_000
"""Events kept per intent before the oldest is dropped (and counted): about 17 days of one
event every 15 s, more than the default retention; a bound, not a retention."""

DEFAULT_MAX_EVENT_BYTES = 256 * 2**20
"""BSON bytes of events kept in all before the oldest are dropped (and counted): the shipped
scenarios never reach it (a few MiB); at 1,000 intents it holds about ten minutes of events,
what the trainer's newest windows and the REST API read most."""

DEFAULT_MAX_EFFECTS_PER_OBJECTIVE = 100
"""Effect versions kept per (intent, objective) before the oldest trained one is dropped (and
counted): at the default training interval (5 minutes) more than 8 hours of versions, past the
planners' 6-hour look-back and the training budget's hour; :meth:`EmbeddedKnowledgeBase.effect`
only ever returns the newest one in its window."""

Key = tuple[float, int]
"""An event's place in time order: (time, insertion sequence)."""


@dataclass
class _Events:
    """One intent's events, oldest first: sort keys and encoded documents side by side."""

    keys: list[Key] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    """The id a batch gave each event (:meth:`KnowledgeBase.record_events`), else ``None``."""

    details: list[bytes | None] = field(default_factory=list)
    """Each event's pod detail (:func:`knowledge.documents.split_event`), else ``None``."""

    size: int = 0
    """The BSON bytes of the events and details held."""

    def add(self, key: Key, blob: bytes, eid: str | None = None,
            detail: bytes | None = None) -> None:
        self.size += len(blob) + (len(detail) if detail is not None else 0)
        if not self.keys or key >= self.keys[-1]:
            self.keys.append(key)
            self.blobs.append(blob)
            self.ids.append(eid)
            self.details.append(detail)
            return
        i = bisect.bisect_right(self.keys, key)
        self.keys.insert(i, key)
        self.blobs.insert(i, blob)
        self.ids.insert(i, eid)
        self.details.insert(i, detail)

    def span(self, since: float | None, until: float | None) -> tuple[int, int]:
        """Index range of the events with ``since <= time < until``."""
        lo = 0 if since is None else bisect.bisect_left(self.keys, (since, -1))
        hi = len(self.keys) if until is None else bisect.bisect_left(self.keys, (until, -1))
        return lo, max(lo, hi)

    def newest_first(self, since: float | None, until: float | None, details: bool = False
                     ) -> Iterator[tuple[tuple[float, int], bytes]]:
        """The events (or, with ``details``, the details of those that have one) in the
        window, newest first, with a key that sorts them so across intents."""
        lo, hi = self.span(since, until)
        for i in range(hi - 1, lo - 1, -1):
            blob = self.details[i] if details else self.blobs[i]
            if blob is not None:
                yield (-self.keys[i][0], -self.keys[i][1]), blob

    def drop_before(self, cutoff: float) -> list[str | None]:
        """Drop the events before ``cutoff``; their ids."""
        return self.drop_oldest(bisect.bisect_left(self.keys, (cutoff, -1)))

    def drop_oldest(self, n: int) -> list[str | None]:
        """Drop the ``n`` oldest events; their ids."""
        gone = self.ids[:n]
        self.size -= sum(len(b) for b in self.blobs[:n])
        self.size -= sum(len(d) for d in self.details[:n] if d is not None)
        del self.keys[:n], self.blobs[:n], self.ids[:n], self.details[:n]
        return gone


def _encode(doc: Mapping[str, Any]) -> bytes:
    return bson.encode({k: v for k, v in doc.items() if k not in INTERNAL_FIELDS})


def _decode(blob: bytes) -> base.Document:
    out: base.Document = bson.decode(blob)
    return out


class EmbeddedKnowledgeBase(base.KnowledgeBase):
    """An indexed, bounded, in-process store (see the module docstring)."""

    def __init__(self, retention_s: float | None = DEFAULT_RETENTION_S,
                 max_events_per_intent: int = DEFAULT_MAX_EVENTS_PER_INTENT,
                 max_effects_per_objective: int = DEFAULT_MAX_EFFECTS_PER_OBJECTIVE,
                 max_event_bytes: int | None = DEFAULT_MAX_EVENT_BYTES) -> None:
        if retention_s is not None and not retention_s > 0:
            raise ValueError("retention_s must be > 0 or None")
        if max_events_per_intent < 1:
            raise ValueError("max_events_per_intent must be >= 1")
        if max_event_bytes is not None and max_event_bytes < 1:
            raise ValueError("max_event_bytes must be >= 1 or None")
        self.max_event_bytes = max_event_bytes
        self._event_bytes = 0
        self._oldest: list[tuple[Key, str]] = []
        """A heap of (an intent's oldest event key, the intent), to find the oldest events of
        all intents; an entry is checked against the intent's events when popped (events
        dropped otherwise leave stale entries, refreshed or discarded then)."""
        if max_effects_per_objective < 1:
            raise ValueError("max_effects_per_objective must be >= 1")
        self.retention_s = retention_s
        self.max_events_per_intent = max_events_per_intent
        self.max_effects_per_objective = max_effects_per_objective
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._events: dict[str, _Events] = {}
        self._effects: dict[tuple[str, str], list[tuple[Key, bool, bytes, bytes]]] = {}
        """Per (intent, objective): (timestamp, sequence), static, the document without its
        blob, the whole document; oldest first."""
        self._status: dict[str, bytes] = {}
        self._memory: dict[str, bytes] = {}
        self._ids: set[str] = set()
        """Ids of the stored events a batch named (a batch sent again stores each once)."""
        self.events_evicted = 0
        self.effects_evicted = 0

    # -- events -----------------------------------------------------------------------------

    def record_event(self, event: Mapping[str, Any]) -> str:
        return self.record_events([event])[0]

    def record_events(
        self, events: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None
    ) -> list[str]:
        """Store ``events`` in order; an event whose id (``ids``) is stored already is not
        stored again (a batch sent again after a failure)."""
        base._check_ids(events, ids)
        split = [documents.split_event(documents.event_document(e, where=f"events[{i}]"))
                 for i, e in enumerate(events)]
        docs = [doc for doc, _ in split]
        blobs = [_encode(doc) for doc in docs]
        details = [None if d is None else _encode(d) for _, d in split]
        out: list[str] = []
        with self._lock:
            for i, (doc, blob) in enumerate(zip(docs, blobs, strict=True)):
                eid = None if ids is None else ids[i]
                if eid is not None and eid in self._ids:
                    out.append(eid)
                    continue
                seq = next(self._seq)
                stored = self._events.setdefault(doc["intent"], _Events())
                key = (float(doc["time"]), seq)
                before = stored.size
                if not stored.keys or key < stored.keys[0]:
                    heapq.heappush(self._oldest, (key, doc["intent"]))
                stored.add(key, blob, eid, details[i])
                if eid is not None:
                    self._ids.add(eid)
                over = len(stored.keys) - self.max_events_per_intent
                if over > 0:
                    self._forget_ids(stored.drop_oldest(over))
                    self.events_evicted += over
                self._event_bytes += stored.size - before
                out.append(eid if eid is not None else f"embedded:{seq}")
            self._within_bytes()
        return out

    def _within_bytes(self) -> None:
        """Drop the oldest events of all intents until the events fit ``max_event_bytes``
        (holding the lock)."""
        if self.max_event_bytes is None:
            return
        while self._event_bytes > self.max_event_bytes and self._oldest:
            key, intent = heapq.heappop(self._oldest)
            stored = self._events.get(intent)
            if stored is None or not stored.keys:
                continue                             # the intent's events are gone
            if stored.keys[0] != key:                # stale: its oldest changed since
                heapq.heappush(self._oldest, (stored.keys[0], intent))
                continue
            before = stored.size
            self._forget_ids(stored.drop_oldest(1))
            self._event_bytes -= before - stored.size
            self.events_evicted += 1
            if stored.keys:
                heapq.heappush(self._oldest, (stored.keys[0], intent))
            else:
                del self._events[intent]

    def _forget_ids(self, gone: list[str | None]) -> None:
        self._ids.difference_update(e for e in gone if e is not None)

    def events(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._read_events(intent, since, until, limit, skip, details=False)

    def pod_details(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._read_events(intent, since, until, limit, skip, details=True)

    def _read_events(self, intent: str | None, since: float | None, until: float | None,
                     limit: int, skip: int, details: bool) -> list[base.Document]:
        if limit < 0 or skip < 0:
            raise ValueError("limit and skip must be >= 0")
        with self._lock:
            if intent is not None:
                found = self._events.get(intent)
                rows: Iterator[tuple[Key, bytes]] = (
                    iter(()) if found is None else found.newest_first(since, until, details))
            else:
                rows = heapq.merge(*(e.newest_first(since, until, details)
                                     for e in self._events.values()), key=lambda r: r[0])
            stop = skip + limit if limit else None
            picked = [blob for _, blob in itertools.islice(rows, skip, stop)]
        return [_decode(b) for b in picked]

    def event_bytes(self) -> int:
        """The BSON bytes of the events stored, their pod details included (what
        ``max_event_bytes`` bounds)."""
        with self._lock:
            return self._event_bytes

    def count_events(self, intent: str | None = None) -> int:
        with self._lock:
            if intent is not None:
                found = self._events.get(intent)
                return 0 if found is None else len(found.keys)
            return sum(len(e.keys) for e in self._events.values())

    def apply_retention(self, now: float) -> int:
        if self.retention_s is None:
            return 0
        cutoff = now - self.retention_s
        with self._lock:
            deleted = 0
            for e in self._events.values():
                before = e.size
                gone = e.drop_before(cutoff)
                self._forget_ids(gone)
                self._event_bytes -= before - e.size
                deleted += len(gone)
            for key in [k for k, e in self._events.items() if not e.keys]:
                del self._events[key]
        return deleted

    # -- effects ----------------------------------------------------------------------------

    def put_effect(self, effect: Mapping[str, Any]) -> str:
        doc = documents.effect_document(effect, not_after=self.effect_horizon())
        blob = _encode(doc)
        with self._lock:
            seq = next(self._seq)
            stored = self._effects.setdefault((doc["intent"], doc["objective"]), [])
            header = _encode({k: v for k, v in doc.items() if k != "blob"})
            bisect.insort(stored, ((float(doc["timestamp"]), seq), doc.get("static") is True,
                                   header, blob))
            over = len(stored) - self.max_effects_per_objective
            if over > 0:  # the oldest trained versions; static ones stay
                gone = [i for i, row in enumerate(stored) if not row[1]][:over]
                for i in reversed(gone):
                    del stored[i]
                self.effects_evicted += len(gone)
        return f"embedded:{seq}"

    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> base.Document | None:
        horizon = self.effect_horizon()
        found = None
        with self._lock:
            for (ts, _), static, header, blob in reversed(self._effects.get((intent, objective),
                                                                            ())):
                if (static and 0 <= ts <= horizon) or now - lookback_s <= ts <= now:
                    found = blob if with_blob else header  # newest, last stored among equals
                    break
        return None if found is None else _decode(found)

    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[base.Document]:
        with self._lock:
            rows = [(key, blob if with_blobs else header)
                    for (who, _), stored in self._effects.items()
                    if intent is None or who == intent for key, _, header, blob in stored]
        rows.sort(key=lambda r: r[0], reverse=True)
        return [_decode(doc) for _, doc in rows]

    # -- statuses and memory ----------------------------------------------------------------

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        blob = _encode(documents.status_document(intent, time, status))
        with self._lock:
            self._status[intent] = blob

    def statuses(self) -> dict[str, base.Document]:
        with self._lock:
            stored = sorted(self._status.items())
        return {intent: _decode(blob) for intent, blob in stored}

    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None:
        blob = _encode(documents.memory_document(intent, memory))
        with self._lock:
            self._memory[intent] = blob

    def memory(self, intent: str) -> base.Document | None:
        with self._lock:
            blob = self._memory.get(intent)
        return None if blob is None else _decode(blob)

    # -- lifecycle --------------------------------------------------------------------------

    def __deepcopy__(self, memo: dict[int, Any]) -> EmbeddedKnowledgeBase:
        """An independent copy holding the same documents (a second run from this moment);
        the stored documents are immutable bytes, so copying the indexes is enough."""
        new = EmbeddedKnowledgeBase(self.retention_s, self.max_events_per_intent,
                                    self.max_effects_per_objective, self.max_event_bytes)
        with self._lock:
            new._events = {k: _Events(list(e.keys), list(e.blobs), list(e.ids),
                                      list(e.details), e.size)
                           for k, e in self._events.items()}
            new._event_bytes = self._event_bytes
            new._oldest = list(self._oldest)
            new._ids = set(self._ids)
            new._effects = {k: list(v) for k, v in self._effects.items()}
            new._status = dict(self._status)
            new._memory = dict(self._memory)
            new.events_evicted = self.events_evicted
            new.effects_evicted = self.effects_evicted
            new._seq = itertools.count(next(self._seq))
        new._followed_clock = self._followed_clock
        memo[id(self)] = new
        return new

    def lost(self) -> dict[str, int]:
        """What this store dropped to stay within its bounds: ``events`` and ``effects``
        evicted (only those it dropped)."""
        dropped = {"events": self.events_evicted, "effects": self.effects_evicted}
        return {k: n for k, n in dropped.items() if n}
