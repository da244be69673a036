"""The learned effect models a planner uses, read from the knowledge base and kept between
cycles."""

from __future__ import annotations

import logging

from knowledge.base import KnowledgeBase
from planner.domain.errors import TemporaryError
from planner.models import serialization
from planner.models.effects import EffectModel, from_document

log = logging.getLogger(__name__)


class EffectCache:
    """Newest usable model per (intent, objective), re-read from the knowledge base at most
    every ``refresh_s``; refused documents are logged once and skipped.

    It is a cache, not memory: when the model was loaded (``loaded_at``) is the planner's memory
    of the intent. Given it back, the cache serves the model as the knowledge base had it then
    (a restarted planner uses the model the uninterrupted one would still be using)."""

    def __init__(self, knowledge: KnowledgeBase | None, lookback_s: float = 6 * 3600.0,
                 refresh_s: float = 60.0) -> None:
        self.knowledge = knowledge
        self.lookback_s = lookback_s
        self.refresh_s = refresh_s
        self._cache: dict[tuple[str, str], tuple[float, EffectModel | None]] = {}
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
            if hit is None or hit[0] != loaded_at:
                hit = (loaded_at, self._load(intent, objective, loaded_at))
                self._cache[key] = hit
            return hit[1], loaded_at
        model = self._load(intent, objective, now)
        self._cache[key] = (now, model)
        return model, now

    def _load(self, intent: str, objective: str, now: float) -> EffectModel | None:
        if self.knowledge is None:
            return None
        try:
            doc = self.knowledge.effect(intent, objective, now, self.lookback_s)
        except TemporaryError as exc:
            log.warning("effects unavailable for %s/%s: %s", intent, objective, exc)
            hit = self._cache.get((intent, objective))
            return hit[1] if hit else None
        if doc is None:
            return None
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
