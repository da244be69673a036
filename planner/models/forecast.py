"""Short-term load forecast: the request rate to plan for when the pods ordered now are ready.

A planner that sizes for the rate it measures now is late on rising load: pods take their
start-up time to become ready, and the next decision is a cycle away. :class:`LoadForecast`
keeps, per intent, the recent ``(time, rate)`` observations and projects a robust linear
trend over a horizon of one pod start-up plus one cycle.

Contract:

* :meth:`LoadForecast.observe` records one observation per intent and cycle. Memory is bounded:
  at most ``max_points`` observations per intent, none older than ``window_s``, and (with
  :meth:`LoadForecast.observe_pods`) at most ``max_pending`` pods awaiting readiness and
  ``max_samples`` start-up samples per intent.
* :meth:`LoadForecast.forecast` never lowers the rate: the planned rate is at least the current
  rate (scale-in is decided on what is measured now), and at most ``max_ratio`` times it (noise
  and outliers cannot blow the plan up). It raises the rate only when the trend is rising by
  more than ``min_rise`` of the current rate over the horizon (below that is noise, which the
  admin's headroom covers), and only with ``min_points`` observations over ``min_span_s``.
* The trend is the Theil-Sen slope (median of the pairwise slopes), so a minority of outliers
  (a spike, a dip) does not move it. A rise must be persistent: the slope used is the smaller
  of the slope over ``window_s`` and over the last ``recent_s``. After a step (a flash sale's
  onset) the load is flat at its new level: the recent slope is about 0, so the step is not
  extrapolated; on a ramp both windows rise and the plan leads it.
* The horizon is the pod start-up time plus one cycle: the capacity ordered now must serve the
  load until the capacity ordered at the next cycle is ready. The start-up time is learned
  from observed pods (creation to first seen ready) when :meth:`LoadForecast.observe_pods` is
  fed, else ``default_startup_s``.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.domain.state import PodState

DEFAULT_STARTUP_S = 30.0
"""Start-up time assumed until a pod has been seen becoming ready (typical container start)."""


@dataclass(frozen=True)
class Forecast:
    """The rate to plan for and why."""

    rate: float
    """Requests per second to plan for; ``current <= rate <= max_ratio * current``."""
    current: float
    """The measured rate it was derived from."""
    slope: float
    """Robust trend in requests per second per second (0 without enough history)."""
    horizon_s: float

    @property
    def raised(self) -> bool:
        return self.rate > self.current

    @property
    def pct_per_min(self) -> float:
        """The trend as a percentage of the current rate per minute."""
        return 100.0 * self.slope * 60.0 / self.current if self.current > 0 else 0.0


@functools.lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """``np.triu_indices(n, k=1)``, kept per ``n`` (read-only): every intent's forecast asks
    for the pairs of its few dozen points every cycle."""
    i, j = np.triu_indices(n, k=1)
    i.flags.writeable = False
    j.flags.writeable = False
    return i, j


def median(a: NDArray[np.float64]) -> float:
    """``float(np.median(a))`` of a non-empty 1-D float array: the same partition and the same
    additions (``np.mean``'s of the middle one or two, from 0.0), without ``np.median``'s
    per-call handling (every intent's forecast takes a few medians every cycle)."""
    n = a.size
    h = n // 2
    part = np.partition(a, [h - 1, h, -1] if n % 2 == 0 else [h, -1])
    if np.isnan(part[-1]):
        return float(np.median(a))
    if n % 2:
        return float((0.0 + part[h]) / 1.0)
    return float((0.0 + part[h - 1] + part[h]) / 2.0)


def theil_sen_slope(t: Iterable[float], y: Iterable[float]) -> float:
    """Median of the slopes between every pair of points with distinct times (0 if none)."""
    ta = np.asarray(list(t), dtype=float)
    ya = np.asarray(list(y), dtype=float)
    i, j = _pairs(len(ta))
    dt = ta[j] - ta[i]
    ok = dt > 0
    if not ok.any():
        return 0.0
    return median((ya[j] - ya[i])[ok] / dt[ok])


MAX_SEEN = 512
"""Pod names remembered per intent (so a pod is judged on first sight only)."""


@dataclass
class _Startup:
    pending: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Pod name -> (created at, last seen not ready)."""
    seen: dict[str, None] = field(default_factory=dict)
    """Pod names already looked at, oldest first (a bounded, insertion-ordered set)."""
    samples: deque[float] = field(default_factory=deque)


def _names(seen: Any) -> list[str]:
    """Pod names as :meth:`LoadForecast.remember` writes them down: one string, a name per
    line (Kubernetes object names hold no line break; one string instead of hundreds keeps
    the memory written every cycle cheap), or a list (memory written before)."""
    if isinstance(seen, str):
        return seen.split("\n") if seen else []
    return [str(n) for n in seen]


class LoadForecast:
    """Per-intent load history and its projection over the pods' start-up (see module doc)."""

    def __init__(self, window_s: float = 180.0, recent_s: float = 75.0, max_points: int = 32,
                 min_points: int = 4,
                 min_span_s: float = 40.0, max_ratio: float = 2.0, min_rise: float = 0.02,
                 default_startup_s: float = DEFAULT_STARTUP_S, max_samples: int = 16,
                 max_pending: int = 256) -> None:
        if max_ratio < 1.0:
            raise ValueError("max_ratio must be >= 1 (the forecast never lowers the rate)")
        self.window_s = window_s
        self.recent_s = recent_s
        self.max_points = max_points
        self.min_points = max(2, min_points)
        self.min_span_s = min_span_s
        self.max_ratio = max_ratio
        self.min_rise = min_rise
        self.default_startup_s = default_startup_s
        self.max_samples = max_samples
        self.max_pending = max_pending
        self._points: dict[str, deque[tuple[float, float]]] = {}
        self._startup: dict[str, _Startup] = {}

    # ---------------------------------------------------------------- observations
    def observe(self, key: str, t: float, rate: float | None) -> None:
        """Record the rate measured for intent ``key`` at time ``t`` (ignored if unknown)."""
        if rate is None or not np.isfinite(rate) or rate < 0:
            return
        pts = self._points.setdefault(key, deque(maxlen=self.max_points))
        if pts and t <= pts[-1][0]:
            if t < pts[-1][0]:
                pts.clear()  # time went backwards (a restarted clock): start over
            else:
                pts.pop()  # same instant observed twice: keep the latest
        pts.append((t, float(rate)))
        while pts and pts[0][0] < t - self.window_s:
            pts.popleft()

    def observe_pods(self, key: str, t: float, pods: Iterable[PodState]) -> None:
        """Learn the start-up time: a pod first seen not ready and later seen ready took
        between (last seen not ready - created) and (first seen ready - created); the sample
        is the midpoint. Pods seen ready on first sight, or without a creation time, teach
        nothing (their start was not watched)."""
        st = self._startup.setdefault(key, _Startup())
        if not st.pending:
            # The steady case: nothing awaits readiness, so only pods not seen yet can teach
            # (one membership test per pod; the pass below also tracks the pending ones).
            seen = st.seen
            pods = [p for p in pods if p.name not in seen]
        present: set[str] = set()
        for p in pods:
            present.add(p.name)
            if p.name in st.pending:
                created, last_not_ready = st.pending[p.name]
                if p.ready:
                    del st.pending[p.name]
                    sample = (max(last_not_ready, created) + t) / 2.0 - created
                    if sample > 0:
                        st.samples.append(sample)
                        while len(st.samples) > self.max_samples:
                            st.samples.popleft()
                else:
                    st.pending[p.name] = (created, t)
            elif p.name not in st.seen:
                st.seen[p.name] = None
                if len(st.seen) > MAX_SEEN:
                    del st.seen[next(iter(st.seen))]
                if not p.ready and p.started_at > 0 and p.started_at <= t \
                        and len(st.pending) < self.max_pending:
                    st.pending[p.name] = (p.started_at, t)
        for gone in [n for n in st.pending if n not in present]:
            del st.pending[gone]

    # ---------------------------------------------------------------- projection
    def _recent(self, key: str, now: float, span_s: float) -> list[float]:
        return [r for t, r in self._points.get(key) or () if t >= now - span_s]

    def peak(self, key: str, now: float, span_s: float) -> float | None:
        """The highest rate observed for ``key`` in the last ``span_s`` (``None``: none)."""
        rates = self._recent(key, now, span_s)
        return max(rates) if rates else None

    def trough(self, key: str, now: float, span_s: float) -> float | None:
        """The lowest rate observed for ``key`` in the last ``span_s`` (``None``: none)."""
        rates = self._recent(key, now, span_s)
        return min(rates) if rates else None

    def startup_s(self, key: str) -> float:
        """Median of the learned start-up samples, else ``default_startup_s``."""
        st = self._startup.get(key)
        if st is None or not st.samples:
            return self.default_startup_s
        return median(np.asarray(st.samples, dtype=float))

    def horizon_s(self, key: str, cycle_s: float) -> float:
        """How far ahead capacity ordered now must hold: one start-up plus one cycle."""
        return self.startup_s(key) + cycle_s

    def slope(self, key: str) -> float:
        """Robust, persistent trend of intent ``key``'s rate in req/s per second: the smaller
        of the Theil-Sen slopes over ``window_s`` and over ``recent_s`` (0: too little
        history)."""
        pts = self._points.get(key)
        if not pts or len(pts) < self.min_points or pts[-1][0] - pts[0][0] < self.min_span_s:
            return 0.0
        long = theil_sen_slope((p[0] for p in pts), (p[1] for p in pts))
        recent = [p for p in pts if p[0] >= pts[-1][0] - self.recent_s]
        if len(recent) < 3:
            return long
        return min(long, theil_sen_slope((p[0] for p in recent), (p[1] for p in recent)))

    def forecast(self, key: str, rate: float, horizon_s: float) -> Forecast:
        """The rate to plan for, ``horizon_s`` ahead of the last observation, from ``rate``
        measured now: ``rate + slope * horizon_s`` on a significant rise, capped at
        ``max_ratio * rate``; otherwise ``rate``."""
        rate = max(0.0, float(rate))
        slope = self.slope(key)
        rise = slope * max(0.0, horizon_s)
        planned = rate
        if rate > 0 and rise > self.min_rise * rate:
            planned = min(rate + rise, self.max_ratio * rate)
        return Forecast(planned, rate, slope, horizon_s)

    # ---------------------------------------------------------------- memory as data
    def remember(self, key: str) -> dict[str, Any]:
        """Intent ``key``'s history as JSON-safe data (:meth:`recall` restores it)."""
        st = self._startup.get(key)
        return {
            "points": [[t, r] for t, r in self._points.get(key, ())],
            "startup": None if st is None else {
                "pending": {n: [c, w] for n, (c, w) in st.pending.items()},
                "seen": "\n".join(st.seen), "samples": list(st.samples)},
        }

    def recall(self, key: str, memory: Mapping[str, Any]) -> None:
        """Restore what :meth:`remember` wrote down for intent ``key``."""
        points = memory.get("points") or []
        if points:
            self._points[key] = deque(((float(t), float(r)) for t, r in points),
                                      maxlen=self.max_points)
        st = memory.get("startup")
        if st is not None:
            self._startup[key] = _Startup(
                {str(n): (float(c), float(w)) for n, (c, w) in dict(st["pending"]).items()},
                dict.fromkeys(_names(st["seen"])),
                deque(float(x) for x in st["samples"]))

    def __len__(self) -> int:
        """Observations held, over all intents (for memory checks)."""
        return sum(len(p) for p in self._points.values())
