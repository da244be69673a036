"""A knowledge base whose store is down: bounded failures, buffering, recovery; indexes; URIs."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import mongomock
import pymongo
import pytest

from knowledge import base, connect, documents, embedded, mongo, resilient
from planner.domain.errors import SpecError

# -- helpers ------------------------------------------------------------------------------------


def closed_port() -> int:
    """A local TCP port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def down_client() -> Iterator[pymongo.MongoClient[dict[str, Any]]]:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        f"mongodb://127.0.0.1:{closed_port()}",
        serverSelectionTimeoutMS=200,
        connectTimeoutMS=200,
        connect=False,
    )
    yield client
    client.close()


def ev(seq: int, intent: str = "default/a", time_: float | None = None) -> dict[str, Any]:
    return {"intent": intent, "time": float(seq if time_ is None else time_), "seq": seq}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Flaky(base.KnowledgeBase):
    """Delegates to ``inner``; raises ``KnowledgeBaseUnavailable`` while ``down`` or for the
    next ``fail_times`` calls. Counts the calls that reached it."""

    def __init__(self, inner: base.KnowledgeBase, fail_times: int = 0) -> None:
        self.inner = inner
        self.fail_times = fail_times
        self.down = False
        self.calls = 0
        self.prepares = 0

    def _gate(self) -> None:
        self.calls += 1
        if self.down:
            raise base.KnowledgeBaseUnavailable("simulated outage")
        if self.fail_times > 0:
            self.fail_times -= 1
            raise base.KnowledgeBaseUnavailable("simulated failure")

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._gate()
        return fn(*args)

    def prepare(self) -> None:
        self.prepares += 1
        self._call(self.inner.prepare)

    def record_event(self, event: Mapping[str, Any]) -> str:
        result: str = self._call(self.inner.record_event, event)
        return result

    def events(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        result: list[base.Document] = self._call(
            self.inner.events, intent, since, until, limit, skip
        )
        return result

    def pod_details(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        result: list[base.Document] = self._call(
            self.inner.pod_details, intent, since, until, limit, skip
        )
        return result

    def count_events(self, intent: str | None = None) -> int:
        result: int = self._call(self.inner.count_events, intent)
        return result

    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None:
        self._call(self.inner.put_memory, intent, memory)

    def memory(self, intent: str) -> base.Document | None:
        result: base.Document | None = self._call(self.inner.memory, intent)
        return result

    def put_effect(self, effect: Mapping[str, Any]) -> str:
        result: str = self._call(self.inner.put_effect, effect)
        return result

    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> base.Document | None:
        result: base.Document | None = self._call(
            self.inner.effect, intent, objective, now, lookback_s, with_blob
        )
        return result

    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[base.Document]:
        result: list[base.Document] = self._call(self.inner.effects, intent, with_blobs)
        return result

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        self._call(self.inner.put_status, intent, time, status)

    def statuses(self) -> dict[str, base.Document]:
        result: dict[str, base.Document] = self._call(self.inner.statuses)
        return result

    def apply_retention(self, now: float) -> int:
        result: int = self._call(self.inner.apply_retention, now)
        return result


def mongomock_store(**kwargs: Any) -> mongo.MongoKnowledgeBase:
    return mongo.MongoKnowledgeBase(mongomock.MongoClient(), **kwargs)


def resilient_over_flaky(
    fail_times: int = 0, **kwargs: Any
) -> tuple[resilient.ResilientKnowledgeBase, Flaky, mongo.MongoKnowledgeBase, FakeClock]:
    store = mongomock_store(create_indexes=False)
    flaky = Flaky(store, fail_times)
    clock = FakeClock()
    kwargs.setdefault("retry_interval_s", 1.0)
    kb = resilient.ResilientKnowledgeBase(flaky, clock=clock, **kwargs)
    return kb, flaky, store, clock


READS: list[Callable[[base.KnowledgeBase], object]] = [
    lambda kb: kb.events(),
    lambda kb: kb.count_events(),
    lambda kb: kb.effect("default/a", "p95", 1.0, 1.0),
    lambda kb: kb.effects(),
    lambda kb: kb.statuses(),
    lambda kb: kb.apply_retention(1e9),
]
"""Every read; while the store is down each raises ``KnowledgeBaseUnavailable``."""


# -- a MongoDB that is down ------------------------------------------------------------------------


def test_start_up_against_a_down_server_raises_unavailable_quickly(
    down_client: pymongo.MongoClient[dict[str, Any]],
) -> None:
    started = time.monotonic()
    with pytest.raises(base.KnowledgeBaseUnavailable) as caught:
        mongo.MongoKnowledgeBase(down_client, retention_s=60.0)
    assert time.monotonic() - started < 5.0
    assert "creating indexes" in str(caught.value)
    assert "reachable" in str(caught.value)
    assert isinstance(caught.value.__cause__, pymongo.errors.ServerSelectionTimeoutError)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda kb: kb.prepare(), id="prepare"),
        pytest.param(lambda kb: kb.record_event(ev(1)), id="record_event"),
        pytest.param(lambda kb: kb.events("default/a", 0.0, 9.0, 5, 1), id="events"),
        pytest.param(lambda kb: kb.count_events(), id="count_events"),
        pytest.param(
            lambda kb: kb.put_effect(
                {"intent": "i", "objective": "p95", "timestamp": 1.0, "blob": b"x"}
            ),
            id="put_effect",
        ),
        pytest.param(lambda kb: kb.effect("i", "p95", 10.0, 5.0), id="effect"),
        pytest.param(lambda kb: kb.effects(with_blobs=True), id="effects"),
        pytest.param(lambda kb: kb.put_status("i", 1.0, {"phase": "x"}), id="put_status"),
        pytest.param(lambda kb: kb.statuses(), id="statuses"),
        pytest.param(lambda kb: kb.apply_retention(1e9), id="apply_retention"),
        pytest.param(lambda kb: kb.drop(), id="drop"),
    ],
)
def test_every_call_on_a_down_server_raises_only_unavailable(
    down_client: pymongo.MongoClient[dict[str, Any]],
    call: Callable[[mongo.MongoKnowledgeBase], object],
) -> None:
    kb = mongo.MongoKnowledgeBase(down_client, retention_s=60.0, create_indexes=False)
    started = time.monotonic()
    with pytest.raises(base.KnowledgeBaseUnavailable):
        call(kb)
    assert time.monotonic() - started < 5.0


