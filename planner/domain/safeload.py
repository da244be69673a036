"""One safe loader for every YAML and JSON document the project reads from a user.

Bounded before anything is built: the size of the text (:attr:`Limits.max_bytes`), the number
of nodes after aliases are expanded (:attr:`Limits.max_nodes`, so a "billion laughs" alias
bomb is refused without expanding it) and the nesting depth (:attr:`Limits.max_depth`, so a
deeply nested document cannot exhaust the stack). The documents are then plain JSON data:
mappings with string keys (a key given twice is refused), lists, strings, booleans, finite
numbers and null. YAML timestamps stay strings (as in Kubernetes) and ``1e3`` is a number
(as in YAML 1.2 and JSON); tags beyond those are refused.

Every failure is a :class:`LoadError` (a :class:`~planner.domain.errors.SpecError`): one line
naming the place and the fix, with the offending value shortened (:func:`short`).
"""

from __future__ import annotations

import json
import math
import os
import re
import reprlib
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml import events, nodes

from planner.domain.errors import SpecError


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 1 << 20
    """Largest text read (1 MiB: Kubernetes stores no object larger than about 1.5 MiB)."""
    max_nodes: int = 50_000
    """Most values (scalars, lists, mappings) in one document, aliases expanded."""
    max_depth: int = 64
    """Deepest nesting of lists and mappings, aliases expanded."""


DEFAULT_LIMITS = Limits()
MAX_INT = 2**63 - 1
"""Integers beyond int64 (what Kubernetes stores) are refused."""


class LoadError(SpecError):
    """A document that cannot be loaded safely (too large, too deep, not plain data)."""


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 4


def short(value: Any) -> str:
    """A bounded ``repr`` of ``value``: at most about 100 characters whatever its size (the
    work is bounded too: only the first few items of the first two levels are looked at)."""
    return _REPR.repr(value)


# ------------------------------------------------------------------------------------ files
def read_bytes(path: str | Path, max_bytes: int, what: str = "file") -> bytes:
    """The content of a regular file of at most ``max_bytes`` bytes (a device such as
    ``/dev/zero``, a FIFO or a directory is refused, and so is a file that grows past the
    limit while it is read)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise LoadError(str(p), "(file)", f"not a regular {what}",
                                f"give the path of a regular {what}")
            if info.st_size > max_bytes:
                raise LoadError(str(p), "(file)", f"{info.st_size} bytes, more than the "
                                f"{max_bytes} allowed", f"give a {what} of at most {max_bytes} "
                                "bytes")
            data = fh.read(max_bytes + 1)
    except IsADirectoryError:
        raise LoadError(str(p), "(file)", "is a directory",
                        f"give the path of a regular {what}") from None
    except OSError as exc:
        raise LoadError(str(p), "(file)", f"cannot read: {exc.strerror or exc}",
                        f"give an existing, readable {what}") from None
    if len(data) > max_bytes:
        raise LoadError(str(p), "(file)", f"more than the {max_bytes} bytes allowed",
                        f"give a {what} of at most {max_bytes} bytes")
    return data


def read_text(path: str | Path, limits: Limits = DEFAULT_LIMITS, what: str = "file") -> str:
    """:func:`read_bytes`, decoded as UTF-8."""
    data = read_bytes(path, limits.max_bytes, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(str(path), "(file)", f"not UTF-8 text (byte {exc.start})",
                        "save the file as UTF-8") from None


# ------------------------------------------------------------------------------------- YAML
_BASE_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


class _Loader(_BASE_LOADER):  # type: ignore[misc]
    """PyYAML's safe loader with JSON's data model: no timestamps, sets, binary or ordered
    maps; ``1e3`` is a float; a key given twice is an error."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BASE_LOADER.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: nodes.MappingNode, deep: bool = False) -> Any:
        seen: dict[Any, nodes.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise _Refused(key_node, f"key {short(key)} is not a string",
                               "quote the key")
            if key in seen:
                raise _Refused(key_node, f"key {short(key)} given twice",
                               "keep one of the two entries")
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def refuse_tag(self, node: nodes.Node) -> Any:
        raise _Refused(node, f"unsupported YAML tag {short(node.tag)}",
                       "use plain mappings, lists, strings, numbers and booleans")


for _first in "-+0123456789.":
    _Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list(_first))
