"""Online explicit estimates of a workload, refreshed every cycle from the observation and
kept in the planner's memory of the intent."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from planner.domain.intents import KPIType
from planner.domain.state import WorkloadConfig
from planner.models.explicit import ExplicitAvailability, ExplicitLatency, ExplicitThroughput
from planner.models.predictor import Predictor
from planner.models.queue_estimate import (
    MAX_UTILIZATION,
    QueueEstimate,
    blend,
    capped,
    estimate,
    floored,
    idle_bound,
)
from planner.models.training import SATURATED_UTILIZATION
from planner.planners.base import PlanningContext
from planner.planners.feedback import KPI_WINDOW_S, steady

Recent = tuple[tuple[float, float], ...]
"""(time, mean utilisation of the workload's pods, :attr:`WorkloadState.busy`) of the cycles
within the last KPI window, oldest first."""


def recent_utilization(recent: Sequence[tuple[float, float]], ctx: PlanningContext,
                       window_s: float = KPI_WINDOW_S) -> Recent:
    """``recent`` with this cycle's utilisation added (when known) and the cycles older than
    ``window_s`` (or, after the clock went back, later than now) left out."""
    kept = [(t, u) for t, u in recent if ctx.now - window_s < t < ctx.now]
    util = ctx.workload.busy
    if util is not None and math.isfinite(util):
        kept.append((ctx.now, float(util)))
    return tuple(kept)


def window_peak(recent: Sequence[tuple[float, float]]) -> float | None:
    """The highest utilisation of ``recent`` (``None``: none known)."""
    return max((u for _, u in recent), default=None)


def updated_estimate(ctx: PlanningContext, previous: QueueEstimate | None,
                     peak: float | None = None) -> QueueEstimate | None:
    """The workload's exponentially weighted :class:`QueueEstimate` after this cycle's
    observation (``previous`` when the observation says nothing; capped by the capacity seen
    when the pods are saturated); unchanged while the serving pods are not :func:`steady`.
    Each latency objective's base latency is fitted from its own percentile, unless ``peak``
    (the highest utilisation of the pods over the KPI window, :func:`window_peak`) reached
    the queue's bound (:data:`~planner.models.queue_estimate.MAX_UTILIZATION`): the
    percentile then carries the queueing of a saturated stretch, which the M/M/1 formula
    cannot explain at the utilisation the estimate is read at (nor at any below its bound),
    and what it fails to explain is not base latency. The service rate is still read (from
    this cycle's rate and utilisation, as before)."""
    saturated = peak is not None and peak >= MAX_UTILIZATION
    # (objective name, observed latency, quantile, cap on the base); no latency objective:
    # the service rate alone.
    latency: list[tuple[str | None, float | None, float, float]] = [
        (o.name, None if saturated else ctx.current.get(o.name),
         ctx.profiles[o.name].spec.latency_percentile / 100.0,
         0.5 * o.value) for o in ctx.intent.spec.objectives
        if ctx.profiles[o.name].spec.type is KPIType.LATENCY] or [(None, None, 0.95, math.inf)]
    if previous is not None and not steady(ctx):
        # A scale-out or a rollout under way: the window's mean utilisation is spread over
        # pods that served part of it (or are of the shape being replaced), and the service
        # rate read from it is too low. The first estimate is taken whatever the state (a
        # planner restarted during an overload acts in its first cycle).
        return previous
    fresh: QueueEstimate | None = None
    idle: QueueEstimate | None = None
    bases: dict[str, float] = {}
    idle_bases: dict[str, float] = {}
    for name, obs, q, cap in latency:
        one = estimate(ctx.workload, obs, q, cap)
        if one is None:
            low = idle_bound(ctx.workload, obs, cap)
            if low is not None:
                idle = idle or low
                if name is not None and not math.isnan(low.base_ms):
                    idle_bases[name] = low.base_ms
            continue
        fresh = fresh or one
        if name is not None:
            bases[name] = one.base_ms
    if fresh is None:
        util = ctx.workload.busy
        if previous is not None and util is not None and util >= SATURATED_UTILIZATION:
            return capped(previous, ctx.workload)
        if idle is not None:
            # Pods nearly idle: a lower bound of their speed (and, for a first estimate of
            # their place, an upper bound of the base latency).
            return floored(previous, QueueEstimate(idle.mu_per_core, idle.base_ms, idle_bases,
                                                   idle.place, idle.cpu))
        return previous
    return blend(previous, QueueEstimate(fresh.mu_per_core, fresh.base_ms, bases, fresh.place,
                                         fresh.cpu))


def estimate_memory(est: QueueEstimate | None) -> dict[str, Any] | None:
    """``est`` as memory (JSON-safe)."""
    if est is None:
        return None
    out: dict[str, Any] = {"mu_per_core": est.mu_per_core, "base_ms": est.base_ms,
                           "bases": dict(est.bases)}
    if est.place is not None:
        out["place"] = list(est.place)
    if est.cpu is not None:
        out["cpu"] = est.cpu
    return out


def recalled_estimate(memory: Mapping[str, Any] | None) -> QueueEstimate | None:
    """The estimate :func:`estimate_memory` wrote down."""
    if not memory:
        return None
    base = memory.get("base_ms")
    bases = {str(k): float(v) for k, v in dict(memory.get("bases") or {}).items()
             if v is not None}
    place = memory.get("place")
    cpu = memory.get("cpu")
    return QueueEstimate(float(memory["mu_per_core"]),
                         math.nan if base is None else float(base), bases,
                         (str(place[0]), None if place[1] is None else str(place[1]))
                         if isinstance(place, list | tuple) and len(place) == 2 else None,
                         float(cpu) if isinstance(cpu, int | float) else None)


def explicit_predictors(ctx: PlanningContext, est: QueueEstimate,
                        parallel_sizes: bool = False, current: WorkloadConfig | None = None
                        ) -> dict[str, Predictor]:
    """One explicit predictor per objective it can predict (latency, throughput,
    availability); other KPI types are left out. ``parallel_sizes``: a bigger pod's latency as
    several servers, none faster per request than a current pod or one whole core
    (:class:`ExplicitLatency`). ``current``: the configuration the estimate stands for (what
    it vouches for); the workload's own by default."""
    cfg = ctx.config if current is None else current
    out: dict[str, Predictor] = {}
    for o in ctx.intent.spec.objectives:
        spec = ctx.profiles[o.name].spec
        if spec.type is KPIType.LATENCY:
            out[o.name] = ExplicitLatency(est, spec.latency_percentile / 100.0, cfg,
                                          objective=o.name, parallel_sizes=parallel_sizes)
        elif spec.type is KPIType.THROUGHPUT:
            out[o.name] = ExplicitThroughput(est, cfg)
        elif spec.type is KPIType.AVAILABILITY:
            out[o.name] = ExplicitAvailability(est, cfg)
    return out
