"""The knowledge base's write queue (``knowledge/writer.py`` behind ``ResilientKnowledgeBase``):
nothing lost when the store fails in the middle of a batch, the bound and back-pressure, reads
that see queued writes, the writer thread, flush on shutdown, one batch per controller cycle."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import mongomock
import pymongo
import pymongo.errors
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import base, connect, directory, mongo, resilient, writer

BOUND = 6
"""The queue bound of the "nothing lost" tests: small, so that outages overflow it."""

Step = tuple[str, int | None]
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), st.integers(1, 9)),
        # flush with the store failing after k documents of the next batch (None: no failure;
        # k >= the batch: all arrive but the acknowledgement is lost)
        st.tuples(st.just("flush"), st.none() | st.integers(0, 8)),
        st.tuples(st.just("down"), st.none()),  # every write fails until the next "up"
        st.tuples(st.just("up"), st.none()),
    ),
    max_size=25,
)
HYPOTHESIS = settings(max_examples=60, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])


def ev(seq: int) -> dict[str, Any]:
    return {"intent": "default/a", "time": float(seq), "seq": seq}


# -- stores that fail in the middle of a batch -----------------------------------------------


class MidBatchEvents:
    """A pymongo events collection whose next ``insert_many`` can fail after its first ``k``
    documents arrived: ``AutoReconnect``, as a connection dropped mid-batch (the client cannot
    tell which documents the server has)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fail_after: int | None = None
        self.down = False
        self.calls = 0

    def insert_many(self, docs: Sequence[dict[str, Any]], ordered: bool = True) -> Any:
        self.calls += 1
        k, self.fail_after = (0 if self.down else self.fail_after), None
        if k is None:
            return self.inner.insert_many(docs, ordered=ordered)
        if k > 0:
            with contextlib.suppress(pymongo.errors.BulkWriteError):  # some arrived before
                self.inner.insert_many(list(docs)[:k], ordered=False)
        raise pymongo.errors.AutoReconnect(f"connection lost after {k} documents")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class PymongoLike:
    """The pymongo store (one unordered ``insert_many`` per batch, ids chosen by the caller)."""

    def __init__(self) -> None:
        self.store = mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=None)
        self.events = MidBatchEvents(self.store._events)
        self.store._events = self.events

    def arm(self, k: int | None) -> None:
        self.events.fail_after = k

    def set_down(self, down: bool) -> None:
        self.events.down = down

    def stored(self) -> list[base.Document]:
        return self.store.events()


class OneByOneStore(mongo.MongoKnowledgeBase):
    """A store with only the single-document methods (a third party's): the batches are the
    default loops of ``KnowledgeBase``. ``budget``: how many more events it stores before
    failing (``None``: no limit)."""

    budget: int | None = None
    down = False

    def record_event(self, event: Mapping[str, Any]) -> str:
        if self.down or self.budget == 0:
            self.budget = None
            raise base.KnowledgeBaseUnavailable("connection lost")
        if self.budget is not None:
            self.budget -= 1
        return super().record_event(event)

    def record_events(self, events: Sequence[Mapping[str, Any]],
                      ids: Sequence[str] | None = None) -> list[str]:
        return base.KnowledgeBase.record_events(self, events, ids)


class ThirdParty:
    def __init__(self) -> None:
        self.store = OneByOneStore(mongomock.MongoClient(), retention_s=None)

    def arm(self, k: int | None) -> None:
        self.store.budget = k

    def set_down(self, down: bool) -> None:
        self.store.down = down

    def stored(self) -> list[base.Document]:
        return self.store.events()


class FailingJournal:
    """The directory store's journal, failing to append when armed (a full disk): the write
    applied in memory is undone, so a copy of the directory (what ``kill -9`` leaves) holds
    exactly what was acknowledged."""

    def __init__(self, client: directory.DirectoryClient) -> None:
        self.client = client
        self.fail_next = False
        self.down = False
        real = client.journal.append

        def append(record: bytes) -> None:
            if self.down or self.fail_next:
                self.fail_next = False
                raise pymongo.errors.OperationFailure("journal: no space left on device")
            real(record)

        client.journal.append = append  # type: ignore[method-assign]


