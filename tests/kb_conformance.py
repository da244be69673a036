"""Conformance suite for :class:`knowledge.base.KnowledgeBase` implementations.

Like optuna's storage tests: subclass :class:`KnowledgeBaseConformance` in a ``test_*.py``
module, name the subclass ``Test...`` and implement :meth:`~KnowledgeBaseConformance.open_kb`,
a context manager yielding a fresh, empty knowledge base (and cleaning up after it)::

    class TestMyStore(KnowledgeBaseConformance):
        @contextlib.contextmanager
        def open_kb(self, retention_s=KnowledgeBaseConformance.RETENTION_S):
            kb = MyStore(retention_s=retention_s)
            try:
                yield kb
            finally:
                kb.close()

Every test checks one point of the contract in ``knowledge/base.py``; the hypothesis tests
compare ``events()`` / ``effect()`` with a small in-Python reference model.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge import base, documents

HYPOTHESIS = settings(
    max_examples=30,
    deadline=None,
    # One test method runs on several subclasses (stores): that is the point of the suite.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.differing_executors,
    ],
)

INTENTS = ["default/a", "default/b", "prod/c"]


def event(intent: str = "default/a", time: float = 0.0, **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "time": time,
        "intent": intent,
        "workload": intent,
        "current": {"p95": 0.12, "throughput": None},
        "desired": {"p95": 0.1},
        "config": {"replicas": 2, "cpu": 0.5, "device": "cpu", "pool": "eu"},
        "load": {"request_rate": 12.5},
        "pod_groups": {"pool": ["eu"], "count": [1]},
        "plan": None,
        "exploratory": False,
        "planner": "grid",
    }
    doc.update(extra)
    return doc


def effect(
    intent: str = "default/a",
    objective: str = "p95",
    timestamp: float = 0.0,
    static: bool = False,
    blob: bytes | None = b"model",
    **extra: Any,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "intent": intent,
        "objective": objective,
        "timestamp": timestamp,
        "static": static,
        "kind": "gp",
        "format": "skops",
        "blob": blob,
        "metadata": {"n": 3},
    }
    doc.update(extra)
    return doc


def newest_first(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reference order: time desc, then the most recently recorded first (``seq`` desc)."""
    return sorted(docs, key=lambda d: (d["time"], d["seq"]), reverse=True)