for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.refuse_tag)
_Loader.add_constructor(None, _Loader.refuse_tag)


class _Refused(Exception):
    def __init__(self, node: nodes.Node, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.node, self.problem, self.fix = node, problem, fix


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else \
        "(document)"


def _check_events(text: str, source: str, limits: Limits) -> None:
    """Depth and size of the event stream, before any node is built (the C composer recurses
    without a limit)."""
    loader = _Loader(text)
    depth = count = 0
    try:
        while True:
            ev = loader.get_event()
            if ev is None or isinstance(ev, events.StreamEndEvent):
                return
            if isinstance(ev, events.DocumentStartEvent):
                count = 0
            if isinstance(ev, events.CollectionStartEvent):
                depth += 1
                if depth > limits.max_depth:
                    raise LoadError(source, _at(ev.start_mark), f"nested deeper than "
                                    f"{limits.max_depth} levels", "flatten the document")
            elif isinstance(ev, events.CollectionEndEvent):
                depth -= 1
            if isinstance(ev, events.NodeEvent):
                count += 1
                if count > limits.max_nodes:
                    raise LoadError(source, _at(ev.start_mark), f"more than "
                                    f"{limits.max_nodes} values in one document",
                                    "split or shorten the document")
    finally:
        loader.dispose()


def _measure(node: nodes.Node, depth: int, memo: dict[int, tuple[int, int]],
             source: str, limits: Limits) -> tuple[int, int]:
    """(values, height) of ``node`` with aliases expanded, each node counted once (an alias
    bomb is refused without being expanded; a recursive alias nests without end). The
    recursion stops at ``max_depth``."""
    known = memo.get(id(node))
    height = known[1] if known is not None else 1
    if depth + height - 1 > limits.max_depth:
        raise LoadError(source, _at(node.start_mark), f"nested deeper than {limits.max_depth} "
                        "levels once aliases are expanded", "flatten the document or use "
                        "fewer aliases")
    if known is not None:
        return known
    children: list[nodes.Node] = []
    if isinstance(node, nodes.SequenceNode):
        children = list(node.value)
    elif isinstance(node, nodes.MappingNode):
        children = [n for pair in node.value for n in pair]
    size, height = 1, 0
    for child in children:
        s, h = _measure(child, depth + 1, memo, source, limits)
        size, height = size + s, max(height, h)
        if size > limits.max_nodes:
            raise LoadError(source, _at(node.start_mark), f"more than {limits.max_nodes} "
                            "values once aliases are expanded", "use fewer aliases")
    memo[id(node)] = (size, height + 1)
    return size, height + 1


def load_yaml(text: str | bytes, source: str = "", limits: Limits = DEFAULT_LIMITS
              ) -> list[Any]:
    """Every document of a YAML stream as plain data (empty documents are dropped)."""
    if isinstance(text, bytes):
        if len(text) > limits.max_bytes:
            raise LoadError(source, "(document)", f"{len(text)} bytes, more than the "
                            f"{limits.max_bytes} allowed", "give a smaller document")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LoadError(source, "(document)", f"not UTF-8 text (byte {exc.start})",
                            "save the document as UTF-8") from None
    if len(text) > limits.max_bytes:
        raise LoadError(source, "(document)", f"{len(text)} characters, more than the "
                        f"{limits.max_bytes} allowed", "give a smaller document")
    docs: list[Any] = []
    try:
        _check_events(text, source, limits)
        loader = _Loader(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                _measure(node, 1, {}, source, limits)
                doc = loader.construct_document(node)
                if doc is not None:
                    check_data(doc, source, limits=limits)
                    docs.append(doc)
        finally:
            loader.dispose()
    except _Refused as exc:
        raise LoadError(source, _at(exc.node.start_mark), exc.problem, exc.fix) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(str(exc.problem or exc.context or "syntax error").split())
        if "nesting depth" in problem:
            # The libyaml in PyYAML 6.0.4 refuses 1,000 levels while scanning ahead,
            # before the event check above sees the first one: the same refusal.
            raise LoadError(source, _at(mark), f"nested deeper than {limits.max_depth} "
                            "levels", "flatten the document") from None
        raise LoadError(source, _at(mark), f"not valid YAML: {problem}",
                        "fix the syntax") from None
    except yaml.YAMLError as exc:
        raise LoadError(source, "(document)", f"not valid YAML: {short(str(exc))}",
                        "fix the syntax") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of 5,000 digits
        raise LoadError(source, "(document)", f"a value cannot be read: {short(str(exc))}",
                        "give numbers of at most 18 digits") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise LoadError(source, "(document)", "nested too deeply",
                        "flatten the document") from None
    return docs


# ------------------------------------------------------------------------------------- JSON
def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_constant(name: str) -> Any:
    raise _NonFinite(name)


class _NonFinite(ValueError):
    pass


def load_json(text: str | bytes, source: str = "", limits: Limits = DEFAULT_LIMITS) -> Any:
    """One JSON document as plain data: duplicate keys, ``NaN`` and ``Infinity`` refused."""
    if len(text) > limits.max_bytes:
        raise LoadError(source, "(document)", f"{len(text)} bytes, more than the "
                        f"{limits.max_bytes} allowed", "give a smaller document")
    try:
        doc = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        raise LoadError(source, "(document)", f"key {short(exc.key)} given twice",
                        "keep one of the two entries") from None
    except _NonFinite as exc:
        raise LoadError(source, "(document)", f"{exc} is not a finite number",
                        "give a finite number") from None
    except json.JSONDecodeError as exc:
        raise LoadError(source, f"line {exc.lineno}, column {exc.colno}",
                        f"not valid JSON: {exc.msg}", "fix the syntax") from None
    except UnicodeDecodeError as exc:
        raise LoadError(source, "(document)", f"not UTF-8 text (byte {exc.start})",
                        "save the document as UTF-8") from None
    except RecursionError:
        raise LoadError(source, "(document)", f"nested deeper than {limits.max_depth} levels",
                        "flatten the document") from None
    except ValueError as exc:  # e.g. an integer of 5,000 digits
        raise LoadError(source, "(document)", f"a value cannot be read: {short(str(exc))}",
                        "give numbers of at most 18 digits") from None
    check_data(doc, source, limits=limits)
    return doc


def load_file(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> list[Any]:
    """The documents of a YAML file (or of a JSON file, by its ``.json`` suffix)."""
    text = read_text(path, limits)
    if Path(path).suffix.lower() == ".json":
        return [load_json(text, str(path), limits)]
    return load_yaml(text, str(path), limits)


# -------------------------------------------------------------------------------- plain data
def _path(prefix: str, part: str | int) -> str:
    if isinstance(part, int):
        return f"{prefix}[{part}]"
    return f"{prefix}.{part}" if prefix else part


def check_data(doc: Any, source: str = "", prefix: str = "",
               limits: Limits = DEFAULT_LIMITS) -> None:
    """Raise :class:`LoadError` unless ``doc`` is plain JSON data within ``limits``: string
    keys, finite numbers, integers within int64, no deeper than ``max_depth``, no more than
    ``max_nodes`` values. For documents that did not come through :func:`load_yaml` or
    :func:`load_json` (an API body, an object read from Kubernetes)."""
    budget = [limits.max_nodes]

    def walk(value: Any, path: str, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise LoadError(source, path or "(document)", f"more than {limits.max_nodes} "
                            "values", "split or shorten the document")
        if depth > limits.max_depth:
            raise LoadError(source, path or "(document)", f"nested deeper than "
                            f"{limits.max_depth} levels", "flatten the document")
        if value is None or isinstance(value, str | bool):
            return
        if isinstance(value, int):
            if abs(value) > MAX_INT:
                raise LoadError(source, path or "(document)", f"integer {short(value)} is too "
                                "large", f"give an integer between {-MAX_INT} and {MAX_INT}")
            return
        if isinstance(value, float):
            if not math.isfinite(value):
                raise LoadError(source, path or "(document)", f"{value} is not a finite "
                                "number", "give a finite number")
            return
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise LoadError(source, path or "(document)", f"key {short(key)} is not a "
                                    "string", "quote the key")
                walk(item, _path(path, key), depth + 1)
            return
        if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
            for i, item in enumerate(value):
                walk(item, _path(path, i), depth + 1)
            return
        raise LoadError(source, path or "(document)", f"unsupported value {short(value)} "
                        f"({type(value).__name__})", "give a mapping, list, string, number, "
                        "boolean or null")

    walk(doc, prefix, 0)