def test_open_against_a_down_server_raises_unavailable_and_closes() -> None:
    started = time.monotonic()
    with pytest.raises(base.KnowledgeBaseUnavailable):
        connect.open_knowledge_base(
            f"mongodb://127.0.0.1:{closed_port()}/ipt", server_selection_timeout_ms=200
        )
    assert time.monotonic() - started < 5.0


def test_resilient_open_against_a_down_server_degrades(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="knowledge.resilient"):
        kb = connect.open_knowledge_base(
            f"mongodb://127.0.0.1:{closed_port()}/ipt",
            server_selection_timeout_ms=200,
            resilient=True,
            buffer_size=50,
        )
    assert isinstance(kb, resilient.ResilientKnowledgeBase)
    assert not kb.healthy
    assert "unavailable" in caplog.text
    # The back-off keeps a burst of calls from waiting for the server selection timeout each.
    ids = [kb.record_event(ev(i)) for i in range(100)]
    assert len(set(ids)) == 100  # final ids, given when queued
    # Reads raise (fast): an empty answer would read as "no events, no model".
    for read in READS:
        with pytest.raises(base.KnowledgeBaseUnavailable, match="not read"):
            read(kb)
    kb.put_status("default/a", 1.0, {"phase": "x"})
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.put_effect({"intent": "default/a", "objective": "p95", "timestamp": 1.0})
    assert kb.buffered == 50 and kb.dropped == 50
    assert kb.last_error is not None and "ServerSelectionTimeoutError" in kb.last_error
    kb.close()  # one last try, then gives up without raising
    assert time.monotonic() - started < 5.0
    assert kb.lost() == {"events": 100, "statuses": 1, "memories": 0}  # and says so


