"""Reading stored documents defensively.

The knowledge base may hold documents this version did not write: by an older version, another
tool, or by hand (``timestamp: 1e300``, ``time: "yesterday"``). The API serves what it can
read; a document it cannot is left out, logged and *reported* in the answer (``skipped`` and
``problems``), never a 500 and never silently.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import pydantic

from knowledge.documents import timestamp_problem
from planner.api import schemas
from planner.api.preview import json_safe
from planner.domain.status import rfc3339

log = logging.getLogger(__name__)

MAX_PROBLEMS = 10
"""Problems listed in one answer (``skipped`` counts them all)."""


class Unreadable(ValueError):
    """A stored document the API cannot serve; ``str()`` names the field and the problem."""


@dataclass
class Skipped:
    """The documents one answer left out."""

    collection: str
    count: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        self.count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)
        log.warning("%s: a stored document was skipped: %s", self.collection, problem)


def _text(value: Any, limit: int = 60) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON/BSON number (``bool`` is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _name(doc: dict[str, Any], key: str, what: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str):
        raise Unreadable(f"{what} with {key} {_text(value)}: {key} must be a string")
    return value


def effect(doc: dict[str, Any], not_after: float) -> schemas.EffectOut:
    """An effect document as served (``newest`` false: the caller knows the order);
    :class:`Unreadable` if it cannot be (its timestamp must be a finite number between 1970
    and ``not_after``, the store's clock)."""
    intent = _name(doc, "intent", "an effect")
    objective = _name(doc, "objective", f"effect {intent}")
    raw = doc.get("timestamp")
    problem = timestamp_problem(raw, not_after)
    if problem is not None or not is_number(raw):
        raise Unreadable(f"effect {intent} {objective}: timestamp {problem}; fix: correct or "
                         "delete the document")
    ts = float(raw)
    meta = doc.get("metadata")
    fmt = doc.get("format")
    try:
        return schemas.EffectOut(
            intent=intent, objective=objective, timestamp=ts, trained_at=rfc3339(ts),
            static=doc.get("static") is True, kind=str(doc.get("kind")),
            format=str(fmt) if fmt is not None else None, newest=False,
            metadata=json_safe(meta) if isinstance(meta, dict) else {})
    except (pydantic.ValidationError, ValueError, OverflowError, OSError) as exc:
        raise Unreadable(f"effect {intent} {objective}: {type(exc).__name__}") from None


def event(doc: dict[str, Any]) -> schemas.EventOut:
    """An event document as served; :class:`Unreadable` without a finite ``time`` and a
    string ``intent``. Other fields that do not match the schema are left out."""
    time, intent = _when_and_whose(doc, "event")
    try:
        return schemas.EventOut.model_validate(json_safe(doc))
    except pydantic.ValidationError:
        # Written by another version: serve what matches the schema.
        return schemas.EventOut(time=time, intent=intent)


def pod_detail(doc: dict[str, Any]) -> schemas.PodDetailOut:
    """A pod-detail document as served; :class:`Unreadable` as :func:`event`."""
    time, intent = _when_and_whose(doc, "pod detail")
    try:
        return schemas.PodDetailOut.model_validate(json_safe(doc))
    except pydantic.ValidationError:
        return schemas.PodDetailOut(time=time, intent=intent)


def _when_and_whose(doc: dict[str, Any], what: str) -> tuple[float, str]:
    raw = doc.get("time")
    if not is_number(raw) or not math.isfinite(raw):
        raise Unreadable(f"{what} with time {_text(raw)}: time must be a finite number of "
                         "seconds since the epoch; fix: correct or delete the document")
    time = float(raw)
    return time, _name(doc, "intent", f"{what} at {time:g}")


def status(doc: Any) -> dict[str, Any] | None:
    """The ``status`` of a stored status document, JSON-safe; ``None`` if it has none."""
    if not isinstance(doc, dict) or not isinstance(doc.get("status"), dict):
        return None
    out: dict[str, Any] = json_safe(doc["status"])
    return out
