"""Feedback for a planner that learns: trying configuration shapes its model has not observed
(exploration), and correcting a model that is observed to be too optimistic.

Exploration: a learned model only vouches for the shapes (CPU size, device, pool) it was
trained on, so a planner that never leaves them never learns that another shape is cheaper.
While every objective holds (no violation for ``EXPLORE_CALM_S``, and not before an intent has
been watched that long) the :class:`Explorer` proposes an unobserved shape that the model
predicts feasible and at least ``EXPLORE_GAIN`` cheaper than the best known one. The planner
keeps that shape as if known until the retrained model covers it, an objective is violated, or
``EXPLORE_HOLD_S`` pass; a shape is tried at most once per ``EXPLORE_RETRY_S``. Where the
``canary`` actuator runs, the proposed shape is tried beside the workload instead
(:mod:`planner.planners.canary`), and the workload moves only once its speed is measured.

Correction: :func:`load_correction` (see there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.domain.intents import objective_met
from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch, Predictor
from planner.planners import capacity
from planner.planners.base import PlanningContext

EXPLORE_GAIN = 0.2
"""An unobserved shape is tried only if predicted at least this much cheaper than the best
known configuration (with 0.1 the shipped scenarios churned: docs/benchmarks.md section 2)."""
EXPLORE_CALM_S = 600.0
EXPLORE_HOLD_S = 900.0
EXPLORE_RETRY_S = 3600.0
FORGET_S = 6 * 3600.0
"""Per-intent memory of an intent not planned for this long is dropped (a deleted intent)."""
MAX_CORRECTION = 1.5
"""Largest factor by which an observed violation scales the load planned for."""
BISECT_STEPS = 12
"""Halvings of ``[1, MAX_CORRECTION]`` that find the correction (to 0.5 / 2**12, 1.2e-4)."""
BISECT_LEVELS = 6
"""Bisection steps whose predictions are asked for in one call: ``2**6 - 1`` midpoints (a
one-configuration call of the learned latency model costs about as much with 64 rows as with
one): the 12 steps in two calls instead of twelve."""
KPI_WINDOW_S = 60.0
"""The window KPIs are typically measured over (a PromQL ``[1m]`` range, the simulator's)."""
SETTLED_S = 90.0
"""A configuration whose pods are all ready and none younger than this is settled: what is
observed is its own behaviour, not a scale-up still under way."""

Shape = tuple[float, str, str | None]
"""(CPU size, device, pool): what a learned model must have observed to vouch for."""


def _shape(data: Sequence[Any]) -> Shape:
    cpu, device, pool = data
    return (float(cpu), str(device), None if pool is None else str(pool))


def shape_of(cfg: WorkloadConfig) -> Shape:
    return (cfg.cpu, cfg.device, cfg.pool)


def shape_mask(batch: CandidateBatch, shape: Shape | None) -> NDArray[np.bool_]:
    """Which candidates of ``batch`` have ``shape``."""
    if shape is None:
        return np.zeros(len(batch), dtype=bool)
    cpu, device, pool = shape
    out: NDArray[np.bool_] = ((batch.cpu == cpu) & ((batch.gpu > 0.5) == (device == "gpu"))
                              & batch.in_pool(pool))
    return out


def unobserved_shapes(batch: CandidateBatch, supported: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Candidates whose shape no candidate of ``batch`` is supported in (a shape the model has
    not observed, as opposed to a known shape at a load beyond its range)."""
    out: NDArray[np.bool_] = ~supported
    idx = np.flatnonzero(supported)
    # Columns to Python values once (not a numpy scalar per row and column); the masks are
    # combined by "and", so the order of the shapes does not matter.
    known = set(zip(batch.cpu[idx].tolist(),
                    ["gpu" if g else "cpu" for g in (batch.gpu[idx] > 0.5).tolist()],
                    [batch.pool[i] for i in idx.tolist()], strict=True))
    for shape in known:
        out &= ~shape_mask(batch, shape)
    return out


def other_shapes_serving(ctx: PlanningContext) -> bool:
    """Pods of another shape than the configuration's still run: a change of shape is rolling
    out (or back)."""
    cfg = ctx.config
    return any(cpu != cfg.cpu or device != cfg.device
               or (cfg.pool is not None and pool is not None and pool != cfg.pool)
               for cpu, device, pool, _, _ in ctx.workload.pod_counts)


def rollout_in_progress(ctx: PlanningContext) -> bool:
    """Pods of another shape still serve, or not every pod is ready yet."""
    pods = ctx.workload.pods
    if not pods:
        return False
    return other_shapes_serving(ctx) or ctx.workload.ready_replicas < min(ctx.config.replicas,
                                                                          len(pods))


def serving_as_configured(ctx: PlanningContext) -> bool:
    """The configuration's own pods serve, every one ready: what the KPIs show is its own
    behaviour (with a settle time or a window, as the reader needs)."""
    pods = ctx.workload.pods
    return (not rollout_in_progress(ctx) and len(pods) == ctx.config.replicas
            and ctx.workload.ready_replicas == len(pods))


def steady(ctx: PlanningContext) -> bool:
    """Every pod that serves is of the configuration's shape and started at least
    ``SETTLED_S`` ago: a request rate and a utilisation averaged over the last metrics window
    describe these pods. (A pod that became ready within the window served part of it and
    drags the mean utilisation down; a pod of the shape being replaced is another pod.)
    Pods not ready serve nothing and do not count."""
    cfg, workload = ctx.config, ctx.workload
    # Per ready group of pods alike, then the newest ready pod's age (``now - started`` falls
    # as ``started`` grows, so the newest is the one to check): what a loop over the ready
    # pods finds.
    return (all(capacity.runs_shape(cpu, device, pool, cfg)
                for cpu, device, pool, _, ready in workload.pod_counts if ready)
            and ctx.now - workload.newest_ready_start >= SETTLED_S)


@dataclass
class Canary:
    """A canary on trial: its shape, when it was started, when all its pods were first seen
    ready (``None``: not yet) and when it was judged."""

    shape: Shape
    since: float
    ready_since: float | None = None
    judged_at: float | None = None
    """When its speed was measured; a judged canary serves on while the workload moves to
    its shape, and stops once the workload's own pods run there (or it does not move)."""
    rescue: bool = False
    """Started while an objective was observed violated and no known configuration was
    predicted to meet it: a violation during the trial was there before it, so it does not
    stop the trial (see :func:`planner.planners.canary.propose`)."""
    versus: float | None = None
    """A trial of another CPU size on the workload's own device and pool: the CPU size of the
    workload's pods it is measured against (``None``: a device or pool tried at the
    workload's CPU size, measured against pods of its own size)."""

    def as_list(self) -> list[Any]:
        return [list(self.shape), self.since, self.ready_since, self.judged_at, self.rescue,
                self.versus]

    @staticmethod
    def of(data: Sequence[Any]) -> Canary:
        def opt(i: int) -> float | None:
            return None if len(data) <= i or data[i] is None else float(data[i])
        return Canary(_shape(data[0]), float(data[1]), opt(2), opt(3),
                      len(data) > 4 and bool(data[4]), opt(5))


Place = tuple[str, str | None]
"""(device, pool): where a canary of the workload's CPU size runs."""
Tried = Place | Shape
"""What a canary measured: a place (every CPU size there, at equal size) or, for a trial of
another CPU size, a shape (that size alone)."""


def _place(data: Sequence[Any]) -> Place:
    return (str(data[0]), None if data[1] is None else str(data[1]))


@dataclass(frozen=True)
class Measured:
    """A speed a canary measured: relative to ``reference`` (device, pool) at ``at``; for a
    shape of another CPU size, relative to the reference's pods of ``reference_cpu``.
    ``capacity``: the canary pods' own capacity per pod (requests per second at full
    utilisation), where known: what the speed is re-based on when the workload's pods change
    size (:func:`planner.planners.canary.measured_speeds`). ``cpu``: for a place, the CPU
    size its canary ran at, beside the workload's pods of that size (where known: memory
    stored before it was kept reads as unknown)."""

    reference: Place
    factor: float
    at: float
    reference_cpu: float | None = None
    capacity: float | None = None
    cpu: float | None = None

    def as_list(self, tried: Tried) -> list[Any]:
        return [list(tried), list(self.reference), self.factor, self.at, self.reference_cpu,
                self.capacity, self.cpu]

    @staticmethod
    def of(data: Sequence[Any]) -> tuple[Tried, Measured]:
        tried = _shape(data[0]) if len(data[0]) == 3 else _place(data[0])
        ref_cpu = None if len(data) <= 4 or data[4] is None else float(data[4])
        capacity = None if len(data) <= 5 or data[5] is None else float(data[5])
        cpu = None if len(data) <= 6 or data[6] is None else float(data[6])
        return tried, Measured(_place(data[1]), float(data[2]), float(data[3]), ref_cpu,
                               capacity, cpu)


class Explorer:
    """Per-intent exploration state of one planner (see the module doc)."""

    def __init__(self) -> None:
        self.trials: dict[str, tuple[Shape, float]] = {}
        """Per intent, the unobserved shape being tried and since when."""
        self.tried: dict[str, dict[Shape, float]] = {}
        """Per intent, when each shape was last tried."""
        self.violated_at: dict[str, float] = {}
        """Per intent, the last violation (or first sight)."""
        self.seen_at: dict[str, float] = {}
        self.canaries: dict[str, Canary] = {}
        """Per intent, the canary on trial (:mod:`planner.planners.canary`)."""
        self.speeds: dict[str, dict[Tried, Measured]] = {}
        """Per intent, the speeds canaries measured, by (device, pool) or, for another CPU
        size, by shape."""

    def calm(self, key: str, now: float) -> bool:
        """No objective violated for ``EXPLORE_CALM_S`` (nor an intent first seen since)."""
        return now - self.violated_at.get(key, -math.inf) >= EXPLORE_CALM_S

    def was_tried(self, key: str, shape: Shape, now: float) -> bool:
        return now - self.tried.get(key, {}).get(shape, -math.inf) < EXPLORE_RETRY_S

    def mark_tried(self, key: str, shape: Shape, now: float) -> None:
        self.tried.setdefault(key, {})[shape] = now

    def observe(self, key: str, now: float, violated: bool) -> Shape | None:
        """Record this cycle's verdict; the shape on trial, if it is still on."""
        if violated or key not in self.violated_at:
            self.violated_at[key] = now          # a new intent is not calm yet either
        self.seen_at[key] = now
        self._forget(now)
        trial = self.trials.get(key)
        if trial is None:
            return None
        shape, since = trial
        if violated or now - since > EXPLORE_HOLD_S:
            del self.trials[key]
            return None
        return shape

    def propose(self, ctx: PlanningContext, batch: CandidateBatch,
                feasible: NDArray[np.bool_], supported: NDArray[np.bool_],
                score: NDArray[np.float64], best: int, same_place: bool = False) -> int | None:
        """Index in ``batch`` of an unobserved shape worth trying now (recorded as on trial),
        or ``None``. ``best`` is the best known candidate; ``same_place``: only other CPU
        sizes on the current device and pool."""
        key = ctx.intent.key
        if not self.calm(key, ctx.now) or key in self.trials or rollout_in_progress(ctx):
            return None
        # Only shapes the model has not observed: a known shape's candidates that are
        # unsupported for their load (beyond the range the model saw) are not a shape to try.
        cand = feasible & unobserved_shapes(batch, supported) & (
            score < score[best] * (1.0 - EXPLORE_GAIN))
        if same_place:              # other devices and pools are tried through a canary
            cfg = ctx.config
            cand &= shape_mask(batch, None) | (
                ((batch.gpu > 0.5) == (cfg.device == "gpu"))
                & np.array([p == cfg.pool for p in batch.pool], dtype=bool))
        tried = self.tried.setdefault(key, {})
        for i in np.flatnonzero(cand):
            if ctx.now - tried.get(shape_of(batch.config(int(i))), -math.inf) \
                    < EXPLORE_RETRY_S:
                cand[i] = False
        if not cand.any():
            return None
        idx = int(np.flatnonzero(cand)[np.argmin(score[cand])])
        shape = shape_of(batch.config(idx))
        tried[shape] = ctx.now
        self.trials[key] = (shape, ctx.now)
        return idx

    def release(self, key: str) -> None:
        """The proposed shape is tried beside the workload (a canary) instead of as its
        configuration: no longer on trial, still counted as tried."""
        self.trials.pop(key, None)

    def cancel(self, key: str) -> None:
        """The proposed shape was not taken after all: not on trial, not counted as tried."""
        dropped = self.trials.pop(key, None)
        if dropped is not None:
            self.tried.get(key, {}).pop(dropped[0], None)

    # ---------------------------------------------------------------- memory as data
    def remember(self, key: str) -> dict[str, Any]:
        """Intent ``key``'s exploration state as JSON-safe data (:meth:`recall` restores it)."""
        trial = self.trials.get(key)
        return {
            "trial": None if trial is None else [list(trial[0]), trial[1]],
            "tried": [[list(shape), t] for shape, t in self.tried.get(key, {}).items()],
            "violated_at": self.violated_at.get(key),
            "seen_at": self.seen_at.get(key),
            "canary": None if (c := self.canaries.get(key)) is None else c.as_list(),
            "speeds": [m.as_list(place) for place, m in self.speeds.get(key, {}).items()],
        }

    def recall(self, key: str, memory: Mapping[str, Any]) -> None:
        """Restore what :meth:`remember` wrote down for intent ``key``."""
        trial = memory.get("trial")
        if trial is not None:
            self.trials[key] = (_shape(trial[0]), float(trial[1]))
        tried = memory.get("tried") or []
        if tried:
            self.tried[key] = {_shape(shape): float(t) for shape, t in tried}
        for table, name in ((self.violated_at, "violated_at"), (self.seen_at, "seen_at")):
            if memory.get(name) is not None:
                table[key] = float(memory[name])
        if memory.get("canary") is not None:
            self.canaries[key] = Canary.of(memory["canary"])
        speeds = memory.get("speeds") or []
        if speeds:
            self.speeds[key] = dict(Measured.of(row) for row in speeds)

    def _forget(self, now: float) -> None:
        if len(self.seen_at) < 64:
            return
        for key in [k for k, t in self.seen_at.items() if now - t > FORGET_S]:
            for table in (self.trials, self.tried, self.violated_at, self.seen_at):
                table.pop(key, None)
            self.canaries.pop(key, None)
            self.speeds.pop(key, None)


def load_correction(ctx: PlanningContext, preds: dict[str, Predictor],
                    observed_rate: float | None = None) -> dict[str, float]:
    """Per minimised objective observed violated although its model predicts the current
    configuration within target: the factor on the load at which the model would predict
    what was observed (at most ``MAX_CORRECTION``). The KPI covers a window, the rate the last
    metrics interval: ``observed_rate`` (the peak rate over the KPI window) keeps a violation
    from a peak that has passed from reading as model error. Planning for that much more load is
    feedback for a model that is too optimistic right now: the current configuration no
    longer "meets every objective", and every candidate gets the same extra capacity. Only for
    a settled configuration (all pods ready for ``SETTLED_S``) the model claims to know."""
    factors: dict[str, float] = {}
    rate = max(ctx.workload.request_rate or 0.0, observed_rate or 0.0)
    # (``now - started`` falls as ``started`` grows: the newest pod is the one to check)
    if not serving_as_configured(ctx) or ctx.now - ctx.workload.newest_start < SETTLED_S:
        return factors
    batch = CandidateBatch.of([ctx.config])
    for o in ctx.intent.spec.objectives:
        p, seen, prof = preds.get(o.name), ctx.current.get(o.name), ctx.profiles[o.name]
        if p is None or seen is None or rate <= 0 or not prof.spec.minimizes or objective_met(
                seen, o, prof) is not False:
            continue
        now = p.predict(batch, rate)
        if not now.supported[0] or not float(now.mean[0]) < seen:
            continue
        factors[o.name] = _bisect(p, batch, rate, seen)
    return factors


def _midpoints(lo: float, hi: float, levels: int) -> list[float]:
    """Every midpoint the next ``levels`` steps of bisecting ``[lo, hi]`` may take, breadth
    first: node ``i``'s interval is halved at entry ``i``, its upper half (the step that
    keeps ``mid`` as ``lo``) is node ``2 i + 1``, its lower half node ``2 i + 2``."""
    out: list[float] = []
    level = [(lo, hi)]
    for _ in range(levels):
        halves: list[tuple[float, float]] = []
        for a, b in level:
            mid = 0.5 * (a + b)
            out.append(mid)
            halves.extend(((mid, b), (a, mid)))
        level = halves
    return out


def _bisect(p: Predictor, batch: CandidateBatch, rate: float, seen: float) -> float:
    """The load factor at which ``p`` predicts ``seen`` for ``batch``'s one configuration:
    ``MAX_CORRECTION`` unless ``p`` predicts more than ``seen`` there, else the upper end
    after ``BISECT_STEPS`` halvings of ``[1, MAX_CORRECTION]`` (predicted latency grows with
    load), each keeping the half whose lower end is predicted below ``seen``.

    The steps are taken as one after another, on the same numbers; only the predictions are
    asked for ``BISECT_LEVELS`` steps at a time, in one call
    (:meth:`Predictor.predict_mean_rates`): every midpoint those steps may take
    (:func:`_midpoints`, the same arithmetic as the step itself), of which the steps then
    read the ones they take. The first call also holds ``MAX_CORRECTION``."""
    lo, hi = 1.0, MAX_CORRECTION
    steps = BISECT_STEPS
    first = True
    while steps > 0:
        levels = min(BISECT_LEVELS, steps)
        at = ([hi] if first else []) + _midpoints(lo, hi, levels)
        values = p.predict_mean_rates(batch, [rate * f for f in at])[:, 0].tolist()
        if first:
            if not values.pop(0) > seen:
                return hi
            first = False
        node = 0
        for _ in range(levels):
            mid = 0.5 * (lo + hi)
            if values[node] < seen:
                lo, node = mid, 2 * node + 1
            else:
                hi, node = mid, 2 * node + 2
        steps -= levels
    return hi
