"""The conformance suite on the MongoDB knowledge base over mongomock (and its wrappers)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import mongomock
import pymongo.errors
import pytest

from knowledge import base, connect, mongo, resilient

try:
    import kb_conformance
except ImportError:  # tests/ is a package
    from tests import kb_conformance  # type: ignore[no-redef]


class TestMongoKnowledgeBaseOverMongomock(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(
        self, retention_s: float | None = kb_conformance.KnowledgeBaseConformance.RETENTION_S
    ) -> Iterator[base.KnowledgeBase]:
        kb = mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=retention_s)
        try:
            yield kb
        finally:
            kb.close()


class TestResilientOverMongomock(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(
        self, retention_s: float | None = kb_conformance.KnowledgeBaseConformance.RETENTION_S
    ) -> Iterator[base.KnowledgeBase]:
        inner = mongo.MongoKnowledgeBase(
            mongomock.MongoClient(), retention_s=retention_s, create_indexes=False
        )
        kb = resilient.ResilientKnowledgeBase(inner)
        try:
            yield kb
            assert kb.flush() and kb.healthy and kb.buffered == 0 and kb.dropped == 0
        finally:
            kb.close()


class TestOpenedInMemory(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(
        self, retention_s: float | None = kb_conformance.KnowledgeBaseConformance.RETENTION_S
    ) -> Iterator[base.KnowledgeBase]:
        kb = connect.open_knowledge_base("memory", retention_s=retention_s)
        try:
            yield kb
        finally:
            kb.close()


def _mongo_store() -> mongo.MongoKnowledgeBase:
    return mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=None)


def test_a_detail_the_server_refuses_is_dropped_and_its_event_kept_unmarked() -> None:
    kb = _mongo_store()
    original = kb._details.insert_many

    def refuse_first(docs: list[dict[str, object]], ordered: bool = True) -> object:
        original(docs[1:], ordered=ordered)
        raise pymongo.errors.BulkWriteError({"writeErrors": [
            {"index": 0, "code": 10334, "errmsg": "object to insert too large"}]})

    kb._details.insert_many = refuse_first  # type: ignore[method-assign]
    pods = {"name": ["p-1"]}
    kb.record_events([kb_conformance.event(time=1.0, pods=pods),
                      kb_conformance.event(time=2.0, pods=pods)])
    assert [e.get("pod_detail") for e in kb.events()] == [True, None]
    assert [d["time"] for d in kb.pod_details()] == [2.0]


def test_details_unwritten_when_the_server_went_away_arrive_when_the_batch_is_sent_again(
) -> None:
    kb = _mongo_store()
    original = kb._details.insert_many
    calls = []

    def down_once(docs: list[dict[str, object]], ordered: bool = True) -> object:
        calls.append(len(docs))
        if len(calls) == 1:
            raise pymongo.errors.AutoReconnect("connection reset")
        return original(docs, ordered=ordered)

    kb._details.insert_many = down_once  # type: ignore[method-assign]
    docs = [kb_conformance.event(time=float(t), pods={"name": [f"p-{t}"]}) for t in range(3)]
    ids = [kb.new_event_id() for _ in docs]
    with pytest.raises(base.KnowledgeBaseUnavailable):
        kb.record_events(docs, ids)
    assert kb.count_events() == 3 and kb.pod_details() == []   # events first, details lost
    kb.record_events(docs, ids)                                 # the writer sends it again
    assert kb.count_events() == 3
    assert [d["pods"]["name"] for d in kb.pod_details()] == [["p-2"], ["p-1"], ["p-0"]]
