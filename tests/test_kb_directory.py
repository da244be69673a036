"""The persistent embedded knowledge base (``--kb ./DIRECTORY``, :mod:`knowledge.directory`):
the conformance suite, survival of a crash at any point (a copy of the directory taken while the
store is open is what ``kill -9`` leaves behind), a torn last record, one process per directory,
the mongodump layout, and ``kill -9`` of a real ``intent-planner run``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bson
import mongomock
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge import base, connect, directory, mongo
from planner.domain.errors import SpecError
from simulator.runner import RESUME_GAP_S, resumed_start

try:
    import kb_conformance
except ImportError:  # tests/ is a package
    from tests import kb_conformance  # type: ignore[no-redef]

DB = mongo.DEFAULT_DATABASE


class TestDirectoryStore(kb_conformance.KnowledgeBaseConformance):
    @contextlib.contextmanager
    def open_kb(
        self, retention_s: float | None = kb_conformance.KnowledgeBaseConformance.RETENTION_S
    ) -> Iterator[base.KnowledgeBase]:
        with tempfile.TemporaryDirectory() as tmp:
            kb = connect.open_knowledge_base(str(Path(tmp) / "kb"), retention_s=retention_s)
            try:
                yield kb
            finally:
                kb.close()


# -- a crash at any point ---------------------------------------------------------------------

def _state(kb: base.KnowledgeBase) -> dict[str, Any]:
    return {"events": kb.events(), "effects": kb.effects(with_blobs=True),
            "statuses": kb.statuses(), "memory": {i: kb.memory(i)
                                                  for i in kb_conformance.INTENTS}}


def _apply(kb: base.KnowledgeBase, op: tuple[Any, ...]) -> None:
    kind, intent, t = op[0], kb_conformance.INTENTS[op[1]], float(op[2])
    if kind == "event":
        kb.record_event(kb_conformance.event(intent, t, pods=[{"name": "p"}] * op[3]))
    elif kind == "effect":
        kb.put_effect(kb_conformance.effect(intent, timestamp=t, blob=bytes(op[3])))
    elif kind == "status":
        kb.put_status(intent, t, {"phase": f"p{op[3]}"})
    elif kind == "memory":
        kb.put_memory(intent, {"planner": {"n": op[3]}})
    else:
        kb.apply_retention(t)


OPS = st.lists(st.tuples(st.sampled_from(["event", "effect", "status", "memory", "retention"]),
                         st.integers(0, len(kb_conformance.INTENTS) - 1),
                         st.integers(0, 3000), st.integers(0, 40)), max_size=30)


@settings(max_examples=15, deadline=None)
@given(ops=OPS, crash_at=st.integers(0, 30), fold_bytes=st.sampled_from([600, 1 << 30]))
def test_a_crash_at_any_point_keeps_every_write_before_it(
        ops: list[tuple[Any, ...]], crash_at: int, fold_bytes: int) -> None:
    """The directory copied while the store is open (what ``kill -9`` leaves: every write is
    flushed before it returns), reopened, holds exactly what a never-stopped store held at that
    point, also when journals were folded into snapshots on the way (``fold_bytes`` small)."""
    original = directory.MIN_FOLD_BYTES
    directory.MIN_FOLD_BYTES = fold_bytes
    try:
        with tempfile.TemporaryDirectory() as tmp:
            live = connect.open_knowledge_base(str(Path(tmp) / "kb"), retention_s=1000.0)
            reference = mongo.MongoKnowledgeBase(mongomock.MongoClient(), retention_s=1000.0)
            for i, op in enumerate(ops):
                if i == crash_at:
                    break
                _apply(live, op)
                _apply(reference, op)
            shutil.copytree(Path(tmp) / "kb", Path(tmp) / "after-crash", symlinks=True)
            live.close()
            reopened = connect.open_knowledge_base(str(Path(tmp) / "after-crash"),
                                                   retention_s=1000.0)
            try:
                assert _state(reopened) == _state(reference)
            finally:
                reopened.close()
    finally:
        directory.MIN_FOLD_BYTES = original


def test_a_torn_last_record_is_cut_off_and_the_rest_kept(tmp_path: Path) -> None:
    kb = connect.open_knowledge_base(str(tmp_path / "kb"))
    for t in range(3):
        kb.record_event(kb_conformance.event(time=float(t)))
    shutil.copytree(tmp_path / "kb", tmp_path / "crashed", symlinks=True)
    kb.close()
    journal = tmp_path / "crashed" / "journal-0.bson"
    whole = journal.stat().st_size
    record = bson.encode({"c": f"{DB}.events", "m": "insert_one", "a": [{"time": 9.0}], "k": {}})
    with journal.open("ab") as f:                 # the process died inside this write
        f.write(record[: len(record) // 2])
    again = connect.open_knowledge_base(str(tmp_path / "crashed"))
    try:
        assert [e["time"] for e in again.events()] == [2.0, 1.0, 0.0]
    finally:
        again.close()
    assert not (tmp_path / "crashed" / "journal-0.bson").exists()   # folded on close
    assert whole > 0


def test_a_second_process_is_refused_with_the_field_and_the_fix(tmp_path: Path) -> None:
    kb = connect.open_knowledge_base(str(tmp_path / "kb"))
    try:
        with pytest.raises(SpecError) as err:
            connect.open_knowledge_base(str(tmp_path / "kb"))
        assert err.value.field == "--kb" and "another process" in err.value.problem
        assert "mongodb://" in err.value.fix
    finally:
        kb.close()
    connect.open_knowledge_base(str(tmp_path / "kb")).close()   # free again after close


@pytest.mark.parametrize(("value", "expected"), [
    ("./kb", Path("kb")), ("/var/lib/ip", Path("/var/lib/ip")), ("file:///srv/kb", Path("/srv/kb")),
    ("memory", None), ("mongodb://h/db", None), ("kb", None)])
def test_which_values_name_a_directory(value: str, expected: Path | None) -> None:
    assert connect.directory_of(value) == expected


def test_a_bare_word_is_refused_naming_the_directory_form() -> None:
    with pytest.raises(SpecError) as err:
        connect.open_knowledge_base("kb")
    assert err.value.field == "--kb" and "./DIRECTORY" in err.value.fix


def test_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kb").write_text("not a directory")
    with pytest.raises(SpecError, match="not a directory"):
        connect.open_knowledge_base(str(tmp_path / "kb"))


def test_the_snapshot_is_laid_out_as_mongodump_writes_it(tmp_path: Path) -> None:
    kb = connect.open_knowledge_base(str(tmp_path / "kb"))
    kb.record_event(kb_conformance.event(time=5.0))
    kb.put_effect(kb_conformance.effect(timestamp=4.0))
    kb.put_status("default/a", 5.0, {"phase": "ok"})
    kb.close()
    dump = tmp_path / "kb" / "dump" / DB
    with (dump / "events.bson").open("rb") as f:
        (doc,) = list(bson.decode_file_iter(f))
    assert doc["time"] == 5.0 and isinstance(doc["_id"], bson.ObjectId)
    meta = json.loads((dump / "events.metadata.json").read_text())
    indexes = {i["name"]: i for i in meta["indexes"]}
    assert indexes[mongo.INDEX_EVENTS_INTENT_TIME]["key"] == {"intent": 1, "time": -1, "_id": -1}
    assert mongo.INDEX_EVENTS_TTL not in indexes   # made by prepare() on the server it moves to
    status_meta = json.loads((dump / "status.metadata.json").read_text())
    assert any(i.get("unique") for i in status_meta["indexes"])
    assert sorted(p.name for p in dump.glob("*.bson")) == [
        "effects.bson", "events.bson", "memory.bson", "pod_details.bson", "status.bson"]


@pytest.mark.skipif(not os.environ.get("INTENT_PLANNER_TEST_MONGODB_URI"),
                    reason="needs INTENT_PLANNER_TEST_MONGODB_URI (a MongoDB server)")
def test_a_snapshot_restored_into_mongodb_reads_the_same(tmp_path: Path) -> None:
    """What ``mongorestore --dir kb/dump`` does (insert each collection's documents), read back
    through the MongoDB knowledge base."""
    kb = connect.open_knowledge_base(str(tmp_path / "kb"))
    for t in range(3):
        kb.record_event(kb_conformance.event(time=float(t)))
    kb.put_memory("default/a", {"planner": {"n": 1}})
    want = _state(kb)
    kb.close()
    name = f"ip_restore_{os.getpid()}"
    server = connect.open_knowledge_base(os.environ["INTENT_PLANNER_TEST_MONGODB_URI"],
                                         database=name)
    assert isinstance(server, mongo.MongoKnowledgeBase)
    try:
        for file in (tmp_path / "kb" / "dump" / DB).glob("*.bson"):
            with file.open("rb") as f:
                docs = list(bson.decode_file_iter(f))
            if docs:
                server.client[name][file.stem].insert_many(docs)
        assert _state(server) == want
    finally:
        server.drop()
        server.close()


def test_a_later_run_resumes_the_clock_after_what_the_store_holds(tmp_path: Path) -> None:
    kb = connect.open_knowledge_base(str(tmp_path / "kb"))
    try:
        assert resumed_start(kb, 100.0) == 100.0
        kb.record_event(kb_conformance.event(time=5000.0))
        assert resumed_start(kb, 100.0) == 5000.0 + RESUME_GAP_S
        assert resumed_start(kb, 9000.0) == 9000.0
    finally:
        kb.close()


# -- kill -9 of a real run --------------------------------------------------------------------

def _journal_collections(root: Path) -> set[str]:
    """Collections the journal has writes for (read from a copy: the run is still writing)."""
    found: set[str] = set()
    for journal in root.glob("journal-*.bson"):
        copy = root.parent / "journal-copy.bson"
        shutil.copyfile(journal, copy)
        found |= {str(r["c"]) for r in directory.read_documents(copy, repair=True)}
    if (root / "dump").is_symlink():
        found |= {f"{DB}.{p.stem}" for p in (root / "dump" / DB).glob("*.bson")
                  if p.stat().st_size > 0}
    return found


def _dump_events(root: Path) -> list[dict[str, Any]]:
    with (root / "dump" / DB / "events.bson").open("rb") as f:
        return list(bson.decode_file_iter(f))


@pytest.mark.slow
def test_kill_9_during_run_keeps_events_models_and_planner_memory(tmp_path: Path) -> None:
    """A clean ``run`` leaves a complete snapshot (the journal folded in); a second ``run`` on
    the same directory, killed with SIGKILL once it trained a model, loses nothing of it."""
    root = tmp_path / "kb"
    subprocess.run([sys.executable, "-m", "planner.cli", "run", "--kb", str(root), "--speed",
                    "1000000", "--duration", "2m", "--no-live"], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    assert (root / "dump").is_symlink()
    assert [p.stat().st_size for p in root.glob("journal-*.bson")] == [0]
    first = {str(d["time"]) for d in _dump_events(root)}
    assert first
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", "--kb", str(root), "--speed", "1000000",
         # A week of simulated time takes minutes on any machine: the run is still going when
         # it is killed (a 6 h run finished in 13 s on a fast machine, before the check saw it).
         "--duration", "7d", "--no-live"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    want = {f"{DB}.events", f"{DB}.effects", f"{DB}.memory"}
    try:
        deadline = time.monotonic() + 90
        while not want <= _journal_collections(root) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.5)
        assert want <= _journal_collections(root), "no model was trained within 90 s"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    kb = connect.open_knowledge_base(str(root))
    try:
        assert kb.count_events() > len(first)
        assert first <= {str(e["time"]) for e in kb.events()}
        assert {e["objective"] for e in kb.effects()} >= {"p95latency"}
        assert kb.memory("shop/checkout") is not None
    finally:
        kb.close()
