"""Progress of a long simulation, on stderr (never in the ``--json`` output on stdout), and
Ctrl-C as "stop here and report what ran".

On a terminal: a progress bar. Otherwise (stderr to a file or a pipe): one plain line every
``every_s`` seconds of wall time, the first after ``every_s``, so a short run prints none.
"""

from __future__ import annotations

import signal
import time
from types import FrameType, TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class SimulationProgress:
    def __init__(self, console: Console, label: str, total_s: float,
                 every_s: float = 10.0) -> None:
        self.console = console
        self.label = label
        self.total_s = total_s
        self.every_s = every_s
        self._bar: Progress | None = None
        self._task: Any = None
        self._t0 = time.monotonic()
        self._next = self._t0 + every_s

    def __enter__(self) -> SimulationProgress:
        if self.console.is_terminal:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                 TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                                 console=self.console, transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(escape(self.label), total=self.total_s)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(et, ev, tb)

    def update(self, done_s: float) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done_s)
            return
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every_s
        share = done_s / self.total_s if self.total_s > 0 else 1.0
        self.console.print(f"{self.label}: {done_s / 60:.1f} of {self.total_s / 60:.1f} "
                           f"simulated min ({share:.0%}), {now - self._t0:.0f} s",
                           markup=False, highlight=False)


class StopOnInterrupt:
    """While active, the first Ctrl-C (SIGINT) sets :attr:`stopped` instead of raising, so a
    run can end its step and report; a second one interrupts as usual."""

    def __init__(self) -> None:
        self.stopped = False
        self._previous: Any = None

    def __enter__(self) -> StopOnInterrupt:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.stopped = True
        signal.signal(signal.SIGINT, self._previous)
