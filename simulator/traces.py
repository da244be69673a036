"""Request-rate traces: how many requests per second arrive at a workload at time ``t``.

Every trace is a pure function of time (and its seed), so a run is reproducible.
"""

from __future__ import annotations

import csv
import io
import math
from abc import ABC, abstractmethod
from bisect import bisect_right
from pathlib import Path

import numpy as np

from planner.domain.safeload import read_bytes


class Trace(ABC):
    """``rate(t)`` in requests per second, ``t`` in seconds since the start of the run."""

    @abstractmethod
    def base_rate(self, t: float) -> float: ...

    def __init__(self, noise: float = 0.0, seed: int = 0) -> None:
        self.noise = noise
        self._rng_seed = seed

    def rate(self, t: float) -> float:
        r = self.base_rate(t)
        if self.noise > 0:
            # Deterministic per (seed, second): the same t gives the same noise.
            rng = np.random.default_rng((self._rng_seed, int(t)))
            r *= float(np.exp(rng.normal(0.0, self.noise)))
        return max(0.0, r)


class ConstantTrace(Trace):
    def __init__(self, rate: float, noise: float = 0.0, seed: int = 0) -> None:
        super().__init__(noise, seed)
        self._rate = rate

    def base_rate(self, t: float) -> float:
        return self._rate


class StepTrace(Trace):
    """``initial`` until the first step, then each step's rate from its ``at`` onwards."""

    def __init__(
        self, initial: float, steps: list[tuple[float, float]], noise: float = 0.0, seed: int = 0
    ) -> None:
        super().__init__(noise, seed)
        self._initial = initial
        self._steps = sorted(steps)
        self._times = [s[0] for s in self._steps]

    def base_rate(self, t: float) -> float:
        i = bisect_right(self._times, t)
        return self._initial if i == 0 else self._steps[i - 1][1]


class DiurnalTrace(Trace):
    """``base + amplitude * sin(2 pi (t / period) + phase)``: a day compressed into ``period``."""

    def __init__(
        self, base: float, amplitude: float, period: float, phase: float = 0.0,
        noise: float = 0.0, seed: int = 0,
    ) -> None:
        super().__init__(noise, seed)
        self.base, self.amplitude, self.period, self.phase = base, amplitude, period, phase

    def base_rate(self, t: float) -> float:
        return self.base + self.amplitude * math.sin(2 * math.pi * t / self.period + self.phase)


class BurstyTrace(Trace):
    """A base rate with bursts of ``burst_rate`` lasting ``burst_duration`` seconds.

    Burst starts follow a Poisson process with mean gap ``mean_gap`` seconds, drawn once from
    the seed so the trace is a fixed function of time.
    """

    def __init__(
        self, base: float, burst_rate: float, mean_gap: float, burst_duration: float,
        horizon: float = 7 * 86400, noise: float = 0.0, seed: int = 0,
    ) -> None:
        super().__init__(noise, seed)
        self.base, self.burst_rate, self.burst_duration = base, burst_rate, burst_duration
        rng = np.random.default_rng(seed)
        starts: list[float] = []
        t = float(rng.exponential(mean_gap))
        while t < horizon:
            starts.append(t)
            t += burst_duration + float(rng.exponential(mean_gap))
        self._starts = starts

    def base_rate(self, t: float) -> float:
        i = bisect_right(self._starts, t)
        if i and t < self._starts[i - 1] + self.burst_duration:
            return self.burst_rate
        return self.base