# -- buffering and recovery ---------------------------------------------------------------------


def test_buffers_while_down_then_flushes_in_order() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    kb.record_event(ev(0))
    assert kb.flush() and store.count_events() == 1
    flaky.down = True
    ids = [kb.record_event(ev(i, time_=5.0)) for i in range(1, 6)]  # equal times: order matters
    assert len(set(ids)) == 5 and kb.healthy  # queued: the store was not tried
    assert not kb.flush() and not kb.flush()
    assert not kb.healthy and kb.buffered == 5
    assert kb.counters()["failures"] == 1  # the second flush waited for the back-off
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.events()
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.effect("default/a", "p95", 0.0, 1.0)
    flaky.down = False
    kb.record_event(ev(6, time_=5.0))
    assert not kb.flush() and kb.buffered == 6  # still inside the back-off delay
    clock.now += 1.0
    kb.record_event(ev(7, time_=5.0))
    assert kb.flush()
    assert kb.healthy and kb.buffered == 0 and kb.flushed == 8 and kb.dropped == 0
    assert [d["seq"] for d in store.events()] == [7, 6, 5, 4, 3, 2, 1, 0]


def test_fails_n_times_then_flushes_in_order() -> None:
    kb, _, store, _ = resilient_over_flaky(fail_times=3, retry_interval_s=0.0)
    for i in range(6):
        kb.record_event(ev(i, time_=1.0))
    assert [kb.flush() for _ in range(4)] == [False, False, False, True]
    assert kb.healthy and kb.buffered == 0
    assert kb.counters()["failures"] == 3
    assert [d["seq"] for d in store.events()] == [5, 4, 3, 2, 1, 0]


def test_failure_in_the_middle_of_a_flush_keeps_the_rest_in_order() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    flaky.down = True
    for i in range(5):
        kb.record_event(ev(i, time_=1.0))
    flaky.down = False
    clock.now += 10.0
    prepare_and_two = 3
    original = flaky._gate

    def fail_after_two() -> None:
        nonlocal prepare_and_two
        prepare_and_two -= 1
        if prepare_and_two < 0:
            flaky.down = True
        original()

    flaky._gate = fail_after_two  # type: ignore[method-assign]
    kb.record_event(ev(5, time_=1.0))
    assert not kb.flush()  # the batch stopped after two events (PartialWrite)
    assert kb.buffered == 4 and kb.flushed == 2 and not kb.healthy
    flaky._gate = original  # type: ignore[method-assign]
    flaky.down = False
    clock.now += 100.0
    assert kb.flush()
    assert [d["seq"] for d in store.events()] == [5, 4, 3, 2, 1, 0]
    assert kb.flushed == 6 and kb.dropped == 0


def test_reads_flush_first_so_they_see_earlier_writes() -> None:
    kb, flaky, _, clock = resilient_over_flaky()
    flaky.down = True
    kb.record_event(ev(1))
    flaky.down = False
    clock.now += 5.0
    assert [d["seq"] for d in kb.events()] == [1]
    assert kb.healthy and kb.buffered == 0


