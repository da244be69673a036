"""Turning caller documents into plain, storable ones.

Every knowledge base stores *plain* documents: ``dict`` with ``str`` keys, ``list``, ``str``,
``int`` (64-bit), ``float``, ``bool``, ``None`` and ``bytes``. :func:`sanitize` builds such a
document from what the controller hands over (numpy scalars and arrays, tuples, enums, ...) and
is at the same time the deep copy that makes later changes of the argument invisible to the store.

Choices, applied by every store that uses this module:

* ``NaN``, ``inf`` and ``-inf`` become ``None``. MongoDB could store them, but the documents are
  read by JSON consumers (the REST API, notebooks, ``json.dumps(allow_nan=False)``) that cannot
  represent them; "no value" is also what a NaN measurement means.
* integers outside the signed 64-bit range become ``float`` (BSON has no bigger integer).
* tuples and numpy arrays become lists; numpy scalars become Python scalars; ``bytearray`` and
  ``memoryview`` become ``bytes`` (stored as BSON binary, returned as ``bytes``).
* keys must be strings without a NUL character; top-level keys must not start with ``$``
  (MongoDB reserves them). Anything else (datetimes, arbitrary objects, strings with lone
  surrogates) raises :class:`InvalidDocument`: the caller has a bug, retrying cannot help.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from planner.domain.errors import PermanentError

Document = dict[str, Any]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class InvalidDocument(PermanentError, TypeError):
    """A document holds something no knowledge base can store (a caller bug, not retried)."""


def sanitize(doc: Mapping[str, Any], where: str = "document") -> Document:
    """Return a plain deep copy of ``doc`` (see the module docstring for the rules).

    ``where`` names the document in error messages (``event``, ``effect``...).
    """
    if not isinstance(doc, Mapping):
        raise InvalidDocument(f"{where}: expected a mapping, got {type(doc).__name__}")
    out: Document = {}
    try:
        for key, value in doc.items():
            name = _key(key)
            if name.startswith("$"):
                raise _Refused("top-level keys must not start with '$'", [f".{name}"])
            try:
                out[name] = _value(value)
            except _Refused as exc:
                exc.path.append(f".{name}")
                raise
    except _Refused as exc:
        # The path is built only here, on the way out of a refusal (a document's every value
        # would otherwise format its own path on the happy path).
        raise InvalidDocument(f"{where}{''.join(reversed(exc.path))}: {exc.reason}") from None
    return out


class _Refused(Exception):
    """A value that cannot be stored: why, and its path inside the document from the value
    outwards (each container appends its part as the refusal passes through it)."""

    def __init__(self, reason: str, path: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = path if path is not None else []


def _key(key: object) -> str:
    if type(key) is not str:
        if isinstance(key, str):  # str subclass, e.g. a str-valued enum
            key = _plain_str(key)
        else:
            raise _Refused(f"keys must be strings, got {type(key).__name__} {key!r}")
    assert isinstance(key, str)
    if "\x00" in key:
        raise _Refused(f"key {key!r} contains a NUL character")
    _check_utf8(key)
    return key


def _plain_str(value: str) -> str:
    if isinstance(value, enum.Enum):
        inner = value.value
        if isinstance(inner, str):
            return str.__str__(inner)
    return str.__str__(value)


def _check_utf8(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(f"string is not valid unicode ({exc.reason})") from None


def _float(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _int(value: int) -> int | float:
    return value if _INT64_MIN <= value <= _INT64_MAX else float(value)


def _mapping(value: Mapping[Any, Any]) -> Document:
    out: Document = {}
    for key, item in value.items():
        # The common cases inline (a plain ASCII key; an ASCII string, float, bool or None
        # value): the same checks as _key and _value, without two calls per value.
        plain = type(key) is str and key.isascii() and "\x00" not in key
        name = key if plain else _key(key)
        kind = type(item)
        if kind is str and item.isascii():
            out[name] = item
        elif kind is float:
            out[name] = item if math.isfinite(item) else None
        elif item is None or kind is bool:
            out[name] = item
        else:
            try:
                out[name] = _value(item)
            except _Refused as exc:
                exc.path.append(f".{name}")
                raise
    return out


def _sequence(value: Sequence[Any]) -> list[Any]:
    try:
        return [_value(v) for v in value]
    except _Refused as exc:
        # Which item: found again only now, on the error path.
        for i, v in enumerate(value):
            try:
                _value(v)
            except _Refused:
                exc.path.append(f"[{i}]")
                break
        raise


def _value(value: Any) -> Any:
    kind = type(value)
    # Fast paths for the exact builtin types.
    if value is None or kind is bool:
        return value
    if kind is float:
        return _float(value)
    if kind is int:
        return _int(value)
    if kind is str:
        _check_utf8(value)
        return value
    if kind is bytes:
        return value
    if kind is dict:
        return _mapping(value)
    if kind is list or kind is tuple:
        return _sequence(value)
    if isinstance(value, Mapping):
        return _mapping(value)
    # Subclasses and foreign scalar types.
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return _value(value.tolist())
    if isinstance(value, np.generic):
        return _value(value.item())
    if isinstance(value, str):
        return _value(_plain_str(value))
    if isinstance(value, int):
        return _int(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return _sequence(value)
    raise _Refused(
        f"cannot store a value of type {type(value).__name__}; "
        "convert it to numbers, strings, lists or dicts first"
    )


def require_str(doc: Mapping[str, Any], key: str, where: str) -> str:
    """``doc[key]`` if it is a string, else :class:`InvalidDocument`."""
    value = doc.get(key)
    if not isinstance(value, str):
        raise InvalidDocument(f"{where}.{key}: expected a string, got {value!r}")
    return value


def require_number(doc: Mapping[str, Any], key: str, where: str) -> float:
    """``doc[key]`` if it is a finite number (not a bool), else :class:`InvalidDocument`."""
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidDocument(
            f"{where}.{key}: expected a finite number, got {value!r}"
            " (NaN and inf are stored as None)"
        )
    return value


def event_document(event: Mapping[str, Any], where: str = "event") -> Document:
    """A sanitized copy of an ``events`` document; needs ``time`` and ``intent``. Errors name
    the field from ``where`` (``events[3].time`` in a batch)."""
    doc = sanitize(event, where)
    require_number(doc, "time", where)
    require_str(doc, "intent", where)
    return doc


DETAIL_FIELDS = ("pods", "nodes")
"""An event's fields kept apart from it (:func:`split_event`)."""
DETAIL_MARK = "pod_detail"
"""Set (``True``) on an event whose detail is stored in the ``pod_details`` collection."""


