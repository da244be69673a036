"""The learned effect models a planner uses, read from the knowledge base and kept between
cycles.

Stale while error: when the knowledge base cannot be read (a
:class:`~planner.domain.errors.TemporaryError`), the last model read for an (intent, objective)
is served on, and :meth:`EffectCache.stale` says since when. A model is never kept past the
look-back the store itself applies (``lookback_s``, unless static): after that the planner
falls back to the explicit estimate, as it would with the store up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from knowledge.base import Document, KnowledgeBase
from planner.domain.errors import TemporaryError
from planner.models import serialization
from planner.models.effects import EffectModel, from_document

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stale:
    """A model served from memory because the knowledge base cannot be read."""

    since: float
    """Time of the first read that failed: the model has been served stale since then."""
    confirmed: float
    """Time of the last read that succeeded: the model was the newest one then."""
    error: str
    """The first failure."""

    def age_s(self, now: float) -> float:
        """Seconds the model has been served stale at ``now``."""
        return max(0.0, now - self.since)


@dataclass(frozen=True)
class _Entry:
    checked: float
    """Time of the last read attempt."""
    model: EffectModel | None
    stale: Stale | None = None
    header: Document | None = None
    """The stored document ``model`` was read from, without its blob: while the newest one is
    still that, the model is not read and decoded again."""


class EffectCache:
    """Newest usable model per (intent, objective), re-read from the knowledge base at most
    every ``refresh_s``; refused documents are logged once and skipped; while reads fail the
    last good model is kept (see the module docstring).

    It is a cache, not memory: when the model was loaded (``loaded_at``) is the planner's memory
    of the intent. Given it back, the cache serves the model as the knowledge base had it then
    (a restarted planner uses the model the uninterrupted one would still be using)."""

    def __init__(self, knowledge: KnowledgeBase | None, lookback_s: float = 6 * 3600.0,
                 refresh_s: float = 60.0) -> None:
        self.knowledge = knowledge
        self.lookback_s = lookback_s
        self.refresh_s = refresh_s
        self._cache: dict[tuple[str, str], _Entry] = {}
        self._refused: dict[tuple[str, str, float], str] = {}
        self.refusals = 0

    def get(self, intent: str, objective: str, now: float,
            loaded_at: float | None = None) -> tuple[EffectModel | None, float]:
        """The model to use at ``now`` and when it was loaded. ``loaded_at`` is when the model
        in use was loaded (from the planner's memory): within ``refresh_s`` of it, that model
        is served."""
        key = (intent, objective)
        hit = self._cache.get(key)
        if loaded_at is not None and now - loaded_at < self.refresh_s:
            if hit is None or hit.checked != loaded_at:
                hit = self._read(intent, objective, loaded_at, hit)
                self._cache[key] = hit
            return hit.model, loaded_at
        entry = self._read(intent, objective, now, hit)
        self._cache[key] = entry
        return entry.model, now

    def stale(self, intent: str, objective: str) -> Stale | None:
        """Since when the model :meth:`get` returns is served stale; None when it is fresh
        (or there is no model)."""
        hit = self._cache.get((intent, objective))
        return hit.stale if hit is not None and hit.model is not None else None

    def _read(self, intent: str, objective: str, now: float, hit: _Entry | None) -> _Entry:
        if self.knowledge is None:
            return _Entry(now, None)
        try:
            if hit is not None and hit.header is not None:
                head = self.knowledge.effect(intent, objective, now, self.lookback_s,
                                             with_blob=False)
                if head == hit.header:  # still the newest: keep the decoded model
                    self._readable_again(intent, objective, now, hit)
                    return _Entry(now, hit.model, header=hit.header)
                if head is None:
                    self._readable_again(intent, objective, now, hit)
                    return _Entry(now, None)
            doc = self.knowledge.effect(intent, objective, now, self.lookback_s)
        except TemporaryError as exc:
            return self._keep(intent, objective, now, hit, exc)
        self._readable_again(intent, objective, now, hit)
        if doc is None:
            return _Entry(now, None)
        header = {k: v for k, v in doc.items() if k != "blob"}
        return _Entry(now, self._model(intent, objective, doc), header=header)

    @staticmethod
    def _readable_again(intent: str, objective: str, now: float, hit: _Entry | None) -> None:
        if hit is not None and hit.stale is not None:
            log.info("effects for %s/%s readable again after %.0f s", intent, objective,
                     hit.stale.age_s(now))

    def _keep(self, intent: str, objective: str, now: float, hit: _Entry | None,
              exc: TemporaryError) -> _Entry:
        """The entry while reads fail: the last model, unless the store would have let it
        expire too."""
        model = hit.model if hit is not None else None
        if model is not None and not model.static and model.timestamp < now - self.lookback_s:
            log.warning("effects unavailable for %s/%s and the last model is older than the "
                        "look-back: falling back to the explicit model", intent, objective)
            model = None
        if model is None or hit is None:
            log.warning("effects unavailable for %s/%s: %s", intent, objective, exc)
            return _Entry(now, None)
        if hit.stale is not None:
            return _Entry(now, model, hit.stale, hit.header)
        log.warning("effects unavailable for %s/%s, serving the model read at %s stale: %s",
                    intent, objective, hit.checked, exc)
        return _Entry(now, model, Stale(since=now, confirmed=hit.checked, error=str(exc)),
                      hit.header)

    def _model(self, intent: str, objective: str, doc: Document) -> EffectModel | None:
        try:
            return from_document(doc)
        except serialization.ModelRefused as exc:
            tag = (intent, objective, float(doc.get("timestamp", 0.0)))
            if tag not in self._refused:
                self._refused[tag] = str(exc)
                self.refusals += 1
                log.warning("refused effect model for %s objective %s (timestamp %s): %s; "
                            "falling back to the explicit model", intent, objective, tag[2], exc)
            return None