def test_bounded_buffer_drops_oldest_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    kb, flaky, store, clock = resilient_over_flaky(buffer_size=3)
    flaky.down = True
    with caplog.at_level(logging.WARNING, logger="knowledge.writer"):
        for i in range(7):
            kb.record_event(ev(i))  # a full queue is written first (back-pressure): fails
    assert kb.buffered == 3 and kb.dropped == 4
    drops = [r for r in caplog.records if "dropped the oldest" in r.getMessage()]
    assert len(drops) == 1  # rate limited: one warning per interval, with the count
    assert "1 dropped so far" in drops[0].getMessage()
    clock.now += 120.0
    with caplog.at_level(logging.WARNING, logger="knowledge.writer"):
        kb.record_event(ev(7))
    assert "5 dropped so far" in caplog.text
    flaky.down = False
    clock.now += 5.0  # past the back-off
    assert kb.flush()
    assert [d["seq"] for d in store.events()] == [7, 6, 5]
    assert kb.counters() == {
        "buffered": 0,
        "pending_statuses": 0,
        "pending_memories": 0,
        "dropped": 5,
        "unconfirmed": 0,
        "flushed": 3,
        "batches": 1,
        "failures": 2,
        "skipped_reads": 0,
    }


def test_back_off_doubles_and_skips_the_store_meanwhile() -> None:
    kb, flaky, _, clock = resilient_over_flaky(retry_interval_s=1.0, max_retry_interval_s=4.0)
    flaky.down = True
    kb.record_event(ev(0))
    assert not kb.flush()
    delays = []
    for _ in range(5):
        calls = flaky.calls
        kb.record_event(ev(1))
        assert not kb.flush()
        with pytest.raises(base.KnowledgeBaseUnavailable):
            kb.events()
        assert flaky.calls == calls  # inside the delay: not tried
        waited = 0.0
        while flaky.calls == calls:
            clock.now += 0.5
            waited += 0.5
            with pytest.raises(base.KnowledgeBaseUnavailable):
                kb.count_events()
        delays.append(waited)
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert kb.counters()["skipped_reads"] > 0


def test_statuses_kept_while_down_latest_wins() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    flaky.down = True
    kb.put_status("default/a", 1.0, {"phase": "one"})
    kb.put_status("default/b", 1.0, {"phase": "b"})
    kb.put_status("default/a", 2.0, {"phase": "two"})
    assert kb.counters()["pending_statuses"] == 2
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.statuses()
    flaky.down = False
    clock.now += 5.0
    kb.put_status("default/c", 3.0, {"phase": "c"})
    assert kb.flush()
    got = store.statuses()
    assert {k: v["status"]["phase"] for k, v in got.items()} == {
        "default/a": "two",
        "default/b": "b",
        "default/c": "c",
    }
    assert got["default/a"]["time"] == 2.0


def test_put_effect_raises_unavailable_while_down() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    flaky.down = True
    effect = {"intent": "default/a", "objective": "p95", "timestamp": 1.0, "blob": b"m"}
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.put_effect(effect)
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.put_effect(effect)  # during the back-off: fails fast
    flaky.down = False
    clock.now += 5.0
    kb.put_effect(effect)
    assert len(store.effects()) == 1


def test_invalid_documents_raise_even_while_down() -> None:
    kb, flaky, _, _ = resilient_over_flaky()
    flaky.down = True
    kb.record_event(ev(0))
    with pytest.raises(documents.InvalidDocument):
        kb.record_event({"intent": "default/a"})
    with pytest.raises(documents.InvalidDocument):
        kb.put_status("default/a", float("nan"), {})
    assert kb.buffered == 1


def test_poison_document_at_flush_is_dropped_not_retried_forever() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    flaky.down = True
    kb.record_event(ev(0))
    kb.record_event(ev(1))
    kb._queue._events[0][1]["time"] = "not a number"  # corrupt it behind the wrapper's back
    flaky.down = False
    clock.now += 5.0
    assert kb.flush()
    assert [d["seq"] for d in store.events()] == [1]
    assert kb.dropped == 1 and kb.healthy


def test_index_creation_is_retried_lazily() -> None:
    kb, flaky, store, clock = resilient_over_flaky()
    flaky.down = True
    kb.prepare()  # logs, does not raise
    assert not kb.healthy and flaky.prepares == 1
    kb.record_event(ev(0))
    flaky.down = False
    clock.now += 5.0
    kb.record_event(ev(1))
    assert kb.flush()
    assert flaky.prepares == 2 and kb.healthy
    kb.record_event(ev(2))
    assert kb.flush()
    assert flaky.prepares == 2  # once it worked, never again
    indexes = store.client[store.database_name][mongo.EVENTS].index_information()
    assert mongo.INDEX_EVENTS_TTL in indexes
    assert store.count_events() == 3


