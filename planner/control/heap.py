"""Keeping CPython's cyclic garbage collector off a large controller's cycle.

A full collection scans every tracked object of the oldest generation, and one starts whenever
the objects that survived into that generation since the last one reach a quarter of it. A
controller cycle at 1,000 intents keeps most of a million tracked objects alive (the
snapshot's pods, the memories, the models) and replaces a large part of them every cycle (a new
snapshot, new plans), so a full collection runs about every cycle and scans the whole heap,
although what the cycle replaced is freed by reference counting, not by the collector
(``bench/scale.py`` prints the collector's CPU per cycle).

:class:`HeapKeeper`, a cycle hook, collects after each cycle what the cycle left (the objects
not frozen) and then freezes the survivors (:func:`gc.freeze`), so the collections of the next
cycle scan only what that cycle allocates; and while it is installed the collector starts no
full collection of its own (the third threshold raised): the keeper's collection after each
cycle is that cycle's full collection. Garbage cycles that reach a frozen object are not found
while it is frozen, so every ``full_every`` cycles the heap is unfrozen and collected in full.
The collector is process-wide state: the operator and the CLI install the keeper; a controller
built as a library object (tests, notebooks) leaves the process's collector alone.
:meth:`HeapKeeper.close` gives it back as it was.

In a steady cycle that collection finds nothing: what a cycle leaves is freed by reference
counting, so the collection only scans the live objects the cycle allocated (the snapshot's
pods above all) to find no garbage (measured in ``docs/benchmarks.md`` section 47). So the
keeper spaces its collections out while they find nothing: each empty collection doubles the
cycles to the next, up to ``max_spacing``; one that finds garbage brings them back to every
cycle. Garbage cycles then wait at most ``max_spacing`` cycles, and only while the cycles
before made none.

Measured at 1,000 intents (``docs/benchmarks.md`` section 35): the collector's CPU per cycle
1.00 s as CPython leaves it, 0.75 s with the freezing alone (it still ran three full
collections a cycle, each over what the cycle had allocated), 0.44 s with both.
"""

from __future__ import annotations

import gc
import time
from typing import Any

MAX_SPACING = 8
"""Most cycles between the keeper's collections while they find no garbage (a collection's
CPU per cycle falls as one over the spacing: an eighth of it at 8, for garbage held two
minutes at most at 15 s cycles)."""
FULL_EVERY = 240
"""Cycles between full collections of the unfrozen heap (an hour at 15 s cycles)."""
NO_AUTOMATIC_FULL = 1_000_000
"""The collector's third threshold while the keeper is installed: young collections before
it may start a full one (CPython's default is 10)."""


class HeapKeeper:
    """A cycle hook (see the module docstring); ``seconds`` and ``collections`` count its own
    work."""

    def __init__(self, full_every: int = FULL_EVERY, max_spacing: int = MAX_SPACING) -> None:
        if full_every < 1:
            raise ValueError("full_every must be >= 1")
        if max_spacing < 1:
            raise ValueError("max_spacing must be >= 1")
        self.full_every = full_every
        self.max_spacing = max_spacing
        self.spacing = 1
        """Cycles from one collection to the next, now."""
        self._since = 0
        """Cycles since the last collection."""
        self.cycles = 0
        self.collections = 0
        self.full_collections = 0
        self.seconds = 0.0
        """CPU seconds spent in its collections."""
        self._thresholds: tuple[int, int, int] | None = None
        """The collector's thresholds before the keeper was installed (``None``: it is not)."""

    def __call__(self, _snapshot: Any, _outcomes: Any) -> None:
        start = time.process_time()
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            gc.set_threshold(self._thresholds[0], self._thresholds[1], NO_AUTOMATIC_FULL)
        self.cycles += 1
        self._since += 1
        full = self.cycles % self.full_every == 0
        if full or self._since >= self.spacing:
            if full:
                gc.unfreeze()
                self.full_collections += 1
            found = gc.collect()
            gc.freeze()
            self.collections += 1
            self._since = 0
            self.spacing = 1 if found else min(2 * self.spacing, self.max_spacing)
        self.seconds += time.process_time() - start

    def close(self) -> None:
        """Give the frozen objects back to the collector and its thresholds back as they were
        (the controller stops)."""
        gc.unfreeze()
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
