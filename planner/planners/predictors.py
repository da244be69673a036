"""Which predictor a planner uses per objective: the learned model when a usable one exists
(kept while the knowledge base cannot be read, see :mod:`.effect_cache`), else the explicit
queueing estimate."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from knowledge.base import KnowledgeBase
from planner.domain.intents import KPIType
from planner.domain.state import ClusterSnapshot, WorkloadConfig
from planner.models.effects import (
    KIND_AVAILABILITY,
    KIND_LATENCY,
    EffectModel,
    LearnedAvailability,
    LearnedLatency,
    LearnedThroughput,
)
from planner.models.mix import expected_mix, observed_mix
from planner.models.predictor import CandidateBatch, FloatArray, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners import places_left
from planner.planners.base import PlanningContext
from planner.planners.effect_cache import EffectCache
from planner.planners.online import (
    Recent,
    estimate_memory,
    explicit_predictors,
    recalled_estimate,
    recent_utilization,
    updated_estimate,
    window_peak,
)
from planner.planners.search_space import prices


class ComputedCost(Predictor):
    """Cost per hour is computed from node-pool prices, not learned: exact, always supported.
    Not :attr:`Predictor.monotone`: more replicas cost more."""

    kind = "computed"
    monotone = False

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        cost = prices(self.snapshot, batch)
        return Prediction(cost, cost, np.ones(len(batch), dtype=bool))


class CurrentSizeOnly(Predictor):
    """``inner``'s predictions, vouched for only at the current CPU size.

    The explicit estimate is calibrated on the pods as they run; how it scales to another CPU
    size is an assumption it never observed. A workload whose requests each use one core, or
    whose rate grows slower than its cores, is served no faster per request by a bigger pod,
    and the whole workload moved there on that assumption stays where it landed (the learned
    model then knows only that size). So, as for another device or node pool, candidates of
    another size are still predicted but marked unsupported: reached by exploration (a trial
    while every objective holds, or when no known configuration is feasible), not chosen as
    known. :class:`PredictorSource` gives it explicit predictors that take a bigger pod as
    more servers, none faster per request than a current pod (or one whole core, where a
    current pod has a share of one: ``parallel_sizes``), so a target the current pods' service
    time misses is not predicted met by a bigger size of one core or more either."""

    def __init__(self, inner: Predictor, cpu: float) -> None:
        self.inner = inner
        self.cpu = cpu
        self.kind = inner.kind
        self.monotone = inner.monotone

    def runs(self, batch: CandidateBatch, rate: float) -> NDArray[np.int64]:
        return self.inner.runs(batch, rate)

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return self._at_size(batch, self.inner.predict(batch, rate))

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        return self._at_size(batch, self.inner.predict_faster(batch, rate, factor))

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        return self.inner.predict_mean_rates_faster(batch, rates, factor)

    def predict_faster_rows(self, batch: CandidateBatch, rate: float,
                            factors: FloatArray) -> Prediction:
        return self._at_size(batch, self.inner.predict_faster_rows(batch, rate, factors))

    def supported_faster(self, batch: CandidateBatch, rate: float, factor: float
                         ) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = (self.inner.supported_faster(batch, rate, factor)
                                  & (batch.cpu == self.cpu))
        return out

    def supported_faster_rows(self, batch: CandidateBatch, rate: float,
                              factors: FloatArray) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = (self.inner.supported_faster_rows(batch, rate, factors)
                                  & (batch.cpu == self.cpu))
        return out

    def cpu_speedup(self, cpu: float, reference_cpu: float) -> float:
        return self.inner.cpu_speedup(cpu, reference_cpu)

    def _at_size(self, batch: CandidateBatch, p: Prediction) -> Prediction:
        return Prediction(p.mean, p.bound, p.supported & (batch.cpu == self.cpu))

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        out: NDArray[np.bool_] = self.inner.supported(batch, rate) & (batch.cpu == self.cpu)
        return out


@dataclass
class PredictorMemory:
    """What choosing predictors remembers of an intent: the online explicit estimate, per
    objective when the learned model in use was loaded, the node-pool mixes, and the
    estimates of places the workload left."""

    estimate: QueueEstimate | None = None
    loaded_at: dict[str, float] = field(default_factory=dict)
    mixes: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per device, the node-pool mix its ready pods last had while the workload ran
    unpinned (:func:`planner.models.mix.expected_mix`'s ``last_seen``)."""
    left: dict[places_left.Place, places_left.Left] = field(default_factory=dict)
    """The estimates of places the workload left (:mod:`.places_left`)."""
    utilization: Recent = ()
    """The pods' utilisation in the cycles of the last KPI window
    (:func:`~planner.planners.online.recent_utilization`): whether the window the observed
    latency was measured over saw them saturated."""

    @staticmethod
    def recall(memory: Mapping[str, Any]) -> PredictorMemory:
        mixes = memory.get("mixes")
        return PredictorMemory(recalled_estimate(memory.get("estimate")),
                               {str(k): float(v) for k, v in
                                dict(memory.get("loaded_at") or {}).items()},
                               {str(d): {str(p): float(v) for p, v in m.items()}
                                for d, m in dict(mixes).items() if isinstance(m, Mapping)}
                               if isinstance(mixes, Mapping) else {},
                               places_left.recalled_left(memory.get("left")),
                               _recalled_utilization(memory.get("utilization")))

    def as_memory(self) -> dict[str, Any]:
        return {"estimate": estimate_memory(self.estimate), "loaded_at": dict(self.loaded_at),
                "mixes": {d: dict(m) for d, m in self.mixes.items()},
                "left": places_left.left_memory(self.left),
                "utilization": [[t, u] for t, u in self.utilization]}


