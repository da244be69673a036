"""Error messages of :func:`knowledge.documents.sanitize` name the offending field by its path
(the path is built only when a value is refused)."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowledge import documents


class Colour(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(("doc", "message"), [
    ({"a": {"b": [1, 2, {"c": object()}]}},
     r"^event\.a\.b\[2\]\.c: cannot store a value of type object; convert it"),
    ({"pods": [{"name": "p0"}, {"name": "p1", 3: "x"}]},
     r"^event\.pods\[1\]: keys must be strings, got int 3$"),
    ({"$set": 1}, r"^event\.\$set: top-level keys must not start with '\$'$"),
    ({"a": ({"k\x00": 1},)}, r"^event\.a\[0\]: key 'k\\x00' contains a NUL character$"),
    ({"a": [[0.0, "ok", "\ud800"]]}, r"^event\.a\[0\]\[2\]: string is not valid unicode"),
    ({"a": np.array([1.0]), "b": [np.float32(2.0), {"c": {1.5}}]},
     r"^event\.b\[1\]\.c: cannot store a value of type set"),
])
def test_a_refused_value_is_named_by_its_path(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(documents.InvalidDocument, match=message):
        documents.sanitize(doc, "event")


def test_a_batch_names_the_document_and_the_field() -> None:
    with pytest.raises(documents.InvalidDocument, match=r"^events\[3\]\.pods\[0\]\.cpu: "):
        documents.event_document({"time": 1.0, "intent": "a/b", "pods": [{"cpu": object()}]},
                                 where="events[3]")


def test_plain_values_are_copied_not_shared() -> None:
    inner = {"x": [1, 2]}
    got = documents.sanitize({"a": inner, "e": Colour.RED, "n": math.nan, "t": (1, 2.5),
                              "big": 2**70, "np": np.int64(3), "arr": np.arange(2)})
    assert got == {"a": {"x": [1, 2]}, "e": "red", "n": None, "t": [1, 2.5],
                   "big": float(2**70), "np": 3, "arr": [0, 1]}
    assert got["a"] is not inner and got["a"]["x"] is not inner["x"]


leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=4),
                   st.binary(max_size=4), st.just(object()), st.just({1.5}))
trees = st.recursive(leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.tuples(kids, kids),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), kids, max_size=3)),
    max_leaves=12)


@given(st.dictionaries(st.text(max_size=3), trees, max_size=4))
def test_the_same_copy_or_the_same_error_as_a_path_built_on_the_way_down(
        doc: dict[str, Any]) -> None:
    """Against a reference that formats every value's path as it descends (the sanitiser as
    it was before paths were built on the error path only)."""
    try:
        expected: Any = reference(doc, "doc")
    except documents.InvalidDocument as exc:
        expected = ("error", str(exc))
    try:
        got: Any = documents.sanitize(doc, "doc")
    except documents.InvalidDocument as exc:
        got = ("error", str(exc))
    assert got == expected


def reference(doc: dict[str, Any], where: str) -> dict[str, Any]:
    out = {}
    for key, value in doc.items():
        name = _ref_key(key, where)
        if name.startswith("$"):
            raise documents.InvalidDocument(
                f"{where}.{name}: top-level keys must not start with '$'")
        out[name] = _ref_value(value, f"{where}.{name}")
    return out


def _ref_key(key: object, where: str) -> str:
    if not isinstance(key, str):
        raise documents.InvalidDocument(
            f"{where}: keys must be strings, got {type(key).__name__} {key!r}")
    if "\x00" in key:
        raise documents.InvalidDocument(f"{where}: key {key!r} contains a NUL character")
    _ref_utf8(key, where)
    return key


def _ref_utf8(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise documents.InvalidDocument(
            f"{where}: string is not valid unicode ({exc.reason})") from None


def _ref_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | bytes):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else float(value)
    if isinstance(value, str):
        _ref_utf8(value, where)
        return value
    if isinstance(value, dict):
        return {_ref_key(k, where): _ref_value(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_ref_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise documents.InvalidDocument(
        f"{where}: cannot store a value of type {type(value).__name__}; "
        "convert it to numbers, strings, lists or dicts first")
