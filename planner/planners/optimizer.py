"""The default planner, ``optuna``: the cheapest configuration predicted to meet every
objective, over replicas x CPU size x device x node pool.

Objectives are constraints, judged on the predictors' conservative bound (the learned models'
uncertainty band, or the explicit estimate with a margin). Among feasible configurations it
minimises ``utility.cost * cost/h + utility.disruption * cost/h * restarts`` where ``restarts``
counts knobs whose change restarts pods (CPU, device, pool). Small spaces are scored as one
vectorised grid (the fast path); large ones by a seeded, time-boxed optuna TPE study with the
objectives as constraints. The current configuration is kept while it meets its objectives
within ``tolerance`` and nothing is cheaper by more than ``hysteresis``: no flapping.
When no configuration the models know is feasible, the planner takes the best-predicted
unexplored one and marks the plan exploratory.

Exploration: a learned model only vouches for the shapes (CPU size, device, pool) it was
trained on, so a planner that never leaves them never learns that another shape is cheaper.
While every objective holds and no violation is recent, the planner tries an unobserved shape
that the model predicts feasible and at least ``EXPLORE_GAIN`` cheaper than the best known
one (marked exploratory in the plan and the event). It keeps that shape as if known until the
retrained model covers it, an objective is violated, or ``EXPLORE_HOLD_S`` pass; a shape is
tried at most once per ``EXPLORE_RETRY_S``.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import optuna
from numpy.typing import NDArray

from planner.forecast import LoadForecast
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.models.select import PredictorSource
from planner.plan import Action, Plan
from planner.planners.base import (
    Planner,
    PlanningContext,
    clip_target,
    held_reasons,
    hold_if_unknown,
    steps_towards,
)
from planner.planners.registry import register_planner
from planner.search_space import SearchSpace, gpu_capacity_ok, prices, space_for
from planner.state import WorkloadConfig

log = logging.getLogger(__name__)
optuna.logging.set_verbosity(optuna.logging.WARNING)

FULL_GRID_LIMIT = 4_000
"""Up to this many points every candidate is scored in one vectorised batch."""
GRID_LIMIT = 200_000
"""Up to this many, a monotone binary search over replicas; beyond, an optuna TPE study."""
HYSTERESIS = 0.05
RISK_FREE = 0.7
ALARM_DECAY = 0.995
ALARM_GAIN = 1.0
"""Per cycle; at 15 s cycles a violation's extra margin halves in about 35 minutes."""
RISK_SCALE = 1.0
SCALE_IN_MARGIN = 0.05
"""A cheaper configuration must also hold at this much more load before the planner moves to
it from a configuration that meets its objectives (hysteresis in load, against flapping)."""
EXPLORE_GAIN = 0.2
"""An unobserved shape is tried only if predicted at least this much cheaper than the best
known configuration."""
EXPLORE_CALM_S = 600.0
"""... and only when no objective was violated for this long (nor since the planner first saw
the intent), and only with learned models (they say what they have not observed)."""
EXPLORE_HOLD_S = 900.0
EXPLORE_RETRY_S = 3600.0
SATURATED_EXCESS = 1e8
"""``excess`` at or above this means a prediction of an unstable queue (infinite latency)."""


Shape = tuple[float, str, str | None]
"""(CPU size, device, pool): what a learned model must have observed to vouch for."""


def _shape(cfg: WorkloadConfig) -> Shape:
    return (cfg.cpu, cfg.device, cfg.pool)


def _shape_mask(batch: CandidateBatch, shape: Shape | None) -> NDArray[np.bool_]:
    if shape is None:
        return np.zeros(len(batch), dtype=bool)
    cpu, device, pool = shape
    out: NDArray[np.bool_] = ((batch.cpu == cpu) & ((batch.gpu > 0.5) == (device == "gpu"))
                              & np.array([p == pool for p in batch.pool], dtype=bool))
    return out


MAX_CORRECTION = 1.5
"""Largest factor by which an observed violation scales the load planned for."""
SETTLED_S = 90.0
"""A configuration whose pods are all ready and none younger than this is settled: what is
observed is its own behaviour, not a scale-up still under way."""