class DirectoryLike:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = directory.DirectoryClient(root / "kb")
        self.store = mongo.MongoKnowledgeBase(self.client, retention_s=None, ttl_index=False)
        self.journal = FailingJournal(self.client)

    def arm(self, k: int | None) -> None:
        self.journal.fail_next = k is not None

    def set_down(self, down: bool) -> None:
        self.journal.down = down

    def stored(self) -> list[base.Document]:
        """The events of a copy of the directory taken now (a crash image)."""
        image = self.root / "image"
        shutil.rmtree(image, ignore_errors=True)
        shutil.copytree(self.root / "kb", image, symlinks=True,
                        ignore=shutil.ignore_patterns("lock"))
        client = directory.DirectoryClient(image)
        try:
            return mongo.MongoKnowledgeBase(client, retention_s=None, ttl_index=False).events()
        finally:
            client.close()


Harness = PymongoLike | ThirdParty | DirectoryLike


@contextlib.contextmanager
def harness(kind: str) -> Iterator[Harness]:
    if kind == "pymongo":
        yield PymongoLike()
    elif kind == "third-party":
        yield ThirdParty()
    else:
        with tempfile.TemporaryDirectory() as tmp:
            h = DirectoryLike(Path(tmp))
            try:
                yield h
            finally:
                h.client.close()


def drive(h: Harness, steps: list[Step]) -> None:
    """Record, flush (with failures), go down and up; then check that every event recorded
    is stored exactly once or counted as dropped, that the bound held throughout, and that
    the latest status and memory arrive."""
    kb = resilient.ResilientKnowledgeBase(h.store, buffer_size=BOUND, max_batch=4,
                                          retry_interval_s=0.0, max_retry_interval_s=0.0)
    recorded = 0
    for kind, arg in steps:
        if kind == "record":
            assert arg is not None
            for _ in range(arg):
                kb.record_event(ev(recorded))
                kb.put_status("default/a", float(recorded), {"seq": recorded})
                kb.put_memory("default/a", {"seq": recorded})
                recorded += 1
                assert kb.buffered <= BOUND
        elif kind == "flush":
            h.arm(arg)
            kb.flush()
            h.arm(None)
        else:
            h.set_down(kind == "down")
        assert kb.buffered <= BOUND
    h.set_down(False)
    assert kb.flush()
    seqs = [d["seq"] for d in h.stored()]
    assert len(seqs) == len(set(seqs)), "an event was stored twice"
    assert set(seqs) <= set(range(recorded))
    missing = recorded - len(seqs)
    # Every event missing is counted as dropped; a dropped one may have arrived only if it
    # was sent when the connection failed (counted as unconfirmed too).
    unconfirmed = kb.counters()["unconfirmed"]
    assert kb.dropped - unconfirmed <= missing <= kb.dropped, "an event was lost uncounted"
    assert kb.lost() == {"events": kb.dropped, "statuses": 0, "memories": 0}
    assert seqs == sorted(seqs, reverse=True)
    if recorded:
        last = recorded - 1
        assert h.store.statuses()["default/a"]["status"] == {"seq": last}
        assert h.store.memory("default/a") == {"intent": "default/a", "seq": last}
    kb.close()


@HYPOTHESIS
@given(steps=STEPS)
def test_nothing_lost_when_insert_many_fails_mid_batch(steps: list[Step]) -> None:
    with harness("pymongo") as h:
        drive(h, steps)


@HYPOTHESIS
@given(steps=STEPS)
def test_nothing_lost_with_a_store_that_writes_one_by_one(steps: list[Step]) -> None:
    with harness("third-party") as h:
        drive(h, steps)


