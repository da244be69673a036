"""The conformance suite against a real MongoDB.

Runs only when ``INTENT_PLANNER_TEST_MONGODB_URI`` names a server, e.g.
``INTENT_PLANNER_TEST_MONGODB_URI=mongodb://localhost:27017``. Every knowledge base gets a fresh
random database that is dropped afterwards.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pymongo
import pytest

from knowledge import base, mongo, resilient

try:
    import kb_conformance
except ImportError:  # tests/ is a package
    from tests import kb_conformance  # type: ignore[no-redef]

URI_ENV = "INTENT_PLANNER_TEST_MONGODB_URI"
URI = os.environ.get(URI_ENV, "").strip()

pytestmark = pytest.mark.skipif(
    not URI, reason=f"set {URI_ENV}=mongodb://HOST:PORT to run against a real MongoDB"
)

RETENTION_S = kb_conformance.KnowledgeBaseConformance.RETENTION_S


@contextlib.contextmanager
def fresh_store(retention_s: float | None = RETENTION_S) -> Iterator[mongo.MongoKnowledgeBase]:
    client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
        URI, serverSelectionTimeoutMS=5000
    )
    name = f"ipt_test_{uuid.uuid4().hex[:16]}"
    try:
        kb = mongo.MongoKnowledgeBase(client, database=name, retention_s=retention_s)
    except base.KnowledgeBaseUnavailable:
        client.close()
        raise
    try:
        yield kb
    finally:
        client.drop_database(name)
        client.close()


class TestMongoKnowledgeBaseOnMongoDB(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(self, retention_s: float | None = RETENTION_S) -> Iterator[base.KnowledgeBase]:
        with fresh_store(retention_s) as kb:
            yield kb


class TestResilientOnMongoDB(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(self, retention_s: float | None = RETENTION_S) -> Iterator[base.KnowledgeBase]:
        with fresh_store(retention_s) as kb:
            yield resilient.ResilientKnowledgeBase(kb)


def test_indexes_on_mongodb() -> None:
    with fresh_store(3600.0) as kb:
        events = kb.client[kb.database_name][mongo.EVENTS].index_information()
        assert events[mongo.INDEX_EVENTS_INTENT_TIME]["key"] == [
            ("intent", 1),
            ("time", -1),
            ("_id", -1),
        ]
        assert events[mongo.INDEX_EVENTS_TTL]["expireAfterSeconds"] == 3600
        assert events[mongo.INDEX_EVENTS_TTL]["key"] == [(mongo.RECORDED_AT, 1)]
        status = kb.client[kb.database_name][mongo.STATUS].index_information()
        assert status[mongo.INDEX_STATUS]["unique"] is True
        kb.prepare()  # idempotent on a real server too


def test_retention_change_replaces_the_ttl_index_on_mongodb() -> None:
    with fresh_store(3600.0) as kb:
        again = mongo.MongoKnowledgeBase(kb.client, kb.database_name, retention_s=60.0)
        events = again.client[again.database_name][mongo.EVENTS]
        assert events.index_information()[mongo.INDEX_EVENTS_TTL]["expireAfterSeconds"] == 60
        mongo.MongoKnowledgeBase(kb.client, kb.database_name, retention_s=None)
        assert mongo.INDEX_EVENTS_TTL not in events.index_information()
