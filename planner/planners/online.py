"""Online explicit estimates of a workload, refreshed every cycle from the observation and
kept in the planner's memory of the intent."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from planner.domain.intents import KPIType
from planner.models.explicit import ExplicitAvailability, ExplicitLatency, ExplicitThroughput
from planner.models.predictor import Predictor
from planner.models.queue_estimate import QueueEstimate, blend, estimate
from planner.planners.base import PlanningContext


def updated_estimate(ctx: PlanningContext, previous: QueueEstimate | None
                     ) -> QueueEstimate | None:
    """The workload's exponentially weighted :class:`QueueEstimate` after this cycle's
    observation (``previous`` when the observation says nothing)."""
    latency = [(o, ctx.profiles[o.name]) for o in ctx.intent.spec.objectives
               if ctx.profiles[o.name].spec.type is KPIType.LATENCY]
    obs, q, cap = None, 0.95, float("inf")
    if latency:
        o, p = latency[0]
        obs, q, cap = ctx.current.get(o.name), p.spec.latency_percentile / 100.0, 0.5 * o.value
    fresh = estimate(ctx.workload, obs, q, cap)
    return blend(previous, fresh) if fresh is not None else previous


def estimate_memory(est: QueueEstimate | None) -> dict[str, float] | None:
    """``est`` as memory (JSON-safe)."""
    return None if est is None else {"mu_per_core": est.mu_per_core, "base_ms": est.base_ms}


def recalled_estimate(memory: Mapping[str, Any] | None) -> QueueEstimate | None:
    """The estimate :func:`estimate_memory` wrote down."""
    if not memory:
        return None
    base = memory.get("base_ms")
    return QueueEstimate(float(memory["mu_per_core"]), math.nan if base is None else float(base))


def explicit_predictors(ctx: PlanningContext, est: QueueEstimate) -> dict[str, Predictor]:
    """One explicit predictor per objective it can predict (latency, throughput,
    availability); other KPI types are left out."""
    out: dict[str, Predictor] = {}
    for o in ctx.intent.spec.objectives:
        spec = ctx.profiles[o.name].spec
        if spec.type is KPIType.LATENCY:
            out[o.name] = ExplicitLatency(est, spec.latency_percentile / 100.0, ctx.config)
        elif spec.type is KPIType.THROUGHPUT:
            out[o.name] = ExplicitThroughput(est, ctx.config)
        elif spec.type is KPIType.AVAILABILITY:
            out[o.name] = ExplicitAvailability(est, ctx.config)
    return out
