"""A persistent embedded store: the knowledge base in a directory, no server needed.

``--kb ./kb`` (any value with a path separator, or ``file:///abs/path``) opens one. The
documents live in an in-process mongomock database, so the knowledge-base code is the same
pymongo code that runs against MongoDB; every write is also appended to a journal, and the
journal is folded into a snapshot the ``mongodump`` way. The directory holds::

    kb/
      dump -> dump-7/           the newest complete snapshot (a symlink: the commit point)
      dump-7/<database>/<collection>.bson            documents, concatenated BSON
      dump-7/<database>/<collection>.metadata.json   indexes, in mongodump's layout
      journal-7.bson            writes since that snapshot, one BSON document each
      lock                      held while a process has the store open

``mongorestore --dir kb/dump`` loads the snapshot into a MongoDB server; after a clean stop the
snapshot holds everything (closing folds the journal in), after a crash opening the directory
once does. A write reaches the journal before it returns (flushed to the operating system), so
``kill -9`` loses nothing that was written; a torn last record (the process died inside a write)
is cut off when the directory is next opened. The journal is folded into a new snapshot when
it outgrows the snapshot (amortised constant cost per write): a new ``dump-N+1`` is written,
then the ``dump`` symlink is swapped atomically, then the old snapshot and journal are removed,
so a crash at any point leaves one consistent snapshot plus its journal.

One process at a time: a second one gets a clear error (share a knowledge base through MongoDB,
``docker compose up``). Index definitions are not journaled: the knowledge base creates them
when it opens the store (:meth:`knowledge.mongo.MongoKnowledgeBase.prepare`), and snapshots
record them for ``mongorestore``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import bson
import mongomock
import pymongo.errors
from bson.codec_options import CodecOptions

SNAPSHOT_LINK = "dump"
LOCK_FILE = "lock"
MIN_FOLD_BYTES = 4 << 20
"""The journal is folded into a snapshot once it is larger than this and than the snapshot."""
JOURNALED = frozenset({"insert_one", "insert_many", "replace_one", "update_one", "update_many",
                       "delete_one", "delete_many", "drop"})
"""Collection writes that are journaled (what the knowledge base uses, and their siblings)."""
REFUSED = frozenset({"bulk_write", "find_one_and_delete", "find_one_and_replace",
                     "find_one_and_update", "rename", "aggregate_raw_batches"})
"""Writes the journal does not replay: refused loudly rather than lost on restart."""
_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(tz_aware=False)


class DirectoryInUse(pymongo.errors.ConnectionFailure):
    """Another process has the directory open."""


class DirectoryDamaged(pymongo.errors.PyMongoError):
    """The directory's snapshot or journal cannot be read (not a torn last record)."""


