"""The ``queueing`` planner: the fewest replicas an explicit queueing model says meet every
objective, with headroom, and a feedback nudge when observations contradict the model."""

from __future__ import annotations

from planner.domain.cost import cost_per_hour
from planner.domain.intents import KPIType, objective_met
from planner.domain.plan import Plan, ReasonPart
from planner.domain.state import WorkloadConfig
from planner.models.queue_estimate import QueueEstimate
from planner.planners import fallback, plan_details
from planner.planners.base import Planner, PlanningContext, clip_target, steps_towards
from planner.planners.online import (
    estimate_memory,
    explicit_predictors,
    recalled_estimate,
    updated_estimate,
)


class QueueingPlanner(Planner):
    name = "queueing"

    def required_replicas(self, ctx: PlanningContext, est: QueueEstimate,
                          rate: float) -> tuple[int, dict[str, float]] | None:
        """The fewest replicas predicted to meet every objective; ``None`` if no count is."""
        cfg = ctx.config
        bounds = ctx.admin.replicas
        for r in range(max(1, bounds.min), bounds.max + 1):
            cand = cfg.with_(replicas=r)
            predicted = self.predict(ctx, est, rate, cand)
            if predicted is not None:
                return r, predicted
        return None

    def predict(self, ctx: PlanningContext, est: QueueEstimate, rate: float,
                cfg: WorkloadConfig) -> dict[str, float] | None:
        """Predicted objective values if ``cfg`` meets every objective, else ``None``."""
        if rate > est.capacity(cfg):
            return None
        out: dict[str, float] = {}
        for o in ctx.intent.spec.objectives:
            spec = ctx.profiles[o.name].spec
            if spec.type is KPIType.LATENCY:
                v = est.latency_ms(rate, cfg, spec.latency_percentile / 100.0, o.name)
                if v > o.value:
                    return None
            elif spec.type is KPIType.THROUGHPUT:
                v = min(rate, est.capacity(cfg))
                if est.capacity(cfg) < o.value:
                    return None
            elif spec.type is KPIType.AVAILABILITY:
                if o.value >= fallback.REDUNDANT_AVAILABILITY and cfg.replicas < 2:
                    return None
                v = o.value
            else:
                continue
            out[o.name] = v
        return out

    def plan(self, ctx: PlanningContext) -> Plan:
        """Steps are predicted by the explicit predictors over the same queueing estimate."""
        cfg = ctx.config
        on_hold = plan_details.hold_if_unknown(ctx, self.name)
        if on_hold is not None:
            return on_hold
        est = updated_estimate(ctx, recalled_estimate(ctx.memory.get("estimate")))
        remembered = {"estimate": estimate_memory(est)}
        if est is None:
            return plan_details.no_action(
                ctx, self.name, "no-model",
                "no action: load too low to estimate the service rate",
                memory=remembered)
        rate = (ctx.workload.request_rate or 0.0) * (1.0 + ctx.admin.headroom)
        found = self.required_replicas(ctx, est, rate)
        if found is not None:
            replicas, predicted = found
            why = ReasonPart("choice", f"queueing model: {replicas} replica(s) meet every "
                                       f"objective at {rate:.0f} req/s")
        else:
            # No count does (a target below the base latency, ...): carry the load instead of
            # going to the maximum.
            sized, text = fallback.explicit_sizing(ctx, est, rate)
            replicas, predicted = sized.replicas, {}
            why = ReasonPart("choice", f"no replica count is predicted to meet every "
                                       f"objective: {text}")
        # Only latency: a throughput shortfall may be the offered load, not the capacity.
        violated = [o.name for o in ctx.intent.spec.objectives
                    if ctx.profiles[o.name].spec.type is KPIType.LATENCY
                    and objective_met(ctx.current.get(o.name), o, ctx.profiles[o.name]) is False]
        if violated and replicas <= cfg.replicas:
            replicas = cfg.replicas + 1
            why = ReasonPart("correction", f"observed {', '.join(violated)} out of bounds "
                                           f"although the model says {cfg.replicas} suffice: "
                                           "one more replica")
        chosen = cfg.with_(replicas=replicas)
        target = clip_target(ctx, chosen)
        actions = steps_towards(ctx, target)
        preds = explicit_predictors(ctx, est)
        return Plan(ctx.intent.key, self.name, cfg, target, tuple(actions), predicted,
                    cost_per_hour(target, ctx.snapshot), planned_rate=rate,
                    chosen=chosen if chosen != target else None,
                    steps=plan_details.plan_steps(ctx, actions, target, preds, rate),
                    models=plan_details.models_used(ctx, preds),
                    reason_parts=(why, *plan_details.held_parts(ctx, actions)),
                    memory=remembered)
