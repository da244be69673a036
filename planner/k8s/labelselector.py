"""Kubernetes label selectors in their string form (``kubectl -l``, ``labels.Parse``).

A selector is requirements joined by commas, all of which must hold:

* ``key`` / ``!key``: the label exists / does not exist;
* ``key=value``, ``key==value`` / ``key!=value``: equal / not equal (a missing label is
  "not equal");
* ``key in (a,b)`` / ``key notin (a,b)``: one of / none of (a missing label is "none of").

The empty selector matches every object. :func:`parse` raises :class:`SelectorError` (a
``ValueError``) naming the offending part and the expected form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_KEY = re.compile(r"^([a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?/)?"
                  r"[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")
_VALUE = re.compile(r"^(([a-zA-Z0-9][-a-zA-Z0-9_.]*)?[a-zA-Z0-9])?$")
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ = re.compile(r"^(?P<key>[^=!\s]+)\s*(?P<op>==|=|!=)\s*(?P<value>\S*)$")
FORMS = "key, !key, key=value, key!=value, key in (a,b), key notin (a,b)"


class SelectorError(ValueError):
    """A selector string that does not parse."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str
    """``exists``, ``!exists``, ``in`` or ``notin`` (``=`` is ``in`` one value)."""
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        have = labels or {}
        return all(r.matches(have) for r in self.requirements)


def _split(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def _key(key: str, part: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise SelectorError(f"{part!r}: {key!r} is not a label key (give prefix/name or name)")
    return key


def _value(value: str, part: str) -> str:
    if not _VALUE.match(value) or len(value) > 63:
        raise SelectorError(f"{part!r}: {value!r} is not a label value (at most 63 characters: "
                            "letters, digits, '-', '_', '.', starting and ending alphanumeric)")
    return value


def _requirement(part: str) -> Requirement:
    text = part.strip()
    if not text:
        raise SelectorError(f"empty requirement (expected one of: {FORMS})")
    m = _SET.match(text)
    if m:
        values = [v.strip() for v in m["values"].split(",")]
        if not any(values):
            raise SelectorError(f"{text!r}: give at least one value in the parentheses")
        return Requirement(_key(m["key"], text), m["op"],
                           frozenset(_value(v, text) for v in values))
    m = _EQ.match(text)
    if m:
        op = "notin" if m["op"] == "!=" else "in"
        return Requirement(_key(m["key"], text), op, frozenset({_value(m["value"], text)}))
    if text.startswith("!"):
        return Requirement(_key(text[1:].strip(), text), "!exists")
    if re.search(r"\s|[=()<>]", text):
        raise SelectorError(f"{text!r} is not a requirement (expected one of: {FORMS})")
    return Requirement(_key(text, text), "exists")


def parse(text: str) -> Selector:
    """The selector of ``text``; the empty (or blank) string selects everything."""
    if not text.strip():
        return Selector(())
    return Selector(tuple(_requirement(p) for p in _split(text)))
