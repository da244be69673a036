"""What the workload was seen to break: per configuration shape, the load per pod at which a
latency objective was observed violated.

A learned model that extrapolates below the replica counts it was trained on can keep calling
a configuration feasible after the cluster has shown it is not. The observation that would
correct the model never reaches it: a scale-in that breaks an objective is undone within a
cycle or two, before the configuration has settled long enough to be a training row, and the
load correction (:func:`.feedback.load_correction`) applies only while the configuration it
corrects is in place. So the planner goes back to it as soon as the KPI clears, and the
workload flaps between a configuration that holds and one that does not, violating a little
each time.

:class:`ObservedLimits` keeps that observation as data. Contract:

* **A limit is recorded** for the current configuration's shape (CPU size, device, pool) when a
  latency objective is observed violated beyond its tolerance and the observation is the
  configuration's own: it has been in place with every pod ready, none restarted or replaced
  and no canary beside it, for the KPI window (cycles observed without a gap of more than two
  cycles); or it was entered by a scale-in of the same shape from a configuration that had
  been (the window's earlier part had more ready pods, so what was observed is a lower bound
  on what this configuration does). The limit is the highest request rate over the KPI window
  and the next cycle's, divided by the replicas: the most load per pod the violation can be
  blamed on (the rate is measured over a shorter interval than the KPI, so on a steep rise the
  next cycle's rate is the one that caused it). It is recorded at that next cycle, and only
  above the highest load per pod the shape was observed holding (a violation at a load the
  shape has held is not the load's doing: a slow dependency, noise). A shape keeps the lowest
  such load.
* **A limit excludes** every candidate of its shape whose planned load per pod is at least the
  limit (:meth:`ObservedLimits.excluded`). More replicas of the same shape carry less load per
  pod, so the exclusion is monotone in replicas: it never hides a configuration with more
  replicas than one it allows.
* **A limit is dropped** when the shape is observed meeting every latency objective, in place
  for the whole KPI window, at a load per pod (the lowest rate over the window, per replica) at
  least the limit; or when it is older than ``FORGET_S`` (as other per-intent memory); all of
  it when the clock goes back. The planner rarely runs a configuration it excludes, so the age
  is what usually ends a limit: within ``FORGET_S`` a limit it should not have recorded costs
  capacity, never an objective.
* **A held load vouches** for the candidates of its shape, where the shape is pinned to a
  pool, whose planned load per pod is at most the load the shape held
  (:meth:`ObservedLimits.vouched`): they meet every latency objective, whatever a model
  predicts. A model fitted on a handful of rows can put an upper bound far above what the
  workload was just seen to do, and then asks for ten times the pods the cluster showed
  enough; the observation is the stronger evidence. More replicas of the shape carry less
  load per pod, so this too is monotone in replicas. A load vouches only where every latency
  objective met its target itself (not just its tolerance). The current shape does not vouch
  while it is observed violating a latency objective, as its own behaviour (judged as for a
  limit: steady for the KPI window, or entered by a scale-in from steady), at the current
  rate per pod within what it vouched for (or at an unknown rate); such a violation, recorded
  the next cycle, ends the vouch and records no limit (the shape vouches again once it holds
  a whole window again). A violation at more load per pod than it held does not contradict
  it. An unpinned shape's pods land on whatever nodes the scheduler picks, and a held load
  does not carry to another mix of nodes: those are left to the models.
* The KPI window is taken to be ``feedback.KPI_WINDOW_S`` (a PromQL ``[1m]``); a profile whose
  query covers a longer range is judged on that assumption (not read from the query).
* Everything is plain data (:meth:`remember`, :meth:`recall`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.domain.intents import KPIType, objective_met
from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch
from planner.planners import feedback
from planner.planners.base import PlanningContext


@dataclass(frozen=True)
class Limit:
    """A load per pod (req/s) observed for a shape, and when: one it violated at (in
    ``limits``) or one it held over a whole window (in ``held``, and in ``vouch`` where every
    latency objective met its target itself)."""

    per_pod: float
    at: float


def _fresh(seen: dict[feedback.Shape, Limit], now: float) -> dict[feedback.Shape, Limit]:
    return {s: lim for s, lim in seen.items() if now - lim.at <= feedback.FORGET_S}


def _latency_verdicts(ctx: PlanningContext, strict: bool = False) -> list[bool | None]:
    """Met / violated / unknown for each latency objective the intent minimises (``strict``:
    met only within the target itself, not its tolerance)."""
    out: list[bool | None] = []
    for o in ctx.intent.spec.objectives:
        prof = ctx.profiles[o.name]
        if prof.spec.type is KPIType.LATENCY and prof.spec.minimizes:
            value = ctx.current.get(o.name)
            out.append(objective_met(value, o, prof) if not strict or value is None
                       else value <= o.value)
    return out


@dataclass(frozen=True)
class Pending:
    """A violation seen at ``replicas`` pods of ``shape``, recorded the next cycle."""

    shape: feedback.Shape
    replicas: int
    peak_rate: float
    at: float


@dataclass
class ObservedLimits:
    """Per-shape limits of one intent, and the configuration they are judged against (see
    the module doc)."""

    limits: dict[feedback.Shape, Limit] = field(default_factory=dict)
    held: dict[feedback.Shape, Limit] = field(default_factory=dict)
    """Per shape, the highest load per pod observed meeting every latency objective over a
    whole steady window: a violation at or below it is not the load's doing."""
    vouch: dict[feedback.Shape, Limit] = field(default_factory=dict)
    """Per shape, the highest load per pod observed meeting every latency objective's target
    itself (its tolerance not used) over a whole steady window since the shape last violated
    at or below it: pinned shapes are judged feasible within it (:meth:`vouched`)."""
    config: WorkloadConfig | None = None
    """The configuration in place, every pod ready, last cycle (``None``: it was not)."""
    since: float = 0.0
    """Since when :attr:`config` has been in place with every pod ready and none restarted."""
    restarts: int = 0
    """The pods' restarts counted then (a restart between two cycles starts the window over)."""
    seen_at: float | None = None
    """When :meth:`observe` last ran (a gap of more than two cycles starts over)."""
    by_scale_in: bool = False
    """Whether :attr:`config` was entered by a scale-in of the same shape from a
    configuration that had been in place with every pod ready for the KPI window."""
    pending: Pending | None = None
    """A violation seen this cycle, recorded at the next (:meth:`_record`)."""

    # ---------------------------------------------------------------- observations
    def observe(self, ctx: PlanningContext, peak_rate: float | None,
                low_rate: float | None) -> None:
        """Judge this cycle's KPIs against the configuration in place; ``peak_rate`` and
        ``low_rate`` are the highest and lowest request rates over the KPI window."""
        cfg, now = ctx.config, ctx.now
        if self.seen_at is not None and now < self.seen_at:      # a restarted clock
            self.limits, self.held, self.config, self.pending = {}, {}, None, None
            self.vouch = {}
        gap = self.seen_at is not None and now - self.seen_at > 2 * ctx.admin.cycle_s
        self.seen_at = now
        self.limits = _fresh(self.limits, now)
        self.held = _fresh(self.held, now)
        self.vouch = _fresh(self.vouch, now)
        if self.pending is not None and not gap:
            self._record(self.pending, peak_rate)
        self.pending = None
        restarts = ctx.workload.restarts
        if (gap or cfg.replicas <= 0 or not feedback.serving_as_configured(ctx)
                or ctx.workload.canary is not None):
            # Not the configuration's own behaviour: judged again from its next steady cycle.
            self.config, self.by_scale_in = None, False
            return
        if cfg != self.config:
            self.by_scale_in = (self.config is not None and cfg.replicas < self.config.replicas
                                and feedback.shape_of(cfg) == feedback.shape_of(self.config)
                                and now - self.since >= feedback.KPI_WINDOW_S)
            self.config, self.since = cfg, now
        elif restarts > self.restarts:
            self.since, self.by_scale_in = now, False
        self.restarts = restarts
        steady = max(self.since, ctx.workload.newest_start)
        whole_window = now - steady >= feedback.KPI_WINDOW_S
        verdicts = _latency_verdicts(ctx)
        strict = _latency_verdicts(ctx, strict=True)
        shape = feedback.shape_of(cfg)
        if False in verdicts and (whole_window or self.by_scale_in) and peak_rate:
            self.pending = Pending(shape, cfg.replicas, peak_rate, now)
        elif (verdicts and all(v is True for v in verdicts) and whole_window
              and low_rate is not None):
            per_pod = low_rate / cfg.replicas
            if shape not in self.held or per_pod >= self.held[shape].per_pod:
                self.held[shape] = Limit(per_pod, now)
            if all(v is True for v in strict) and (
                    shape not in self.vouch or per_pod >= self.vouch[shape].per_pod):
                self.vouch[shape] = Limit(per_pod, now)
            if shape in self.limits and per_pod >= self.limits[shape].per_pod:
                del self.limits[shape]

    def _record(self, seen: Pending, peak_rate: float | None) -> None:
        """Record a violation seen last cycle at the highest rate of both windows: the rate
        is the mean of the last metrics interval, so on a steep rise the violation is caused
        by more load than was measured when it was seen, and the next cycle's rate shows it.
        Not at a load per pod the shape has held: then something else caused it (and what it
        held vouches for it no longer, until it holds a whole window again)."""
        per_pod = max(seen.peak_rate, peak_rate or 0.0) / seen.replicas
        vouch = self.vouch.get(seen.shape)
        if vouch is not None and per_pod <= vouch.per_pod:
            del self.vouch[seen.shape]
            return
        held = self.held.get(seen.shape)
        if held is not None and per_pod <= held.per_pod:
            return
        old = self.limits.get(seen.shape)
        if old is None or per_pod <= old.per_pod:
            self.limits[seen.shape] = Limit(per_pod, seen.at)

    # ---------------------------------------------------------------- use
    def overload(self, batch: CandidateBatch, rate: float) -> NDArray[np.float64]:
        """Per candidate of ``batch``, its load per pod at ``rate`` over its shape's limit
        (0 without a limit): at 1 or more the candidate is excluded."""
        out = np.zeros(len(batch))
        if not self.limits or rate <= 0:
            return out
        per_pod = rate / np.maximum(batch.replicas, 1)
        for shape, lim in self.limits.items():
            out = np.where(feedback.shape_mask(batch, shape), per_pod / lim.per_pod, out)
        return out

    def excluded(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        """Candidates of ``batch`` whose shape has a limit their load per pod reaches at
        ``rate`` requests per second."""
        out: NDArray[np.bool_] = self.overload(batch, rate) >= 1.0
        return out

    def vouched(self, ctx: PlanningContext, batch: CandidateBatch,
                rate: float) -> NDArray[np.bool_]:
        """Candidates of ``batch`` whose shape, pinned to a pool, held every latency objective
        at a load per pod at least theirs at ``rate`` requests per second; not the current
        shape while it violates a latency objective within that load (:meth:`_doubted`: the
        observation then says otherwise)."""
        out = np.zeros(len(batch), dtype=bool)
        if rate <= 0 or not self.vouch:
            return out
        per_pod = rate / np.maximum(batch.replicas, 1)
        doubted = self._doubted(ctx)
        for shape, lim in self.vouch.items():
            if shape[2] is not None and shape != doubted:
                out |= feedback.shape_mask(batch, shape) & (per_pod <= lim.per_pod)
        return out

    def _doubted(self, ctx: PlanningContext) -> feedback.Shape | None:
        """The current shape, where a latency objective is observed violated now (beyond its
        tolerance) by the configuration itself (in place, every pod ready, for the KPI
        window, or entered from such by a scale-in: as :meth:`observe` judges a limit) at a
        load per pod at or below the load the shape vouched for (or at a load unknown).
        Judged after :meth:`observe` has seen this cycle. Just after a scale-out the window
        still holds the fewer pods' minutes: not the current configuration's own."""
        shape = feedback.shape_of(ctx.config)
        lim, rate = self.vouch.get(shape), ctx.workload.request_rate
        if lim is None or False not in _latency_verdicts(ctx) or self.config != ctx.config:
            return None
        steady = max(self.since, ctx.workload.newest_start)
        if ctx.now - steady < feedback.KPI_WINDOW_S and not self.by_scale_in:
            return None
        if rate is None:           # no rate seen: nothing says the load is beyond it
            return shape
        now = rate / max(ctx.config.replicas, 1)
        return shape if now <= lim.per_pod else None

    def describe(self) -> str:
        """The limits in words (for a plan's reason)."""
        return "; ".join(
            f"{cpu:g} cpu {device}" + (f" in {pool}" if pool else "")
            + f" observed violating at {lim.per_pod:.1f} req/s per pod"
            for (cpu, device, pool), lim in sorted(self.limits.items(), key=str))

    # ---------------------------------------------------------------- memory as data
    def remember(self) -> dict[str, Any]:
        return {
            "limits": _rows(self.limits), "held": _rows(self.held),
            "vouch": _rows(self.vouch),
            "config": None if self.config is None else self.config.as_dict(),
            "since": self.since, "restarts": self.restarts, "seen_at": self.seen_at,
            "by_scale_in": self.by_scale_in,
            "pending": None if self.pending is None else [
                *self.pending.shape, self.pending.replicas, self.pending.peak_rate,
                self.pending.at],
        }

    @staticmethod
    def recall(memory: Mapping[str, Any]) -> ObservedLimits:
        cfg, seen, at = memory.get("config"), memory.get("pending"), memory.get("seen_at")
        return ObservedLimits(
            limits=_limits(memory.get("limits")), held=_limits(memory.get("held")),
            vouch=_limits(memory.get("vouch")),
            config=None if cfg is None else WorkloadConfig(
                int(cfg["replicas"]), float(cfg["cpu"]), str(cfg["device"]),
                None if cfg.get("pool") is None else str(cfg["pool"])),
            since=float(memory.get("since") or 0.0), restarts=int(memory.get("restarts") or 0),
            seen_at=None if at is None else float(at),
            by_scale_in=bool(memory.get("by_scale_in")),
            pending=None if seen is None else Pending(_shape(seen[:3]), int(seen[3]),
                                                      float(seen[4]), float(seen[5])))


def _shape(row: Any) -> feedback.Shape:
    cpu, device, pool = row
    return (float(cpu), str(device), None if pool is None else str(pool))


def _rows(seen: dict[feedback.Shape, Limit]) -> list[list[Any]]:
    return [[*shape, lim.per_pod, lim.at] for shape, lim in seen.items()]


def _limits(rows: Any) -> dict[feedback.Shape, Limit]:
    return {_shape(r[:3]): Limit(float(r[3]), float(r[4])) for r in rows or ()}