def _recalled_utilization(raw: Any) -> Recent:
    """:attr:`PredictorMemory.utilization` from its memory: the readable, finite ``[time,
    utilisation]`` pairs (an unreadable one is dropped, as a place left's record is)."""
    out: list[tuple[float, float]] = []
    for x in raw if isinstance(raw, list | tuple) else ():
        try:
            t, u = (float(v) for v in x)
        except (TypeError, ValueError):
            continue
        if math.isfinite(t) and math.isfinite(u):
            out.append((t, u))
    return tuple(out)


def calibrated_estimate(ctx: PlanningContext, previous: QueueEstimate | None,
                        peak: float | None = None) -> QueueEstimate | None:
    """:func:`updated_estimate`, started afresh where this cycle's observation is of pods in
    another place (device, node pool) than the estimate's: a GPU pod's service rate blended
    into the CPU pods' it replaced describes neither. ``peak``: the pods' highest utilisation
    over the KPI window (no base latency is read from a window that saw them saturated)."""
    est = updated_estimate(ctx, previous, peak)
    if est is None or previous is None or est is previous or previous.place is None:
        return est
    if est.place != previous.place:
        return updated_estimate(ctx, None, peak)
    if previous.place != (ctx.config.device, ctx.config.pool):
        # Capped by the saturated throughput of pods in another place: that bounds theirs.
        return previous
    return est


def estimated_config(ctx: PlanningContext, est: QueueEstimate) -> WorkloadConfig:
    """The configuration ``est`` vouches for: the workload's, in the place of the pods it was
    calibrated on. Right after a move to another device or pool, until the new pods are
    observed steady, the estimate still describes the pods that left; it predicts the new
    place as if unchanged and does not vouch for it (a place a canary measured is then
    predicted at its measured speed, :class:`planner.planners.canary.MeasuredShapes`)."""
    if est.place is None:
        return ctx.config
    return ctx.config.with_(device=est.place[0], pool=est.place[1])