@settings(max_examples=25, deadline=None)
@given(steps=STEPS)
def test_nothing_lost_when_the_directory_journal_fails(steps: list[Step]) -> None:
    with harness("directory") as h:
        drive(h, steps)


def test_a_lost_acknowledgement_does_not_duplicate() -> None:
    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store, retry_interval_s=0.0,
                                          max_retry_interval_s=0.0)
    for i in range(5):
        kb.record_event(ev(i))
    h.arm(5)                # all five arrive, the answer does not
    assert not kb.flush() and kb.buffered == 5
    assert h.store.count_events() == 5
    assert kb.flush()       # sent again: the server has every id already
    assert [d["seq"] for d in h.store.events()] == [4, 3, 2, 1, 0]
    assert kb.counters()["flushed"] == 5 and kb.dropped == 0


# -- the bound and back-pressure ---------------------------------------------------------------


def test_a_full_queue_is_written_first_not_dropped() -> None:
    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store, buffer_size=4, max_batch=10)
    for i in range(10):
        kb.record_event(ev(i))
        assert kb.buffered <= 4
    assert kb.dropped == 0
    assert h.events.calls == 2          # written twice, four at a time, by the caller
    assert h.store.count_events() == 8 and kb.buffered == 2
    assert kb.flush() and h.store.count_events() == 10


def test_while_down_the_oldest_beyond_the_bound_are_dropped_and_counted() -> None:
    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store, buffer_size=4, retry_interval_s=0.0,
                                          max_retry_interval_s=0.0)
    h.set_down(True)
    for i in range(10):
        kb.record_event(ev(i))
    assert kb.buffered == 4 and kb.dropped == 6
    h.set_down(False)
    assert kb.flush()
    assert [d["seq"] for d in h.store.events()] == [9, 8, 7, 6]
    assert kb.lost()["events"] == 6


def test_batches_are_at_most_max_batch_events() -> None:
    h = PymongoLike()
    sizes: list[int] = []
    real = h.events.insert_many

    def spy(docs: Sequence[dict[str, Any]], ordered: bool = True) -> Any:
        sizes.append(len(docs))
        assert ordered is False
        return real(docs, ordered=ordered)

    h.events.insert_many = spy  # type: ignore[method-assign]
    kb = resilient.ResilientKnowledgeBase(h.store, max_batch=4)
    kb.record_events([ev(i) for i in range(10)])
    assert kb.flush()
    assert sizes == [4, 4, 2]


def test_queue_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_events"):
        writer.WriteQueue(max_events=0)
    with pytest.raises(ValueError, match="max_batch"):
        writer.WriteQueue(max_batch=0)


# -- reads see queued writes -------------------------------------------------------------------


def test_reads_see_queued_writes() -> None:
    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store)
    kb.record_event(ev(1))
    kb.put_status("default/a", 1.0, {"phase": "x"})
    kb.put_memory("default/a", {"seq": 1})
    assert h.store.count_events() == 0            # queued, not written
    assert kb.memory("default/a") == {"intent": "default/a", "seq": 1}   # from the queue
    assert h.events.calls == 0
    assert kb.statuses()["default/a"]["status"] == {"phase": "x"}   # written first
    assert [d["seq"] for d in kb.events()] == [1]
    assert h.events.calls == 1


def test_memory_is_answered_from_the_queue_while_the_store_is_down() -> None:
    h = ThirdParty()
    kb = resilient.ResilientKnowledgeBase(h.store)
    kb.put_memory("default/a", {"seq": 1})
    h.set_down(True)
    kb.record_event(ev(0))
    assert not kb.flush()
    assert kb.memory("default/a") == {"intent": "default/a", "seq": 1}


# -- the writer thread and shutdown ------------------------------------------------------------