class KnowledgeBaseConformance:
    """Base class of the conformance tests; subclasses implement :meth:`open_kb`."""

    RETENTION_S = 1000.0

    def open_kb(
        self, retention_s: float | None = RETENTION_S
    ) -> contextlib.AbstractContextManager[base.KnowledgeBase]:
        raise NotImplementedError

    @pytest.fixture
    def kb(self) -> Iterator[base.KnowledgeBase]:
        with self.open_kb(self.RETENTION_S) as store:
            yield store

    # -- record_event / events ----------------------------------------------------------------

    def test_record_event_returns_distinct_string_ids(self, kb: base.KnowledgeBase) -> None:
        ids = [kb.record_event(event(time=float(t))) for t in range(5)]
        assert all(isinstance(i, str) and i for i in ids)
        assert len(set(ids)) == 5

    def test_event_round_trips_without_internal_keys(self, kb: base.KnowledgeBase) -> None:
        doc = event(time=12.5)
        kb.record_event(doc)
        (got,) = kb.events()
        assert got == doc
        assert "_id" not in got
        assert not [k for k in got if k.startswith("_")]

    def test_record_event_stores_a_copy(self, kb: base.KnowledgeBase) -> None:
        doc = event(time=1.0)
        kb.record_event(doc)
        doc["current"]["p95"] = 99.0
        doc["pod_groups"]["count"].append(2)
        doc["planner"] = "changed"
        (got,) = kb.events()
        assert got == event(time=1.0)

    def test_events_returns_copies(self, kb: base.KnowledgeBase) -> None:
        kb.record_event(event(time=1.0))
        (got,) = kb.events()
        got["current"]["p95"] = 99.0
        got["pod_groups"].clear()
        assert kb.events() == [event(time=1.0)]

    def test_internal_keys_in_the_argument_are_ignored(self, kb: base.KnowledgeBase) -> None:
        doc = event(time=1.0)
        doc["_id"] = "caller-chosen"
        kb.record_event(doc)
        kb.record_event(doc)  # would collide if the _id were used
        assert kb.count_events() == 2
        assert all("_id" not in d for d in kb.events())

    def test_events_newest_first(self, kb: base.KnowledgeBase) -> None:
        for t in [3.0, 1.0, 4.0, 1.5, 9.0, 2.0]:
            kb.record_event(event(time=t))
        assert [d["time"] for d in kb.events()] == [9.0, 4.0, 3.0, 2.0, 1.5, 1.0]

    def test_equal_times_most_recently_recorded_first(self, kb: base.KnowledgeBase) -> None:
        for seq in range(5):
            kb.record_event(event(time=7.0, seq=seq))
        assert [d["seq"] for d in kb.events()] == [4, 3, 2, 1, 0]
        pages = [kb.events(limit=2, skip=s) for s in (0, 2, 4)]
        assert [d["seq"] for page in pages for d in page] == [4, 3, 2, 1, 0]

    def test_since_inclusive_until_exclusive(self, kb: base.KnowledgeBase) -> None:
        for t in range(10):
            kb.record_event(event(time=float(t)))
        assert [d["time"] for d in kb.events(since=3.0, until=6.0)] == [5.0, 4.0, 3.0]
        assert [d["time"] for d in kb.events(since=8.0)] == [9.0, 8.0]
        assert [d["time"] for d in kb.events(until=2.0)] == [1.0, 0.0]
        assert kb.events(since=5.0, until=5.0) == []
        assert kb.events(since=20.0) == []

    def test_limit_and_skip(self, kb: base.KnowledgeBase) -> None:
        for t in range(10):
            kb.record_event(event(time=float(t)))

        def times(docs: list[base.Document]) -> list[float]:
            return [d["time"] for d in docs]

        assert times(kb.events(limit=3)) == [9.0, 8.0, 7.0]
        assert times(kb.events(limit=3, skip=3)) == [6.0, 5.0, 4.0]
        assert times(kb.events(skip=8)) == [1.0, 0.0]
        assert len(kb.events(limit=0)) == 10
        assert kb.events(skip=10) == []
        assert times(kb.events(since=2.0, until=8.0, limit=2, skip=1)) == [6.0, 5.0]

    def test_intent_filter_and_count(self, kb: base.KnowledgeBase) -> None:
        for t in range(4):
            kb.record_event(event("default/a", float(t)))
        for t in range(2):
            kb.record_event(event("prod/c", float(t) + 0.5))
        assert kb.count_events() == 6
        assert kb.count_events("default/a") == 4
        assert kb.count_events("prod/c") == 2
        assert kb.count_events("missing/x") == 0
        assert {d["intent"] for d in kb.events("prod/c")} == {"prod/c"}
        assert [d["time"] for d in kb.events("prod/c")] == [1.5, 0.5]
        assert len(kb.events()) == 6
        assert kb.events("missing/x") == []

    def test_many_intents_are_isolated(self, kb: base.KnowledgeBase) -> None:
        intents = [f"ns{i % 7}/intent-{i}" for i in range(40)]
        for i, name in enumerate(intents):
            for t in range(i % 4 + 1):
                kb.record_event(event(name, float(t), n=i))
        for i, name in enumerate(intents):
            got = kb.events(name)
            assert len(got) == kb.count_events(name) == i % 4 + 1
            assert {(d["intent"], d["n"]) for d in got} == {(name, i)}
        assert kb.count_events() == sum(i % 4 + 1 for i in range(40))

    # -- values -------------------------------------------------------------------------------

    def test_nan_and_inf_are_stored_as_none(self, kb: base.KnowledgeBase) -> None:
        kb.record_event(
            event(
                time=1.0,
                current={"p95": math.nan, "throughput": math.inf, "power": -math.inf},
                series=[1.0, math.nan, 2.0],
                load={"request_rate": np.float64("nan")},
            )
        )
        (got,) = kb.events()
        assert got["current"] == {"p95": None, "throughput": None, "power": None}
        assert got["series"] == [1.0, None, 2.0]
        assert got["load"] == {"request_rate": None}

    def test_numpy_values_become_python_values(self, kb: base.KnowledgeBase) -> None:
        kb.record_event(
            event(
                time=np.float64(2.5),
                config={"replicas": np.int64(3), "cpu": np.float32(0.5), "gpu": np.bool_(True)},
                samples=np.array([[1.0, 2.0], [3.0, np.nan]]),
                counts=(1, 2),
            )
        )
        (got,) = kb.events()
        assert got["time"] == 2.5
        assert got["config"] == {"replicas": 3, "cpu": 0.5, "gpu": True}
        assert type(got["config"]["replicas"]) is int
        assert type(got["config"]["gpu"]) is bool
        assert got["samples"] == [[1.0, 2.0], [3.0, None]]
        assert got["counts"] == [1, 2]

    def test_bytes_round_trip(self, kb: base.KnowledgeBase) -> None:
        payload = bytes(range(256)) * 3
        kb.record_event(event(time=1.0, raw=payload, nested={"b": bytearray(b"\x00\x01")}))
        (got,) = kb.events()
        assert got["raw"] == payload and type(got["raw"]) is bytes
        assert got["nested"]["b"] == b"\x00\x01" and type(got["nested"]["b"]) is bytes
        kb.put_effect(effect(blob=payload))
        found = kb.effect("default/a", "p95", now=0.0, lookback_s=10.0)
        assert found is not None
        assert found["blob"] == payload and type(found["blob"]) is bytes

    def test_unicode_keys_and_values(self, kb: base.KnowledgeBase) -> None:
        current = {"Latenz_µs": 1.5, "延迟": 2.0, "😀": 3.0, "dotted.name": 4.0}
        kb.record_event(event("ns/ïntent-ü", 1.0, current=current, note="naïve ☃"))
        (got,) = kb.events("ns/ïntent-ü")
        assert got["current"] == current
        assert got["note"] == "naïve ☃"
        assert kb.count_events("ns/ïntent-ü") == 1

    def test_invalid_documents_raise_and_store_nothing(self, kb: base.KnowledgeBase) -> None:
        bad = [
            {"intent": "default/a"},  # no time
            event(time=math.nan),  # time must be a number
            {"time": 1.0},  # no intent
            event(time=1.0, odd=object()),
            event(time=1.0, mapping={1: "int key"}),
            {**event(time=1.0), "$set": 1},
        ]
        for doc in bad:
            with pytest.raises(documents.InvalidDocument):
                kb.record_event(doc)
        with pytest.raises(documents.InvalidDocument):
            kb.put_effect({"intent": "default/a", "timestamp": 1.0})  # no objective
        assert kb.count_events() == 0
        assert kb.effects() == []

    # -- effects ------------------------------------------------------------------------------

    def test_put_effect_never_overwrites(self, kb: base.KnowledgeBase) -> None:
        ids = [kb.put_effect(effect(timestamp=float(t), blob=b"v%d" % t)) for t in range(3)]
        assert len(set(ids)) == 3 and all(isinstance(i, str) for i in ids)
        versions = kb.effects(with_blobs=True)
        assert [d["blob"] for d in versions] == [b"v2", b"v1", b"v0"]
        assert all("_id" not in d for d in versions)

    def test_put_effect_stores_a_copy(self, kb: base.KnowledgeBase) -> None:
        doc = effect(timestamp=1.0)
        kb.put_effect(doc)
        doc["metadata"]["n"] = 99
        found = kb.effect("default/a", "p95", now=1.0, lookback_s=5.0)
        assert found == effect(timestamp=1.0)
        assert found is not None
        found["metadata"]["n"] = 42
        assert kb.effect("default/a", "p95", now=1.0, lookback_s=5.0) == effect(timestamp=1.0)

    def test_effect_none_when_nothing_matches(self, kb: base.KnowledgeBase) -> None:
        assert kb.effect("default/a", "p95", now=100.0, lookback_s=10.0) is None
        kb.put_effect(effect(timestamp=10.0))
        assert kb.effect("default/a", "p95", now=100.0, lookback_s=10.0) is None  # stale
        assert kb.effect("default/a", "throughput", now=10.0, lookback_s=10.0) is None
        assert kb.effect("default/b", "p95", now=10.0, lookback_s=10.0) is None

    def test_static_beats_stale(self, kb: base.KnowledgeBase) -> None:
        kb.put_effect(effect(timestamp=0.0, static=True, blob=b"static"))
        kb.put_effect(effect(timestamp=50.0, blob=b"stale"))
        found = kb.effect("default/a", "p95", now=200.0, lookback_s=100.0)
        assert found is not None and found["blob"] == b"static"

    def test_newest_non_stale_wins(self, kb: base.KnowledgeBase) -> None:
        kb.put_effect(effect(timestamp=0.0, static=True, blob=b"static"))
        kb.put_effect(effect(timestamp=150.0, blob=b"older"))
        kb.put_effect(effect(timestamp=180.0, blob=b"newest"))
        kb.put_effect(effect(timestamp=170.0, blob=b"stored-last-but-older"))
        found = kb.effect("default/a", "p95", now=200.0, lookback_s=100.0)
        assert found is not None and found["blob"] == b"newest"
        kb.put_effect(effect(timestamp=190.0, static=True, blob=b"newer-static"))
        found = kb.effect("default/a", "p95", now=200.0, lookback_s=100.0)
        assert found is not None and found["blob"] == b"newer-static"

    def test_lookback_boundary_is_inclusive(self, kb: base.KnowledgeBase) -> None:
        kb.put_effect(effect(timestamp=100.0, blob=b"edge"))
        at_edge = kb.effect("default/a", "p95", now=200.0, lookback_s=100.0)
        assert at_edge is not None and at_edge["blob"] == b"edge"
        assert kb.effect("default/a", "p95", now=200.001, lookback_s=100.0) is None

    def test_a_model_from_the_future_is_not_served(self, kb: base.KnowledgeBase) -> None:
        kb.put_effect(effect(timestamp=100.0, blob=b"then"))
        kb.put_effect(effect(timestamp=160.0, blob=b"later"))
        then = kb.effect("default/a", "p95", now=150.0, lookback_s=100.0)
        assert then is not None and then["blob"] == b"then"  # the same answer as at 150 s

    def test_equal_timestamps_last_stored_wins(self, kb: base.KnowledgeBase) -> None:
        for i in range(3):
            kb.put_effect(effect(timestamp=5.0, blob=b"%d" % i))
        found = kb.effect("default/a", "p95", now=5.0, lookback_s=1.0)
        assert found is not None and found["blob"] == b"2"

    def test_effects_strip_blobs_unless_asked(self, kb: base.KnowledgeBase) -> None:
        kb.put_effect(effect("default/a", "p95", 1.0, blob=b"a"))
        kb.put_effect(effect("default/b", "p95", 2.0, blob=None))
        kb.put_effect(effect("default/a", "throughput", 3.0, blob=b"c"))
        listed = kb.effects()
        assert [(d["intent"], d["objective"]) for d in listed] == [
            ("default/a", "throughput"),
            ("default/b", "p95"),
            ("default/a", "p95"),
        ]
        assert all("blob" not in d for d in listed)
        assert listed[0]["metadata"] == {"n": 3} and listed[0]["kind"] == "gp"
        full = kb.effects(with_blobs=True)
        assert [d["blob"] for d in full] == [b"c", None, b"a"]
        assert [d["timestamp"] for d in kb.effects("default/a")] == [3.0, 1.0]
        assert kb.effects("missing/x") == []

    # -- statuses -----------------------------------------------------------------------------

    def test_statuses_upsert_last_call_wins(self, kb: base.KnowledgeBase) -> None:
        assert kb.statuses() == {}
        kb.put_status("default/a", 1.0, {"phase": "planning"})
        kb.put_status("default/b", 1.0, {"phase": "idle"})
        kb.put_status("default/a", 2.0, {"phase": "acting", "nan": math.nan})
        got = kb.statuses()
        assert got == {
            "default/a": {
                "intent": "default/a",
                "time": 2.0,
                "status": {"phase": "acting", "nan": None},
            },
            "default/b": {"intent": "default/b", "time": 1.0, "status": {"phase": "idle"}},
        }
        got["default/a"]["status"]["phase"] = "mutated"
        assert kb.statuses()["default/a"]["status"]["phase"] == "acting"

    def test_put_status_stores_a_copy(self, kb: base.KnowledgeBase) -> None:
        status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True"}]}
        kb.put_status("default/a", 1.0, status)
        status["conditions"].append({"type": "Degraded"})
        assert kb.statuses()["default/a"]["status"] == {
            "conditions": [{"type": "Ready", "status": "True"}]
        }

    # -- memory -------------------------------------------------------------------------------

    def test_memory_upsert_last_call_wins(self, kb: base.KnowledgeBase) -> None:
        assert kb.memory("default/a") is None
        kb.put_memory("default/a", {"planner": "p", "planning": {"alarm": 0.5}})
        kb.put_memory("default/b", {"planner": "q", "planning": {}})
        mem: dict[str, Any] = {"planner": "p", "planning": {"alarm": 0.25, "x": math.inf},
                               "actuators": {"cpu": {"last_change": 30.0}}}
        kb.put_memory("default/a", mem)
        mem["planning"]["alarm"] = 9.0
        got = kb.memory("default/a")
        assert got == {"intent": "default/a", "planner": "p",
                       "planning": {"alarm": 0.25, "x": None},
                       "actuators": {"cpu": {"last_change": 30.0}}}
        got["planning"]["alarm"] = 7.0
        stored = kb.memory("default/a")
        assert stored is not None and stored["planning"]["alarm"] == 0.25
        assert kb.memory("default/b") == {"intent": "default/b", "planner": "q", "planning": {}}

    # -- pod details --------------------------------------------------------------------------

    def test_pods_and_nodes_are_kept_apart(self, kb: base.KnowledgeBase) -> None:
        pods = {"name": ["p-1", "p-2"], "node": ["n-1", None]}
        nodes = {"name": ["n-1"], "pool": ["eu"]}
        kb.record_event(event(time=3.0, pods=pods, nodes=nodes))
        kb.record_event(event(time=4.0, pods=pods))
        kb.record_event(event(time=5.0, pod_detail=True))  # a copied mark, no detail with it
        assert kb.events() == [event(time=5.0), event(time=4.0, pod_detail=True),
                               event(time=3.0, pod_detail=True)]
        detail = {"intent": "default/a", "workload": "default/a", "pods": pods}
        assert kb.pod_details() == [{"time": 4.0, **detail},
                                    {"time": 3.0, **detail, "nodes": nodes}]
        assert kb.pod_details("default/b") == []
        assert kb.count_events() == 3

    def test_pod_details_are_copies(self, kb: base.KnowledgeBase) -> None:
        doc = event(time=1.0, pods={"name": ["p-1"]})
        kb.record_event(doc)
        doc["pods"]["name"].append("p-2")
        (got,) = kb.pod_details()
        got["pods"]["name"].clear()
        assert kb.pod_details()[0]["pods"] == {"name": ["p-1"]}

    def test_pod_details_leave_with_their_events(self, kb: base.KnowledgeBase) -> None:
        r = self.RETENTION_S
        now = 10 * r
        for t in (now - 2 * r, now - r, now):
            kb.record_event(event(time=t, pods={"name": [f"p-{t:g}"]}))
        assert kb.apply_retention(now) == 1
        assert [d["time"] for d in kb.pod_details()] == [now, now - r]

    def test_pod_details_sent_twice_are_stored_once(self, kb: base.KnowledgeBase) -> None:
        docs = [event(time=float(t), seq=t, pods={"name": [f"p-{t}"]}) for t in range(3)]
        ids = [kb.new_event_id() for _ in docs]
        kb.record_events(docs[:1], ids[:1])
        kb.record_events(docs, ids)
        assert kb.flush()
        assert [d["pods"]["name"] for d in kb.pod_details()] == [["p-2"], ["p-1"], ["p-0"]]
        assert [d["time"] for d in kb.pod_details(limit=1, skip=1)] == [1.0]

    # -- retention ----------------------------------------------------------------------------

    def test_retention_deletes_only_old_events(self, kb: base.KnowledgeBase) -> None:
        r = self.RETENTION_S
        now = 10 * r
        for intent in ("default/a", "prod/c"):
            for t in (now - 2 * r, now - r - 1.0, now - r, now - r / 2, now):
                kb.record_event(event(intent, t))
        kb.put_effect(effect(timestamp=0.0))
        kb.put_status("default/a", 0.0, {"phase": "old"})
        assert kb.apply_retention(now) == 4
        remaining = sorted({d["time"] for d in kb.events()})
        assert remaining == [now - r, now - r / 2, now]  # the boundary itself is kept
        assert kb.count_events() == 6
        assert kb.apply_retention(now) == 0
        assert len(kb.effects()) == 1
        assert "default/a" in kb.statuses()

    def test_no_retention_keeps_everything(self) -> None:
        with self.open_kb(None) as kb:
            kb.record_event(event(time=0.0))
            assert kb.apply_retention(1e12) == 0
            assert kb.count_events() == 1

    # -- batches ------------------------------------------------------------------------------

    def test_record_events_returns_ids_and_keeps_the_order(self, kb: base.KnowledgeBase) -> None:
        kb.record_event(event(time=5.0, seq=0))
        ids = kb.record_events([event(time=5.0, seq=1), event(time=5.0, seq=2)])
        kb.record_event(event(time=5.0, seq=3))
        assert len(ids) == 2 and all(isinstance(i, str) and i for i in ids)
        assert len(set(ids)) == 2
        assert kb.flush()
        assert [d["seq"] for d in kb.events()] == [3, 2, 1, 0]
        assert kb.record_events([]) == []

    def test_record_events_stores_copies(self, kb: base.KnowledgeBase) -> None:
        docs = [event(time=1.0), event("default/b", time=2.0)]
        kb.record_events(docs)
        docs[0]["current"]["p95"] = 99.0
        assert kb.events() == [event("default/b", time=2.0), event(time=1.0)]

    def test_record_events_with_ids_sent_twice_stores_each_once(
        self, kb: base.KnowledgeBase
    ) -> None:
        docs = [event(time=float(t), seq=t) for t in range(4)]
        ids = [kb.new_event_id() for _ in docs]
        assert ids == sorted(ids) and len(set(ids)) == 4
        kb.record_events(docs[:2], ids[:2])   # as if the first half arrived before a failure
        kb.record_events(docs, ids)           # and the whole batch was sent again
        assert kb.flush()
        assert [d["seq"] for d in kb.events()] == [3, 2, 1, 0]

    def test_record_events_refuses_a_bad_batch_whole(self, kb: base.KnowledgeBase) -> None:
        with pytest.raises(documents.InvalidDocument, match=r"events\[1\]\.time"):
            kb.record_events([event(time=1.0), {"intent": "default/a"}])
        with pytest.raises(ValueError, match="ids"):
            kb.record_events([event(time=1.0)], [])
        assert kb.count_events() == 0

    def test_put_statuses_last_wins(self, kb: base.KnowledgeBase) -> None:
        kb.put_status("default/a", 1.0, {"phase": "old"})
        status: dict[str, Any] = {"phase": "b", "nan": math.nan}
        kb.put_statuses([("default/a", 2.0, {"phase": "a1"}), ("default/b", 2.0, status),
                         ("default/a", 3.0, {"phase": "a2"})])
        status["phase"] = "mutated"
        assert kb.statuses() == {
            "default/a": {"intent": "default/a", "time": 3.0, "status": {"phase": "a2"}},
            "default/b": {"intent": "default/b", "time": 2.0,
                          "status": {"phase": "b", "nan": None}},
        }
        kb.put_statuses([])
        with pytest.raises(documents.InvalidDocument, match=r"statuses\[1\]\.time"):
            kb.put_statuses([("default/c", 1.0, {}), ("default/c", math.nan, {})])
        assert "default/c" not in kb.statuses()

    def test_put_memories_last_wins(self, kb: base.KnowledgeBase) -> None:
        kb.put_memory("default/a", {"planner": "old"})
        mem: dict[str, Any] = {"planner": "q", "planning": {"alarm": 0.5}}
        kb.put_memories([("default/a", {"planner": "p1"}), ("default/b", mem),
                         ("default/a", {"planner": "p2"})])
        mem["planning"]["alarm"] = 9.0
        assert kb.memory("default/a") == {"intent": "default/a", "planner": "p2"}
        assert kb.memory("default/b") == {"intent": "default/b", "planner": "q",
                                          "planning": {"alarm": 0.5}}
        kb.put_memories([])
        with pytest.raises(documents.InvalidDocument, match=r"memories\[0\]"):
            kb.put_memories([("default/c", 5)])  # type: ignore[list-item]
        assert kb.memory("default/c") is None

    def test_flush_leaves_nothing(self, kb: base.KnowledgeBase) -> None:
        kb.record_event(event(time=1.0))
        kb.put_status("default/a", 1.0, {"phase": "x"})
        kb.put_memory("default/a", {"planner": "p"})
        assert kb.flush()
        assert kb.flush(wait=False) or kb.flush()
        assert kb.count_events() == 1

    @HYPOTHESIS
    @given(chunks=st.lists(st.lists(st.tuples(st.sampled_from(INTENTS),
                                              st.integers(0, 6).map(float)), max_size=6),
                           max_size=6),
           singles=st.lists(st.booleans(), max_size=6))
    def test_batches_match_reference_model(
        self, chunks: list[list[tuple[str, float]]], singles: list[bool]
    ) -> None:
        """Batches and single events mixed: the same order and contents as one by one."""
        with self.open_kb(self.RETENTION_S) as kb:
            model: list[dict[str, Any]] = []
            for i, chunk in enumerate(chunks):
                docs = [{"intent": name, "time": t, "seq": len(model) + j}
                        for j, (name, t) in enumerate(chunk)]
                if i < len(singles) and singles[i]:
                    for doc in docs:
                        kb.record_event(doc)
                else:
                    kb.record_events(docs)
                model.extend(docs)
            assert kb.events() == newest_first(model)
            for intent in INTENTS:
                assert kb.events(intent, limit=3) == newest_first(
                    [d for d in model if d["intent"] == intent])[:3]

    # -- reference-model properties ------------------------------------------------------------

    @HYPOTHESIS
    @given(
        recorded=st.lists(
            st.tuples(st.sampled_from(INTENTS), st.integers(0, 12).map(float)), max_size=25
        ),
        queries=st.lists(
            st.tuples(
                st.none() | st.sampled_from(INTENTS),
                st.none() | st.integers(0, 13).map(float),
                st.none() | st.integers(0, 13).map(float),
                st.integers(0, 6),
                st.integers(0, 6),
            ),
            min_size=1,
            max_size=6,
        ),
    )
    def test_events_match_reference_model(
        self,
        recorded: list[tuple[str, float]],
        queries: list[tuple[str | None, float | None, float | None, int, int]],
    ) -> None:
        """Every third event carries pods: ``events`` and ``pod_details`` both select and
        order as the reference does."""
        with self.open_kb(self.RETENTION_S) as kb:
            model: list[dict[str, Any]] = []
            details: list[dict[str, Any]] = []
            for seq, (name, t) in enumerate(recorded):
                doc: dict[str, Any] = {"intent": name, "time": t, "seq": seq}
                if seq % 3 == 0:
                    kb.record_event({**doc, "pods": {"seq": [seq]}})
                    doc["pod_detail"] = True
                    details.append({"intent": name, "time": t, "seq": seq,
                                    "pods": {"seq": [seq]}})
                else:
                    kb.record_event(doc)
                model.append(doc)
            for intent, since, until, limit, skip in queries:
                for got, docs in ((kb.events(intent, since, until, limit, skip), model),
                                  (kb.pod_details(intent, since, until, limit, skip),
                                   details)):
                    expected = newest_first(
                        [
                            d
                            for d in docs
                            if (intent is None or d["intent"] == intent)
                            and (since is None or d["time"] >= since)
                            and (until is None or d["time"] < until)
                        ]
                    )[skip:]
                    if limit:
                        expected = expected[:limit]
                    assert [{k: v for k, v in d.items() if k != "seq"} for d in got] == [
                        {k: v for k, v in d.items() if k != "seq"} for d in expected]
            for intent in INTENTS:
                assert kb.count_events(intent) == sum(d["intent"] == intent for d in model)

    @HYPOTHESIS
    @given(
        versions=st.lists(
            st.tuples(st.sampled_from(["p95", "cost"]), st.integers(0, 20), st.booleans()),
            max_size=12,
        ),
        now=st.integers(0, 30),
        lookback=st.integers(0, 15),
    )
    def test_effect_matches_reference_model(
        self, versions: list[tuple[str, int, bool]], now: int, lookback: int
    ) -> None:
        with self.open_kb(self.RETENTION_S) as kb:
            for seq, (objective, ts, static) in enumerate(versions):
                kb.put_effect(
                    effect(
                        objective=objective, timestamp=float(ts), static=static, blob=b"%d" % seq
                    )
                )
            for objective in ("p95", "cost"):
                candidates = [
                    (ts, seq)
                    for seq, (o, ts, static) in enumerate(versions)
                    if o == objective and (static or now - lookback <= ts <= now)
                ]
                found = kb.effect("default/a", objective, float(now), float(lookback))
                if not candidates:
                    assert found is None
                else:
                    assert found is not None
                    assert found["blob"] == b"%d" % max(candidates)[1]

    @HYPOTHESIS
    @given(
        payload=st.dictionaries(
            st.text(max_size=8).filter(lambda k: "\x00" not in k and not k.startswith("$")),
            st.recursive(
                st.none()
                | st.booleans()
                | st.integers(-(2**70), 2**70)
                | st.floats(allow_nan=True, allow_infinity=True)
                | st.text(max_size=10)
                | st.binary(max_size=10),
                lambda inner: (
                    st.lists(inner, max_size=4)
                    | st.dictionaries(
                        st.text(max_size=5).filter(lambda k: "\x00" not in k), inner, max_size=4
                    )
                ),
                max_leaves=12,
            ),
            max_size=5,
        )
    )
    def test_values_round_trip_as_plain_data(self, payload: dict[str, Any]) -> None:
        with self.open_kb(self.RETENTION_S) as kb:
            kb.record_event({"intent": "default/a", "time": 1.0, "payload": payload})
            (got,) = kb.events()
            assert got["payload"] == plain(payload)


def plain(value: Any) -> Any:
    """Reference model of :func:`knowledge.documents.sanitize` for builtin values."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