def test_close_flushes_what_is_left() -> None:
    kb, flaky, store, _ = resilient_over_flaky()
    flaky.down = True
    kb.record_event(ev(0))
    kb.put_status("default/a", 1.0, {"phase": "x"})
    flaky.down = False  # back, but still inside the back-off delay
    kb.close()
    assert kb.flushed == 1 and kb.buffered == 0
    assert [d["seq"] for d in store.events()] == [0]  # mongomock keeps data after close()
    assert store.statuses()["default/a"]["status"] == {"phase": "x"}


def test_mongo_errors_during_a_write_become_invalid_document_not_unavailable() -> None:
    store = mongomock_store()
    events = store.client[store.database_name][mongo.EVENTS]

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise pymongo.errors.WriteError("Document failed validation", 121)

    events.insert_one = refuse
    store._events = events
    with pytest.raises(documents.InvalidDocument):
        store.record_event(ev(0))


# -- indexes ------------------------------------------------------------------------------------


def test_indexes_after_start_up() -> None:
    client: Any = mongomock.MongoClient()
    kb = mongo.MongoKnowledgeBase(client, database="ipt", retention_s=3600.0)
    db = client["ipt"]
    events = db[mongo.EVENTS].index_information()
    assert events[mongo.INDEX_EVENTS_INTENT_TIME]["key"] == [
        ("intent", 1),
        ("time", -1),
        ("_id", -1),
    ]
    assert events[mongo.INDEX_EVENTS_TIME]["key"] == [("time", 1), ("_id", 1)]
    ttl = events[mongo.INDEX_EVENTS_TTL]
    assert ttl["key"] == [(mongo.RECORDED_AT, 1)] and ttl["expireAfterSeconds"] == 3600
    effects = db[mongo.EFFECTS].index_information()
    assert effects[mongo.INDEX_EFFECTS]["key"] == [
        ("intent", 1),
        ("objective", 1),
        ("timestamp", -1),
        ("_id", -1),
    ]
    status = db[mongo.STATUS].index_information()
    assert status[mongo.INDEX_STATUS] == {"key": [("intent", 1)], "unique": True, "v": 2}
    kb.prepare()
    kb.prepare()  # idempotent
    assert db[mongo.EVENTS].index_information() == events


def test_ttl_field_is_a_date_and_hidden() -> None:
    client: Any = mongomock.MongoClient()
    kb = mongo.MongoKnowledgeBase(client, retention_s=60.0)
    kb.record_event(ev(0))
    raw = client[kb.database_name][mongo.EVENTS].find_one()
    assert raw is not None
    assert raw[mongo.RECORDED_AT].year >= 2024
    assert mongo.RECORDED_AT not in kb.events()[0]


def test_retention_change_replaces_the_ttl_index() -> None:
    client: Any = mongomock.MongoClient()
    mongo.MongoKnowledgeBase(client, retention_s=3600.0)
    events = client[mongo.DEFAULT_DATABASE][mongo.EVENTS]
    mongo.MongoKnowledgeBase(client, retention_s=120.5)
    assert events.index_information()[mongo.INDEX_EVENTS_TTL]["expireAfterSeconds"] == 121
    mongo.MongoKnowledgeBase(client, retention_s=None)
    assert mongo.INDEX_EVENTS_TTL not in events.index_information()
    assert mongo.INDEX_EVENTS_INTENT_TIME in events.index_information()


def test_constructor_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="retention_s"):
        mongomock_store(retention_s=0.0)
    with pytest.raises(ValueError, match="database"):
        mongomock_store(database="bad/name")
    with pytest.raises(ValueError, match="limit"):
        mongomock_store().events(limit=-1)


