"""The MongoDB knowledge base.

Runs on any pymongo-compatible client: ``pymongo.MongoClient`` in production and
``mongomock.MongoClient`` for the embedded default and the tests, through the same code.

Collections and indexes (created by :meth:`MongoKnowledgeBase.prepare`, idempotently):

``events``
    ``intent_time`` (intent, time desc, _id desc) serves ``events(intent, since, until)`` newest
    first without an in-memory sort; ``time`` (time, _id) serves retention and the all-intents
    listing; ``recorded_at_ttl`` is a TTL index on the BSON date ``_kb_recorded_at`` (the wall
    clock at insertion) with ``expireAfterSeconds = retention_s``, so a real MongoDB bounds the
    collection by itself even if nobody calls :meth:`~MongoKnowledgeBase.apply_retention`.
    The TTL uses the insertion wall clock rather than the event's ``time`` because ``time`` may
    come from a simulated clock; ``apply_retention(now)`` uses ``time`` (mongomock has no TTL
    monitor, so this explicit delete is what runs there).
``pod_details``
    An event's ``pods`` and ``nodes`` (:func:`knowledge.documents.split_event`), under the
    event's ``_id``; the same three indexes as ``events``.
``effects``
    ``intent_objective_timestamp`` (intent, objective, timestamp desc, _id desc).
``status``
    ``intent_unique`` (intent), unique: one status document per intent.

Documents go through :func:`knowledge.documents.sanitize` (a deep copy; NaN/inf -> ``None``,
see there why), come back without ``_id`` and ``_kb_*`` fields.

Batches: ``record_events`` is one unordered ``insert_many`` with the ids chosen by the caller
(``_id``), so sending a batch again after a failure (a dropped connection leaves unknown which
documents arrived) stores each event once: a duplicate ``_id`` means "already stored".
``put_statuses`` / ``put_memories`` are one unordered ``bulk_write`` of upserts on a MongoDB
server; on mongomock and the directory store (whose journal does not replay ``bulk_write``,
and whose mongomock ``bulk_write`` does not take this pymongo's operations) they are one
``replace_one`` each, in process.

Errors: every ``PyMongoError`` (server selection timeout, auto-reconnect, operation failure,
authentication...) becomes :class:`~knowledge.base.KnowledgeBaseUnavailable`, except a
document-level ``WriteError`` and ``DocumentTooLarge``: the server refused *this* document, so
they become :class:`~knowledge.documents.InvalidDocument` (permanent) - otherwise a wrapper
that buffers on unavailability would retry a poison document forever.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bson
import bson.errors
import pymongo
import pymongo.errors

from knowledge import base, documents

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "intent_planner"
DEFAULT_RETENTION_S = 7 * 24 * 3600.0

EVENTS = "events"
POD_DETAILS = "pod_details"
EFFECTS = "effects"
STATUS = "status"
MEMORY = "memory"

RECORDED_AT = "_kb_recorded_at"
INTERNAL_FIELDS = frozenset({"_id", RECORDED_AT})

INDEX_EVENTS_INTENT_TIME = "intent_time"
INDEX_EVENTS_TIME = "time"
INDEX_EVENTS_TTL = "recorded_at_ttl"
INDEX_EFFECTS = "intent_objective_timestamp"
INDEX_STATUS = "intent_unique"

_NEWEST = [("time", pymongo.DESCENDING), ("_id", pymongo.DESCENDING)]
_NEWEST_EFFECT = [("timestamp", pymongo.DESCENDING), ("_id", pymongo.DESCENDING)]
_MAX_TTL_S = 2**31 - 1
_DUPLICATE_KEY = 11000

_BAD_DB_CHARS = frozenset('/\\. "$*<>:|?\x00')


def database_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a MongoDB database name, or ``None`` if it can."""
    if not name:
        return "the database name is empty"
    bad = sorted(set(name) & _BAD_DB_CHARS)
    if bad:
        return f"the database name {name!r} contains {''.join(bad)!r}"
    if len(name.encode("utf-8")) > 63:
        return f"the database name {name!r} is longer than 63 bytes"
    return None


