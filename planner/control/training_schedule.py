"""Which intents to refit next, within a CPU budget per hour (pure: no clock, no store).

Each candidate intent comes with what the knowledge base says of its models: when they were
last fitted, how many settled observations arrived since, how wrong the last model was on its
held-out rows (``metadata.validation.mape``) and what its last fit cost (CPU seconds,
``metadata.training.cpu_s``, measured). :func:`choose` skips intents without new data, ranks
the rest by :func:`priority` (staler and worse-fitting first) and takes them in that order
while their costs fit in what the budget has left (:class:`CpuLedger`: CPU seconds spent over
the last hour). It stops at the first that does not fit rather than skipping to cheaper ones,
so an expensive, stale model is not starved by a stream of cheap ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

HOUR_S = 3600.0
ERROR_CAP = 1.0
"""Validation errors (MAPE) above this rank as this: 100 % off is as bad as it gets."""
UNKNOWN_ERROR = ERROR_CAP
"""A model without a validation score (too few rows to hold some out) ranks as the worst."""


@dataclass(frozen=True)
class ModelState:
    """What the schedule knows of one intent's models."""

    intent: str
    new_rows: int
    """Settled observations since the last fit (all of them when there is no model)."""
    last_fit: float | None
    """Timestamp of the oldest of the intent's current models; ``None``: some have none."""
    error: float | None = None
    """The worst validation error (MAPE) of its latency models; ``None``: unknown."""
    cost_s: float | None = None
    """CPU seconds its last fit took (all objectives); ``None``: never measured."""


def priority(state: ModelState, now: float) -> float:
    """Age of the model weighted by how badly it fits: ``age * (1 + min(error, 1))``.
    An intent without a model comes first (infinite). Grows with the age and the error."""
    if state.last_fit is None:
        return math.inf
    err = UNKNOWN_ERROR if state.error is None or math.isnan(state.error) else state.error
    return max(now - state.last_fit, 0.0) * (1.0 + min(max(err, 0.0), ERROR_CAP))


def choose(states: Iterable[ModelState], now: float, available_s: float | None,
           unknown_cost_s: float | None = None, min_new_rows: int = 1) -> list[ModelState]:
    """The intents to fit now, highest :func:`priority` first (ties: more new rows, then the
    key), whose costs add up to at most ``available_s`` CPU seconds (``None``: unlimited).

    Intents with fewer than ``min_new_rows`` new observations are never chosen. A cost never
    measured counts as ``unknown_cost_s`` (say the mean of those measured); with no
    measurement at all, such an intent takes whatever is left, so one runs and is measured
    before others are admitted on a guess."""
    ready = [s for s in states if s.new_rows >= max(min_new_rows, 1)]
    ready.sort(key=lambda s: (-priority(s, now), -s.new_rows, s.intent))
    if available_s is None:
        return ready
    picked: list[ModelState] = []
    left = available_s
    for s in ready:
        cost = s.cost_s if s.cost_s is not None else unknown_cost_s
        if cost is None:
            cost = left if left > 0 else math.inf
        if cost > left:
            break
        picked.append(s)
        left -= cost
    return picked


@dataclass
class CpuLedger:
    """CPU seconds spent on fits, by when they were charged; what the last hour's budget has
    left. Rebuilt from the stored models' ``metadata.training`` after a restart."""

    entries: list[tuple[float, float]] = field(default_factory=list)

    def charge(self, time: float, cpu_s: float) -> None:
        self.entries.append((time, max(cpu_s, 0.0)))

    def spent(self, now: float) -> float:
        """CPU seconds charged within the hour up to ``now`` (older entries are dropped)."""
        self.entries = [(t, c) for t, c in self.entries if t > now - HOUR_S]
        return sum(c for _, c in self.entries)

    def available(self, now: float, budget_s: float | None, reserved_s: float = 0.0
                  ) -> float | None:
        """What ``budget_s`` per hour leaves now, after fits under way (``reserved_s``);
        ``None``: unlimited."""
        if budget_s is None:
            return None
        return budget_s - self.spent(now) - reserved_s

    def mean_cost(self) -> float | None:
        """Mean CPU seconds per fit charged in the window; ``None`` before the first."""
        if not self.entries:
            return None
        return sum(c for _, c in self.entries) / len(self.entries)