class CsvTrace(Trace):
    """Rates from a CSV file of ``timestamp,rate`` rows, linearly interpolated.

    Timestamps are seconds (relative or absolute; the first row is time 0). With ``loop`` the
    trace repeats after its last row. The file is a regular file of at most ``max_bytes``
    (:class:`~planner.domain.safeload.LoadError` otherwise); a row without a number in either
    column, or with a number that is not finite, is a ValueError naming the row.
    """

    def __init__(
        self, path: str | Path, time_column: str = "timestamp", rate_column: str = "rate",
        loop: bool = True, scale: float = 1.0, noise: float = 0.0, seed: int = 0,
        max_bytes: int = 16 << 20,
    ) -> None:
        super().__init__(noise, seed)
        times: list[float] = []
        rates: list[float] = []
        try:
            text = read_bytes(path, max_bytes, "CSV file").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        reader = csv.DictReader(io.StringIO(text, newline=""))
        missing = {time_column, rate_column} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}")
        for row in reader:
            line = reader.line_num
            times.append(_number(row.get(time_column), path, line, time_column))
            rates.append(_number(row.get(rate_column), path, line, rate_column) * scale)
        if len(times) < 2:
            raise ValueError(f"{path}: needs at least two rows")
        t0 = times[0]
        self._t = np.asarray([x - t0 for x in times])
        self._r = np.asarray(rates)
        if not np.all(np.isfinite(self._t)) or not np.all(np.isfinite(self._r)):
            raise ValueError(f"{path}: timestamps and rates (times scale) must be finite")
        if np.any(np.diff(self._t) <= 0) or np.any(self._r < 0):
            raise ValueError(f"{path}: timestamps must increase and rates must be >= 0")
        self.loop = loop

    def base_rate(self, t: float) -> float:
        span = float(self._t[-1])
        if self.loop and span > 0:
            t = t % span
        return float(np.interp(t, self._t, self._r))


def _number(cell: str | None, path: str | Path, line: int, column: str) -> float:
    """A CSV cell as a finite number; ValueError naming the line and column otherwise."""
    if cell is None or not cell.strip():
        raise ValueError(f"{path}: line {line} has no {column}")
    try:
        value = float(cell)
    except ValueError:
        raise ValueError(f"{path}: line {line}: {column} {cell[:40]!r} is not a number") \
            from None
    if not math.isfinite(value):
        raise ValueError(f"{path}: line {line}: {column} {cell[:40]!r} is not a finite number")
    return value


class RandomWalkTrace(Trace):
    """A bounded geometric random walk: the log of the rate takes a Gaussian step every
    ``interval`` seconds (standard deviation ``volatility * sqrt(interval / 1 h)``) and is
    reflected at ``log(low)`` and ``log(high)``; between knots it is interpolated linearly in
    log space, so the rate is continuous.

    The knots are drawn from the seed in order and kept, so ``rate(t)`` is a fixed function of
    ``t`` whatever order it is asked in; they are drawn up to ``horizon`` at once and extended
    beyond it (with the same stream) only if asked.
    """

    def __init__(
        self, initial: float, low: float, high: float, volatility: float, interval: float = 60.0,
        horizon: float = 7 * 86400, noise: float = 0.0, seed: int = 0,
    ) -> None:
        super().__init__(noise, seed)
        if not 0 < low <= initial <= high:
            raise ValueError("need 0 < low <= initial <= high")
        if interval <= 0 or volatility < 0:
            raise ValueError("need interval > 0 and volatility >= 0")
        self.low, self.high, self.interval = low, high, interval
        self._lo, self._hi = math.log(low), math.log(high)
        self._sigma = volatility * math.sqrt(interval / 3600.0)
        self._rng = np.random.default_rng(seed)
        self._knots = [math.log(initial)]
        self._extend(math.ceil(horizon / interval) + 1)

    def _extend(self, n: int) -> None:
        """Draw knots until there are ``n``."""
        if n <= len(self._knots):
            return
        steps = self._rng.normal(0.0, self._sigma, n - len(self._knots))
        x = self._knots[-1]
        span = self._hi - self._lo
        for step in steps:
            x += float(step)
            if span <= 0:
                x = self._lo
            else:
                # Reflect into [lo, hi] (a step can cross a bound more than once).
                y = (x - self._lo) % (2 * span)
                x = self._lo + (y if y <= span else 2 * span - y)
            self._knots.append(x)

    def base_rate(self, t: float) -> float:
        pos = max(0.0, t) / self.interval
        i = int(pos)
        self._extend(i + 2)
        frac = pos - i
        x = self._knots[i] * (1.0 - frac) + self._knots[i + 1] * frac
        return min(self.high, max(self.low, math.exp(x)))
