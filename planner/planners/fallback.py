"""Sizing when the models predict nothing feasible: the explicit queueing estimate, in the
current shape.

A learned model that finds no feasible configuration is wrong or out of its depth (a target
below what it believes possible, a load beyond anything it has seen); following its "least
violating" point sends the workload to the admin's maximum replicas and largest size, beyond
what the cluster can schedule. The explicit estimate (:mod:`planner.models.queue_estimate`)
still knows how many pods carry the load: the fewest that meet the latency objectives by its
prediction, or, when no count does (a target below the base latency), the fewest that keep
every pod at HPA's target utilisation. It never scales in: models out of their depth are no
reason to remove pods. Without an estimate the current replicas are kept (the safety layer
scales a saturated, violated workload out by the proportional rule).
"""

from __future__ import annotations

import math

import numpy as np

from planner.domain.intents import KPIType
from planner.domain.plan import ReasonPart
from planner.domain.state import WorkloadConfig
from planner.models.explicit import ExplicitLatency
from planner.models.predictor import CandidateBatch, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners.base import PlanningContext
from planner.planners.safety import PROPORTIONAL_TARGET

REDUNDANT_AVAILABILITY = 0.99
"""Availability targets from this up need two pods at least (one is a single point of
failure)."""


def explicit_sizing(ctx: PlanningContext, est: QueueEstimate | None,
                    rate: float) -> tuple[WorkloadConfig, str]:
    """The current shape with the replicas the explicit estimate asks for at ``rate``, and why."""
    cfg = ctx.config
    b = ctx.admin.replicas
    floor = max(b.min, 1)
    if any(ctx.profiles[o.name].spec.type is KPIType.AVAILABILITY
           and o.value >= REDUNDANT_AVAILABILITY for o in ctx.intent.spec.objectives):
        floor = max(floor, 2)
    if est is None or est.mu_per_core <= 0:
        return cfg.with_(replicas=max(cfg.replicas, floor)), (
            f"no estimate of the service rate: {max(cfg.replicas, floor)} replica(s) kept")
    reps = np.arange(floor, max(b.max, floor) + 1, dtype=float)
    n = len(reps)
    batch = CandidateBatch(reps, np.full(n, cfg.cpu),
                           np.full(n, 1.0 if cfg.device == "gpu" else 0.0), (cfg.pool,) * n)
    ok = np.ones(n, dtype=bool)
    latency = False
    for o in ctx.intent.spec.objectives:
        spec = ctx.profiles[o.name].spec
        if spec.type is KPIType.LATENCY:
            latency = True
            pred = ExplicitLatency(est, spec.latency_percentile / 100.0, cfg,
                                   objective=o.name).predict(batch, rate)
            ok &= pred.bound <= o.value * (1.0 + o.tolerance)
    if latency and ok.any():
        r = max(int(reps[int(np.argmax(ok))]), cfg.replicas)
        return cfg.with_(replicas=r), (
            f"explicit queueing estimate: {r} replica(s) of the current size meet the latency "
            f"objectives at {rate:.0f} req/s")
    need = rate / (PROPORTIONAL_TARGET * est.mu_per_core * cfg.cpu)
    r = int(min(max(b.max, floor), max(floor, math.ceil(need))))
    why = (f"explicit queueing estimate: {r} replica(s) of the current size carry {rate:.0f} "
           f"req/s at {PROPORTIONAL_TARGET:.0%} utilisation"
           + (" (no count meets the latency targets by the estimate either)" if latency else ""))
    if r < cfg.replicas:
        return cfg, why + f"; {cfg.replicas} kept (no scale-in on a model's word)"
    return cfg.with_(replicas=r), why


IDLE_RATE = 1e-6
"""The load (req/s) at which a learned model's floor is read: a service with no queue."""


def unreachable_targets(ctx: PlanningContext, preds: dict[str, Predictor],
                        batch: CandidateBatch) -> list[ReasonPart]:
    """Minimised objectives whose target is below what the service can do at all: below every
    candidate's latency predicted by its learned model with no load (the service's measured
    base latency plus one request's service time, on its fastest configuration). No amount of
    capacity meets such a target; the plan says so (kind ``unreachable``, reported as the
    status condition ``TargetsReachable``) instead of chasing it with the cluster."""
    out = []
    for o in ctx.intent.spec.objectives:
        p = preds.get(o.name)
        if p is None or p.kind != "learned" or not ctx.profiles[o.name].spec.minimizes:
            continue
        floor = float(np.min(p.predict_mean(batch, IDLE_RATE), initial=math.inf))
        if math.isfinite(floor) and floor > o.value * (1.0 + o.tolerance):
            out.append(ReasonPart("unreachable", (
                f"{o.name} target {o.value:g} is below what the service can do: its learned "
                f"model predicts at least {floor:.3g} on every configuration even without load;"
                f" no capacity meets it (set the target above {floor:.3g}, or make the service "
                "faster)")))
    return out
