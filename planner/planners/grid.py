"""The default planner, ``grid``: the cheapest configuration predicted to meet every
objective, found by scoring a grid of candidates (replicas x CPU size x device x node pool)
with the learned effect models (the explicit queueing estimate until they are learned).

Named for what it does: on every shipped scenario the space is scored as a grid (one vectorised
batch; with a long replica axis, the window of each shape's replica counts that can matter,
located by a coarse sample, when the predictors promise monotonicity; a monotone binary search
over replicas for larger spaces); only a space beyond ``GRID_LIMIT`` points falls back to an
optuna TPE study. (It was called ``optuna`` up to 0.1.0.)

Objectives are constraints, judged on the predictors' conservative bound (the learned models'
uncertainty band, or the explicit estimate with a margin). Among feasible configurations it
minimises ``utility.cost * cost/h + utility.disruption * cost/h * restarts`` where ``restarts``
counts knobs whose change restarts pods (CPU, device, pool; not the CPU size alone where the
cluster resizes pods in place: :mod:`planner.planners.disruption`). Small spaces are scored as one
vectorised grid (the fast path); large ones by a seeded, time-boxed optuna TPE study with the
objectives as constraints. The current configuration is kept while it meets its objectives
within ``tolerance`` and nothing is cheaper by more than ``hysteresis``: no flapping. A
scale-in goes to the fewest replicas (of the cheapest shape) that also hold at
``SCALE_IN_MARGIN`` more load, so the next cycle's noise does not bring it back.
When no configuration the models know is feasible, the planner takes the best-predicted
unexplored one and marks the plan exploratory (another CPU size alone is tried beside the
workload first, as a canary, where one can be judged); when none at all is, it sizes the
current shape by the explicit queueing estimate (:mod:`planner.planners.fallback`), never the
admin's maximum.

Feedback (:mod:`planner.planners.feedback`): while every objective holds it occasionally tries
a configuration shape its model has not observed but predicts much cheaper (marked
exploratory), and it plans for more load when a settled configuration is observed violating
although its model says it holds. The load planned for is the forecast over the pods' start-up
(:mod:`planner.models.forecast`) plus the admin's headroom.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import optuna
from numpy.typing import NDArray

from actuators.canary import CanaryActuator
from planner.domain.intents import KPIType, objective_met
from planner.domain.plan import Action, Plan, ReasonPart
from planner.domain.state import WorkloadConfig
from planner.models.forecast import Forecast, LoadForecast
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.queue_estimate import QueueEstimate
from planner.planners import (
    canary,
    capacity,
    disruption,
    fallback,
    feedback,
    plan_details,
    safety,
)
from planner.planners.base import (
    Planner,
    PlanningContext,
    ShapeOption,
    clip_target,
    scaler_of,
    steps_towards,
)
from planner.planners.canary import place_of
from planner.planners.observed_limits import ObservedLimits
from planner.planners.predictors import PredictorMemory, PredictorSource
from planner.planners.search_space import SearchSpace, gpu_capacity_ok, prices, space_for

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)

FULL_GRID_LIMIT = 4_000
"""Up to this many points every candidate is scored in one vectorised batch."""
GRID_LIMIT = 200_000
"""Up to this many, a monotone binary search over replicas; beyond, an optuna TPE study."""
SPECULATIVE_ROWS = 256
"""Rows per model call of the binary search (:meth:`GridPlanner._grid`): while few
combinations are unfinished, one call evaluates the points of their next several steps. A
call's fixed work (a chain of measured places, the support checks, the wrappers) outweighs its
rows' up to a few hundred rows: from 64, 256 takes about a third off gen-4009's plan time with
the same plans (docs/benchmarks.md section 61)."""
WINDOW_ROWS = 64
"""A replica axis longer than this is predicted in a window (:meth:`GridPlanner._windowed`)
rather than whole."""
HYSTERESIS = 0.05
RISK_FREE = 0.7
ALARM_DECAY = 0.995
ALARM_GAIN = 1.0
"""Per cycle; at 15 s cycles a violation's extra margin halves in about 35 minutes."""
RISK_SCALE = 1.0
SCALE_IN_MARGIN = 0.05
"""A cheaper configuration must also hold at this much more load before the planner moves to
it from a configuration that meets its objectives (hysteresis in load, against flapping)."""


@dataclass
class Recall:
    """The planner's memory of one intent while it plans (built from ``ctx.memory``, returned
    as the plan's ``memory``; see :mod:`planner.domain.memory`)."""

    alarm: float
    """How recently objectives were violated (1 after a violation, decaying): the risk
    margin grows where the models have been too optimistic."""
    forecast: LoadForecast
    """Recent load and pod start-ups: on rising load the planner sizes for the rate expected
    when the pods it orders now are ready (never below the current rate)."""
    explorer: feedback.Explorer
    """Which unobserved shape is on trial (see :mod:`.feedback`)."""
    predictors: PredictorMemory
    limits: ObservedLimits
    """Per shape, the load per pod at which a latency objective was observed violated
    (:mod:`.observed_limits`): candidates that reach it are not feasible, whatever the model;
    and the load per pod a pinned shape was observed holding: candidates within it meet the
    latency objectives, whatever the model."""

    @staticmethod
    def of(key: str, memory: Mapping[str, Any]) -> Recall:
        forecast, explorer = LoadForecast(), feedback.Explorer()
        forecast.recall(key, memory.get("forecast") or {})
        explorer.recall(key, memory.get("explorer") or {})
        return Recall(float(memory.get("alarm") or 0.0), forecast, explorer,
                      PredictorMemory.recall(memory.get("predictors") or {}),
                      ObservedLimits.recall(memory.get("limits") or {}))

    def as_memory(self, key: str) -> dict[str, Any]:
        return {"alarm": self.alarm, "forecast": self.forecast.remember(key),
                "explorer": self.explorer.remember(key),
                "predictors": self.predictors.as_memory(), "limits": self.limits.remember()}


@dataclass(frozen=True)
class Inputs:
    """What scoring a candidate needs besides the candidate: the predictors, the alarm and
    the limits observed."""

    preds: dict[str, Predictor]
    alarm: float
    limits: ObservedLimits = field(default_factory=ObservedLimits)
    estimate: QueueEstimate | None = None
    """The explicit estimate (:mod:`planner.planners.fallback` sizes by it when no count of
    a shape is predicted to meet the objectives)."""
    anchors: dict[str, float] = field(default_factory=dict)
    """Objectives judged against these values instead of their targets: those no candidate
    is predicted to meet or to do better on than the current configuration, which meets
    them within tolerance and is observed meeting them (see :func:`_no_better_than_staying`)."""


@dataclass(frozen=True)
class Scored:
    batch: CandidateBatch
    cost: NDArray[np.float64]
    feasible: NDArray[np.bool_]
    supported: NDArray[np.bool_]
    excess: NDArray[np.float64]
    """Worst relative violation of any objective by the bound (0 when feasible)."""
    predictions: dict[str, Prediction]
    score: NDArray[np.float64]
    calm: NDArray[np.bool_]
    """Risk-free: every objective's bound within :data:`RISK_FREE` of its target (the score
    has no risk term)."""

    def take(self, idx: NDArray[np.intp]) -> Scored:
        """The rows ``idx``, in that order."""
        return Scored(self.batch.take(idx), self.cost[idx], self.feasible[idx],
                      self.supported[idx], self.excess[idx],
                      {n: Prediction(p.mean[idx], p.bound[idx], p.supported[idx])
                       for n, p in self.predictions.items()}, self.score[idx], self.calm[idx])


def _met(pred: NDArray[np.float64], target: float, minimize: bool, slack: float) -> NDArray[
        np.bool_]:
    out: NDArray[np.bool_] = (pred <= target * (1 + slack)) if minimize else (
        pred >= target * (1 - slack))
    return out


ANCHOR_EPS = 1e-9
"""Slack of an anchor (:func:`_no_better_than_staying`), relative to the bound's size (at
least 1): the current configuration's own bound, predicted by another call, may differ in its
last bits."""


def _no_better_than_staying(ctx: PlanningContext, scored: Scored, current: Scored
                            ) -> dict[str, float]:
    """Objectives that cannot tell the candidates apart from staying: no candidate of
    ``scored`` is predicted to meet the target, none is predicted to do better than the
    current configuration, the current configuration meets the target within its tolerance
    by its bound and is observed meeting the target itself (not just within tolerance). Each
    with the current configuration's bound (a little relaxed): judged against it, a candidate
    must be no worse than staying.

    Without this, the tolerance the current configuration is kept on holds for it alone: every
    other configuration, cheaper ones predicted exactly as good included, fails the target, so
    the count can rise and never fall (an availability model whose one loss for every count
    of two or more pods sits below the target held 48 pods where 16 carried the load,
    docs/benchmarks.md section 29)."""
    out: dict[str, float] = {}
    for o in ctx.intent.spec.objectives:
        pr, cur = scored.predictions.get(o.name), current.predictions.get(o.name)
        if pr is None or cur is None or not len(pr.bound):
            continue
        minimize = ctx.profiles[o.name].spec.minimizes
        bound = float(cur.bound[0])
        seen = ctx.current.get(o.name)
        if (not math.isfinite(bound) or seen is None
                or not (seen <= o.value if minimize else seen >= o.value)
                or _met(pr.bound, o.value, minimize, 0.0).any()
                or not _met(cur.bound, o.value, minimize, o.tolerance)[0]):
            continue
        known = pr.bound[~np.isnan(pr.bound)]
        best = float(np.min(known) if minimize else np.max(known)) if known.size else bound
        if (best < bound) if minimize else (best > bound):
            continue                     # a candidate does better: the objective decides
        eps = ANCHOR_EPS * max(abs(bound), 1.0)
        out[o.name] = bound + eps if minimize else bound - eps
    return out


