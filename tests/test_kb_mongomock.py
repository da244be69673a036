"""The conformance suite on the MongoDB knowledge base over mongomock (and its wrappers)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import mongomock

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