def read_documents(path: Path, repair: bool = False) -> Iterator[dict[str, Any]]:
    """The BSON documents of ``path`` in order. A torn last record (a process killed inside a
    write) ends the file: with ``repair`` it is cut off, else it raises ``DirectoryDamaged``."""
    with path.open("rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "little") if len(data) - pos >= 4 else 0
        if size < 5 or pos + size > len(data):
            if not repair:
                raise DirectoryDamaged(f"{path}: torn record at byte {pos}")
            with path.open("r+b") as f:
                f.truncate(pos)
            return
        try:
            doc = bson.decode(data[pos:pos + size], codec_options=_CODEC)
        except bson.errors.BSONError as exc:
            raise DirectoryDamaged(f"{path}: unreadable record at byte {pos}: {exc}") from exc
        pos += size
        yield doc


class Journal:
    """Append-only record of the writes since the snapshot."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = path.open("ab")
        self.size = self._file.tell()

    @staticmethod
    def record(collection: str, method: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> bytes:
        """One write as a journal record (raises ``bson.errors.InvalidDocument`` for what BSON
        cannot hold, before anything is applied)."""
        return bson.encode({"c": collection, "m": method, "a": list(args), "k": kwargs})

    def append(self, record: bytes) -> None:
        try:
            self._file.write(record)
            self._file.flush()
        except OSError as exc:
            raise pymongo.errors.OperationFailure(
                f"writing the knowledge-base journal {self.path}: {exc}") from exc
        self.size += len(record)

    def close(self) -> None:
        self._file.close()


class DirectoryCollection:
    """A mongomock collection whose writes are journaled (reads go straight through)."""

    def __init__(self, inner: Any, database: DirectoryDatabase) -> None:
        self._inner = inner
        self._database = database

    def __getattr__(self, name: str) -> Any:
        if name in REFUSED:
            raise NotImplementedError(f"the directory knowledge base does not journal {name}; "
                                      f"use one of {sorted(JOURNALED)}")
        attr = getattr(self._inner, name)
        if name not in JOURNALED:
            return attr

        def journaled(*args: Any, **kwargs: Any) -> Any:
            if name == "insert_one":                 # the _id is part of what is replayed
                args = (_with_id(args[0]), *args[1:])
            elif name == "insert_many":
                args = ([_with_id(d) for d in args[0]], *args[1:])
            record = Journal.record(self._inner.full_name, name, args, kwargs)
            try:
                result = attr(*args, **kwargs)  # a refused write (duplicate key) is not journaled
            except pymongo.errors.BulkWriteError as exc:
                if name == "insert_many":       # but the documents of a batch that went in are
                    inserted = _inserted(args, kwargs, exc)
                    if inserted:
                        self._append(Journal.record(self._inner.full_name, name, (inserted,),
                                                    kwargs), inserted)
                raise
            self._append(record, [args[0]] if name == "insert_one" else
                         list(args[0]) if name == "insert_many" else [])
            return result

        return journaled

    def _append(self, record: bytes, inserted: list[Any]) -> None:
        """Journal a write that was applied. If the journal cannot be written, the documents
        the write inserted are taken out again, so that what the store holds is what the
        journal replays: the caller sees the write fail and sends it again (an upsert's
        second application changes nothing, an insert's goes in this time)."""
        try:
            self._database.client.journal.append(record)
        except pymongo.errors.PyMongoError:
            if inserted:
                self._inner.delete_many({"_id": {"$in": [doc["_id"] for doc in inserted]}})
            raise
        self._database.client.maybe_fold()


def _inserted(args: tuple[Any, ...], kwargs: dict[str, Any],
              exc: pymongo.errors.BulkWriteError) -> list[Any]:
    """The documents of an ``insert_many`` that failed which were inserted all the same: all
    but the refused ones (``ordered=False``), or those before the first refused one."""
    docs = list(args[0])
    refused = {int(e["index"]) for e in exc.details.get("writeErrors", [])}
    ordered = bool(args[1]) if len(args) > 1 else bool(kwargs.get("ordered", True))
    stop = min(refused) if ordered and refused else len(docs)
    return [doc for i, doc in enumerate(docs[:stop]) if i not in refused]


def _with_id(doc: Any) -> Any:
    if isinstance(doc, dict) and "_id" not in doc:
        doc["_id"] = bson.ObjectId()             # pymongo adds it to the caller's dict too
    return doc


class DirectoryDatabase:
    def __init__(self, inner: Any, client: DirectoryClient) -> None:
        self._inner = inner
        self.client = client

    def __getitem__(self, name: str) -> DirectoryCollection:
        return DirectoryCollection(self._inner[name], self)

    def get_collection(self, name: str) -> DirectoryCollection:
        return self[name]

    def drop_collection(self, name: str) -> None:
        self[name].drop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DirectoryClient:
    """A pymongo-compatible client over one directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = (self.root / LOCK_FILE).open("a+")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise DirectoryInUse(f"{self.root} is open in another process") from None
        self._mock: Any = mongomock.MongoClient()
        self.generation = self._load()
        self.journal = Journal(self._journal_path(self.generation))
        self._snapshot_bytes = _tree_size(self._snapshot_dir(self.generation))
        self._closed = False

    # -- pymongo surface ------------------------------------------------------------------
    def __getitem__(self, name: str) -> DirectoryDatabase:
        return DirectoryDatabase(self._mock[name], self)

    def get_database(self, name: str) -> DirectoryDatabase:
        return self[name]

    def list_database_names(self) -> list[str]:
        names: list[str] = self._mock.list_database_names()
        return names

    def drop_database(self, name: str) -> None:
        self._mock.drop_database(name)
        self.fold()                                  # the drop is in the new snapshot

    def close(self) -> None:
        """Fold the journal into a snapshot and release the directory."""
        if self._closed:
            return
        self._closed = True
        try:
            self.fold()
        finally:
            self.journal.close()
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()

    # -- snapshot and journal -------------------------------------------------------------
    def _snapshot_dir(self, generation: int) -> Path:
        return self.root / f"dump-{generation}"

    def _journal_path(self, generation: int) -> Path:
        return self.root / f"journal-{generation}.bson"

    def _load(self) -> int:
        """Read the committed snapshot and replay its journal; remove anything left over from
        a fold that did not commit. Returns the snapshot's generation."""
        link = self.root / SNAPSHOT_LINK
        generation = 0
        if link.is_symlink():
            target = os.readlink(link)
            if not target.startswith("dump-") or not target[5:].isdigit():
                raise DirectoryDamaged(f"{link} points to {target!r}, not a dump-N directory")
            generation = int(target[5:])
            snapshot = self._snapshot_dir(generation)
            for file in sorted(snapshot.glob("*/*.bson")):
                docs = list(read_documents(file))
                if docs:
                    self._mock[file.parent.name][file.stem].insert_many(docs)
        elif link.exists():
            raise DirectoryDamaged(f"{link} is not a symlink to a snapshot")
        journal = self._journal_path(generation)
        if journal.exists():
            for record in read_documents(journal, repair=True):
                self._replay(record)
        for stale in self.root.glob("dump-*"):
            if stale.name != f"dump-{generation}":
                shutil.rmtree(stale, ignore_errors=True)
        for stale in self.root.glob("journal-*.bson"):
            if stale.name != journal.name:
                stale.unlink(missing_ok=True)
        return generation

    def _replay(self, record: dict[str, Any]) -> None:
        db_name, _, coll_name = str(record["c"]).partition(".")
        coll = self._mock[db_name][coll_name]
        getattr(coll, str(record["m"]))(*record["a"], **record["k"])

    def maybe_fold(self) -> None:
        if self.journal.size > max(MIN_FOLD_BYTES, self._snapshot_bytes):
            self.fold()

    def fold(self) -> None:
        """Write the whole store as snapshot ``generation + 1``, commit it by swapping the
        ``dump`` symlink, then remove the old snapshot and journal."""
        new = self.generation + 1
        target = self._snapshot_dir(new)
        shutil.rmtree(target, ignore_errors=True)
        for db_name in self._mock.list_database_names():
            db = self._mock[db_name]
            folder = target / db_name
            folder.mkdir(parents=True, exist_ok=True)
            for coll_name in db.list_collection_names():
                coll = db[coll_name]
                with (folder / f"{coll_name}.bson").open("wb") as f:
                    for doc in coll.find({}):
                        f.write(bson.encode(doc))
                    f.flush()
                    os.fsync(f.fileno())
                (folder / f"{coll_name}.metadata.json").write_text(
                    json.dumps(_metadata(coll_name, coll.index_information())))
        target.mkdir(parents=True, exist_ok=True)
        _fsync_dir(target)
        tmp_link = self.root / f".{SNAPSHOT_LINK}.tmp"
        tmp_link.unlink(missing_ok=True)
        os.symlink(target.name, tmp_link)
        os.replace(tmp_link, self.root / SNAPSHOT_LINK)  # the commit point
        _fsync_dir(self.root)
        old_journal, old_snapshot = self.journal, self._snapshot_dir(self.generation)
        self.generation = new
        self.journal = Journal(self._journal_path(new))
        self._snapshot_bytes = _tree_size(target)
        old_journal.close()
        old_journal.path.unlink(missing_ok=True)
        shutil.rmtree(old_snapshot, ignore_errors=True)


def _metadata(name: str, indexes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A collection's ``.metadata.json`` the way mongodump writes it (index keys in order)."""
    out = []
    for index_name, spec in indexes.items():
        entry: dict[str, Any] = {"v": spec.get("v", 2),
                                 "key": {field: direction for field, direction in spec["key"]},
                                 "name": index_name}
        for option in ("unique", "expireAfterSeconds", "sparse"):
            if option in spec:
                entry[option] = spec[option]
        out.append(entry)
    return {"options": {}, "indexes": out, "collectionName": name, "type": "collection"}


def _tree_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