def split_event(doc: Document) -> tuple[Document, Document | None]:
    """A sanitized event (:func:`event_document`) as stored: without ``pods`` and ``nodes``,
    which go into a document of their own (``time``, ``intent`` and ``workload`` copied;
    ``None`` when the event carries neither, or only ``None`` for them), and with
    ``pod_detail: true`` when they did.

    Every pod of a workload is tens of kilobytes, the rest of an event a few: kept apart, the
    events a trainer and the REST API read stay small, and the pods are read only by whoever
    asks for them (:meth:`knowledge.base.KnowledgeBase.pod_details`)."""
    fields = {f: v for f in DETAIL_FIELDS if (v := doc.pop(f, None)) is not None}
    if not fields:
        doc.pop(DETAIL_MARK, None)    # a copied event's mark: no detail comes with it
        return doc, None
    detail: Document = {k: doc[k] for k in ("time", "intent", "workload") if k in doc}
    detail.update(fields)
    doc[DETAIL_MARK] = True
    return doc, detail


FUTURE_TOLERANCE_S = 300.0
"""How far past a store's clock an effect's ``timestamp`` may lie (clocks of writers differ)."""


def timestamp_problem(value: Any, not_after: float | None = None) -> str | None:
    """Why ``value`` cannot be an effect's ``timestamp`` (seconds since the epoch), or ``None``:
    it must be a finite number, not before 1970 and not after ``not_after`` (the future)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        shown = repr(value)
        return f"expected a finite number, got {shown if len(shown) <= 40 else shown[:37] + '...'}"
    if value < 0:
        return f"{value:g} is before 1970"
    if not_after is not None and value > not_after:
        when = dt.datetime.fromtimestamp(not_after, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"{value:g} is in the future (after {when})"
    return None


def effect_document(effect: Mapping[str, Any], not_after: float | None = None) -> Document:
    """A sanitized copy of an ``effects`` document; ``static`` defaults to False. A
    ``timestamp`` after ``not_after`` (the store's clock plus :data:`FUTURE_TOLERANCE_S`) is
    refused: a version from the future would be the newest for good."""
    doc = sanitize(effect, "effect")
    require_str(doc, "intent", "effect")
    require_str(doc, "objective", "effect")
    problem = timestamp_problem(doc.get("timestamp"), not_after)
    if problem is not None:
        raise InvalidDocument(f"effect.timestamp: {problem}; fix: give the time the model was "
                              "trained, in seconds since the epoch")
    static = doc.setdefault("static", False)
    if not isinstance(static, bool):
        raise InvalidDocument(f"effect.static: expected a bool, got {static!r}")
    blob = doc.get("blob")
    if blob is not None and not isinstance(blob, bytes):
        raise InvalidDocument(f"effect.blob: expected bytes or None, got {type(blob).__name__}")
    return doc


def status_document(intent: str, time: float, status: Mapping[str, Any],
                    where: str = "status") -> Document:
    """A sanitized ``status`` document ``{"intent", "time", "status"}``."""
    if not isinstance(status, Mapping):
        raise InvalidDocument(f"{where}.status: expected a mapping, got {type(status).__name__}")
    doc = sanitize({"intent": intent, "time": time, "status": status}, where)
    require_str(doc, "intent", where)
    require_number(doc, "time", where)
    return doc


def memory_document(intent: str, memory: Mapping[str, Any], where: str = "memory") -> Document:
    """A sanitized ``memory`` document: ``memory`` with its ``intent``."""
    if not isinstance(memory, Mapping):
        raise InvalidDocument(f"{where}: expected a mapping, got {type(memory).__name__}")
    doc = sanitize({**memory, "intent": intent}, where)
    require_str(doc, "intent", where)
    return doc