_MOST_NEGATIVE = float(np.finfo(np.float64).min)


def _capped(a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``np.nan_to_num(a, nan=1e9, posinf=1e9)`` (``-inf``: the most negative float), without
    its per-call argument handling: a judgement takes it twice per objective."""
    out: NDArray[np.float64] = np.where(np.isfinite(a), a,
                                        np.where(a < 0.0, _MOST_NEGATIVE, 1e9))
    return out


def _merged(rows: NDArray[np.int64], predictions: dict[str, Prediction],
            more_rows: NDArray[np.int64], more: dict[str, Prediction]
            ) -> tuple[NDArray[np.int64], dict[str, Prediction]]:
    """Two sets of grid rows (disjoint) and their predictions as one, in the grid's order."""
    both = np.concatenate([rows, more_rows])
    order = np.argsort(both, kind="stable")
    return both[order], {
        n: Prediction(np.concatenate([p.mean, more[n].mean])[order],
                      np.concatenate([p.bound, more[n].bound])[order],
                      np.concatenate([p.supported, more[n].supported])[order])
        for n, p in predictions.items()}


def _old_pods_serving(ctx: PlanningContext, target: WorkloadConfig) -> int:
    """The serving pods not of ``target``'s shape: what a rolling update keeps until the new
    pods are ready. All of them: they are the count the plan sized for the objectives; the
    proportional rule's count (HPA's, 80 % busy) is sized for throughput, not for a latency
    percentile (a p95 of 120 ms seen at 104 ms on 44 pods was 122 ms on the 34 that the step
    limit left of the 23 that rule asked for)."""
    return sum(1 for p in ctx.workload.pods if p.ready and not capacity.runs(p, target))


def _within(ctx: PlanningContext, need: int) -> int:
    """``need`` replicas of the current shape, capped as the safety layer's rule 3 caps
    (:func:`planner.planners.safety.replica_cap`: never removing a pod on a node); a
    ``need`` below the cap is kept, a scale-in as asked."""
    return max(min(need, safety.replica_cap(ctx, ctx.config)), 1)


def _sized_text(replicas: int, need: int, of: str) -> str:
    return f"{replicas} replica(s) of {of}" + (
        f" (the models ask {need}; the cluster can schedule {replicas})"
        if replicas < need else "")


def _first_step_carries(ctx: PlanningContext, target: WorkloadConfig, reached: int,
                        fits: int) -> bool:
    """Whether a move's first step (``reached`` pods of ``target``'s shape) has at least the
    cores of the current shape at the count the cluster can schedule of it (``fits``, at
    most the replicas now). Only within a device, cores for cores (node generations differ
    in speed far less than devices do); across devices the speeds are not known here: no."""
    cur = ctx.config
    if target.device != cur.device:
        return False
    return reached * target.cpu >= min(fits, cur.replicas) * cur.cpu


def _size_trial(ctx: PlanningContext, explorer: feedback.Explorer,
                tester: CanaryActuator | None, shape: WorkloadConfig,
                busy: bool) -> Literal["start", "wait"] | None:
    """How ``shape``, unobserved and the cheapest configuration predicted to meet the
    objectives where no known one is, is reached: ``None``, the workload is rolled over to it
    (it differs in more than its CPU size, or no trial could tell anything: no canary actuator,
    one pod, no room for a pod of it, no per-pod request rates, or a trial of it ended unjudged
    lately); ``"wait"``, a canary of it waits (``busy``: another canary is on, or one stopped
    this cycle; or a change of shape rolls out); ``"start"``, a canary of it starts."""
    cfg, key = ctx.config, ctx.intent.key
    if (tester is None or cfg.replicas < 2 or shape.cpu == cfg.cpu
            or place_of(shape) != place_of(cfg) or key in explorer.trials):
        return None
    if busy or feedback.other_shapes_serving(ctx):
        return "wait"
    if (explorer.was_tried(key, feedback.shape_of(shape), ctx.now)
            or not canary.can_judge_size(ctx, shape)):
        return None
    return "start"


def _cpu_rollout_under_way(ctx: PlanningContext, target: WorkloadConfig) -> bool:
    """A rollout to ``target``'s shape that changes the CPU size alone is under way: the
    Deployment asks for ``target``'s shape, and pods of another CPU size, on its device and
    pool, still run beside its own (the old pods a rollout removes; with in-place resize, the
    pods whose resize has not landed yet)."""
    if feedback.shape_of(target) != feedback.shape_of(ctx.config):
        return False
    old = False
    for p in ctx.workload.pods:
        if p.device != target.device or (target.pool is not None
                                         and p.pool not in (target.pool, None)):
            return False           # another device or pool: not a resize alone
        old = old or p.cpu != target.cpu     # (a pod waiting for room has no pool yet)
    return old


def _throughput_objectives(ctx: PlanningContext) -> set[str]:
    return {o.name for o in ctx.intent.spec.objectives
            if ctx.profiles[o.name].spec.type is KPIType.THROUGHPUT}


def _run_starts(space: SearchSpace, rate: float, inp: Inputs) -> NDArray[np.int64]:
    """The first grid row of every run of ``space.grid()`` at ``rate``: a shape's replica
    counts, apart from one replica (a regime of its own), cut wherever a predictor's
    :meth:`Predictor.runs` label changes; within a run every predictor keeps its promise of
    monotonicity."""
    size, n_r = space.size, len(space.replicas)
    cut = np.zeros(size, dtype=bool)
    cut[::n_r] = True
    if space.replicas[0] < 2 and n_r > 1:
        cut[1::n_r] = True
    if not all(p.monotone for p in inp.preds.values()):
        grid = space.grid()
        for p in inp.preds.values():
            label = p.runs(grid, rate)
            cut[1:] |= label[1:] != label[:-1]
    return np.flatnonzero(cut)


def _ranges(lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.int64]:
    """``lo[i]..hi[i]`` (inclusive) for every ``i``, concatenated."""
    n = np.maximum(hi - lo + 1, 0)
    offset = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    out: NDArray[np.int64] = np.repeat(lo, n) + offset
    return out


def _sample_runs(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per run ``starts[i]..ends[i]`` of length ``L``: every ``isqrt(L)``-th row from its
    first, and its last; sorted."""
    length = ends - starts + 1
    step = np.array([math.isqrt(int(n)) for n in length.tolist()], dtype=np.int64)
    per = -(-length // step)
    offset = np.arange(int(per.sum()), dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
    out: NDArray[np.int64] = np.union1d(np.repeat(starts, per) + offset * np.repeat(step, per),
                                        ends)
    return out


def _windows(starts: NDArray[np.int64], ends: NDArray[np.int64], sample: NDArray[np.int64],
             judged: Scored, axis: NDArray[np.float64]
             ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per run with a sampled row predicted feasible, its window ``lo..hi`` of grid rows (see
    :meth:`GridPlanner._windowed`). ``judged``: the ``sample`` rows (every run's first and
    last among them) judged short of the caps that tighten with replicas.

    From the row after the last sampled infeasible one before the first sampled feasible one,
    to the first that is feasible and calm (else the run's end), and at least to the first
    supported one; but not past the rows whose score cannot come below the best sampled
    (feasible and, in a run supported at its end, supported) score: within a run a row's
    risk is at least the run end's and its cost is its replicas times the shape's pod price,
    so its score is at least the end's score times its replicas over the end's."""
    idx = np.arange(len(sample))
    group = np.searchsorted(sample, starts)      # each run's first sampled row
    tail = np.searchsorted(sample, ends)         # and its last
    none = len(sample)
    feasible, calm, known = judged.feasible, judged.feasible & judged.calm, judged.supported

    def first(mask: NDArray[np.bool_]) -> NDArray[np.int64]:
        out: NDArray[np.int64] = np.minimum.reduceat(np.where(mask, idx, none), group)
        return out

    j_ok, j_calm, j_known = first(feasible), first(calm), first(known)
    has = j_ok < none
    last = none - 1
    lo = np.where(j_ok > group, sample[np.clip(j_ok - 1, 0, last)] + 1, starts)
    hi = np.where(j_calm < none, sample[np.minimum(j_calm, last)], ends)
    # The bound: the best sampled score among the rows a plan compares within the run.
    run_of = np.repeat(np.arange(len(starts)), np.diff(np.append(group, none)))
    counted = feasible & (known | ~(feasible & known)[tail][run_of])
    best = np.minimum.reduceat(np.where(counted, judged.score, np.inf), group)
    end_reps, end_score = judged.batch.replicas[tail], judged.score[tail]
    with np.errstate(divide="ignore", invalid="ignore"):
        limit = best * (1.0 + 1e-9) * end_reps / end_score
    ok = np.isfinite(limit) & (end_score > 0)
    # The last row of the run's shape whose replica count (``axis``) is within the limit.
    shape_start = starts - starts % len(axis)
    within = shape_start + np.searchsorted(axis, np.where(ok, limit, 0.0), side="right") - 1
    hi = np.where(ok, np.minimum(hi, np.maximum(within, starts)), hi)
    hi = np.where(j_known < none, np.maximum(hi, sample[np.minimum(j_known, last)]), hi)
    return lo[has], hi[has]


def _violated_any(ctx: PlanningContext) -> bool:
    return any(objective_met(ctx.current.get(o.name), o, ctx.profiles[o.name]) is False
               for o in ctx.intent.spec.objectives)


class GridPlanner(Planner):
    name = "grid"

    uses_models = True

    def __init__(self, seed: int = 0, n_trials: int = 150, timeout_s: float = 0.04,
                 grid_limit: int = GRID_LIMIT) -> None:
        self.seed = seed
        self.n_trials = n_trials
        self.timeout_s = timeout_s
        self.grid_limit = grid_limit
        self.source: PredictorSource | None = None
        """The model cache (re-readable from the knowledge base; not memory)."""

    def predictors(self, ctx: PlanningContext, mem: PredictorMemory) -> dict[str, Predictor]:
        if self.source is None:
            self.source = PredictorSource(ctx.knowledge)
        return self.source.predictors(ctx, mem)

    # ---------------------------------------------------------------- scoring
    def score(self, ctx: PlanningContext, batch: CandidateBatch, rate: float,
              inp: Inputs, slack: float = 0.0,
              monotone_only: bool = False) -> Scored:
        """Predictions, feasibility and score of every candidate. ``monotone_only`` leaves
        out the constraints that tighten with replicas (budget, GPU count) so feasibility is
        monotone in replicas for the binary search; they are applied to its result."""
        return self._judge(ctx, batch, rate, self._predict(ctx, batch, rate, inp), inp, slack,
                           monotone_only)

    @staticmethod
    def _predict(ctx: PlanningContext, batch: CandidateBatch, rate: float,
                 inp: Inputs) -> dict[str, Prediction]:
        """Each objective's predictions for ``batch`` at ``rate`` (objectives without a
        predictor left out)."""
        return {o.name: p.predict(batch, rate) for o in ctx.intent.spec.objectives
                if (p := inp.preds.get(o.name)) is not None}

    def _judge(self, ctx: PlanningContext, batch: CandidateBatch, rate: float,
               predictions: dict[str, Prediction], inp: Inputs, slack: float = 0.0,
               monotone_only: bool = False) -> Scored:
        """Feasibility and score of every candidate of ``batch`` from its predictions (see
        :meth:`score`)."""
        n = len(batch)
        feasible = np.ones(n, dtype=bool)
        supported = np.ones(n, dtype=bool)
        excess = np.zeros(n)
        closeness = np.zeros(n)
        # Configurations of a pinned shape at a load per pod it was observed holding: their
        # latency objectives are met (observed), whatever the models' bounds say.
        vouched = inp.limits.vouched(ctx, batch, rate) if inp.limits.vouch else None
        with np.errstate(divide="ignore", invalid="ignore"):
            for o in ctx.intent.spec.objectives:
                pr = predictions.get(o.name)
                if pr is None:
                    continue
                spec = ctx.profiles[o.name].spec
                minimize = spec.minimizes
                tol = o.tolerance if slack else 0.0
                target = inp.anchors.get(o.name, o.value)
                met = _met(pr.bound, target, minimize, tol)
                supported &= pr.supported
                limit = target * (1 + tol) if minimize else target * (1 - tol)
                rel = (pr.bound / max(limit, 1e-12) - 1.0) if minimize else (
                    1.0 - pr.bound / max(limit, 1e-12))
                if vouched is not None and minimize and spec.type is KPIType.LATENCY:
                    met |= vouched
                    rel = np.where(vouched, np.minimum(rel, 0.0), rel)
                feasible &= met
                closeness = np.maximum(closeness, _capped(1.0 + rel))
                excess = np.maximum(excess, _capped(np.maximum(rel, 0.0)))
        # Configurations observed violating at this load per pod (whatever the models say);
        # their excess (the optuna path's constraint) is the overload, made positive.
        over = inp.limits.overload(batch, rate)
        limited = over >= 1.0
        if limited.any():
            feasible &= ~limited
            excess = np.where(limited, np.maximum(excess, np.nextafter(over - 1.0, np.inf)),
                              excess)
        for shape in ctx.vetoed:          # rolled back as stuck: the other shapes only
            feasible &= ~feedback.shape_mask(batch, shape)
        cost = prices(ctx.snapshot, batch)
        if not monotone_only:
            feasible &= gpu_capacity_ok(ctx.snapshot, batch)
        restarts = disruption.batch_restarts(batch, ctx.config, ctx.snapshot.in_place_resize)
        u = ctx.admin.utility
        # Risk, weighted by the intent's priority: a configuration that uses more than
        # RISK_FREE of an objective's budget (bound / target) pays for the thin margin.
        risk = np.clip(closeness - RISK_FREE, 0.0, 1.0)
        alarm = 1.0 + ALARM_GAIN * inp.alarm
        score = (u.cost * cost + u.disruption * cost * restarts
                 + u.slo_risk * RISK_SCALE * alarm * ctx.intent.spec.priority * cost * risk)
        budget = ctx.admin.budget_per_hour
        if budget is not None and not monotone_only:
            feasible &= cost <= budget
        return Scored(batch, cost, feasible, supported, excess, predictions, score, risk <= 0.0)

    # ---------------------------------------------------------------- search
    def _grid(self, ctx: PlanningContext, space: SearchSpace, rate: float,
              inp: Inputs) -> tuple[Scored, str]:
        """Exact search using monotonicity: for a fixed (CPU size, device, pool) more replicas
        never predict worse objectives and always cost more, so the cheapest feasible point
        of each combination is its fewest feasible replicas. A vectorised binary search over
        replicas, all combinations at once, finds them in ``log2(len(replicas))`` steps.

        More replicas never lose support either (the :class:`Predictor` contract: a model
        vouches for loads per pod up to a margin beyond what it saw). Where a combination's
        fewest feasible count is not supported but its most replicas are, a second search
        finds its fewest feasible and supported count, and both are returned: the plan's
        cheapest known candidate is then the whole grid's (a shape a canary measured faster
        is moved to at the fewest pods its model vouches for, not left out because the
        very fewest would load each pod beyond what was seen), and the shape counts as
        observed, as in the whole grid.

        A model call on a few rows costs its per-call work, not its rows, so each call
        evaluates the points of the next few steps of every unfinished combination (both
        ways each step may go, up to :data:`SPECULATIVE_ROWS` rows) and the steps are then
        taken from those results: the same steps, fewer calls (a candidate's prediction does
        not depend on the other rows of its batch)."""
        cpu, gpu, pools = space.shapes
        reps = np.asarray(space.replicas, dtype=float)
        n = len(pools)

        def at(points: list[tuple[int, int]], known: bool) -> dict[tuple[int, int], bool]:
            """Feasibility (monotone constraints) of (combination, replica index) points;
            ``known``: and support."""
            ci = np.array([c for c, _ in points], dtype=np.int64)
            ri = np.array([r for _, r in points], dtype=np.int64)
            s = self.score(ctx, CandidateBatch(reps[ri], cpu[ci], gpu[ci],
                                               tuple(pools[c] for c in ci.tolist())),
                           rate, inp, monotone_only=True)
            ok = s.feasible & s.supported if known else s.feasible
            return dict(zip(points, ok.tolist(), strict=True))

        def fewest(lo: NDArray[np.int64], hi: NDArray[np.int64], possible: NDArray[np.bool_],
                   known: bool) -> tuple[NDArray[np.int64], int]:
            """Per ``possible`` combination, the lowest replica index in ``[lo, hi]`` where
            :func:`at` holds (it holds at ``hi``), and the points stepped through."""
            evaluated = 0
            while np.any((lo < hi) & possible):
                active = np.flatnonzero((lo < hi) & possible).tolist()
                depth = max(1, int(math.log2(SPECULATIVE_ROWS / len(active) + 1)))
                points: list[tuple[int, int]] = []
                frontier = [(c, int(lo[c]), int(hi[c])) for c in active]
                for _ in range(depth):
                    points.extend((c, (a + b) // 2) for c, a, b in frontier)
                    frontier = [half for c, a, b in frontier
                                for half in ((c, a, (a + b) // 2), (c, (a + b) // 2 + 1, b))
                                if half[1] < half[2]]
                holds = at(points, known)
                for _ in range(depth):
                    if not np.any((lo < hi) & possible):
                        break
                    mid = (lo + hi) // 2
                    # A finished combination's point is its upper end, where ``at`` holds.
                    ok = np.array([lo[c] >= hi[c] or not possible[c] or holds[(c, int(mid[c]))]
                                   for c in range(n)], dtype=bool)
                    evaluated += n
                    hi = np.where(possible & ok, mid, hi)
                    lo = np.where(possible & ~ok, mid + 1, lo)
            return lo, evaluated

        last = len(reps) - 1
        top = self.score(ctx, CandidateBatch(reps[np.full(n, last)], cpu, gpu, pools), rate,
                         inp, monotone_only=True)
        possible = top.feasible
        lo, steps = fewest(np.zeros(n, dtype=np.int64), np.full(n, last, dtype=np.int64),
                           possible, known=False)
        evaluated = n + steps
        final_idx = np.where(possible, lo, last)
        final = self.score(ctx, CandidateBatch(reps[final_idx], cpu, gpu, pools), rate, inp)
        short = possible & top.supported & ~final.supported & (final_idx < last)
        if short.any():
            known_lo, steps = fewest(np.where(short, final_idx + 1, last),
                                     np.full(n, last, dtype=np.int64), short, known=True)
            evaluated += steps
            extra = np.flatnonzero(short)
            combos = np.concatenate([np.arange(n), extra])
            both = CandidateBatch(reps[np.concatenate([final_idx, known_lo[extra]])],
                                  cpu[combos], gpu[combos],
                                  tuple(pools[c] for c in combos.tolist()))
            # Only the new rows are predicted (a row's prediction is its own).
            _, predictions = _merged(np.arange(n), final.predictions,
                                     n + np.arange(extra.size),
                                     self._predict(ctx, both.take(n + np.arange(extra.size)),
                                                   rate, inp))
            final = self._judge(ctx, both, rate, predictions, inp)
        return final, f"{evaluated} of {space.size} points searched"

    def _windowed(self, ctx: PlanningContext, space: SearchSpace, rate: float,
                  inp: Inputs, starts: NDArray[np.int64] | None = None
                  ) -> tuple[Scored, str]:
        """The candidates of ``space``'s grid that can matter to a plan, scored at ``rate``;
        for a grid with a long replica axis, in place of scoring every candidate.

        Per run (a shape's replica counts over which every predictor keeps its promise:
        :func:`_run_starts`; one replica is a run of its own, a regime without redundancy),
        the window of replica counts from the fewest predicted feasible (short of the GPU and
        budget caps) to the first that is also risk-free (:attr:`Scored.calm`) and, when the
        run is supported anywhere, supported, or less far, to where no row's score can come
        below the best sampled one (:func:`_windows`); plus a coarse sample (every
        ``isqrt(length)``-th count, the fewest and the most) that located that window. Nothing
        a plan reads from
        its search is lost: within a run more replicas never predict a worse bound nor lose
        support (the :class:`Predictor` contract) and always cost more, so past the window a
        run's feasible candidates are risk-free and score their cost, above the window's last;
        the cheapest known candidate, the explorer's and an unobserved shape's cheapest lie in
        their run's window, whether a run is supported anywhere shows at its most replicas and
        whether observed limits exclude any of its candidates at its fewest. A candidate's
        prediction does not depend on the rows beside it, so every row is the number the
        whole grid gives it (tested against it): two model calls of a few dozen rows instead
        of one over every replica count. ``starts``: the runs' first grid rows (default
        :func:`_run_starts`)."""
        size = space.size
        if starts is None:
            starts = _run_starts(space, rate, inp)
        ends = np.append(starts[1:], size) - 1
        sample = _sample_runs(starts, ends)
        # With the current configuration's row: the plan scores it (:meth:`_current`).
        cur, n_r = ctx.config, len(space.replicas)
        cpu, gpu, pools = space.shapes
        own = np.flatnonzero(feedback.shape_mask(CandidateBatch(np.zeros(len(cpu)), cpu, gpu,
                                                                pools), feedback.shape_of(cur)))
        count = np.flatnonzero(np.asarray(space.replicas) == cur.replicas)
        picked = np.zeros(size, dtype=bool)      # sets of grid rows as masks: sorted, unique
        picked[sample] = True
        picked[(own[:, None] * n_r + count[None, :]).reshape(-1)] = True
        first = np.flatnonzero(picked)
        sampled = space.rows(first)
        seen = self._predict(ctx, sampled, rate, inp)
        judged = self._judge(ctx, sampled, rate, seen, inp, monotone_only=True)
        lo, hi = _windows(starts, ends, sample, judged.take(np.searchsorted(first, sample)),
                          np.asarray(space.replicas, dtype=float))
        picked[:] = False
        picked[_ranges(lo, hi)] = True
        picked[first] = False
        extra = np.flatnonzero(picked)
        rows, predictions = first, seen
        if extra.size:
            rows, predictions = _merged(first, seen, extra,
                                        self._predict(ctx, space.rows(extra), rate, inp))
        return (self._judge(ctx, space.rows(rows), rate, predictions, inp),
                f"grid of {space.size}, {len(rows)} predicted")

    def _study(self, ctx: PlanningContext, space: SearchSpace, rate: float,
               inp: Inputs) -> tuple[Scored, str]:
        sampler = optuna.samplers.TPESampler(seed=self.seed)
        study = optuna.create_study(direction="minimize", sampler=sampler)
        configs: list[WorkloadConfig] = [ctx.config]
        study.enqueue_trial({"replicas": ctx.config.replicas, "cpu": ctx.config.cpu,
                             "device": ctx.config.device, "pool": str(ctx.config.pool)}
                            if ctx.config.replicas in space.replicas else {})
        pool_names = [str(p) for p in space.pools]
        started = time.perf_counter()
        for _ in range(self.n_trials):
            trial = study.ask()
            r = trial.suggest_int("replicas", space.replicas[0], space.replicas[-1])
            cpu = trial.suggest_categorical("cpu", list(space.cpus))
            dev = trial.suggest_categorical("device", list(space.devices))
            pool_s = trial.suggest_categorical("pool", pool_names)
            cfg = WorkloadConfig(r, float(cpu), str(dev), None if pool_s == "None" else pool_s)
            s = self.score(ctx, CandidateBatch.of([cfg]), rate, inp)
            # Objectives as constraints: the worst relative violation, <= 0 when feasible.
            trial.set_constraint("slo", float(s.excess[0]) if not s.feasible[0] else 0.0)
            study.tell(trial, float(s.score[0]))
            configs.append(cfg)
            if time.perf_counter() - started > self.timeout_s:
                break
        uniq = list(dict.fromkeys(configs))
        return (self.score(ctx, CandidateBatch.of(uniq), rate, inp),
                f"optuna TPE, {len(study.trials)} trials")

    def _search(self, ctx: PlanningContext, space: SearchSpace, rate: float,
                inp: Inputs, size: int | None = None) -> tuple[Scored, str]:
        """Every candidate of ``space`` scored at ``rate`` (or, in large spaces, the fewest
        feasible replicas of each shape, or an optuna study's trials), and how. ``size``: the
        space size that decides the method (default ``space``'s own)."""
        size = space.size if size is None else size
        if size <= min(FULL_GRID_LIMIT, self.grid_limit):
            # A replica axis longer than a model call's rows costs more to predict whole
            # than in the window that can matter, where the predictors promise monotonicity.
            if len(space.replicas) > WINDOW_ROWS:
                starts = _run_starts(space, rate, inp)
                if len(starts) < space.size:
                    return self._windowed(ctx, space, rate, inp, starts)
            return self.score(ctx, space.grid(), rate, inp), f"grid of {space.size}"
        if size <= self.grid_limit:
            return self._grid(ctx, space, rate, inp)
        return self._study(ctx, space, rate, inp)

    def _holding(self, ctx: PlanningContext, space: SearchSpace, rate: float, inp: Inputs,
                 cheapest: WorkloadConfig, scored: Scored) -> tuple[Scored, int]:
        """The configuration of ``cheapest``'s shape (CPU size, device, pool) that the search
        picks at :data:`SCALE_IN_MARGIN` more load than ``rate`` (the best-scored feasible
        replica count, by the method ``space``'s size calls for), scored at ``rate``; index -1
        when none is feasible there. Only the shape's candidates are searched and only the
        replica count changes: the margin is a margin in load, and another shape would restart
        pods for it. ``scored``: the search's candidates at ``rate``, where the chosen one is
        looked up before it is predicted again (:meth:`_row_of`)."""
        only = SearchSpace(space.replicas, (cheapest.cpu,), (cheapest.device,),
                           (cheapest.pool,))
        # The method of the whole space (so the same candidates are compared), short of a
        # study: one shape's replicas are searched exactly.
        wider, _ = self._search(ctx, only, rate * (1 + SCALE_IN_MARGIN), inp,
                                min(space.size, self.grid_limit))
        ok = wider.feasible & feedback.shape_mask(wider.batch, feedback.shape_of(cheapest))
        if not ok.any():
            return wider, -1
        i = int(np.flatnonzero(ok)[np.argmin(wider.score[ok])])
        return self._row_of(ctx, scored, wider.batch.config(i), rate, inp), 0

    def _current(self, ctx: PlanningContext, scored: Scored, rate: float,
                 inp: Inputs) -> Scored:
        """The current configuration scored with its objectives' tolerance: from its row of
        ``scored`` when the search scored it (a candidate's prediction depends on its own row
        only), else predicted on its own."""
        return self._row_of(ctx, scored, ctx.config, rate, inp, slack=1.0)

    def _row_of(self, ctx: PlanningContext, scored: Scored, cfg: WorkloadConfig, rate: float,
                inp: Inputs, slack: float = 0.0) -> Scored:
        """``cfg`` scored at ``rate`` (as :meth:`score` with ``slack``): judged from its row
        of ``scored`` (scored at ``rate`` with ``inp``) when that has it (a candidate's
        prediction depends on its own row only), else predicted on its own."""
        batch = CandidateBatch.of([cfg])
        rows = np.flatnonzero((scored.batch.replicas == cfg.replicas)
                              & feedback.shape_mask(scored.batch, feedback.shape_of(cfg)))
        if rows.size == 0:
            return self.score(ctx, batch, rate, inp, slack=slack)
        i = slice(int(rows[0]), int(rows[0]) + 1)
        return self._judge(ctx, batch, rate,
                           {n: Prediction(p.mean[i], p.bound[i], p.supported[i])
                            for n, p in scored.predictions.items()}, inp, slack=slack)

    def _feasibility(self, ctx: PlanningContext, batch: CandidateBatch, rate: float,
                     inp: Inputs) -> tuple[NDArray[np.bool_], NDArray[np.bool_],
                                           NDArray[np.float64]]:
        s = self.score(ctx, batch, rate, inp)
        return s.feasible, s.supported, s.score

    def _holds_at(self, ctx: PlanningContext, cfg: WorkloadConfig, rate: float,
                  inp: Inputs, supported: bool = False) -> bool:
        """Whether ``cfg`` is judged feasible at ``rate`` (by the models, or by a load its
        shape was seen holding); ``supported``: and its shape is supported by the
        predictions."""
        s = self.score(ctx, CandidateBatch.of([cfg]), rate, inp)
        return bool(s.feasible[0] and (s.supported[0] or not supported))

    # ---------------------------------------------------------------- transitions
    def _safe_step(self, ctx: PlanningContext, target: WorkloadConfig, rate: float,
                   inp: Inputs, covered: float | None = None, scored: Scored | None = None
                   ) -> tuple[WorkloadConfig, str, list[Action]]:
        """This cycle's step towards ``target`` without an unsafe intermediate state.

        Changing CPU size, device or pool replaces every pod (a rolling update sized by the
        new replica count), so the replica count must not drop in the same cycle (nor where
        the cluster resizes the pods in place: a resize their nodes have no room for waits,
        and is then rolled out); and while
        such a change is held back (cooldown), the replicas must suffice for the pods as they
        are now. Returns the step's target, why it differs from ``target`` and its actions
        (each actuator is asked once per cycle). ``covered``: the move is to a shape a canary
        measured (:func:`planner.planners.canary.measured_move`), at that speed relative to
        the pods serving now; once as many of its pods are ready as the target has, the
        replica count drops (only old pods leave) instead of waiting for every held replica
        to be replaced (a GPU pod may do the work of thirty, and the cluster may not have a
        GPU for each held replica): in one step, as
        :meth:`actuators.replicas.ReplicasActuator.finish_rollout` says. Before that, the
        replicas held while pods are replaced are the old pods that serve, as many as the
        new place has room for, and at least those that do the serving pods' work at the
        measured speed (the safety layer's rule 2 across devices,
        :func:`planner.planners.safety.work_in`), not one per serving pod.

        A scale-out with a shape change waits while the step the replicas actuator can take
        this cycle, in the new shape, is not predicted to hold the load (the old pods leave as
        that many new ones are ready), unless the cluster cannot schedule the current shape at
        the count that would hold the load and the step has at least the cores of what it can
        schedule (same device); while a shape change waits, the current shape is sized by the
        models (the explicit estimate where no count is predicted to hold), capped at what the
        cluster can schedule of it (the cap never removing a pod on a node), and a rollout of it
        under way is not scaled in: not while its new pods start, nor, while they wait for
        room, below what each shape of the old pods that serve needs to hold the load alone
        (:meth:`_sized_old`: they take their share of the requests at every step on the way).
        Where such a move waits, another shape among
        ``scored``'s known candidates that the same step reaches whole, and that costs less
        than the current shape sized, is moved to instead (:meth:`_reached_whole`).

        Where the cluster resizes pods in place (``ClusterSnapshot.in_place_resize``), a
        smaller CPU size waits while the ready pods at that size are not predicted to hold the
        load (they shrink in seconds; the pods added beside them serve only once started): the
        current size is scaled out to the target's count first, where the cluster has room. A
        scale-in while some pods still wait for their resize waits too, unless the target's
        count holds at the smallest size a ready pod runs (a scale-in removes resized pods as
        readily as waiting ones), and does not finish early as a rollout's does.
        """
        cur = ctx.config
        scaler = scaler_of(ctx)
        in_place = ctx.snapshot.in_place_resize
        if (scaler is not None and target.replicas < cur.replicas
                and place_of(target) == place_of(cur)
                and canary.ready_of(ctx, target) >= target.replicas
                and (covered is not None
                     or (not in_place and _cpu_rollout_under_way(ctx, target)
                         and self._holds_at(ctx, target, rate, inp, supported=True)))):
            # Enough pods of the new shape are ready: the old ones leave at once (gradually,
            # the slow old pods would carry a growing round-robin share each). Where only the
            # CPU size changes, once the target is judged to hold with its shape supported
            # (gen-3076: 67 one-core pods replaced by 67 four-core ones, on the way to 12,
            # then removed two a cycle by the step limit: four times the cores for ten
            # minutes).
            acts = [a for a in steps_towards(ctx, target) if a.actuator != scaler.name]
            return target, "", [*acts, scaler.finish_rollout(ctx.workload.key, cur,
                                                               target.replicas)]
        if (in_place and target.replicas < cur.replicas and place_of(target) == place_of(cur)
                and _cpu_rollout_under_way(ctx, target)):
            smallest = min((p.cpu for p in ctx.workload.pods if p.ready
                            and p.device == target.device), default=target.cpu)
            if not self._holds_at(ctx, target.with_(cpu=smallest), rate, inp):
                # Resized in place, old and resized pods are one Deployment's: a scale-in
                # removes whichever it ranks first (not the pods still waiting for room, as a
                # rollout's old pods leave first), and 7 pods of which 3 still ran 2 cpu where
                # 4 were planned saturated for two minutes (diurnal-resize, seed 1). The
                # scale-in waits for the resize unless the target's count holds at the
                # smallest size any ready pod still runs.
                step = target.with_(replicas=cur.replicas)
                return step, (f"scale-in waits for the in-place resize to {target.cpu:g} cpu "
                              f"(pods of {smallest:g} cpu still serve)"), steps_towards(ctx, step)
        if target.replicas < cur.replicas and capacity.starting(ctx.workload, cur):
            # Pods are starting: after a shape change the old ones leave as the new ones
            # become ready, so removing replicas now takes capacity twice; after a scale-out
            # the new pods are on their way. Pods waiting for room hold nothing back: a
            # Deployment removes them first on a scale-in, and one pod in a full cluster (or
            # a rollout whose old pods hold the room its new ones need: old pods leave only
            # once new ones are ready) would otherwise be waited for for ever.
            step = target.with_(replicas=cur.replicas)
            return step, "scale-in waits for the rollout", steps_towards(ctx, step)
        acts = steps_towards(ctx, target)
        shape_change = (target.cpu, target.device, target.pool) != (cur.cpu, cur.device,
                                                                   cur.pool)
        if not shape_change:
            return target, "", acts
        if (ctx.snapshot.in_place_resize and target.cpu < cur.cpu
                and place_of(target) == place_of(cur)):
            ready = sum(1 for p in ctx.workload.pods if p.ready)
            step = cur.with_(replicas=max(cur.replicas, target.replicas))
            if (not self._holds_at(ctx, target.with_(replicas=max(ready, 1)), rate, inp)
                    and capacity.schedulable_replicas(ctx.workload, ctx.snapshot, step)
                    >= step.replicas):
                # Resized in place, the pods serving now shrink within seconds, while the pods
                # added beside them serve only after their start-up (a rollout keeps the old
                # pods until the new ones are ready): 4 x 4 cpu shrunk to 4 x 2 on the way to
                # 9 x 2 saturated for half a minute (diurnal-resize, seed 3). The shrink waits
                # until the ready pods hold the load at the smaller size; meanwhile the
                # current size is scaled out to the target's count (where the cluster has the
                # room for that; else the move goes ahead as it is).
                return step, (f"the in-place resize to {target.cpu:g} cpu waits: its {ready} "
                              "ready pod(s) would not carry the load at that size; scaled out "
                              "at the current size first"), steps_towards(ctx, step)
        # Held for an in-place CPU resize too: a resize the nodes have no room for waits (and
        # is then rolled out), and the pods it would shrink to must not be fewer meanwhile.
        if any(disruption.RESTARTING_KNOBS & set(ctx.actuators[a.actuator].knobs)
               for a in acts):
            if target.replicas < cur.replicas:
                work = (safety.work_in(ctx, target, covered)
                        if covered is not None and covered > 0 else None)
                if work is not None and work < cur.replicas:
                    # A measured, faster place: the pods that do the current work there,
                    # not one per serving pod (the pool may not hold that many of them).
                    # But the rolling update keeps old pods only up to the replica count
                    # less the new pods ready, so until the new ones are ready the old
                    # pods that serve are held, as many as the new place has room for
                    # (gen-2110: 27 two-core pods cut to 19, by the step limit, as the 2 GPU
                    # pods they were to become started).
                    base = max(target.replicas, work)
                    old = min(_old_pods_serving(ctx, target), cur.replicas)
                    hold = base if old <= base else max(base, min(
                        old, capacity.schedulable_replicas(ctx.workload, ctx.snapshot,
                                                           target.with_(replicas=old))))
                    step = target.with_(replicas=hold)
                    return step, (f"{step.replicas} replica(s) held while pods are replaced: "
                                  + ("the old pods that serve until the new ones are ready"
                                     + ("" if hold >= old else
                                        f" ({hold} of {old}: the room the new place has)")
                                     if hold > base else
                                     f"the serving pods' work at the measured {covered:.3g}x")
                                  ), steps_towards(ctx, step)
                # Same actions, but the replica count stays: drop the scale-in step.
                held = [a for a in acts if "replicas" not in ctx.actuators[a.actuator].knobs]
                return target.with_(replicas=cur.replicas), (
                    "replicas held while pods are replaced; scale-in follows the rollout"), held
            reached = next((int(a.params["replicas"]) for a in acts if "replicas" in a.params),
                           cur.replicas)
            if reached < target.replicas and not self._holds_at(
                    ctx, target.with_(replicas=reached), rate, inp):
                # The rolling update replaces pod for pod: once this cycle's `reached` new
                # pods are ready the old ones are gone, and the step limit lets the rest come
                # only cycles later. One GPU pod replaced by four CPU pods (on the way to
                # thirty-four) is an outage. Unless the current shape cannot hold the load at
                # any count, the move waits until one step can carry it.
                need = self._sized_current(ctx, rate, inp)
                if need is not None:
                    fits = capacity.schedulable_replicas(ctx.workload, ctx.snapshot, cur)
                    if need > fits and _first_step_carries(ctx, target, reached, fits):
                        # The cluster cannot schedule the count that would hold the load (the
                        # current pool is full): waiting holds pods that never start, and
                        # the move, whose first step carries as much as the current shape
                        # can be scheduled at, goes ahead (gen-4009: 204 pods asked of a
                        # pool that holds 64).
                        return target, "", acts
                    step = cur.with_(replicas=_within(ctx, need))
                    why = (f"the move to {safety.shape_text(target)} waits: its first step "
                           f"({reached} of {target.replicas} pods, the admin's step limit) "
                           "would not carry the load once the old pods leave")
                    other = (self._reached_whole(ctx, scored, reached, step)
                             if scored is not None else None)
                    if other is not None:
                        # Another known shape that one step reaches whole and that costs
                        # less than staying: a way out of an expensive shape (two GPU pods
                        # kept for an hour because thirty CPU pods take four steps).
                        o_step, _, o_acts = self._safe_step(ctx, other, rate, inp)
                        if o_step == other:
                            return o_step, (f"{why}; {safety.shape_text(other)} x "
                                            f"{other.replicas} instead, which one step "
                                            "reaches whole"), o_acts
                    sized = _sized_text(step.replicas, need, "the current shape")
                    return step, f"{why}; {sized}", steps_towards(ctx, step)
            return target, "", acts
        # The shape change waits: size replicas for the current pods, fewer than now only
        # at a count the models vouch for (a size passed through on the way to another,
        # one size a cycle, was never seen: gen-5163 cut 27 two-core pods to 9 on an
        # extrapolation, and they saturated; docs/benchmarks.md section 58).
        need = self._sized_current(ctx, rate, inp, vouched_below=cur.replicas)
        if need is None:          # no count of it is predicted to: the explicit estimate's
            need = fallback.explicit_sizing(ctx, inp.estimate, rate)[0].replicas
        if need < cur.replicas and capacity.starting(ctx.workload, cur):
            # The current shape's own rollout is under way: its old pods serve until the new
            # ones are ready, and a scale-in now would remove them (gen-2110: 19 -> 11 while
            # the GPU pods started, p95 0.5 s).
            step = cur
            return step, (f"until the resize to {target.cpu:g} cpu can start, the current size "
                          "as it is: scale-in waits for the rollout"), steps_towards(ctx, step)
        old_need = self._sized_old(ctx, rate, inp) if need < cur.replicas else 0
        if old_need is None or old_need > need:
            # Its new pods wait for room and old pods serve: the count was sized for pods of
            # the current shape, and the old ones take their share of the requests at every
            # step on the way. It is sized for the slowest of them too (gen-360 seed 3: one
            # GPU pod ready, 44 waiting for a GPU, sized at one GPU pod; three steps removed
            # 33 of the CPU pods that served, p90 at 5 s). A rollout that cannot progress is
            # rule 4's to finish or undo.
            keep = cur.replicas if old_need is None else min(old_need, cur.replicas)
            step = cur.with_(replicas=_within(ctx, keep))
            why_kept = ("no count of them is predicted to hold the load" if old_need is None
                        else f"they need {old_need}")
            return step, (f"until the change to {safety.shape_text(target)} can start, "
                          f"{step.replicas} replica(s) for the old pods that serve while new "
                          f"ones wait for room ({why_kept})"), steps_towards(ctx, step)
        step = cur.with_(replicas=_within(ctx, need))
        return step, (f"until the resize to {target.cpu:g} cpu can start, "
                      f"{_sized_text(step.replicas, need, 'the current size')}"
                      ), steps_towards(ctx, step)

    def _sized_old(self, ctx: PlanningContext, rate: float, inp: Inputs) -> int | None:
        """While pods of the current shape wait for room and pods of other shapes serve (the
        caller has checked that none of the current shape is starting): the most replicas any
        of those shapes needs to hold ``rate`` alone, by the models and the observed limits,
        whether or not the shape is vetoed or its GPUs free (its pods run already; their pool
        the current pin where they run in it, else unpinned); ``None`` when one of them holds
        it at no count; 0 when no pod waits or none of another shape serves."""
        cur = ctx.config
        counts = ctx.workload.pod_counts
        if not any(not on_node and cpu == cur.cpu and device == cur.device
                   for (cpu, device, _, on_node, _) in counts):
            return 0
        shapes = {(cpu, device, cur.pool if pool == cur.pool else None)
                  for (cpu, device, pool, on_node, ready) in counts
                  if on_node and ready and not capacity.runs_shape(cpu, device, pool, cur)}
        unvetoed = replace(ctx, vetoed=())
        most = 0
        for cpu, device, pool in sorted(shapes, key=str):
            n = self._sized_current(unvetoed, rate, inp, cur.with_(cpu=cpu, device=device,
                                                                    pool=pool),
                                    monotone_only=True)
            if n is None:
                return None
            most = max(most, n)
        return most

    @staticmethod
    def _cheapest_fitting(ctx: PlanningContext, scored: Scored, known: NDArray[np.bool_]
                          ) -> tuple[int | None, str]:
        """The best-scored of ``scored``'s ``known`` candidates whose replicas the cluster
        can take, or ``None``; and what kept the best one out (empty when it fits). A shape's
        room is looked up once (:func:`capacity.schedulable_replicas`; the current shape's is
        :func:`safety.replica_cap`, as the safety layer caps it and never refuses it), shapes in
        the order of their best candidate, until no shape left can beat the best that fits:
        one look-up when the best candidate fits."""
        batch = scored.batch
        left = known.copy()
        found: int | None = None
        unfit = ""
        here = feedback.shape_of(ctx.config)
        while left.any():
            i = int(np.flatnonzero(left)[np.argmin(scored.score[left])])
            if found is not None and scored.score[i] >= scored.score[found]:
                break
            c = batch.config(i)
            shape = feedback.shape_of(c)
            room = (safety.replica_cap(ctx, c) if shape == here
                    else capacity.schedulable_replicas(ctx.workload, ctx.snapshot, c))
            in_shape = feedback.shape_mask(batch, shape)
            fit = left & in_shape & (batch.replicas <= room)
            if fit.any():
                j = int(np.flatnonzero(fit)[np.argmin(scored.score[fit])])
                if found is None or scored.score[j] < scored.score[found]:
                    found = j
            if found != i and not unfit:
                unfit = (f"{c.replicas} x {safety.shape_text(c)} costs less but does not fit "
                         f"the cluster (room for {room})")
            left &= ~in_shape
        return found, unfit

    def _reached_whole(self, ctx: PlanningContext, scored: Scored, reach: int,
                       stay: WorkloadConfig) -> WorkloadConfig | None:
        """The cheapest of ``scored``'s known feasible candidates of another shape with at
        most ``reach`` replicas (a rolling update's first step brings them all) that costs
        less than ``stay`` (the current shape sized) by more than :data:`HYSTERESIS`;
        ``None`` when there is none."""
        cur = ctx.config
        here = feedback.shape_mask(scored.batch, feedback.shape_of(cur))
        ok = scored.feasible & scored.supported & ~here & (scored.batch.replicas <= reach)
        if not ok.any():
            return None
        i = int(np.flatnonzero(ok)[np.argmin(scored.cost[ok])])
        limit = float(prices(ctx.snapshot, CandidateBatch.of([stay]))[0]) * (1 - HYSTERESIS)
        return scored.batch.config(i) if float(scored.cost[i]) < limit else None

    def _sized_current(self, ctx: PlanningContext, rate: float, inp: Inputs,
                       shape: WorkloadConfig | None = None,
                       monotone_only: bool = False,
                       vouched_below: int | None = None) -> int | None:
        """The fewest replicas of the current shape (or ``shape``'s) predicted to meet every
        objective at ``rate``; ``None`` when no count of it is. ``monotone_only``: without the
        budget and the GPU count (:meth:`score`). ``vouched_below``: counts below it only
        where every predictor vouches for them (supported)."""
        cur = ctx.config if shape is None else shape
        reps = np.asarray(space_for(ctx).replicas, dtype=float)
        n = len(reps)
        batch = CandidateBatch(reps, np.full(n, cur.cpu),
                               np.full(n, 1.0 if cur.device == "gpu" else 0.0), (cur.pool,) * n)
        scored = self.score(ctx, batch, rate, inp, monotone_only=monotone_only)
        good = scored.feasible
        if vouched_below is not None:
            good = good & (scored.supported | (reps >= vouched_below))
        ok = np.flatnonzero(good)
        return int(reps[ok[0]]) if ok.size else None

    # ---------------------------------------------------------------- plan
    def plan(self, ctx: PlanningContext) -> Plan:
        key = ctx.intent.key
        mem = Recall.of(key, ctx.memory)
        plan = self._plan(ctx, mem)
        return replace(plan, memory=mem.as_memory(key))

    @staticmethod
    def _planned_rate(ctx: PlanningContext, mem: Recall, preds: dict[str, Predictor]
                      ) -> tuple[float, dict[str, float], Forecast]:
        """The load to plan for: the forecast over the pods' start-up, the admin's headroom,
        and the correction for objectives observed violated above their model."""
        key = ctx.intent.key
        corrected = feedback.load_correction(
            ctx, preds, mem.forecast.peak(key, ctx.now, feedback.KPI_WINDOW_S))
        fc = mem.forecast.forecast(key, ctx.workload.request_rate or 0.0,
                                    mem.forecast.horizon_s(key, ctx.admin.cycle_s))
        rate = fc.rate * (1.0 + ctx.admin.headroom) * max(corrected.values(), default=1.0)
        return rate, corrected, fc

    def _take_in(self, ctx: PlanningContext, mem: Recall
                 ) -> Plan | tuple[Inputs, bool, feedback.Shape | None]:
        """Record this cycle's observation in ``mem`` and read the predictors: the scoring
        inputs, whether an objective is observed violated and the shape on trial; or the plan
        when there is nothing to plan with (an objective's value unknown, no model yet)."""
        key = ctx.intent.key
        mem.forecast.observe(key, ctx.now, ctx.workload.request_rate)
        mem.forecast.observe_pods(key, ctx.now, ctx.workload.pods)
        on_hold = plan_details.hold_if_unknown(ctx, self.name)
        if on_hold is not None:
            return on_hold
        violated = _violated_any(ctx)
        mem.alarm = 1.0 if violated else mem.alarm * ALARM_DECAY
        mem.limits.observe(ctx, mem.forecast.peak(key, ctx.now, feedback.KPI_WINDOW_S),
                           mem.forecast.trough(key, ctx.now, feedback.KPI_WINDOW_S))
        trial = mem.explorer.observe(key, ctx.now, violated)
        preds = self.predictors(ctx, mem.predictors)
        if not preds:
            return plan_details.no_action(ctx, self.name, "no-model",
                                          "no action: no model yet (load too low to estimate)")
        # Shapes a canary measured count as known, at their measured speed.
        preds = canary.with_speeds(preds, canary.measured_speeds(ctx, mem.explorer, preds),
                                   _throughput_objectives(ctx))
        return Inputs(preds, mem.alarm, mem.limits, mem.predictors.estimate), violated, trial

    def _propose_canary(self, ctx: PlanningContext, mem: Recall, tester: CanaryActuator,
                        space: SearchSpace, scored: Scored, supported: NDArray[np.bool_],
                        rate: float, inp: Inputs, best_score: float, rescue: bool = False
                        ) -> tuple[list[Action], list[ReasonPart]]:
        """:func:`planner.planners.canary.propose` over the places of ``space`` that no
        ``supported`` candidate of ``scored`` is on, scored as this planner scores."""
        observed = {("gpu" if scored.batch.gpu[i] > 0.5 else "cpu", scored.batch.pool[i])
                    for i in np.flatnonzero(supported).tolist()}
        return canary.propose(
            ctx, mem.explorer, tester, [(d, p) for d in space.devices for p in space.pools],
            observed, space.replicas, inp.preds, _throughput_objectives(ctx),
            lambda b, ps: self._feasibility(ctx, b, rate, replace(inp, preds=dict(ps))),
            best_score, rescue)

    def _sized_by_estimate(self, ctx: PlanningContext, mem: Recall, rate: float,
                           inp: Inputs) -> tuple[Scored, str]:
        """The current shape sized by the explicit estimate (:func:`fallback.explicit_sizing`,
        never a scale-in), scored, and why."""
        fb, why = fallback.explicit_sizing(ctx, mem.predictors.estimate, rate)
        return self.score(ctx, CandidateBatch.of([fb]), rate, inp), why

    def shape_options(self, ctx: PlanningContext) -> list[ShapeOption] | None:
        """The fewest replicas per shape predicted to meet every objective (known shapes
        only, within the cluster's GPUs and the budget), at the load :meth:`plan` would plan
        for; computed on a copy of the memory, so planning afterwards is unaffected."""
        mem = Recall.of(ctx.intent.key, ctx.memory)
        taken = self._take_in(ctx, mem)
        if isinstance(taken, Plan):
            return None
        inp, violated, _ = taken
        rate, _, _ = self._planned_rate(ctx, mem, inp.preds)
        anywhere = replace(ctx, placement=None)
        space = space_for(anywhere)
        scored, _ = self._grid(anywhere, space, rate, inp)
        # Objectives that cannot tell a shape from staying are judged as plan() judges them.
        anchored = self._anchored(anywhere, rate, inp, scored,
                                  self._current(anywhere, scored, rate, inp), violated,
                                  lambda i: self._grid(anywhere, space, rate, i))
        if anchored is not None:
            scored = anchored[1]
        ok = np.flatnonzero(scored.feasible & scored.supported)
        found = [ShapeOption(scored.batch.config(int(i)), float(scored.cost[i])) for i in ok]
        return sorted(found, key=lambda o: o.cost_per_hour)

    def _anchored(self, ctx: PlanningContext, rate: float, inp: Inputs, scored: Scored,
                  current: Scored, violated: bool,
                  search: Callable[[Inputs], tuple[Scored, str]]
                  ) -> tuple[Inputs, Scored, str, Scored] | None:
        """When nothing is predicted feasible and objectives cannot tell the candidates apart
        from staying (:func:`_no_better_than_staying`): the inputs with those objectives
        anchored, ``search`` (the search that scored ``scored``) again and the current
        configuration scored with them; ``None`` when an objective is observed violated,
        there are no such objectives, or anchoring them leaves nothing feasible (another
        objective, the budget or the GPUs rule every candidate out: the plan falls back as
        before)."""
        if violated or scored.feasible.any():
            return None
        anchors = _no_better_than_staying(ctx, scored, current)
        if not anchors:
            return None
        inp = replace(inp, anchors=anchors)
        again, how = search(inp)
        if not again.feasible.any():
            return None
        return inp, again, how, self._current(ctx, again, rate, inp)

    def _plan(self, ctx: PlanningContext, mem: Recall) -> Plan:
        cfg = ctx.config
        key = ctx.intent.key
        taken = self._take_in(ctx, mem)
        if isinstance(taken, Plan):
            return taken
        inp, violated, trial = taken
        preds = inp.preds
        tester = ctx.actuators.get("canary")
        tester = tester if isinstance(tester, CanaryActuator) else None
        # What following a canary and proposing one do and say (a proposal adds to what
        # following said: a canary's stop without an action keeps its reason).
        trying: list[Action] = []
        trying_why: list[ReasonPart] = []
        canary_on = False
        if tester is not None:
            trying, trying_why, canary_on = canary.follow(ctx, mem.explorer, tester, violated)
        rate, corrected, fc = self._planned_rate(ctx, mem, preds)
        kinds = sorted({p.kind for p in preds.values()})
        blind = [o.name for o in ctx.intent.spec.objectives if o.name not in preds]
        space = space_for(ctx)
        scored, how = self._search(ctx, space, rate, inp)
        current = self._current(ctx, scored, rate, inp)
        anchored: list[ReasonPart] = []
        if (again := self._anchored(ctx, rate, inp, scored, current, violated,
                                    lambda i: self._search(ctx, space, rate, i))):
            inp, scored, how, current = again
            anchored.append(ReasonPart("search", "; ".join(
                f"{n}: no configuration is predicted to meet its target or to do better than "
                f"the current one ({b:.4g}, within tolerance; observed meeting it); judged no "
                "worse than staying" for n, b in inp.anchors.items())))
        # The shape on trial counts as known until the retrained model covers it.
        supported = scored.supported | feedback.shape_mask(scored.batch, trial)
        # A device the admin's (or the owner's, planner.domain.use_case) bounds leave out is
        # not kept however well it does.
        keep_current = bool(current.feasible[0] and (current.supported[0]
                                                     or feedback.shape_of(cfg) == trial)
                            and cfg.device in ctx.admin.devices)
        known = scored.feasible & supported
        exploratory = False
        probe: int | None = None
        why_kind = "choice"
        unreachable: list[ReasonPart] = []
        fit_parts: list[ReasonPart] = []      # a cheaper configuration that does not fit
        if known.any():
            idx = int(np.flatnonzero(known)[np.argmin(scored.score[known])])
            why = "cheapest configuration predicted to meet every objective"
            fitting, unfit = self._cheapest_fitting(ctx, scored, known)
            here = known & feedback.shape_mask(scored.batch, feedback.shape_of(cfg))
            if fitting is not None and fitting != idx:
                # The cheapest does not fit the cluster (the safety layer would keep the
                # current shape with as many cores, sized for another place): the cheapest
                # that fits, of another shape or (when the current shape's count does not
                # fit) leaving the current shape.
                idx = fitting
                why = ("cheapest configuration predicted to meet every objective that fits "
                       "the cluster")
                fit_parts.append(ReasonPart("search", unfit))
            elif fitting is None and here.any() and not here[idx]:
                # None fits: the current shape, at the count the models say it needs (the
                # safety layer caps it at what the cluster can schedule), not another place
                # the safety layer would refuse (keeping the current shape with as many
                # cores, sized for that place).
                idx = int(np.flatnonzero(here)[np.argmin(scored.score[here])])
                why = ("no configuration predicted to meet every objective fits the cluster; "
                       "the current shape, as many as it needs")
                fit_parts.append(ReasonPart("search", unfit))
            if (violated and tester is not None and not canary_on and not trying
                    and fitting is None):
                # What is known to meet the objectives does not fit the cluster: as when
                # nothing known meets them, a place never observed may.
                actions, parts = self._propose_canary(ctx, mem, tester, space, scored, supported,
                                                      rate, inp, math.inf, rescue=True)
                trying += actions
                trying_why += parts
            if "learned" in kinds and not violated and not inp.anchors:
                # (Not while an objective holds only within its tolerance: anchored.)
                probe = mem.explorer.propose(ctx, scored.batch, scored.feasible, supported,
                                              scored.score, idx, same_place=tester is not None)
            if probe is not None and tester is not None and cfg.replicas >= 2:
                # Another CPU size is tried beside the workload, as a device or pool is: a
                # size the model extrapolates to may be far slower than predicted, and every
                # pod rolled over to it (and back) costs a restart each and the room of both.
                gain = 1.0 - float(scored.score[probe] / scored.score[idx])
                c = scored.batch.config(probe)
                if not canary_on and not trying:
                    trying, trying_why = canary.try_size(
                        ctx, mem.explorer, tester, c,
                        f"{c.cpu:g} cpu not observed yet, predicted {gain:.0%} cheaper than "
                        "the best known")
                if trying:
                    mem.explorer.release(key)
                else:                    # a canary is on, or no room: not tried yet
                    mem.explorer.cancel(key)
                probe = None
            if (tester is not None and probe is None and not canary_on and not trying
                    and "learned" in kinds and not violated and not inp.anchors):
                best_score = float(scored.score[idx])
                if keep_current:
                    best_score = min(best_score, float(current.score[0]))
                actions, parts = self._propose_canary(ctx, mem, tester, space, scored, supported,
                                                      rate, inp, best_score)
                trying += actions
                trying_why += parts
            if probe is not None:
                gain = 1.0 - float(scored.score[probe] / scored.score[idx])
                idx, exploratory, why_kind = probe, True, "exploration"
                c = scored.batch.config(probe)
                why = (f"exploratory: {c.cpu:g} cpu {c.device}"
                       + (f" in {c.pool}" if c.pool else "")
                       + f" not observed yet, predicted {gain:.0%} cheaper than the best known;"
                       " tried while every objective holds")
        elif (novel := scored.feasible & feedback.unobserved_shapes(scored.batch,
                                                                   supported)).any():
            idx = int(np.flatnonzero(novel)[np.argmin(scored.score[novel])])
            c = scored.batch.config(idx)
            busy = canary_on or bool(trying)
            how_tried = _size_trial(ctx, mem.explorer, tester, c, busy)
            if how_tried is None:
                exploratory, why_kind = True, "exploration"
                why = "exploratory: no known configuration is feasible; trying an unexplored one"
                if violated and tester is not None and not busy:
                    # A device or pool never observed may meet the objectives at its prior's
                    # optimistic end, where the unexplored configuration is only the model's
                    # extrapolation: tried beside the workload meanwhile (a rescue).
                    actions, parts = self._propose_canary(ctx, mem, tester, space, scored,
                                                          supported, rate, inp, math.inf,
                                                          rescue=True)
                    trying += actions
                    trying_why += parts
            else:
                # Only CPU sizes never observed are predicted to meet the objectives, on what a
                # model extrapolates: the cheapest is tried beside the workload (a canary, which
                # a violation does not stop: every known configuration is predicted to miss),
                # as the explorer's sizes are, not by rolling every pod over to it. The
                # workload is sized by the explicit estimate meanwhile.
                if how_tried == "start" and tester is not None:
                    trying, trying_why = canary.try_size(
                        ctx, mem.explorer, tester, c,
                        f"{c.cpu:g} cpu not observed yet, the cheapest size predicted to meet "
                        "every objective where no known configuration is", rescue=True)
                scored, fb_why = self._sized_by_estimate(ctx, mem, rate, inp)
                idx = 0
                when = ("" if how_tried == "start" else " (a canary is on trial)" if busy
                        else " once the rollout under way ends")
                why = (f"no known configuration is predicted feasible; {c.cpu:g} cpu (not "
                       f"observed yet) is, and is tried beside the workload{when}: {fb_why}")
        else:
            # Nothing is predicted feasible: the models cannot be trusted here (a target below
            # what they think possible, a load beyond anything seen). Size the current shape
            # by the explicit estimate instead of chasing the least violating point to the
            # admin's maximum; the safety layer caps it by what the cluster can schedule.
            unreachable = fallback.unreachable_targets(ctx, preds, scored.batch)
            if (tester is not None and not canary_on and not trying
                    and (violated or "learned" in kinds)):
                # A device or pool never observed may meet what no known one can: tried
                # beside the workload, however it is sized meanwhile.
                actions, parts = self._propose_canary(ctx, mem, tester, space, scored, supported,
                                                      rate, inp, math.inf, rescue=violated)
                trying += actions
                trying_why += parts
            scored, fb_why = self._sized_by_estimate(ctx, mem, rate, inp)
            idx = 0
            why = f"no configuration is predicted feasible: {fb_why}"
        best = scored.batch.config(idx)
        if keep_current and scored.score[idx] < current.score[0] and not self._holds_at(
                ctx, scored.batch.config(idx), rate * (1 + SCALE_IN_MARGIN), inp):
            # Cheaper, but only just feasible: moving there now would come back next cycle.
            # Move instead to a replica count of its shape that holds at the margin (with
            # tens of pods one pod is less than the margin, so the very cheapest is nearly
            # always marginal and staying would never scale in), or stay when there are none;
            # an exploratory probe is not replaced.
            idx = -1
            if probe is None and not exploratory:
                scored, idx = self._holding(ctx, space, rate, inp, best, scored)
                if idx >= 0:
                    best = scored.batch.config(idx)
        if keep_current and (idx < 0 or scored.score[idx] > current.score[0] * (1 - HYSTERESIS)):
            if probe is not None:                # the probe lost to the current configuration
                mem.explorer.cancel(key)
            best, why, exploratory = cfg, "current configuration still meets every objective", \
                False
            why_kind = "hysteresis"
            chosen, i_chosen = current, 0
        else:
            chosen, i_chosen = scored, idx
        predicted = {n: float(p.mean[i_chosen]) for n, p in chosen.predictions.items()
                     if math.isfinite(float(p.mean[i_chosen]))}
        target = clip_target(ctx, best)
        covered = (canary.speed_of(ctx, mem.explorer, target) if tester is not None
                   and canary.measured_move(ctx, mem.explorer, target) else None)
        _, transition, actions = self._safe_step(ctx, target, rate, inp, covered, scored)
        if tester is not None and not trying:
            trying, verdict = canary.after_verdict(ctx, mem.explorer, tester, target)
            trying_why.extend(verdict)
        actions = [*actions, *trying]
        pretty = (f"{target.replicas} x {target.cpu:g} cpu {target.device}"
                  + (f" in {target.pool}" if target.pool else ""))
        parts = [ReasonPart(why_kind, (
            f"{why}: {pretty} at {float(chosen.cost[i_chosen]):.3f}/h "
            f"({how}, {'+'.join(kinds)} models, {rate:.0f} req/s planned"
            + (f" (forecast +{fc.pct_per_min:.0f} %/min over {fc.horizon_s:.0f} s)"
               if fc.raised else "") + ")"))]
        parts.extend(fit_parts)
        parts.extend(anchored)
        parts.extend(unreachable)
        if inp.limits.excluded(scored.batch, rate).any():
            parts.append(ReasonPart("correction", inp.limits.describe()))
        if corrected:
            parts.append(ReasonPart("correction", ", ".join(
                f"load x{f:.2f} planned: {n} observed violated, above its model"
                for n, f in corrected.items())))
        if blind:
            parts.append(ReasonPart("no-model",
                                    f"no model for {', '.join(blind)}: not planned for"))
        if self.source is not None and (stale := self.source.stale_note(ctx, preds)):
            parts.append(ReasonPart("stale-model", stale))
        parts.extend(trying_why)
        if transition:
            parts.append(ReasonPart("transition", transition))
        parts.extend(plan_details.held_parts(ctx, actions))
        return Plan(ctx.intent.key, self.name, cfg, target, tuple(actions), predicted,
                    float(chosen.cost[i_chosen]), exploratory=exploratory,
                    planned_rate=rate, chosen=best if best != target else None,
                    steps=plan_details.plan_steps(ctx, actions, target, preds, rate, known={
                        cfg: plan_details.predicted_at(current.predictions, 0),
                        chosen.batch.config(i_chosen): plan_details.predicted_at(
                            chosen.predictions, i_chosen)}),
                    models=plan_details.models_used(ctx, preds), reason_parts=tuple(parts),
                    target_speed=canary.speed_of(ctx, mem.explorer, target))
