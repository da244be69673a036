"""The ``hpa`` baseline: the Kubernetes HorizontalPodAutoscaler's rule, on CPU utilisation.

``desired = ceil(ready * utilisation / target)`` with a 10 % tolerance; scale-down only to the
highest recommendation of the last 300 s (stabilisation window); scale-up at most
``max(+100 %, +4 pods)`` per 15 s period; replicas within the admin's min/max. Objectives are
not looked at: that is the point of a baseline. It uses HPA's own rate limits instead of the
admin's step size and cooldown, so that it behaves as a Kubernetes user would see it.

The target is the admin's ``plannerOptions.hpa.targetCPUUtilizationPercentage`` (Kubernetes'
own name and unit; 80 by default), or the planner spec ``hpa@60``: what a user whose SLO is
missed does is lower it.

Its plans carry no planned load (``planned_rate`` is ``None``: HPA sizes for utilisation, not
for a load), no predictions (every objective's model is ``none``) and steps with
configurations and prices only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import Field

from planner.domain.cost import cost_per_hour
from planner.domain.plan import Action, Plan, ReasonPart
from planner.planners import plan_details
from planner.planners.base import Planner, PlannerOptions, PlanningContext

TARGET_UTILIZATION = 0.8
TOLERANCE = 0.1
STABILIZATION_S = 300.0
SCALE_UP_PERIOD_S = 15.0


Recommendation = tuple[float, int]
"""(time, replicas) of one sync, kept for the stabilisation window."""


def rule(current: int, ready: int, util: float, target: float, now: float,
         recommendations: Sequence[Recommendation], last_up: float | None,
         lo: int, hi: int) -> tuple[int, list[Recommendation], float | None]:
    """One HPA sync of a Deployment with ``current`` replicas, ``ready`` of them ready
    (0: counted as ``current``), at mean CPU utilisation ``util`` against ``target``, replicas
    within ``[lo, hi]``: the desired replicas, the stabilisation window's recommendations
    after this sync (``recommendations``: those before it) and the time of the last scale-up
    (``last_up``: before it). Pure: the caller keeps the window and the time as its memory."""
    ratio = util / target
    desired = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil((ready or current) * ratio)
    desired = min(hi, max(lo, desired))
    recs = [(t, r) for t, r in (*recommendations, (now, desired)) if t >= now - STABILIZATION_S]
    if desired < current:
        desired = min(current, max(r for _, r in recs))
    if desired > current:
        if last_up is not None and now - last_up < SCALE_UP_PERIOD_S:
            desired = current
        else:
            desired = min(desired, max(2 * current, current + 4))
            last_up = now
    return desired, recs, last_up


class HPAOptions(PlannerOptions):
    target_cpu_utilization_percentage: float = Field(
        default=TARGET_UTILIZATION * 100, gt=0, le=100, alias="targetCPUUtilizationPercentage")
    """Mean CPU utilisation HPA keeps, in percent of the pods' CPU, as in a Kubernetes
    ``HorizontalPodAutoscaler``."""


class HPAPlanner(Planner):
    name = "hpa"
    baseline = True
    options = HPAOptions
    shorthand = "targetCPUUtilizationPercentage"

    def __init__(self, target: float = TARGET_UTILIZATION) -> None:
        if not 0 < target <= 1:
            raise ValueError(f"target utilisation must be in (0, 1], got {target}")
        self.target = target

    @classmethod
    def from_options(cls, options: PlannerOptions) -> HPAPlanner:
        if not isinstance(options, HPAOptions):
            raise TypeError(f"hpa takes HPAOptions, not {type(options).__name__}")
        return cls(options.target_cpu_utilization_percentage / 100.0)

    def plan(self, ctx: PlanningContext) -> Plan:
        cfg = ctx.config
        key = ctx.workload.key
        util = ctx.workload.cpu_utilization
        bounds = ctx.admin.replicas
        if util is None:
            return plan_details.no_action(ctx, self.name, "unknown",
                                          "no action: no CPU metrics")
        # Memory: the recommendations of the stabilisation window and the last scale-up.
        desired, recs, last = rule(
            cfg.replicas, ctx.workload.ready_replicas, util, self.target, ctx.now,
            [(float(t), int(r)) for t, r in ctx.memory.get("recommendations") or ()],
            ctx.memory.get("last_up"), bounds.min, bounds.max)
        target = cfg.with_(replicas=desired)
        reason = f"hpa: cpu {util:.0%} vs target {self.target:.0%} -> {desired} replica(s)"
        actions: tuple[Action, ...] = ()
        if desired != cfg.replicas:
            actions = (Action("replicas", key, {"replicas": desired, "from": cfg.replicas},
                              reason),)
        return Plan(ctx.intent.key, self.name, cfg, target, actions, {},
                    cost_per_hour(target, ctx.snapshot),
                    steps=plan_details.plan_steps(ctx, actions, target),
                    models=plan_details.models_used(ctx),
                    reason_parts=(ReasonPart("choice", reason),),
                    memory={"recommendations": [[t, r] for t, r in recs], "last_up": last})
