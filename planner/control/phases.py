"""Where a controller cycle spends its CPU time, per phase (observe, kpis, plan, act, record,
status, retention, hooks).

A :class:`PhaseClock` adds the process CPU time spent inside ``with clock.phase("plan"):`` to
that phase's total; the controller keeps one per cycle (``IntentController.phases``) for the
scale benchmark and anyone who wants to know what a cycle costs. Process CPU time includes
other threads of the process (a threaded trainer): on a live controller the figures are an
upper bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("observe", "kpis", "plan", "act", "record", "status", "retention", "hooks")


class PhaseClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.process_time() - t0

    @property
    def total(self) -> float:
        return sum(self.seconds.values())