class MongoKnowledgeBase(base.KnowledgeBase):
    """:class:`~knowledge.base.KnowledgeBase` over a pymongo-compatible client.

    ``retention_s`` is how long events are kept (``None``: forever, and any TTL index from an
    earlier configuration is dropped). With ``create_indexes`` the constructor calls
    :meth:`prepare` and so raises :class:`~knowledge.base.KnowledgeBaseUnavailable` when the
    server is down; pass ``False`` to defer that (``ResilientKnowledgeBase`` does).
    ``ttl_index=False`` leaves the TTL index out: for the embedded stores, where mongomock
    checks every document for expiry on every operation (an insert cost 2.7 ms with 1,000
    events stored, 10 ms with 4,000) and :meth:`apply_retention` is what deletes old events
    anyway. :meth:`close` closes the client. ``bulk_upserts`` (default: whether ``client`` is a
    ``pymongo.MongoClient``) writes a batch of statuses or memories in one ``bulk_write``.
    """

    def __init__(
        self,
        client: Any,  # pymongo.MongoClient or mongomock.MongoClient (same API, no shared type)
        database: str = DEFAULT_DATABASE,
        retention_s: float | None = DEFAULT_RETENTION_S,
        create_indexes: bool = True,
        ttl_index: bool = True,
        bulk_upserts: bool | None = None,
    ) -> None:
        problem = database_name_problem(database)
        if problem is not None:
            raise ValueError(problem)
        if retention_s is not None and not (0 < retention_s <= _MAX_TTL_S):
            raise ValueError(f"retention_s must be > 0 and <= {_MAX_TTL_S} or None")
        self._client = client
        self._database_name = database
        self.retention_s = retention_s
        self.ttl_index = ttl_index
        self.bulk_upserts = (isinstance(client, pymongo.MongoClient) if bulk_upserts is None
                             else bulk_upserts)
        db = client[database]
        self._events = db[EVENTS]
        self._details = db[POD_DETAILS]
        self._effects = db[EFFECTS]
        self._status = db[STATUS]
        self._memory = db[MEMORY]
        if create_indexes:
            self.prepare()

    @property
    def database_name(self) -> str:
        return self._database_name

    @property
    def client(self) -> Any:
        return self._client

    # -- errors ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _translate(self, operation: str) -> Iterator[None]:
        try:
            yield
        except pymongo.errors.DuplicateKeyError as exc:  # a race between writers: retry later
            raise base.KnowledgeBaseUnavailable(
                f"knowledge base (MongoDB database {self._database_name!r}): {operation}"
                f" conflicted with another writer: {exc}"
            ) from exc
        except pymongo.errors.WriteError as exc:
            # The server refused this document (validation, field names...): retrying the same
            # document cannot succeed, so it must not be buffered and retried as "unavailable".
            raise documents.InvalidDocument(
                f"{operation}: MongoDB refused the document: {exc}"
            ) from exc
        except pymongo.errors.PyMongoError as exc:
            raise base.KnowledgeBaseUnavailable(self._unreachable(operation, exc)) from exc
        except bson.errors.BSONError as exc:  # sanitize() should have caught it first
            raise documents.InvalidDocument(f"{operation}: {exc}") from exc

    def _unreachable(self, operation: str, exc: Exception) -> str:
        return (f"knowledge base (MongoDB database {self._database_name!r}): {operation} failed:"
                f" {type(exc).__name__}: {exc}; is MongoDB running and reachable at the --kb URI?")

    # -- start-up ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the indexes (idempotent); align the TTL index with ``retention_s``."""
        asc, desc = pymongo.ASCENDING, pymongo.DESCENDING
        with self._translate("creating indexes"):
            for collection in (self._events, self._details):
                self._prepare_events(collection)
            self._effects.create_index(
                [("intent", asc), ("objective", asc), ("timestamp", desc), ("_id", desc)],
                name=INDEX_EFFECTS,
            )
            self._status.create_index([("intent", asc)], name=INDEX_STATUS, unique=True)
            self._memory.create_index([("intent", asc)], name=INDEX_STATUS, unique=True)

    def _prepare_events(self, collection: Any) -> None:
        """The indexes of ``events`` (and of ``pod_details``, read the same way)."""
        asc, desc = pymongo.ASCENDING, pymongo.DESCENDING
        collection.create_index(
            [("intent", asc), ("time", desc), ("_id", desc)], name=INDEX_EVENTS_INTENT_TIME
        )
        collection.create_index([("time", asc), ("_id", asc)], name=INDEX_EVENTS_TIME)
        want = (None if self.retention_s is None or not self.ttl_index
                else math.ceil(self.retention_s))
        ttl = collection.index_information().get(INDEX_EVENTS_TTL)
        if ttl is not None and ttl.get("expireAfterSeconds") != want:
            # The retention changed since the index was made: MongoDB refuses to create an
            # index with the same name and other options, so replace it.
            collection.drop_index(INDEX_EVENTS_TTL)
            ttl = None
        if want is not None and ttl is None:
            collection.create_index(
                [(RECORDED_AT, asc)], name=INDEX_EVENTS_TTL, expireAfterSeconds=want
            )

    # -- events -----------------------------------------------------------------------------

    def record_event(self, event: Mapping[str, Any]) -> str:
        """One event (and its pod detail, written second). Not idempotent: after a failure the
        event may be stored, and calling again stores another; :meth:`record_events` with ids
        is the path that can be retried."""
        doc, detail = documents.split_event(_strip(documents.event_document(event)))
        doc[RECORDED_AT] = dt.datetime.now(dt.UTC)
        with self._translate("recording an event"):
            result = self._events.insert_one(doc)
            if detail is not None:
                detail["_id"] = result.inserted_id
                detail[RECORDED_AT] = doc[RECORDED_AT]
                self._insert_details([detail])
        return str(result.inserted_id)

    def record_events(
        self, events: Sequence[Mapping[str, Any]], ids: Sequence[str] | None = None
    ) -> list[str]:
        base._check_ids(events, ids)
        recorded_at = dt.datetime.now(dt.UTC)
        docs = []
        details = []
        for i, event in enumerate(events):
            doc, detail = documents.split_event(
                _strip(documents.event_document(event, where=f"events[{i}]")))
            doc["_id"] = bson.ObjectId() if ids is None else _object_id(ids[i], f"ids[{i}]")
            doc[RECORDED_AT] = recorded_at
            docs.append(doc)
            if detail is not None:
                detail["_id"] = doc["_id"]
                detail[RECORDED_AT] = recorded_at
                details.append(detail)
        if not docs:
            return []
        with self._translate("recording events"):
            try:
                self._events.insert_many(docs, ordered=False)
            except pymongo.errors.ServerSelectionTimeoutError as exc:
                # No server was selected, so nothing was sent: a retry that cannot select one
                # raises the first attempt's error instead (pymongo's _ClientConnectionRetryable
                # .run: "the application may think the write was never attempted").
                raise base.PartialWrite(self._unreachable("recording events", exc), 0) from exc
            except pymongo.errors.BulkWriteError as exc:
                refused = [e for e in exc.details.get("writeErrors", [])
                           if e.get("code") != _DUPLICATE_KEY]   # a duplicate: already stored
                if refused:
                    first = refused[0]
                    raise documents.InvalidDocument(
                        f"events[{first.get('index')}]: MongoDB refused {len(refused)} of "
                        f"{len(docs)} events: {first.get('errmsg')}") from exc
            self._insert_details(details)
        return [str(doc["_id"]) for doc in docs]

    def _insert_details(self, details: list[base.Document]) -> None:
        """Store the pod details of events just stored; one already stored (a batch sent
        again) is skipped. The server unreachable leaves the batch to be sent again whole
        (``KnowledgeBaseUnavailable``, not ``PartialWrite``): its events are stored already
        and are skipped then, so only the missing details are added. A detail the server
        refuses (larger than a document may be) is dropped, logged, and its event no longer
        says ``pod_detail``: sending it again could not succeed, and the event stays."""
        if not details:
            return
        try:
            self._details.insert_many(details, ordered=False)
            return
        except pymongo.errors.BulkWriteError as exc:
            refused = [details[e["index"]] for e in exc.details.get("writeErrors", [])
                       if e.get("code") != _DUPLICATE_KEY]
        except bson.errors.BSONError:      # refused before sending (DocumentTooLarge)
            refused = [d for d in details if not self._insert_detail(d)]
        if refused:
            ids = [d["_id"] for d in refused]
            self._events.update_many({"_id": {"$in": ids}},
                                     {"$unset": {documents.DETAIL_MARK: ""}})
            log.warning("pod details of %d event(s) refused and dropped (first: %s at %s); the "
                        "events are kept without them", len(refused), refused[0].get("intent"),
                        refused[0].get("time"))

    def _insert_detail(self, detail: base.Document) -> bool:
        """One detail (see :meth:`_insert_details`); False when the server refuses it."""
        try:
            self._details.insert_one(detail)
        except pymongo.errors.DuplicateKeyError:
            return True
        except (pymongo.errors.WriteError, bson.errors.BSONError):
            return False
        return True

    def events(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._find_events(self._events, "reading events", intent, since, until, limit,
                                 skip)

    def pod_details(
        self,
        intent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 0,
        skip: int = 0,
    ) -> list[base.Document]:
        return self._find_events(self._details, "reading pod details", intent, since, until,
                                 limit, skip)

    def _find_events(self, collection: Any, operation: str, intent: str | None,
                     since: float | None, until: float | None, limit: int, skip: int
                     ) -> list[base.Document]:
        if limit < 0 or skip < 0:
            raise ValueError("limit and skip must be >= 0")
        query: dict[str, Any] = {} if intent is None else {"intent": intent}
        window: dict[str, float] = {}
        if since is not None:
            window["$gte"] = since
        if until is not None:
            window["$lt"] = until
        if window:
            query["time"] = window
        with self._translate(operation):
            cursor = collection.find(query, {RECORDED_AT: False}).sort(_NEWEST)
            if skip:
                cursor = cursor.skip(skip)
            if limit:
                cursor = cursor.limit(limit)
            return [_restore(doc) for doc in cursor]

    def count_events(self, intent: str | None = None) -> int:
        query = {} if intent is None else {"intent": intent}
        with self._translate("counting events"):
            return int(self._events.count_documents(query))

    def apply_retention(self, now: float) -> int:
        if self.retention_s is None:
            return 0
        old = {"time": {"$lt": now - self.retention_s}}
        with self._translate("applying retention"):
            # Details first: an event without its detail is a state the contract allows (a
            # batch stopped part-way), a detail without its event is not.
            self._details.delete_many(old)
            result = self._events.delete_many(old)
        return int(result.deleted_count)

    # -- effects ----------------------------------------------------------------------------

    def put_effect(self, effect: Mapping[str, Any]) -> str:
        doc = _strip(documents.effect_document(effect, not_after=self.effect_horizon()))
        with self._translate("storing an effect"):
            result = self._effects.insert_one(doc)
        return str(result.inserted_id)

    def effect(
        self, intent: str, objective: str, now: float, lookback_s: float,
        with_blob: bool = True,
    ) -> base.Document | None:
        query = {
            "intent": intent,
            "objective": objective,
            "$or": [{"static": True, "timestamp": {"$gte": 0, "$lte": self.effect_horizon()}},
                    {"timestamp": {"$gte": now - lookback_s, "$lte": now}}],
        }
        with self._translate("reading an effect"):
            doc = self._effects.find_one(query, None if with_blob else {"blob": False},
                                         sort=_NEWEST_EFFECT)
        return None if doc is None else _restore(doc)

    def effects(self, intent: str | None = None, with_blobs: bool = False) -> list[base.Document]:
        query = {} if intent is None else {"intent": intent}
        projection = None if with_blobs else {"blob": False}
        with self._translate("listing effects"):
            cursor = self._effects.find(query, projection).sort(_NEWEST_EFFECT)
            return [_restore(doc) for doc in cursor]

    # -- status -----------------------------------------------------------------------------

    def put_status(self, intent: str, time: float, status: Mapping[str, Any]) -> None:
        doc = documents.status_document(intent, time, status)
        with self._translate("storing a status"):
            try:
                self._status.replace_one({"intent": intent}, doc, upsert=True)
            except pymongo.errors.DuplicateKeyError:
                # Two writers upserted the same new intent at once; the document exists now.
                self._status.replace_one({"intent": intent}, doc, upsert=True)

    def put_memory(self, intent: str, memory: Mapping[str, Any]) -> None:
        doc = documents.memory_document(intent, memory)
        with self._translate("storing a memory"):
            try:
                self._memory.replace_one({"intent": intent}, doc, upsert=True)
            except pymongo.errors.DuplicateKeyError:
                self._memory.replace_one({"intent": intent}, doc, upsert=True)

    def put_statuses(self, statuses: Sequence[base.StatusUpdate]) -> None:
        docs = [documents.status_document(intent, when, status, where=f"statuses[{i}]")
                for i, (intent, when, status) in enumerate(statuses)]
        self._upsert_many(self._status, docs, "storing statuses")

    def put_memories(self, memories: Sequence[base.MemoryUpdate]) -> None:
        docs = [documents.memory_document(intent, memory, where=f"memories[{i}]")
                for i, (intent, memory) in enumerate(memories)]
        self._upsert_many(self._memory, docs, "storing memories")

    def _upsert_many(self, collection: Any, docs: list[base.Document], operation: str) -> None:
        """Replace (or insert) the document of each doc's ``intent``; a later doc wins."""
        latest = {doc["intent"]: doc for doc in docs}
        if not latest:
            return
        with self._translate(operation):
            if not self.bulk_upserts:
                for intent, doc in latest.items():
                    collection.replace_one({"intent": intent}, doc, upsert=True)
                return
            ops = [pymongo.ReplaceOne({"intent": intent}, doc, upsert=True)
                   for intent, doc in latest.items()]
            try:
                collection.bulk_write(ops, ordered=False)
            except pymongo.errors.BulkWriteError as exc:
                errors = exc.details.get("writeErrors", [])
                refused = [e for e in errors if e.get("code") != _DUPLICATE_KEY]
                if refused:
                    raise documents.InvalidDocument(
                        f"{operation}: MongoDB refused {len(refused)} of {len(ops)} documents:"
                        f" {refused[0].get('errmsg')}") from exc
                # Two writers upserted the same new intent at once; the documents exist now.
                collection.bulk_write([ops[e["index"]] for e in errors], ordered=False)

    def memory(self, intent: str) -> base.Document | None:
        with self._translate("reading a memory"):
            doc = self._memory.find_one({"intent": intent})
        return None if doc is None else _restore(doc)

    def statuses(self) -> dict[str, base.Document]:
        with self._translate("reading statuses"):
            found = [_restore(doc) for doc in self._status.find({}).sort("intent")]
        out: dict[str, base.Document] = {}
        for doc in found:
            intent = doc.get("intent")
            if isinstance(intent, str):
                out[intent] = doc
            else:  # not written by this store (it refuses that): by hand or another tool
                log.warning("status document without a string 'intent' skipped (intent %.60r)",
                            intent)
        return out

    # -- lifecycle --------------------------------------------------------------------------

    def drop(self) -> None:
        """Delete the whole database (tests and demos)."""
        with self._translate("dropping the database"):
            self._client.drop_database(self._database_name)

    def close(self) -> None:
        with self._translate("closing the client"):
            self._client.close()


def _object_id(value: str, field: str) -> bson.ObjectId:
    if not isinstance(value, str) or not bson.ObjectId.is_valid(value):
        raise ValueError(f"{field}: {value!r} is not an event id (24 hexadecimal digits, "
                         "from new_event_id())")
    return bson.ObjectId(value)


def _strip(doc: base.Document) -> base.Document:
    """Drop store-internal keys a caller may have passed back in (e.g. a raw ``_id``)."""
    for key in INTERNAL_FIELDS & doc.keys():
        del doc[key]
    return doc


def _restore(doc: Mapping[str, Any]) -> base.Document:
    out = {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}
    blob = out.get("blob")
    if isinstance(blob, bytes) and type(blob) is not bytes:  # bson.Binary from some drivers
        out["blob"] = bytes(blob)
    return out
