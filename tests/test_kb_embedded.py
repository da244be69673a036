"""The indexed in-process store (``--kb memory``): the conformance suite, reads that do not
grow with what other intents stored, and a bound on memory that counts what it drops."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import mongomock
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge import base, embedded, mongo

try:
    import kb_conformance
except ImportError:  # tests/ is a package
    from tests import kb_conformance  # type: ignore[no-redef]


class TestEmbeddedKnowledgeBase(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(
        self, retention_s: float | None = kb_conformance.KnowledgeBaseConformance.RETENTION_S
    ) -> Iterator[base.KnowledgeBase]:
        kb = embedded.EmbeddedKnowledgeBase(retention_s=retention_s)
        try:
            yield kb
        finally:
            kb.close()


queries = st.tuples(st.sampled_from([None, "a", "b", "c"]),
                    st.one_of(st.none(), st.integers(0, 20).map(float)),
                    st.one_of(st.none(), st.integers(0, 20).map(float)),
                    st.integers(0, 6), st.integers(0, 4))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 20)), max_size=40),
       st.lists(queries, min_size=1, max_size=6), st.one_of(st.none(), st.integers(0, 25)))
def test_events_answer_as_the_pymongo_store_does(
        writes: list[tuple[str, int]],
        asks: list[tuple[str | None, float | None, float | None, int, int]],
        retention_at: int | None) -> None:
    """Any sequence of events (out of time order, equal times) and queries: the same answers,
    in the same order, as the pymongo store over mongomock; retention deletes the same."""
    ours = embedded.EmbeddedKnowledgeBase(retention_s=5.0)
    theirs = mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=5.0, ttl_index=False)
    for i, (intent, t) in enumerate(writes):
        for kb in (ours, theirs):
            kb.record_event({"intent": intent, "time": float(t), "n": i})
    if retention_at is not None:
        assert ours.apply_retention(float(retention_at)) == theirs.apply_retention(
            float(retention_at))
    for intent, since, until, limit, skip in asks:
        assert ours.events(intent, since, until, limit, skip) == theirs.events(
            intent, since, until, limit, skip)
        assert ours.count_events(intent) == theirs.count_events(intent)


def test_the_oldest_events_past_the_bound_are_dropped_and_counted() -> None:
    kb = embedded.EmbeddedKnowledgeBase(max_events_per_intent=3)
    for t in range(5):
        kb.record_event({"intent": "a", "time": float(t)})
    kb.record_event({"intent": "b", "time": 0.0})
    assert [e["time"] for e in kb.events("a")] == [4.0, 3.0, 2.0]
    assert kb.count_events("b") == 1 and kb.lost() == {"events": 2}


def test_effect_versions_past_the_bound_are_dropped_oldest_trained_first() -> None:
    """Every fit stores a version; kept forever they grew without bound over a long run
    (issue 13). Past the bound the oldest trained one goes (counted); static ones stay and
    the newest is what ``effect`` returns, as before."""
    kb = embedded.EmbeddedKnowledgeBase(max_effects_per_objective=3)
    kb.put_effect(kb_conformance.effect(timestamp=0.0, static=True))
    for t in range(1, 6):
        kb.put_effect(kb_conformance.effect(timestamp=float(t)))
    kb.put_effect(kb_conformance.effect(intent="default/b", timestamp=1.0))
    assert [e["timestamp"] for e in kb.effects("default/a")] == [5.0, 4.0, 0.0]
    assert kb.effect("default/a", "p95", 5.0, 10.0)["timestamp"] == 5.0  # type: ignore[index]
    assert kb.effect("default/a", "p95", 100.0, 1.0)["timestamp"] == 0.0  # type: ignore[index]
    assert len(kb.effects("default/b")) == 1 and kb.lost() == {"effects": 3}


def test_effect_versions_stay_bounded_by_default() -> None:
    kb = embedded.EmbeddedKnowledgeBase()
    for t in range(3 * embedded.DEFAULT_MAX_EFFECTS_PER_OBJECTIVE):
        kb.put_effect(kb_conformance.effect(timestamp=float(t)))
    assert len(kb.effects()) == embedded.DEFAULT_MAX_EFFECTS_PER_OBJECTIVE
    assert kb.effects()[0]["timestamp"] == 3 * embedded.DEFAULT_MAX_EFFECTS_PER_OBJECTIVE - 1


@settings(max_examples=120, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("record"), st.sampled_from(["a", "b", "c"]), st.integers(0, 50),
              st.integers(0, 400)),
    st.tuples(st.just("retention"), st.integers(0, 80))), max_size=40),
    st.integers(300, 4000))
def test_events_past_the_byte_bound_are_dropped_oldest_first_of_any_intent(
        ops: list[tuple], budget: int) -> None:
    """Whatever is recorded (in or out of time order) and cut by retention: the stored events
    never exceed ``max_event_bytes`` (their BSON, as counted), the ones the bound dropped are
    older (time, then arrival) than every one kept, and each is counted in ``lost()``."""
    kb = embedded.EmbeddedKnowledgeBase(retention_s=30.0, max_event_bytes=budget)
    recorded: dict[int, tuple[float, int]] = {}
    evicted = 0
    for op in ops:
        before = {e["n"] for e in kb.events()}
        if op[0] == "record":
            _, intent, t, pad = op
            n = len(recorded)
            recorded[n] = (float(t), n)
            kb.record_event({"intent": intent, "time": float(t), "n": n, "pad": "x" * pad})
            before.add(n)
        else:
            kb.apply_retention(float(op[1]))
            before = {n for n in before if recorded[n][0] >= op[1] - 30.0}
        kept = kb.events()
        assert kb.event_bytes() == sum(len(embedded._encode(e)) for e in kept) <= budget
        kept_n = {e["n"] for e in kept}
        dropped = before - kept_n               # by the bound, in this step
        evicted += len(dropped)
        assert kb.lost().get("events", 0) == evicted
        if dropped and kept_n:
            assert max(recorded[n] for n in dropped) < min(recorded[n] for n in kept_n)


def test_the_byte_bound_is_on_by_default_and_can_be_lifted() -> None:
    assert embedded.EmbeddedKnowledgeBase().max_event_bytes == embedded.DEFAULT_MAX_EVENT_BYTES
    kb = embedded.EmbeddedKnowledgeBase(max_event_bytes=None)
    for i in range(50):
        kb.record_event({"intent": "a", "time": float(i), "pad": "x" * 1000})
    assert kb.count_events() == 50 and kb.lost() == {} and kb.event_bytes() > 50_000


def test_pod_details_count_towards_the_byte_bound_and_leave_with_their_events() -> None:
    kb = embedded.EmbeddedKnowledgeBase(max_event_bytes=20_000)
    big = {"name": [f"pod-{i:04d}" for i in range(400)]}          # about 6 KiB of BSON
    for t in range(10):
        kb.record_event(kb_conformance.event(time=float(t), pods=big if t % 2 else None))
    kept = [e["time"] for e in kb.events()]
    assert kb.event_bytes() <= 20_000 and len(kept) < 10
    assert kept == sorted(kept, reverse=True) and kept[0] == 9.0
    details = [d["time"] for d in kb.pod_details()]
    assert details == [t for t in kept if t % 2]
    assert kb.lost()["events"] == 10 - len(kept)