# -- open_knowledge_base ------------------------------------------------------------------------


@pytest.mark.parametrize("uri", [None, "", "memory", " memory "])
def test_memory_uris_open_the_embedded_store(uri: str | None) -> None:
    kb = connect.open_knowledge_base(uri)
    assert isinstance(kb, embedded.EmbeddedKnowledgeBase)
    assert kb.retention_s == mongo.DEFAULT_RETENTION_S
    kb.record_event(ev(0))
    assert kb.count_events() == 1


def test_mongomock_uri_opens_the_pymongo_store_in_process() -> None:
    kb = connect.open_knowledge_base("mongomock://")
    assert isinstance(kb, mongo.MongoKnowledgeBase)
    assert isinstance(kb.client, mongomock.MongoClient)
    assert kb.database_name == mongo.DEFAULT_DATABASE
    kb.record_event(ev(0))
    assert kb.count_events() == 1


def test_memory_stores_are_independent() -> None:
    first = connect.open_knowledge_base("memory")
    second = connect.open_knowledge_base("memory")
    first.record_event(ev(0))
    assert second.count_events() == 0


def test_mongomock_uri_names_the_database() -> None:
    kb = connect.open_knowledge_base("mongomock:///planner_demo", retention_s=None)
    assert isinstance(kb, mongo.MongoKnowledgeBase)
    assert kb.database_name == "planner_demo" and kb.retention_s is None


def test_mongodb_uri_opens_pymongo_with_short_timeouts() -> None:
    kb = connect.open_knowledge_base(
        "mongodb://db.example:27017/from_uri", create_indexes=False, retention_s=3600.0
    )
    assert isinstance(kb, mongo.MongoKnowledgeBase)
    assert isinstance(kb.client, pymongo.MongoClient)
    assert kb.database_name == "from_uri"
    assert kb.client.options.server_selection_timeout == 2.0
    assert kb.client.options.pool_options.connect_timeout == 2.0
    assert kb.client.options.pool_options.socket_timeout == 30.0
    kb.close()


def test_uri_options_and_database_argument_win() -> None:
    kb = connect.open_knowledge_base(
        "mongodb://db.example/from_uri?serverSelectionTimeoutMS=5000",
        database="explicit",
        create_indexes=False,
    )
    assert isinstance(kb, mongo.MongoKnowledgeBase)
    assert kb.database_name == "explicit"
    assert kb.client.options.server_selection_timeout == 5.0
    kb.close()


def test_srv_uri_and_default_database() -> None:
    kb = connect.open_knowledge_base("mongodb+srv://cluster.example.com", create_indexes=False)
    assert isinstance(kb, mongo.MongoKnowledgeBase)
    assert kb.database_name == mongo.DEFAULT_DATABASE
    kb.close()


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("postgres://user:s3cret@db/x", "unsupported knowledge-base URI scheme 'postgres'"),
        ("localhost:27017", "unsupported knowledge-base URI value"),
        ("mongodb://", "invalid MongoDB URI"),
        ("mongodb://user:s3cret@h:port/x", "invalid MongoDB URI"),
        ("mongodb://h/bad$name", "bad$name"),
        ("mongomock:///bad$name", "contains '$'"),
    ],
)
def test_bad_uris_raise_spec_error_for_kb(uri: str, problem: str) -> None:
    with pytest.raises(SpecError) as caught:
        connect.open_knowledge_base(uri)
    err = caught.value
    assert err.field == "--kb"
    assert problem in err.problem
    assert err.fix
    assert "s3cret" not in str(err)
    assert str(err).startswith("--kb: ")


def test_bad_scheme_error_says_how_to_fix() -> None:
    with pytest.raises(SpecError) as caught:
        connect.open_knowledge_base("redis://localhost")
    assert "mongodb://" in caught.value.fix and "memory" in caught.value.fix
