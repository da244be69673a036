"""What a plan carries besides its decision, computed once from the planner's own predictors:
the configuration after each of this cycle's actions with its predictions and price, and
which predictor served each objective. Every built-in planner fills its plan with these, so a
preview, an event or a status shows exactly what was planned."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from planner.domain.cost import cost_per_hour
from planner.domain.memory import Memory
from planner.domain.plan import Action, ModelInfo, ObjectivePrediction, Plan, PlanStep, ReasonPart
from planner.domain.state import WorkloadConfig
from planner.models.effects import EffectModel
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners.base import PlanningContext, after, held_reasons


def configs_along(current: WorkloadConfig, actions: Sequence[Action],
                  target: WorkloadConfig) -> list[WorkloadConfig]:
    """Step 0 is ``current``, then the configuration after each action, then ``target`` if
    the actions do not reach it."""
    configs = [current]
    for a in actions:
        configs.append(after(configs[-1], a))
    if configs[-1] != target:
        configs.append(target)
    return configs


Predicted = dict[str, ObjectivePrediction]


def predicted_at(predictions: Mapping[str, Prediction], i: int) -> Predicted:
    """Row ``i`` of a batch's predictions (per objective)."""
    return {n: ObjectivePrediction(float(p.mean[i]), float(p.bound[i]))
            for n, p in predictions.items()}


def plan_steps(ctx: PlanningContext, actions: Sequence[Action], target: WorkloadConfig,
               preds: Mapping[str, Predictor] | None = None, rate: float | None = None,
               known: Mapping[WorkloadConfig, Predicted] | None = None
               ) -> tuple[PlanStep, ...]:
    """The plan's steps, each predicted by ``preds`` at ``rate`` (no predictions without a
    rate or predictors) and priced from the snapshot's node pools. ``known`` holds what the
    planner already predicted for some configurations with the same predictors at the same
    rate (reused: a learned model's bound costs milliseconds per call)."""
    configs = configs_along(ctx.config, actions, target)
    found: dict[WorkloadConfig, Predicted] = {}
    if preds and rate is not None:
        found = {c: dict(known[c]) for c in configs if known and c in known}
        missing = list(dict.fromkeys(c for c in configs if c not in found))
        if missing:
            batch = CandidateBatch.of(missing)
            fresh = {o.name: p.predict(batch, rate) for o in ctx.intent.spec.objectives
                     if (p := preds.get(o.name)) is not None}
            found.update((c, predicted_at(fresh, i)) for i, c in enumerate(missing))
    return tuple(PlanStep(cfg, found.get(cfg, {}), cost_per_hour(cfg, ctx.snapshot),
                          this_cycle=i <= len(actions)) for i, cfg in enumerate(configs))


def models_used(ctx: PlanningContext,
                preds: Mapping[str, Predictor] | None = None) -> tuple[ModelInfo, ...]:
    """Per objective of the intent, the predictor that served it (``none``: nothing did)."""
    out: list[ModelInfo] = []
    for o in ctx.intent.spec.objectives:
        p = (preds or {}).get(o.name)
        model = getattr(p, "model", None)
        if p is not None and isinstance(model, EffectModel):
            validation = model.metadata.get("validation")
            trained = float(model.timestamp)
            out.append(ModelInfo(o.name, p.kind, model.kind, model.samples,
                                 trained if math.isfinite(trained) else None,
                                 dict(validation) if isinstance(validation, dict) else None))
        else:
            out.append(ModelInfo(o.name, p.kind if p is not None else "none"))
    return tuple(out)


def no_action(ctx: PlanningContext, planner: str, kind: str, text: str,
              preds: Mapping[str, Predictor] | None = None,
              memory: Memory | None = None) -> Plan:
    """A plan that keeps the current configuration, for the reason ``text`` (of ``kind``);
    the planner's memory is ``memory`` (default: unchanged)."""
    cfg = ctx.config
    return Plan(ctx.intent.key, planner, cfg, cfg, steps=plan_steps(ctx, (), cfg),
                models=models_used(ctx, preds), reason_parts=(ReasonPart(kind, text),),
                memory=ctx.memory if memory is None else memory)


def hold_if_unknown(ctx: PlanningContext, planner: str) -> Plan | None:
    """An empty plan when an objective's current value is unknown: no action on missing data."""
    unknown = [n for n, v in ctx.current.items() if v is None]
    if not unknown:
        return None
    return no_action(ctx, planner, "unknown",
                     f"no action: objective(s) {', '.join(unknown)} unknown")


def held_parts(ctx: PlanningContext, actions: Sequence[Action]) -> tuple[ReasonPart, ...]:
    """Why actuators hold back (cooldowns, limits), when the plan has no action this cycle."""
    return () if actions else tuple(ReasonPart("held", r) for r in held_reasons(ctx))
