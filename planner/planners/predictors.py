"""Which predictor a planner uses per objective: the learned model when a usable one exists
(kept while the knowledge base cannot be read, see :mod:`.effect_cache`), else the explicit
queueing estimate."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from knowledge.base import KnowledgeBase
from planner.domain.intents import KPIType
from planner.domain.state import ClusterSnapshot
from planner.models.effects import (
    KIND_AVAILABILITY,
    KIND_LATENCY,
    EffectModel,
    LearnedAvailability,
    LearnedLatency,
    LearnedThroughput,
)
from planner.models.mix import expected_mix
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners.base import PlanningContext
from planner.planners.effect_cache import EffectCache
from planner.planners.online import OnlineEstimates, explicit_predictors
from planner.planners.search_space import prices


class ComputedCost(Predictor):
    """Cost per hour is computed from node-pool prices, not learned: exact, always supported."""

    kind = "computed"

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        cost = prices(self.snapshot, batch)
        return Prediction(cost, cost, np.ones(len(batch), dtype=bool))


class PredictorSource:
    def __init__(self, knowledge: KnowledgeBase | None, min_samples: int = 8,
                 lookback_s: float = 6 * 3600.0) -> None:
        self.cache = EffectCache(knowledge, lookback_s)
        self.online = OnlineEstimates()
        self.min_samples = min_samples

    def predictors(self, ctx: PlanningContext) -> dict[str, Predictor]:
        """Per objective the best predictor available; objectives with none are left out."""
        est = self.online.update(ctx)
        out: dict[str, Predictor] = explicit_predictors(ctx, est) if est is not None else {}
        latency_model = None
        mix = expected_mix(ctx.workload, ctx.snapshot)
        for o in ctx.intent.spec.objectives:
            spec = ctx.profiles[o.name].spec
            model = self.cache.get(ctx.intent.key, o.name, ctx.now)
            if model is None or model.samples < self.min_samples:
                continue
            if spec.type is KPIType.LATENCY and model.kind == KIND_LATENCY:
                out[o.name] = LearnedLatency(model, mix)
                latency_model = latency_model or model
            elif spec.type is KPIType.AVAILABILITY and model.kind == KIND_AVAILABILITY:
                out[o.name] = LearnedAvailability(model, mix)
        if latency_model is not None:
            for o in ctx.intent.spec.objectives:
                if ctx.profiles[o.name].spec.type is KPIType.THROUGHPUT:
                    out[o.name] = LearnedThroughput(latency_model, mix)
        for o in ctx.intent.spec.objectives:
            if ctx.profiles[o.name].spec.type is KPIType.COST:
                out[o.name] = ComputedCost(ctx.snapshot)
        return out

    def stale_note(self, ctx: PlanningContext, preds: Mapping[str, Predictor]) -> str:
        """For a plan's reason: which of ``preds``' learned models are served stale because
        the knowledge base cannot be read, and for how long ("" when none is)."""
        since: dict[str, float] = {}
        for name, p in preds.items():
            model = getattr(p, "model", None)
            if p.kind != "learned" or not isinstance(model, EffectModel):
                continue
            stale = self.cache.stale(ctx.intent.key, model.objective)
            if stale is not None:
                since[name] = stale.since
        if not since:
            return ""
        age = ctx.now - min(since.values())
        return (f"learned model{'s' if len(since) > 1 else ''} for {', '.join(sorted(since))} "
                f"served stale: knowledge base unreachable for {age:.0f} s")
