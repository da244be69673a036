"""Opening a knowledge base from the ``--kb`` URI.

``None``, ``""`` or ``"memory"``
    the indexed in-process store (:mod:`knowledge.embedded`): nothing to install, gone when
    the process ends.
``"mongomock://[/database]"``
    the pymongo store over an in-process mongomock database (the MongoDB code path, in
    memory; every read scans what is stored).
A directory: ``./kb``, ``/var/lib/intent-planner``, ``~/kb`` (a value with a path separator,
or starting with ``.`` or ``~``) or ``file:///abs/path``
    a persistent embedded store (:mod:`knowledge.directory`): kept across restarts without a
    server, as a mongodump-style snapshot ``mongorestore`` loads into MongoDB.
``mongodb://...`` or ``mongodb+srv://...``
    a real MongoDB through ``pymongo.MongoClient``, with short timeouts so that a down server
    makes calls fail after about ``server_selection_timeout_ms`` instead of hanging. Timeout
    options written in the URI (``serverSelectionTimeoutMS=...``) win over the arguments.

The database is ``database`` if given, else the one in the URI path, else ``intent_planner``.
Anything else raises :class:`planner.domain.errors.SpecError` for the field ``--kb``.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import mongomock
import pymongo
import pymongo.errors

from knowledge import base, directory, embedded, mongo
from knowledge import resilient as resilient_kb
from planner.domain.errors import SpecError

MEMORY_URIS = frozenset({"", "memory"})
MONGODB_SCHEMES = frozenset({"mongodb", "mongodb+srv"})

_FIX = (
    "pass --kb mongodb://HOST:27017/DATABASE (or mongodb+srv://...) for MongoDB, "
    "--kb ./DIRECTORY to keep it in a directory, or --kb memory for an in-memory store"
)


def _spec_error(problem: str, fix: str = _FIX) -> SpecError:
    return SpecError("", "--kb", problem, fix)


def open_knowledge_base(
    uri: str | None,
    database: str | None = None,
    retention_s: float | None = mongo.DEFAULT_RETENTION_S,
    server_selection_timeout_ms: int = 2000,
    *,
    socket_timeout_ms: int = 30_000,
    create_indexes: bool = True,
    resilient: bool = False,
    buffer_size: int = resilient_kb.DEFAULT_BUFFER_SIZE,
    background: bool = False,
) -> base.KnowledgeBase:
    """Open the knowledge base named by ``uri`` (see the module docstring).

    With ``create_indexes`` (and not ``resilient``) the indexes are created now and a
    down server raises :class:`~knowledge.base.KnowledgeBaseUnavailable` after the server
    selection timeout; the caller decides whether to stop or to go on degraded.

    With ``resilient`` the store is wrapped in
    :class:`~knowledge.resilient.ResilientKnowledgeBase` (``buffer_size`` events): events,
    statuses and memories are queued and written in batches at each ``flush`` (by a writer
    thread with ``background``: live runs); opening and writing them never raise
    ``KnowledgeBaseUnavailable`` (reads and ``put_effect`` still do); index creation is tried
    once now and again later.
    """
    text = "" if uri is None else uri.strip()
    scheme, sep, _ = text.partition("://")
    if text in MEMORY_URIS:
        store: base.KnowledgeBase = embedded.EmbeddedKnowledgeBase(retention_s=retention_s)
        return (resilient_kb.ResilientKnowledgeBase(store, buffer_size=buffer_size,
                                                    background=background)
                if resilient else store)
    if sep and scheme == "mongomock":
        client: Any = mongomock.MongoClient()
        name = database or _uri_database(text) or mongo.DEFAULT_DATABASE
    elif sep and scheme.lower() in MONGODB_SCHEMES:
        name = database or _uri_database(text) or mongo.DEFAULT_DATABASE
        # Checked before pymongo parses the URI: its own message may not name the database.
        _check_database_name(name)
        client = _pymongo_client(text, server_selection_timeout_ms, socket_timeout_ms)
    elif (folder := directory_of(text)) is not None:
        client = _directory_client(folder)
        name = database or mongo.DEFAULT_DATABASE
    else:
        shown = f"scheme {scheme!r}" if sep else f"value {text!r}"
        raise _spec_error(f"unsupported knowledge-base URI {shown}")
    try:
        _check_database_name(name)
    except SpecError:
        client.close()
        raise
    eager = create_indexes and not resilient
    try:
        store = mongo.MongoKnowledgeBase(
            client, database=name, retention_s=retention_s, create_indexes=eager,
            ttl_index=isinstance(client, pymongo.MongoClient),   # embedded: apply_retention
        )
    except (ValueError, base.KnowledgeBaseUnavailable):  # bad retention_s / server down
        client.close()
        raise
    if not resilient:
        return store
    wrapped = resilient_kb.ResilientKnowledgeBase(store, buffer_size=buffer_size,
                                                  background=background)
    if create_indexes:
        wrapped.prepare()
    return wrapped


def _check_database_name(name: str) -> None:
    problem = mongo.database_name_problem(name)
    if problem is not None:
        raise _spec_error(
            problem, "name a database with letters, digits, '_' or '-' (at most 63 bytes)"
        )


def directory_of(value: str) -> Path | None:
    """The directory a ``--kb`` value names, or ``None`` if it names none (see the module)."""
    scheme, sep, _ = value.partition("://")
    if sep:
        if scheme.lower() != "file":
            return None
        parsed = urllib.parse.urlsplit(value)
        if parsed.netloc not in ("", "localhost") or not parsed.path:
            raise _spec_error(f"file URI {value!r} must name a local absolute path",
                              "write file:///absolute/path or a relative ./path")
        return Path(urllib.parse.unquote(parsed.path))
    if "/" in value or value.startswith((".", "~")):
        return Path(value).expanduser()
    return None


def _directory_client(folder: Path) -> directory.DirectoryClient:
    if folder.exists() and not folder.is_dir():
        raise _spec_error(f"{folder} exists and is not a directory",
                          "name a new or existing directory")
    try:
        return directory.DirectoryClient(folder)
    except directory.DirectoryInUse as exc:
        raise _spec_error(f"{exc} (one process per directory)",
                          "stop the other process, or share one knowledge base through "
                          "MongoDB: --kb mongodb://... (docker compose up)") from None
    except directory.DirectoryDamaged as exc:
        raise _spec_error(f"cannot read the knowledge base: {exc}",
                          "restore the directory from a backup, or move it away to start "
                          "empty") from None
    except OSError as exc:
        raise _spec_error(f"cannot open {folder}: {exc.strerror or exc}",
                          "name a directory this user can write") from None


def _uri_database(uri: str) -> str | None:
    """The database in the URI path (``mongodb://h/db?opts`` -> ``db``), if any."""
    _, sep, rest = uri.partition("://")
    if not sep:
        return None
    path = urllib.parse.urlsplit("//" + rest).path.lstrip("/")
    name = urllib.parse.unquote(path).split(".", 1)[0]  # MongoDB allows db.collection there
    return name or None


def _uri_options(uri: str) -> set[str]:
    query = urllib.parse.urlsplit(uri).query
    return {key.lower() for key in urllib.parse.parse_qs(query, keep_blank_values=True)}


def _pymongo_client(
    uri: str, server_selection_timeout_ms: int, socket_timeout_ms: int
) -> pymongo.MongoClient[dict[str, Any]]:
    defaults: dict[str, Any] = {
        "serverSelectionTimeoutMS": server_selection_timeout_ms,
        "connectTimeoutMS": server_selection_timeout_ms,
        "socketTimeoutMS": socket_timeout_ms,
        "appname": "intent-planner",
    }
    given = _uri_options(uri)
    options = {key: value for key, value in defaults.items() if key.lower() not in given}
    try:
        # connect=False: nothing happens on the network until the first operation.
        return pymongo.MongoClient(uri, connect=False, **options)
    except pymongo.errors.ConfigurationError as exc:
        raise _spec_error(f"invalid MongoDB URI: {exc}") from exc
    except (ValueError, TypeError) as exc:
        raise _spec_error(f"invalid MongoDB URI: {exc}") from exc
