"""The ground-truth latency model of the simulator.

Each ready pod is an M/M/c queue: ``c = max(1, floor(cpu))`` servers sharing the pod's service
rate ``mu_i``; the load balancer sends it a share ``w_i`` of the arrivals ``lam``. A request's
response time is ``base_i + W + S`` with ``S ~ Exp(mu_i / c)`` and ``W`` the Erlang-C waiting
time (0 with probability ``1 - C``, else ``Exp(mu_i - lam_i)``). A saturated pod serves at most
``SATURATION * mu_i``; its served requests wait about the timeout, the rest fail. The workload's
latency distribution is the mixture over pods (and over the steps of a window), written as a
sum of shifted exponentials, and its percentiles are solved for exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

SATURATION = 0.98
"""Utilisation at which a pod is treated as saturated (its queue grows without bound)."""


def service_rate(rate_per_core: float, cpu: float, cpu_exponent: float, gpu_speedup: float,
                 device: str) -> float:
    """Requests per second one pod serves."""
    mu = rate_per_core * float(cpu**cpu_exponent)
    return mu * gpu_speedup if device == "gpu" else mu


@dataclass(frozen=True)
class Components:
    """A latency mixture: weights (requests), offsets (ms) and exponential rates (1/ms)."""

    weight: FloatArray
    offset_ms: FloatArray
    rate_per_ms: FloatArray

    @staticmethod
    def empty() -> Components:
        z = np.zeros(0)
        return Components(z, z, z)

    @staticmethod
    def concat(parts: list[Components]) -> Components:
        if not parts:
            return Components.empty()
        return Components(
            np.concatenate([p.weight for p in parts]),
            np.concatenate([p.offset_ms for p in parts]),
            np.concatenate([p.rate_per_ms for p in parts]),
        )

    @property
    def total(self) -> float:
        return float(self.weight.sum())


@dataclass(frozen=True)
class StepOutcome:
    served: float
    """Requests per second served successfully."""
    dropped: float
    """Requests per second that failed (saturation, failed pods, no pods)."""
    components: Components
    """Latency mixture of the served requests, weighted by requests per second."""
    utilization: FloatArray
    """Per pod ``lam_i / mu_i`` (capped at 1)."""
    served_per_pod: FloatArray | None = None
    """Per pod, the requests per second it served (``None``: none served)."""


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with offered load ``a`` (< c)."""
    term, total = 1.0, 1.0
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c / (1.0 - a / c)
    return last / (total + last)


def pod_components(served: float, mu: float, c: int, lam: float, base: float,
                    timeout_ms: float, saturated: bool) -> list[tuple[float, float, float]]:
    """(weight, offset ms, rate 1/ms) terms of one pod's response-time survival function."""
    if saturated:
        return [(served, timeout_ms, math.inf)]
    s = mu / c / 1000.0              # per-server service rate, 1/ms
    theta = (mu - lam) / 1000.0       # waiting-time rate, 1/ms
    wait = erlang_c(c, lam / (mu / c)) if lam > 0 else 0.0
    if abs(theta - s) < 1e-3 * s:
        # Equal rates make the closed form 0/0; a 0.1 % nudge keeps it well conditioned.
        theta = s * (1.0 + 1e-3) if theta >= s else s * (1.0 - 1e-3)
    # P(T > t) = (1 - C) e^{-s t} + C (s e^{-theta t} - theta e^{-s t}) / (s - theta)
    return [
        (served * ((1.0 - wait) - wait * theta / (s - theta)), base, s),
        (served * (wait * s / (s - theta)), base, theta),
    ]


def step_outcome(
    lam: float, shares: FloatArray, mu: FloatArray, base_ms: FloatArray, timeout_ms: float,
    failed_fraction: FloatArray | None = None, servers: NDArray[np.int64] | None = None,
) -> StepOutcome:
    """Serve ``lam`` req/s over pods with ``shares`` (summing to 1) and rates ``mu``.

    ``failed_fraction[i]`` is the part of pod ``i``'s share that fails outright (a pod that
    crashed before the load balancer noticed). ``servers[i]`` is pod ``i``'s ``c`` (default 1).
    """
    if lam <= 0:
        return StepOutcome(0.0, 0.0, Components.empty(), np.zeros_like(mu))
    if mu.size == 0:
        return StepOutcome(0.0, lam, Components.empty(), mu)
    lam_i = lam * shares
    failed = lam_i * failed_fraction if failed_fraction is not None else np.zeros_like(lam_i)
    lam_i = lam_i - failed
    saturated = lam_i >= SATURATION * mu
    served_i = np.where(saturated, np.minimum(lam_i, SATURATION * mu), lam_i)
    dropped = float(failed.sum() + (lam_i - served_i).sum())
    cs = servers if servers is not None else np.ones(mu.size, dtype=np.int64)
    terms: list[tuple[float, float, float]] = []
    for i in range(mu.size):
        if served_i[i] > 0:
            terms.extend(pod_components(float(served_i[i]), float(mu[i]), int(cs[i]),
                                         float(lam_i[i]), float(base_ms[i]), timeout_ms,
                                         bool(saturated[i])))
    arr = np.asarray(terms, dtype=float).reshape(-1, 3)
    util = np.minimum(1.0, lam_i / mu)
    comps = Components(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy())
    return StepOutcome(float(served_i.sum()), dropped, comps, util, served_i)


def survival(t: float, c: Components) -> float:
    """Share of requests slower than ``t`` ms."""
    w = c.weight
    if w.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        return _survival(t, w, c.offset_ms, c.rate_per_ms, w.sum())


def _survival(t: float, w: FloatArray, offset: FloatArray, rate: FloatArray,
              total: float) -> float:
    """:func:`survival` of the mixture of weights ``w`` (summing to ``total``), in the
    caller's numpy error state (a tail past an infinite rate is not a number: counted 0)."""
    tail = np.where(t < offset, 1.0, np.exp(-rate * (t - offset)))
    if not np.isfinite(tail).all():     # (nan_to_num costs more than the check)
        tail = np.nan_to_num(tail, nan=0.0)
    return float((w * tail).sum() / total)


def quantile(c: Components, q: float, iterations: int = 60) -> float | None:
    """The ``q`` quantile (0 < q < 1) of the mixture in ms; ``None`` if it holds no requests."""
    if c.weight.size == 0 or c.total <= 0:
        return None
    p = 1.0 - q
    w, offset, rate = c.weight, c.offset_ms, c.rate_per_ms
    finite = np.isfinite(rate) & (rate > 0)
    hi_parts = np.where(finite, offset + np.log(1.0 / p) / np.where(finite, rate, 1.0), offset)
    lo, hi = 0.0, float(hi_parts.max()) + 1e-9
    # One error state and one weight sum for the whole bisection (the same numbers as
    # :func:`survival` gives at each point).
    with np.errstate(invalid="ignore", over="ignore"):
        total = w.sum()
        while _survival(hi, w, offset, rate, total) > p and hi < 1e12:
            # Sums of exponentials (waiting + service) have heavier tails than either part.
            hi *= 2.0
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            if _survival(mid, w, offset, rate, total) > p:
                lo = mid
            else:
                hi = mid
    return hi
