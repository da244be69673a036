"""Copies of a scenario run, to continue one simulated state two ways without simulating the
way there twice."""

from __future__ import annotations

import copy
import threading
from typing import Any

import mongomock

from knowledge.mongo import MongoKnowledgeBase
from simulator.runner import ScenarioRun


def copy_knowledge_base(kb: MongoKnowledgeBase) -> MongoKnowledgeBase:
    """A new in-memory knowledge base holding copies of every document of ``kb`` (an in-memory
    one), collection by collection in their stored order; its indexes are created as for any
    new store."""
    if not isinstance(kb.client, mongomock.MongoClient):
        raise TypeError(f"can only copy an in-memory knowledge base, not {kb!r}")
    new = MongoKnowledgeBase(mongomock.MongoClient(), kb.database_name, kb.retention_s)
    source, target = kb.client[kb.database_name], new.client[new.database_name]
    for name in source.list_collection_names():
        docs = list(source[name].find({}))
        if docs:
            target[name].insert_many(docs)
    return new


def copy_run(run: ScenarioRun) -> ScenarioRun:
    """An independent copy of ``run`` as it is now: the simulated cluster (its random generators
    included), the controller with its planners, actuators and training hook, the accountant,
    and a copy of the knowledge base. Advancing either leaves the other as it was.

    The copy stands for a second run of the same scenario and seed up to this moment (runs are
    deterministic for a seed: tests/test_simulator.py::test_deterministic_for_a_seed).
    """
    kb = run.knowledge
    if not isinstance(kb, MongoKnowledgeBase):
        raise TypeError(f"can only copy a run over an in-memory knowledge base, not {kb!r}")
    memo: dict[int, Any] = {id(kb): copy_knowledge_base(kb)}
    if run.trainer is not None:
        if run.trainer._pool is not None:
            raise TypeError("cannot copy a run whose training runs on a thread")
        memo[id(run.trainer._lock)] = threading.Lock()
    return copy.deepcopy(run, memo)
