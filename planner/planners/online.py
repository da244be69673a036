"""Online explicit estimates per workload, refreshed every cycle from the observation."""

from __future__ import annotations

from planner.domain.intents import KPIType
from planner.models.explicit import ExplicitAvailability, ExplicitLatency, ExplicitThroughput
from planner.models.predictor import Predictor
from planner.models.queue_estimate import QueueEstimate, blend, estimate
from planner.planners.base import PlanningContext


class OnlineEstimates:
    """Keeps an exponentially weighted :class:`QueueEstimate` per workload."""

    def __init__(self) -> None:
        self._estimates: dict[str, QueueEstimate] = {}

    def get(self, workload: str) -> QueueEstimate | None:
        return self._estimates.get(workload)

    def update(self, ctx: PlanningContext) -> QueueEstimate | None:
        latency = [(o, ctx.profiles[o.name]) for o in ctx.intent.spec.objectives
                   if ctx.profiles[o.name].spec.type is KPIType.LATENCY]
        obs, q, cap = None, 0.95, float("inf")
        if latency:
            o, p = latency[0]
            obs, q, cap = ctx.current.get(o.name), p.spec.latency_percentile / 100.0, 0.5 * o.value
        fresh = estimate(ctx.workload, obs, q, cap)
        key = ctx.workload.key
        if fresh is not None:
            self._estimates[key] = blend(self._estimates.get(key), fresh)
        return self._estimates.get(key)


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