def with_places_left(ctx: PlanningContext, preds: Mapping[str, Predictor],
                     left: Mapping[places_left.Place, places_left.Left], serving: str
                     ) -> dict[str, Predictor]:
    """``preds`` with the explicit predictors of the places ``left`` on another device than
    ``serving`` (the device of the pods the live estimate describes: during a move back, the
    place left is the one moved to) behind them
    (:class:`~planner.planners.places_left.WithPlacesLeft`), each vouching for its place at
    the size its pods had; unchanged where there are none for an objective. Only another
    device: pools of the device the pods run on are known to the models through the node
    classes they were trained on, and an estimate of each pool left beside them made the
    workload hop from pool to pool, each estimate more hopeful of its own pool than the model
    of the pool it was in (gen-4009 seed 2: 247 actions, docs/benchmarks.md section 61)."""
    others: dict[str, list[Predictor]] = {}
    places: dict[str, list[tuple[places_left.Place, float]]] = {}
    for place, lf in left.items():
        if place[0] == serving:
            continue
        at = ctx.config.with_(device=place[0], pool=place[1], cpu=lf.cpu)
        for name, p in explicit_predictors(ctx, lf.estimate, parallel_sizes=True,
                                           current=at).items():
            others.setdefault(name, []).append(CurrentSizeOnly(p, lf.cpu))
            places.setdefault(name, []).append((place, lf.cpu))
    return {n: places_left.WithPlacesLeft(p, others[n], places[n]) if n in others else p
            for n, p in preds.items()}


class PredictorSource:
    """Chooses the predictors; holds the model cache (a cache of the knowledge base, not
    memory: see :class:`~planner.planners.effect_cache.EffectCache`)."""

    def __init__(self, knowledge: KnowledgeBase | None, min_samples: int = 8,
                 lookback_s: float = 6 * 3600.0) -> None:
        self.cache = EffectCache(knowledge, lookback_s)
        self.min_samples = min_samples

    def predictors(self, ctx: PlanningContext, mem: PredictorMemory) -> dict[str, Predictor]:
        """Per objective the best predictor available; objectives with none are left out.
        Updates ``mem`` (the caller's working copy of the intent's memory)."""
        previous = mem.estimate
        mem.utilization = recent_utilization(mem.utilization, ctx)
        mem.estimate = est = calibrated_estimate(ctx, previous, window_peak(mem.utilization))
        mem.left = places_left.updated(mem.left, previous, est, ctx.now)
        out: dict[str, Predictor] = {} if est is None else {
            n: CurrentSizeOnly(p, ctx.config.cpu)
            for n, p in explicit_predictors(ctx, est, parallel_sizes=True,
                                            current=estimated_config(ctx, est)).items()}
        latency_model = None
        for device in ("cpu", "gpu"):
            if (seen := observed_mix(ctx.workload, device)) is not None:
                mem.mixes[device] = seen
        mix = expected_mix(ctx.workload, ctx.snapshot, "cpu", mem.mixes.get("cpu"))
        gpu_mix = (expected_mix(ctx.workload, ctx.snapshot, "gpu", mem.mixes.get("gpu"))
                   if ctx.snapshot.facts.has_gpu else None)
        for o in ctx.intent.spec.objectives:
            spec = ctx.profiles[o.name].spec
            model, mem.loaded_at[o.name] = self.cache.get(ctx.intent.key, o.name, ctx.now,
                                                          mem.loaded_at.get(o.name))
            if model is None or model.samples < self.min_samples:
                continue
            if spec.type is KPIType.LATENCY and model.kind == KIND_LATENCY:
                out[o.name] = LearnedLatency(model, mix, gpu_mix)
                latency_model = latency_model or model
            elif spec.type is KPIType.AVAILABILITY and model.kind == KIND_AVAILABILITY:
                out[o.name] = LearnedAvailability(model, mix, gpu_mix)
        if latency_model is not None:
            for o in ctx.intent.spec.objectives:
                if ctx.profiles[o.name].spec.type is KPIType.THROUGHPUT:
                    out[o.name] = LearnedThroughput(latency_model, mix, gpu_mix)
        for o in ctx.intent.spec.objectives:
            if ctx.profiles[o.name].spec.type is KPIType.COST:
                out[o.name] = ComputedCost(ctx.snapshot)
        serving = est.place[0] if est is not None and est.place is not None \
            else ctx.config.device
        return with_places_left(ctx, out, mem.left, serving)

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