def _load_correction(ctx: PlanningContext, preds: dict[str, Predictor]) -> dict[str, float]:
    """Per minimised objective observed violated although its model predicts the current
    configuration within target: the factor on the load at which the model would predict
    what was observed (at most ``MAX_CORRECTION``). Planning for that much more load is
    feedback for a model that is too optimistic right now: the current configuration no
    longer "meets every objective", and every candidate gets the same extra capacity."""
    from planner.intents import objective_met

    factors: dict[str, float] = {}
    rate = ctx.workload.request_rate or 0.0
    pods = ctx.workload.pods
    if (_rollout_in_progress(ctx) or len(pods) != ctx.config.replicas
            or any(not p.ready or ctx.now - p.started_at < SETTLED_S for p in pods)):
        return factors
    batch = CandidateBatch.of([ctx.config])
    for o in ctx.intent.spec.objectives:
        p, seen, prof = preds.get(o.name), ctx.current.get(o.name), ctx.profiles[o.name]
        if p is None or seen is None or rate <= 0 or not prof.spec.minimizes or objective_met(
                seen, o, prof) is not False:
            continue
        now = p.predict(batch, rate)
        # Only where the model claims to know the configuration: an unobserved shape's
        # error says nothing about the shapes it was trained on.
        if not now.supported[0] or not float(now.mean[0]) < seen:
            continue
        lo, hi = 1.0, MAX_CORRECTION
        if float(p.predict(batch, rate * hi).mean[0]) > seen:
            for _ in range(12):                  # predicted latency grows with load
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if float(p.predict(batch, rate * mid).mean[0]) < seen \
                    else (lo, mid)
        factors[o.name] = hi
    return factors


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


def _met(pred: NDArray[np.float64], target: float, minimize: bool, slack: float) -> NDArray[
        np.bool_]:
    out: NDArray[np.bool_] = (pred <= target * (1 + slack)) if minimize else (
        pred >= target * (1 - slack))
    return out


def _violated_any(ctx: PlanningContext) -> bool:
    from planner.intents import objective_met

    return any(objective_met(ctx.current.get(o.name), o, ctx.profiles[o.name]) is False
               for o in ctx.intent.spec.objectives)


def _rollout_in_progress(ctx: PlanningContext) -> bool:
    cfg = ctx.config
    pods = ctx.workload.pods
    if not pods:
        return False
    stale = any(p.cpu != cfg.cpu or p.device != cfg.device for p in pods)
    return stale or ctx.workload.ready_replicas < min(cfg.replicas, len(pods))