class SlowStore(mongo.MongoKnowledgeBase):
    """Blocks ``record_events`` until released (a slow MongoDB)."""

    def __init__(self) -> None:
        super().__init__(mongomock.MongoClient(), retention_s=None)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: list[str] = []

    def record_events(self, events: Sequence[Mapping[str, Any]],
                      ids: Sequence[str] | None = None) -> list[str]:
        self.threads.append(threading.current_thread().name)
        self.entered.set()
        assert self.release.wait(10)
        return super().record_events(events, ids)


def test_the_writer_thread_writes_while_the_caller_goes_on() -> None:
    store = SlowStore()
    kb = resilient.ResilientKnowledgeBase(store, background=True)
    kb.record_event(ev(0))
    assert kb.flush(wait=False) is False      # handed over, not written yet
    assert store.entered.wait(10)
    kb.record_event(ev(1))                     # queueing goes on while a batch is written
    kb.put_status("default/a", 1.0, {"phase": "x"})
    store.release.set()
    assert [d["seq"] for d in kb.events()] == [1, 0]   # a read waits for the batch in flight
    assert store.threads[0] == "kb-writer"
    kb.close()


def test_close_writes_what_is_queued_and_stops_the_thread() -> None:
    store = mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=None)
    kb = resilient.ResilientKnowledgeBase(store, background=True)
    for i in range(3):
        kb.record_event(ev(i))
    kb.put_status("default/a", 1.0, {"phase": "x"})
    kb.close()
    assert store.count_events() == 3 and "default/a" in store.statuses()
    assert not [t for t in threading.enumerate() if t.name == "kb-writer" and t.is_alive()]


def test_close_counts_what_it_could_not_write() -> None:
    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store)
    kb.record_event(ev(0))
    kb.put_status("default/a", 1.0, {"phase": "x"})
    h.set_down(True)
    kb.close()
    assert kb.lost() == {"events": 1, "statuses": 1, "memories": 0}
    assert kb.counters()["unconfirmed"] == 1  # it was sent when the connection failed


# -- the pymongo store's batches -------------------------------------------------------------------


