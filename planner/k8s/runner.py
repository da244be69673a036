"""Coalesce planning requests into controller cycles.

Every Intent has a kopf timer (so kopf peering pauses planning in a standby replica and
deletion stops it), but the controller plans all intents in one pass:
:meth:`planner.control.controller.IntentController.cycle` observes the cluster once and reconciles
the
intents in priority order. :class:`CycleRunner` turns the ticks of N timers into at most one
cycle per interval, and a change to an intent (``request()`` + ``run(ticket)``) into one cycle
that starts after the change, however many changes arrive together (e.g. the ``resume`` of
1000 intents at start-up gives one or two cycles, not 1000).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class CycleRunner:
    """Runs ``cycle()`` when due; thread-safe, one cycle at a time."""

    def __init__(self, cycle: Callable[[], object], interval_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 ready: Callable[[], bool] | None = None) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self._cycle = cycle
        self._ready = ready
        self.interval_s = interval_s
        self.clock = clock
        self._run_lock = threading.Lock()
        self._state = threading.Lock()
        self._started = 0
        self._last_start: float | None = None
        self.cycles = 0
        self.failures = 0
        self.last_error: str | None = None
        self.last_cycle_s: float | None = None

    def request(self) -> int:
        """A ticket: :meth:`run` with it runs unless a cycle started after this request."""
        with self._state:
            return self._started + 1

    def due(self) -> bool:
        """Whether a timer tick should run a cycle now."""
        if self._ready is not None and not self._ready():
            return False
        with self._state:
            last = self._last_start
        return last is None or self.clock() - last >= self.interval_s * 0.95

    def run(self, ticket: int | None = None) -> bool:
        """Run one cycle if due (timer tick, ``ticket=None``) or if ``ticket`` is still open.

        Returns whether a cycle ran. Never raises: a failing cycle is logged and counted. While
        ``ready()`` is false nothing runs and nothing is consumed (the next tick tries again).
        """
        if self._ready is not None and not self._ready():
            return False
        with self._run_lock:
            with self._state:
                if ticket is not None:
                    if self._started >= ticket:
                        return False
                elif self._last_start is not None and \
                        self.clock() - self._last_start < self.interval_s * 0.95:
                    return False
                self._started += 1
                self._last_start = self.clock()
            t0 = time.perf_counter()
            try:
                self._cycle()
            except Exception as exc:  # the operator must survive a failing cycle
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("planning cycle failed")
                return False
            finally:
                self.last_cycle_s = time.perf_counter() - t0
            self.cycles += 1
            self.last_error = None
            return True