@register_planner("optuna")
class OptunaPlanner(Planner):
    uses_models = True

    def __init__(self, seed: int = 0, n_trials: int = 150, timeout_s: float = 0.04,
                 grid_limit: int = GRID_LIMIT) -> None:
        self.seed = seed
        self.n_trials = n_trials
        self.timeout_s = timeout_s
        self.grid_limit = grid_limit
        self.source: PredictorSource | None = None
        self._alarm: dict[str, float] = {}
        """Per intent, how recently objectives were violated (1 after a violation, decaying):
        the risk margin grows where the models have been too optimistic."""
        self.forecast = LoadForecast()
        """Per intent, recent load and pod start-ups: on rising load the planner sizes for the
        rate expected when the pods it orders now are ready (never below the current rate)."""
        self._trial: dict[str, tuple[Shape, float]] = {}
        """Per intent, the unobserved shape being tried and since when."""
        self._tried: dict[str, dict[Shape, float]] = {}
        """Per intent, when each shape was last tried."""
        self._violated_at: dict[str, float] = {}

    # ---------------------------------------------------------------- exploration
    def _active_trial(self, ctx: PlanningContext, violated: bool) -> Shape | None:
        key = ctx.intent.key
        trial = self._trial.get(key)
        if trial is None:
            return None
        shape, since = trial
        if violated or ctx.now - since > EXPLORE_HOLD_S:
            del self._trial[key]
            return None
        return shape

    def _explore(self, ctx: PlanningContext, scored: Scored, supported: NDArray[np.bool_],
                 best: int, violated: bool) -> int | None:
        """Index of an unobserved shape worth trying now, or ``None``."""
        key = ctx.intent.key
        calm = ctx.now - self._violated_at.get(key, -math.inf) >= EXPLORE_CALM_S
        if violated or not calm or key in self._trial or _rollout_in_progress(ctx):
            return None
        cand = scored.feasible & ~supported & (
            scored.score < scored.score[best] * (1.0 - EXPLORE_GAIN))
        tried = self._tried.setdefault(key, {})
        for i in np.flatnonzero(cand):
            if ctx.now - tried.get(_shape(scored.batch.config(int(i))), -math.inf) \
                    < EXPLORE_RETRY_S:
                cand[i] = False
        if not cand.any():
            return None
        idx = int(np.flatnonzero(cand)[np.argmin(scored.score[cand])])
        shape = _shape(scored.batch.config(idx))
        tried[shape] = ctx.now
        self._trial[key] = (shape, ctx.now)
        return idx

    def predictors(self, ctx: PlanningContext) -> dict[str, Predictor]:
        if self.source is None:
            self.source = PredictorSource(ctx.knowledge)
        return self.source.predictors(ctx)

    # ---------------------------------------------------------------- scoring
    def score(self, ctx: PlanningContext, batch: CandidateBatch, rate: float,
              preds: dict[str, Predictor], slack: float = 0.0,
              monotone_only: bool = False) -> Scored:
        """Predictions, feasibility and score of every candidate. ``monotone_only`` leaves
        out the constraints that tighten with replicas (budget, GPU count) so feasibility is
        monotone in replicas for the binary search; they are applied to its result."""
        n = len(batch)
        feasible = np.ones(n, dtype=bool)
        supported = np.ones(n, dtype=bool)
        excess = np.zeros(n)
        closeness = np.zeros(n)
        predictions: dict[str, Prediction] = {}
        for o in ctx.intent.spec.objectives:
            p = preds.get(o.name)
            if p is None:
                continue
            pr = p.predict(batch, rate)
            predictions[o.name] = pr
            minimize = ctx.profiles[o.name].spec.minimizes
            tol = o.tolerance if slack else 0.0
            feasible &= _met(pr.bound, o.value, minimize, tol)
            supported &= pr.supported
            limit = o.value * (1 + tol) if minimize else o.value * (1 - tol)
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = (pr.bound / max(limit, 1e-12) - 1.0) if minimize else (
                    1.0 - pr.bound / max(limit, 1e-12))
            closeness = np.maximum(closeness, np.nan_to_num(1.0 + rel, nan=1e9, posinf=1e9))
            excess = np.maximum(excess, np.nan_to_num(np.maximum(rel, 0.0), nan=1e9,
                                                      posinf=1e9))
        cost = prices(ctx.snapshot, batch)
        if not monotone_only:
            feasible &= gpu_capacity_ok(ctx.snapshot, batch)
        cur = ctx.config
        restarts = ((batch.cpu != cur.cpu).astype(float)
                    + (batch.gpu != (1.0 if cur.device == "gpu" else 0.0)).astype(float)
                    + np.array([p != cur.pool for p in batch.pool], dtype=float))
        u = ctx.admin.utility
        # Risk, weighted by the intent's priority: a configuration that uses more than
        # RISK_FREE of an objective's budget (bound / target) pays for the thin margin.
        risk = np.clip(closeness - RISK_FREE, 0.0, 1.0)
        alarm = 1.0 + ALARM_GAIN * self._alarm.get(ctx.intent.key, 0.0)
        score = (u.cost * cost + u.disruption * cost * restarts
                 + u.slo_risk * RISK_SCALE * alarm * ctx.intent.spec.priority * cost * risk)
        budget = ctx.admin.budget_per_hour
        if budget is not None and not monotone_only:
            feasible &= cost <= budget
        return Scored(batch, cost, feasible, supported, excess, predictions, score)

    # ---------------------------------------------------------------- search
    def _grid(self, ctx: PlanningContext, space: SearchSpace, rate: float,
              preds: dict[str, Predictor]) -> tuple[Scored, str]:
        """Exact search using monotonicity: for a fixed (CPU size, device, pool) more replicas
        never predict worse objectives and always cost more, so the cheapest feasible point
        of each combination is its fewest feasible replicas. A vectorised binary search over
        replicas, all combinations at once, finds them in ``log2(len(replicas))`` batches."""
        combos = list(itertools.product(space.cpus, space.devices, space.pools))
        reps = np.asarray(space.replicas, dtype=float)
        n = len(combos)
        cpu = np.array([c for c, _, _ in combos], dtype=float)
        gpu = np.array([1.0 if d == "gpu" else 0.0 for _, d, _ in combos])
        pools = tuple(p for _, _, p in combos)

        def at(idx: NDArray[np.int64]) -> Scored:
            return self.score(ctx, CandidateBatch(reps[idx], cpu, gpu, pools), rate, preds,
                              monotone_only=True)

        lo = np.zeros(n, dtype=np.int64)
        hi = np.full(n, len(reps) - 1, dtype=np.int64)
        top = at(hi)
        possible = top.feasible
        evaluated = n
        while np.any((lo < hi) & possible):
            mid = (lo + hi) // 2
            s = at(mid)
            evaluated += n
            hi = np.where(possible & s.feasible, mid, hi)
            lo = np.where(possible & ~s.feasible, mid + 1, lo)
        final_idx = np.where(possible, lo, len(reps) - 1)
        final = self.score(ctx, CandidateBatch(reps[final_idx], cpu, gpu, pools), rate, preds)
        return final, f"{evaluated} of {space.size} points searched"

    def _study(self, ctx: PlanningContext, space: SearchSpace, rate: float,
               preds: dict[str, Predictor]) -> tuple[Scored, str]:
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
            s = self.score(ctx, CandidateBatch.of([cfg]), rate, preds)
            # Objectives as constraints: the worst relative violation, <= 0 when feasible.
            trial.set_constraint("slo", float(s.excess[0]) if not s.feasible[0] else 0.0)
            study.tell(trial, float(s.score[0]))
            configs.append(cfg)
            if time.perf_counter() - started > self.timeout_s:
                break
        uniq = list(dict.fromkeys(configs))
        return (self.score(ctx, CandidateBatch.of(uniq), rate, preds),
                f"optuna TPE, {len(study.trials)} trials")

    def _holds_at(self, ctx: PlanningContext, cfg: WorkloadConfig, rate: float,
                  preds: dict[str, Predictor]) -> bool:
        return bool(self.score(ctx, CandidateBatch.of([cfg]), rate, preds).feasible[0])

    # ---------------------------------------------------------------- transitions
    def _safe_step(self, ctx: PlanningContext, target: WorkloadConfig, rate: float,
                   preds: dict[str, Predictor]) -> tuple[WorkloadConfig, str, list[Action]]:
        """This cycle's step towards ``target`` without an unsafe intermediate state.

        Changing CPU size, device or pool replaces every pod (a rolling update sized by the
        new replica count), so the replica count must not drop in the same cycle; and while
        such a change is held back (cooldown), the replicas must suffice for the pods as they
        are now. Returns the step's target, why it differs from ``target`` and its actions
        (each actuator is asked once per cycle).
        """
        cur = ctx.config
        if target.replicas < cur.replicas and _rollout_in_progress(ctx):
            # Pods of an earlier shape change are still starting: the old ones leave as the
            # new ones become ready, so removing replicas now takes capacity twice.
            step = target.with_(replicas=cur.replicas)
            return step, "scale-in waits for the rollout", steps_towards(ctx, step)
        acts = steps_towards(ctx, target)
        shape_change = (target.cpu, target.device, target.pool) != (cur.cpu, cur.device,
                                                                   cur.pool)
        if not shape_change:
            return target, "", acts
        restarting = {"cpu", "device", "pool"}
        if any(restarting & set(ctx.actuators[a.actuator].knobs) for a in acts):
            if target.replicas < cur.replicas:
                # Same actions, but the replica count stays: drop the scale-in step.
                held = [a for a in acts if "replicas" not in ctx.actuators[a.actuator].knobs]
                return target.with_(replicas=cur.replicas), (
                    "replicas held while pods are replaced; scale-in follows the rollout"), held
            return target, "", acts
        # The shape change waits: size replicas for the current pods.
        reps = np.asarray(space_for(ctx).replicas, dtype=float)
        n = len(reps)
        batch = CandidateBatch(reps, np.full(n, cur.cpu),
                               np.full(n, 1.0 if cur.device == "gpu" else 0.0), (cur.pool,) * n)
        s = self.score(ctx, batch, rate, preds)
        ok = np.flatnonzero(s.feasible)
        need = int(reps[ok[0]]) if ok.size else int(reps[-1])
        step = cur.with_(replicas=need)
        return step, (f"until the resize to {target.cpu:g} cpu can start, {need} replica(s) of "
                      "the current size"), steps_towards(ctx, step)

    # ---------------------------------------------------------------- plan
    def plan(self, ctx: PlanningContext) -> Plan:
        cfg = ctx.config
        key = ctx.intent.key
        self.forecast.observe(key, ctx.now, ctx.workload.request_rate)
        self.forecast.observe_pods(key, ctx.now, ctx.workload.pods)
        on_hold = hold_if_unknown(ctx, self.name)
        if on_hold is not None:
            return on_hold
        violated = _violated_any(ctx)
        self._alarm[key] = 1.0 if violated else self._alarm.get(key, 0.0) * ALARM_DECAY
        if violated or key not in self._violated_at:
            # A new intent is not calm yet either: it has not been watched long enough.
            self._violated_at[key] = ctx.now
        trial = self._active_trial(ctx, violated)
        preds = self.predictors(ctx)
        if not preds:
            return Plan(ctx.intent.key, self.name, cfg, cfg,
                        reason="no action: no model yet (load too low to estimate)")
        corrected = _load_correction(ctx, preds)
        kinds = sorted({p.kind for p in preds.values()})
        blind = [o.name for o in ctx.intent.spec.objectives if o.name not in preds]
        fc = self.forecast.forecast(key, ctx.workload.request_rate or 0.0,
                                    self.forecast.horizon_s(key, ctx.admin.cycle_s))
        rate = fc.rate * (1.0 + ctx.admin.headroom) * max(corrected.values(), default=1.0)
        space = space_for(ctx)
        if space.size <= min(FULL_GRID_LIMIT, self.grid_limit):
            scored, how = self.score(ctx, space.grid(), rate, preds), f"grid of {space.size}"
        elif space.size <= self.grid_limit:
            scored, how = self._grid(ctx, space, rate, preds)
        else:
            scored, how = self._study(ctx, space, rate, preds)
        current = self.score(ctx, CandidateBatch.of([cfg]), rate, preds, slack=1.0)
        # The shape on trial counts as known until the retrained model covers it.
        supported = scored.supported | _shape_mask(scored.batch, trial)
        keep_current = bool(current.feasible[0] and (current.supported[0]
                                                     or _shape(cfg) == trial))
        known = scored.feasible & supported
        exploratory = False
        if known.any():
            idx = int(np.flatnonzero(known)[np.argmin(scored.score[known])])
            why = "cheapest configuration predicted to meet every objective"
            probe = (self._explore(ctx, scored, supported, idx, violated)
                     if "learned" in kinds else None)
            if probe is not None:
                gain = 1.0 - float(scored.score[probe] / scored.score[idx])
                idx, exploratory = probe, True
                c = scored.batch.config(probe)
                why = (f"exploratory: {c.cpu:g} cpu {c.device}"
                       + (f" in {c.pool}" if c.pool else "")
                       + f" not observed yet, predicted {gain:.0%} cheaper than the best known;"
                       " tried while every objective holds")
        elif scored.feasible.any():
            idx = int(np.flatnonzero(scored.feasible)[np.argmin(scored.score[scored.feasible])])
            exploratory = True
            why = "exploratory: no known configuration is feasible; trying an unexplored one"
        else:
            order = np.lexsort((scored.cost, scored.excess))
            idx = int(order[0])
            why = "no configuration is predicted feasible: the least violating"
        best = scored.batch.config(idx)
        if not scored.feasible.any() and scored.excess[idx] >= SATURATED_EXCESS:
            # Every candidate is predicted saturated: the models know nothing useful here
            # (load beyond anything seen). Add capacity in the current shape, never remove it.
            best = cfg.with_(replicas=ctx.admin.replicas.max)
            why = "every configuration predicted saturated: scaling out at the maximum step"
        if keep_current and scored.score[idx] < current.score[0] and not self._holds_at(
                ctx, scored.batch.config(idx), rate * (1 + SCALE_IN_MARGIN), preds):
            # Cheaper, but only just feasible: moving there now would come back next cycle.
            idx = -1
        if keep_current and (idx < 0 or scored.score[idx] > current.score[0] * (1 - HYSTERESIS)):
            if exploratory:                      # the probe lost to the current configuration
                shape, _ = self._trial.pop(key)
                self._tried[key].pop(shape, None)
            best, why, exploratory = cfg, "current configuration still meets every objective", \
                False
            chosen, i_chosen = current, 0
        else:
            chosen, i_chosen = scored, idx
        predicted = {n: float(p.mean[i_chosen]) for n, p in chosen.predictions.items()
                     if math.isfinite(float(p.mean[i_chosen]))}
        target = clip_target(ctx, best)
        _, transition, actions = self._safe_step(ctx, target, rate, preds)
        held = held_reasons(ctx)
        pretty = (f"{target.replicas} x {target.cpu:g} cpu {target.device}"
                  + (f" in {target.pool}" if target.pool else ""))
        reason = (f"{why}: {pretty} at {float(chosen.cost[i_chosen]):.3f}/h "
                  f"({how}, {'+'.join(kinds)} models, {rate:.0f} req/s planned"
                  + (f" (forecast +{fc.pct_per_min:.0f} %/min over {fc.horizon_s:.0f} s)"
                     if fc.raised else "") + ")")
        if corrected:
            reason += "; " + ", ".join(f"load x{f:.2f} planned: {n} observed violated, above "
                                       "its model" for n, f in corrected.items())
        if blind:
            reason += f"; no model for {', '.join(blind)}: not planned for"
        if transition:
            reason += f"; {transition}"
        if held and not actions:
            reason += "; " + "; ".join(held)
        return Plan(ctx.intent.key, self.name, cfg, target, tuple(actions), predicted,
                    float(chosen.cost[i_chosen]), reason, exploratory)