class BulkCollection:
    """A mongomock collection with a ``bulk_write`` of ``ReplaceOne`` upserts (mongomock's own
    does not take this pymongo's operations), recording each call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bulk_calls: list[tuple[int, bool]] = []

    def bulk_write(self, ops: list[pymongo.ReplaceOne[Any]], ordered: bool = True) -> None:
        self.bulk_calls.append((len(ops), ordered))
        for op in ops:
            assert isinstance(op, pymongo.ReplaceOne) and op._upsert
            self.inner.replace_one(op._filter, op._doc, upsert=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_pymongo_store_writes_statuses_and_memories_in_one_bulk_write() -> None:
    store = mongo.MongoKnowledgeBase(mongomock.MongoClient(), bulk_upserts=True)
    status, memory = BulkCollection(store._status), BulkCollection(store._memory)
    store._status, store._memory = status, memory
    store.put_statuses([(f"default/{i}", 1.0, {"i": i}) for i in range(5)])
    store.put_memories([(f"default/{i}", {"i": i}) for i in range(5)])
    assert status.bulk_calls == [(5, False)] and memory.bulk_calls == [(5, False)]
    assert len(store.statuses()) == 5 and store.memory("default/4") == {"intent": "default/4",
                                                                         "i": 4}


def test_pymongo_store_uses_bulk_writes_only_on_a_server_client() -> None:
    assert not mongo.MongoKnowledgeBase(mongomock.MongoClient()).bulk_upserts
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(connect=False)
    try:
        assert mongo.MongoKnowledgeBase(client, create_indexes=False).bulk_upserts
    finally:
        client.close()


def test_event_ids_are_checked_and_named() -> None:
    store = mongo.MongoKnowledgeBase(mongomock.MongoClient())
    with pytest.raises(ValueError, match=r"ids\[1\]"):
        store.record_events([ev(0), ev(1)], [store.new_event_id(), "not-an-id"])
    assert store.count_events() == 0


def test_a_refused_event_in_a_batch_is_dropped_alone() -> None:
    store = mongo.MongoKnowledgeBase(mongomock.MongoClient())
    kb = resilient.ResilientKnowledgeBase(store)
    kb.record_events([ev(0), ev(1), ev(2)])
    kb._queue._events[1][1]["time"] = "corrupt"   # behind the queue's back
    assert kb.flush()
    assert [d["seq"] for d in store.events()] == [2, 0]
    assert kb.dropped == 1 and kb.lost()["events"] == 1


# -- the controller: one batch per cycle -------------------------------------------------------


class CountingStore(mongo.MongoKnowledgeBase):
    def __init__(self) -> None:
        super().__init__(mongomock.MongoClient(), retention_s=None)
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def record_event(self, event: Mapping[str, Any]) -> str:
        self._count("record_event")
        return super().record_event(event)

    def record_events(self, events: Sequence[Mapping[str, Any]],
                      ids: Sequence[str] | None = None) -> list[str]:
        self._count("record_events")
        return super().record_events(events, ids)

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        self._count("put_status")
        super().put_status(intent, time, status)

    def put_statuses(self, statuses: Sequence[base.StatusUpdate]) -> None:
        self._count("put_statuses")
        super().put_statuses(statuses)


def test_a_controller_cycle_writes_one_batch() -> None:
    from simulator.runner import ScenarioRun
    from simulator.scenario import load_scenario

    scenario = load_scenario(Path(__file__).resolve().parents[1] / "examples" / "scenarios"
                             / "multi-tenant.yaml")
    store = CountingStore()
    kb = resilient.ResilientKnowledgeBase(store)
    run = ScenarioRun(scenario, "queueing", knowledge=kb)
    outcomes = run.controller.cycle()
    assert len(outcomes) >= 2
    assert store.calls == {"record_events": 1, "put_statuses": 1}
    assert store.count_events() == len(outcomes)
    kb.close()


def test_open_knowledge_base_with_a_writer_thread() -> None:
    kb = connect.open_knowledge_base("memory", resilient=True, background=True)
    assert isinstance(kb, resilient.ResilientKnowledgeBase)
    kb.record_event(ev(0))
    kb.flush(wait=False)
    assert kb.count_events() == 1
    kb.close()


def test_operator_metrics_show_the_write_queue() -> None:
    from prometheus_client import generate_latest

    from planner.k8s import kbmetrics

    h = PymongoLike()
    kb = resilient.ResilientKnowledgeBase(h.store, buffer_size=2, retry_interval_s=0.0,
                                          max_retry_interval_s=0.0)
    h.set_down(True)
    for i in range(3):
        kb.record_event(ev(i))
    text = generate_latest(kbmetrics.registry(kb)).decode()
    assert 'intent_planner_knowledge_base_buffer{counter="dropped"} 1.0' in text
    assert 'intent_planner_knowledge_base_buffer{counter="buffered"} 2.0' in text
    assert "intent_planner_knowledge_base_healthy 0.0" in text
    plain = mongo.MongoKnowledgeBase(mongomock.MongoClient())
    assert "knowledge_base" not in generate_latest(kbmetrics.registry(plain)).decode()


def test_a_server_never_reached_stored_nothing_for_sure() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        f"mongodb://127.0.0.1:{port}", serverSelectionTimeoutMS=200, connect=False)
    store = mongo.MongoKnowledgeBase(client, create_indexes=False)
    with pytest.raises(base.PartialWrite) as caught:
        store.record_events([ev(0), ev(1)])
    assert caught.value.stored == 0
    kb = resilient.ResilientKnowledgeBase(store)
    kb.record_event(ev(0))
    kb.close()
    assert kb.lost()["events"] == 1 and kb.counters()["unconfirmed"] == 0
