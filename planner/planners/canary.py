"""Trying a shape no model has observed on a bounded share of the load: a canary.

A learned model vouches only for the devices and node pools it was trained on, and it cannot
know how fast a GPU or another node generation serves this workload until it has seen it. So a
planner that only follows its model never tries them. The canary is the bounded trial:

* **Proposal.** While every objective holds (the explorer's calm rule,
  :class:`planner.planners.feedback.Explorer`), each (device, pool) the admin's knobs reach
  that the model has not observed is scored at an *optimistic* speed: the prior is price
  parity (a pod priced ``k`` times the current one is taken to be ``k`` times as fast; a
  place of the device the workload left for a measured one is priced against the pods it
  left, at their measured speed: :func:`anchors`), widened by :data:`PRIOR_SPREAD`. A shape
  whose fewest feasible pods at that speed would cost at least ``EXPLORE_GAIN`` less than the
  best known configuration is worth a canary; a shape that could not be cheaper even then
  (one GPU pod already dearer than the whole workload) is never tried.
  Of the places worth a canary, the one cheapest at its optimistic speed is tried first, a
  pinned pool before "any pool" where they tie (:func:`first_place`). Trying first the place
  cheapest at the prior's centre (price parity) was measured twice (docs/benchmarks.md
  sections 48 and 57): it finds GPUs sooner, with fewer violation-minutes and more cost.
  A calm trial is not started where a canary pod at its prior's centre would be saturated by
  the share of the requests it gets (:func:`saturated_at_centre`): one slow pod beside two
  fast ones takes a third of them.
* **Another CPU size.** The explorer proposes a CPU size the model has not observed on the
  workload's own device and pool from the model's own (extrapolated) prediction
  (:meth:`planner.planners.feedback.Explorer.propose`); it is tried as a canary of that size
  (:func:`try_size`), not by resizing every pod: an exponent the model assumed may be far
  off, and a fleet rolled over to a slow size (and back) restarts every pod twice and holds
  the room of both sizes meanwhile. (Where the cluster resizes pods in place the restarts are
  spared, not the risk: every pod would serve at the slow size until resized back; the trial
  still bounds that to a share of the load.)
* **Rescue.** When an objective is observed violated and no known configuration that fits the
  cluster is predicted to meet it (a latency below what the current pods' service time
  allows, a fleet the cluster has no room for), the explorer is never calm; a place that
  would meet the objectives at its optimistic speed, whatever it costs, is tried then, and the
  violation that was there before does not stop that trial.
* **Trial.** ``ceil(canary.fraction x replicas)`` pods, but no more than it takes to reach
  that fraction of the workload's current cost (:func:`canary_size`: one GPU pod, not a tenth
  of the CPU pods in GPUs); at least one, and at most what the free room of that device and pool can
  schedule (a place with no room is not tried until it has some), of that device and pool,
  at the current CPU size, serve beside the workload behind the same Service (a second
  Deployment). The workload keeps every pod it has: the canary only adds capacity. The canary
  stops at the first observed violation (not a rescue trial), when its pods are not ready and
  judged within ``canary.timeout_s`` (e.g. unschedulable), or once judged.
* **Verdict.** After every canary pod has served for ``canary.analysis_s``, the canary's
  capacity per pod (requests per second over utilisation; a pod too idle to measure counts
  as :data:`MIN_UTILIZATION` busy, a lower bound) is compared with the workload's own pods':
  the ratio is the shape's measured speed relative to the current shape (a size trial's
  canary is compared with the workload's pods of the current size). It is kept as
  planner memory (data) and used by :class:`MeasuredShapes`: until a model is trained on the
  shape itself, a candidate of that shape is predicted as pods of the known shape that many
  times as fast (the learned latency model's service rate scaled; a measured size keeps its
  own ``floor(cpu)`` servers, see :class:`MeasuredShapes`). The planner then moves the
  workload there if that is the cheapest configuration predicted feasible, and not otherwise;
  the plan carries the speed (:attr:`planner.domain.plan.Plan.target_speed`), so the safety
  layer counts a move to fewer, faster pods in the work they do, not in pods.

Per-pod request rates are needed for the verdict (the simulator has them; a Kubernetes
workload needs per-pod request metrics); without them the canary is stopped unjudged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from actuators.canary import CanaryActuator, describe
from planner.domain.plan import Action, ReasonPart
from planner.domain.state import CanaryState, PodState, WorkloadConfig, WorkloadState
from planner.models import training
from planner.models.predictor import (
    CandidateBatch,
    FloatArray,
    Prediction,
    Predictor,
    runs_by_source,
)
from planner.planners.base import PlanningContext
from planner.planners.capacity import free_slots, runs, runs_shape
from planner.planners.feedback import (
    EXPLORE_GAIN,
    Canary,
    Explorer,
    Measured,
    Place,
    Tried,
    rollout_in_progress,
    shape_of,
)
from planner.planners.search_space import prices

PRIOR_SPREAD = 3.0
"""How much faster than price parity an unobserved device or pool may turn out to be: the
optimistic end of the prior used to decide whether a canary is worth running."""
MIN_UTILIZATION = 0.005
"""Pods busier than this are used to estimate capacity: 5 millicores of a one-core pod, five
steps of the millicore resolution CPU metrics have (an idler pod's ratio is noise). A GPU pod
many times faster than the others is this idle under round-robin dispatch: a canary pod that
idle is taken to be this busy (a lower bound of its capacity)."""
MEASURED_TTL_S = 24 * 3600.0
"""A measured speed is used for this long (the workload may change)."""

def place_of(cfg: WorkloadConfig) -> Place:
    return (cfg.device, cfg.pool)


def place_mask(batch: CandidateBatch, place: Place) -> NDArray[np.bool_]:
    device, pool = place
    out: NDArray[np.bool_] = ((batch.gpu > 0.5) == (device == "gpu")) & batch.in_pool(pool)
    return out


@dataclass(frozen=True)
class Speed:
    """A place's (or a shape's) speed relative to a reference the model knows: pods of the
    ``reference`` device and pool, at equal CPU size, or of ``reference_cpu`` where set (a
    CPU size measured against the workload's pods of another size). ``cpu``: for a place,
    the CPU size it was measured at (beside the reference's pods of that size), where known."""

    reference: Place
    factor: float
    reference_cpu: float | None = None
    cpu: float | None = None


def tried_mask(batch: CandidateBatch, tried: Tried) -> NDArray[np.bool_]:
    """The candidates a measurement is about: every CPU size of a place, or one shape."""
    if len(tried) == 2:
        return place_mask(batch, tried)
    out: NDArray[np.bool_] = place_mask(batch, tried[1:]) & (batch.cpu == tried[0])
    return out


def _by_reach(speeds: Mapping[Tried, Speed]) -> list[tuple[Tried, Speed]]:
    """``speeds`` with the places before the shapes: a shape's own measurement is applied
    last, over its place's."""
    return sorted(speeds.items(), key=lambda item: len(item[0]))


class MeasuredShapes(Predictor):
    """``inner``'s predictions, except for candidates on a (device, pool) in ``speeds`` that
    ``inner`` does not vouch for: those are predicted as pods of the reference shape that are
    the shape's speed times as fast (:meth:`Predictor.predict_faster`: a learned latency model
    scales its service rate; a model without one predicts the reference shape at the load
    divided by the speed, the same utilisation with the reference pod's service time, which
    errs on the slow side), a ``throughput`` KPI as the reference shape's at the load divided
    by the speed, scaled back up; vouched for where the reference shape is.

    A CPU size measured against pods of another size (a shape in ``speeds``) keeps its own
    size when predicted: a pod of more cores serves more requests at once, not each one
    sooner (the learned model's ``floor(cpu)`` servers), so its rows are ``inner``'s own at the
    measured speed over the speed ``inner`` assumes for that size
    (:meth:`Predictor.cpu_speedup`), vouched for where the reference pods are at the load
    they would carry.

    Not :attr:`Predictor.monotone`: where ``inner`` starts to vouch for a shape (a load per core
    within its range), its prediction takes over from the reference's, which may be better at
    fewer replicas. Each source's rows (``inner``'s own, or one measured speed's) keep the
    promise among themselves (:meth:`runs`)."""

    monotone = False

    def __init__(self, inner: Predictor, speeds: Mapping[Tried, Speed],
                 throughput: bool = False) -> None:
        self.inner = inner
        self.speeds = _by_reach(speeds)
        self.throughput = throughput
        self.kind = inner.kind
        self._places = {t for t, s in self.speeds if len(t) == 2 and not s.factor <= 0}
        """The places measured (used): a place measured against one of them chains."""

    def cpu_speedup(self, cpu: float, reference_cpu: float) -> float:
        return self.inner.cpu_speedup(cpu, reference_cpu)

    def runs(self, batch: CandidateBatch, rate: float) -> NDArray[np.int64]:
        """``inner``'s runs, cut where a row's source changes (``inner`` itself, or the
        measured speed that remaps it: each is monotone in replicas where ``inner`` is). Around
        a predictor that is not monotone everywhere, every remapped row is a run of its own."""
        out = self.inner.runs(batch, rate)
        source = self._sources(batch, self.inner.supported(batch, rate))
        remapped = source >= 0
        if not self.inner.monotone and remapped.any():
            source[remapped] = len(self.speeds) + np.flatnonzero(remapped)
        return runs_by_source(out, source)

    def _sources(self, batch: CandidateBatch, supported: NDArray[np.bool_]
                 ) -> NDArray[np.int64]:
        """Per row, the index in :attr:`speeds` of the measurement that predicts it (the last
        that covers a row ``inner`` does not vouch for, at a place and size it knows nothing
        of, as :meth:`_by_place` applies them; speeds at most 0 are not used, NaN is), or -1:
        ``inner``'s own row."""
        source = np.full(len(batch), -1, dtype=np.int64)
        off = ~supported
        if off.any():
            off &= self._unknown(batch)
        for k, (tried, speed) in enumerate(self.speeds):
            if not speed.factor <= 0:
                source[tried_mask(batch, tried) & off] = k
        return source

    def _unknown(self, batch: CandidateBatch) -> NDArray[np.bool_]:
        """Rows of a place and CPU size ``inner`` does not vouch for at any load
        (:meth:`Predictor.knows`). A measured speed stands for a place until the models know
        the place itself: where they vouch for it at some loads, a load beyond them is beyond
        what was seen there, not a reason to predict the place from another through the
        speed. That remap contradicted the model's own fit of the place: on gen-4009 seed 2,
        17 and 36 pods alternated; on gen-3238 (with the estimates of places left, section
        61) six 1-cpu pods in the 1.4x pool, which the model trained there predicts at a p90
        of 345 ms (beyond its range), were predicted at 158 ms as unpinned CPU pods 1.4 times
        as fast, and chosen (docs/benchmarks.md section 61)."""
        out: NDArray[np.bool_] = ~self.inner.knows(batch)
        return out

    def _own(self, tried: Tried, speed: Speed) -> float | None:
        """For a CPU size measured against another size, the factor on ``inner``'s own
        prediction for that size; ``None`` for a place (predicted at the reference)."""
        if speed.reference_cpu is None or len(tried) != 3 or self.throughput:
            return None
        return speed.factor / self.inner.cpu_speedup(float(tried[0]), speed.reference_cpu)

    def _remapped(self, batch: CandidateBatch, supported: NDArray[np.bool_]
                  ) -> list[tuple[NDArray[np.bool_], CandidateBatch, float, float | None,
                                  Predictor]]:
        """Per measurement that predicts some rows (:meth:`_sources`): those rows, the same
        rows at its reference shape, its factor, for a CPU size the factor on ``inner``'s
        own prediction, and what predicts the reference rows (:meth:`_reference_model`)."""
        source = self._sources(batch, supported)
        out = []
        for k, (tried, speed) in enumerate(self.speeds):
            rows = source == k
            if rows.any():
                ref = _as_reference(batch, rows, speed)
                out.append((rows, ref, speed.factor, self._own(tried, speed),
                            self._reference_model(k)))
        return out

    def _reference_model(self, k: int) -> Predictor:
        """What predicts measurement ``k``'s reference rows: ``inner``; or, where its
        reference place is itself a measured place, this wrapper without measurement ``k``.
        A canary is judged against the workload's pods where they are: right after a move to
        a measured place, before a model has been trained there, those pods are known only by
        their own measurement, and the new speed is relative to them. ``inner`` alone would
        predict them as pods of the place it knows best (speed 1): a place measured at 0.77x
        pods measured at 1.3x was predicted at 0.77x, not 1.0x (docs/benchmarks.md 59).
        Without ``k``, a chain of measurements ends where ``inner`` vouches or at the last
        measurement (no cycle). Places chain, each measured at the CPU size of the pods it
        was compared with; and a place measured against pods whose CPU size is known only by
        its own measurement in that place goes on through it (gpu-inference: a GPU measured
        against 4-cpu pods that a CPU-size canary had measured against 1-cpu pods, while the
        model knew 1-cpu pods only, was not vouched for until a refit; docs/benchmarks.md 68).
        A CPU size measured in another place does not chain: a place's speed composed with it
        (two assumptions, neither observed together) chose 4-cpu pods in "any pool" that
        violated on gen-5166 (section 59)."""
        tried, speed = self.speeds[k]
        if len(tried) != 2:
            return self.inner
        kept = {t: s for j, (t, s) in enumerate(self.speeds)
                if j != k and ((len(t) == 2 and speed.reference in self._places)
                               or _measured_beside(t, speed))}
        return MeasuredShapes(self.inner, kept, self.throughput) if kept else self.inner

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return self._predict(batch, rate, 1.0)

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        """For a latency, ``inner``'s own answer for pods ``factor`` times as fast, on a
        measured shape too (its measured speed times ``factor``): a wrapper of measured
        speeds inside another (the optimistic speeds of places a canary may try, around the
        measured ones) answers as the model does. A throughput: the default."""
        if self.throughput:
            return super().predict_faster(batch, rate, factor)
        return self._predict(batch, rate, factor)

    def _predict(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        if factor == 1.0 and not self.throughput:
            return self._in_one_call(batch, rate)
        return self._by_place(batch, rate, factor)

    def _by_place(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        """``inner``'s prediction, then one call per measured place or shape for the rows it
        remaps."""
        pr = (self.inner.predict(batch, rate) if factor == 1.0
              else self.inner.predict_faster(batch, rate, factor))
        parts = self._remapped(batch, pr.supported)
        if not parts:
            return pr
        mean, bound, ok = pr.mean.copy(), pr.bound.copy(), pr.supported.copy()
        for rows, sub, f, own, model in parts:
            if self.throughput:
                p = model.predict(sub, rate / f)
                mean[rows], bound[rows], ok[rows] = p.mean * f, p.bound * f, p.supported
            elif own is None:
                p = model.predict_faster(sub, rate, f * factor)
                mean[rows], bound[rows], ok[rows] = p.mean, p.bound, p.supported
            else:
                p = self.inner.predict_faster(batch.take(np.flatnonzero(rows)), rate,
                                              own * factor)
                mean[rows], bound[rows] = p.mean, p.bound
                ok[rows] = self.inner.supported(sub, rate / (f * factor))
        return Prediction(mean, bound, ok)

    def _in_one_call(self, batch: CandidateBatch, rate: float) -> Prediction:
        """A latency's :meth:`predict`: every row in one :meth:`Predictor.predict_faster_rows`
        call of ``inner`` (the rows it vouches for as they are, at factor 1; each remapped row
        at its reference shape and measured speed, or at its own size and the factor on
        ``inner``'s own prediction), instead of one call per measured place. Each row's
        numbers are those the place-by-place path gives it (a row's prediction depends on
        that row alone; tested): where two measurements cover a row, the shape's, applied
        last there, is the one it gets."""
        source = self._sources(batch, self.inner.supported(batch, rate))
        if not (source >= 0).any():
            return self.inner.predict(batch, rate)
        return self._chained(batch, rate, source)

    def _chained(self, batch: CandidateBatch, rate: float, source: NDArray[np.int64]
                 ) -> Prediction:
        """:meth:`_in_one_call`'s rows remapped, ``source`` being :meth:`_sources` at
        ``inner``'s support at ``rate``. Where a measured place's reference is itself a
        measured place (:meth:`_reference_model`), each row is followed along its chain first
        (the row moved to the reference place at the product of the speeds, while ``inner``
        does not vouch for it there and a measurement not yet used on its way covers it), then
        every row is predicted in one call: the numbers of the place-by-place path, which asks
        ``inner`` for every row at every link of every chain (each nested wrapper predicts all
        its rows before remapping some: on gen-4009, five places measured against one
        another, most of a plan's time, docs/benchmarks.md 60). Here a link costs one support
        check of the rows still going, each at its own speed
        (:meth:`Predictor.supported_faster_rows`). Right after its first link, a row may end
        its chain through the CPU size its place was measured beside (:func:`_measured_beside`),
        as :meth:`_reference_model` has it."""
        n, speeds = len(batch), self.speeds
        cpu, gpu, pools = batch.cpu.copy(), batch.gpu.copy(), list(batch.pool)
        factors = np.ones(n)
        own_rows: list[tuple[NDArray[np.bool_], CandidateBatch, float]] = []
        # Per row, the measurements used on its way (a chain never uses one twice), and
        # whether it goes on; per measurement, the place measurement of its reference (-1).
        used = np.zeros((n, len(speeds)), dtype=bool)
        going = np.zeros(n, dtype=bool)
        usable = [len(t) == 2 and not s.factor <= 0 for t, s in speeds]
        where = {t: k for k, (t, _) in enumerate(speeds) if usable[k]}
        ref_of = [where.get(s.reference, -1) if len(t) == 2 else -1 for t, s in speeds]

        def move(idx: NDArray[np.int64], k: int) -> None:
            speed = speeds[k][1]
            if speed.reference_cpu is not None:
                cpu[idx] = speed.reference_cpu
            gpu[idx] = 1.0 if speed.reference[0] == "gpu" else 0.0
            for i in idx.tolist():
                pools[i] = speed.reference[1]
            factors[idx] = speed.factor * factors[idx]
            used[idx, k] = True
            if ref_of[k] >= 0:
                going[idx] = ~used[idx, ref_of[k]]

        def pick(idx: NDArray[np.int64], eligible: Callable[[int], bool]
                 ) -> NDArray[np.int64]:
            """Per row of ``idx`` as moved so far, the last ``eligible`` measurement that
            covers it where ``inner`` neither vouches for it at its speed nor knows it; -1:
            none."""
            sub = CandidateBatch(batch.replicas[idx], cpu[idx], gpu[idx],
                                 tuple(pools[i] for i in idx.tolist()))
            off = ~self.inner.supported_faster_rows(sub, rate, factors[idx])
            if off.any():
                off &= self._unknown(sub)
            out = np.full(idx.size, -1, dtype=np.int64)
            for j, (tried, _) in enumerate(speeds):
                if eligible(j):
                    out[tried_mask(sub, tried) & off] = j
            return out

        sized: list[tuple[NDArray[np.bool_], CandidateBatch, float]] = []

        def size_hop(idx: NDArray[np.int64], k: int) -> None:
            """Rows just moved by place measurement ``k`` to its reference place, where
            ``inner`` does not vouch for them: on through a CPU size measured in that place
            (:meth:`_reference_model`), which ends their chain."""
            picked = pick(idx, lambda j: (_measured_beside(speeds[j][0], speeds[k][1])
                                          and not speeds[j][1].factor <= 0))
            for j in np.unique(picked[picked >= 0]).tolist():
                at = idx[picked == j]
                going[at] = False
                tried, speed = speeds[j]
                if (own := self._own(tried, speed)) is None:
                    move(at, j)
                    continue
                rows = np.zeros(n, dtype=bool)
                rows[at] = True
                # As the place-by-place path has it: the size's own factor on the place's,
                # vouched for where the size was measured, at the load over both speeds.
                factors[at] = own * factors[at]
                sized.append((rows, _as_reference(batch, rows, speed),
                              rate / (speed.factor * speeds[k][1].factor)))

        for k, (tried, speed) in enumerate(speeds):
            rows = source == k
            if not rows.any():
                continue
            if (own := self._own(tried, speed)) is not None:
                # Its own size, faster by the factor on the model's own prediction.
                factors[rows] = own
                own_rows.append((rows, _as_reference(batch, rows, speed), speed.factor))
            else:
                move(np.flatnonzero(rows), k)
                if len(tried) == 2:
                    size_hop(np.flatnonzero(rows), k)
        while going.any():
            idx = np.flatnonzero(going)
            going[idx] = False
            picked = pick(idx, usable.__getitem__)
            for k in np.unique(picked[picked >= 0]).tolist():
                move(idx[picked == k], k)
        p = self.inner.predict_faster_rows(CandidateBatch(batch.replicas, cpu, gpu,
                                                          tuple(pools)), rate, factors)
        ok = p.supported.copy()
        for rows, ref, f in own_rows:    # vouched for where the reference pods are
            ok[rows] = self.inner.supported(ref, rate / f)
        for rows, ref, at_rate in sized:
            ok[rows] = self.inner.supported(ref, at_rate)
        return Prediction(p.mean, p.bound, ok)

    def predict_mean(self, batch: CandidateBatch, rate: float) -> FloatArray:
        """:meth:`predict`'s ``mean`` from ``inner``'s means alone (a learned model's
        bootstrap ensemble is what its bound costs)."""
        out: FloatArray = self.predict_mean_rates(batch, [rate])[0]
        return out

    def predict_mean_rates(self, batch: CandidateBatch, rates: Sequence[float]) -> FloatArray:
        """:meth:`predict_mean` at each of ``rates``: ``inner``'s means at every rate in one
        call, then per measured shape one call for the rows it remaps at any of the rates (a
        row's prediction depends on its own row and rate alone, so the rows and rates a call
        holds besides change no number)."""
        return self._mean_rates(batch, rates, 1.0)

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        if self.throughput:
            return super().predict_mean_rates_faster(batch, rates, factor)
        return self._mean_rates(batch, rates, factor)

    def _mean_rates(self, batch: CandidateBatch, rates: Sequence[float],
                    factor: float) -> FloatArray:
        out = np.array(self.inner.predict_mean_rates(batch, rates) if factor == 1.0
                       else self.inner.predict_mean_rates_faster(batch, rates, factor),
                       dtype=float)
        places = [(k, tried_mask(batch, tried), speed, self._own(tried, speed))
                  for k, (tried, speed) in enumerate(self.speeds) if not speed.factor <= 0]
        if not places:
            return out
        unknown = self._unknown(batch)
        unsupported = [~self.inner.supported(batch, rate / factor) & unknown for rate in rates]
        for k, here, speed, own in places:
            rows = [(i, here & off) for i, off in enumerate(unsupported) if (here & off).any()]
            if not rows:
                continue
            union = np.logical_or.reduce([r for _, r in rows])
            at = [rates[i] for i, _ in rows]
            ref = _as_reference(batch, union, speed)
            if self.throughput:
                means = self._reference_model(k).predict_mean_rates(
                    ref, [r / speed.factor for r in at]) * speed.factor
            elif own is None:
                means = self._reference_model(k).predict_mean_rates_faster(
                    ref, at, speed.factor * factor)
            else:
                means = self.inner.predict_mean_rates_faster(
                    batch.take(np.flatnonzero(union)), at, own * factor)
            for j, (i, r) in enumerate(rows):
                out[i, r] = means[j, r[union]]
        return out


def _measured_beside(tried: Tried, place: Speed) -> bool:
    """Whether ``tried`` is the CPU size, in ``place``'s reference place, of the pods the place
    was measured beside (the two measurements were observed together: the place's canary ran
    at that size beside those pods)."""
    return (len(tried) == 3 and place.cpu is not None and tried[0] == place.cpu
            and tried[1:] == place.reference)


def _as_reference(batch: CandidateBatch, rows: NDArray[np.bool_], speed: Speed
                  ) -> CandidateBatch:
    """``batch``'s ``rows`` moved to ``speed``'s reference shape (device and pool; and CPU
    size where the measurement was against pods of another size)."""
    n = int(rows.sum())
    device, pool = speed.reference
    cpu = (batch.cpu[rows] if speed.reference_cpu is None
           else np.full(n, speed.reference_cpu))
    return CandidateBatch(batch.replicas[rows], cpu,
                          np.full(n, 1.0 if device == "gpu" else 0.0), (pool,) * n)


def with_speeds(preds: Mapping[str, Predictor], speeds: Mapping[Tried, Speed],
                throughput: set[str]) -> dict[str, Predictor]:
    """``preds`` with :class:`MeasuredShapes` around each (unchanged when ``speeds`` is empty);
    ``throughput`` names the objectives whose KPI is a throughput."""
    if not speeds:
        return dict(preds)
    return {n: MeasuredShapes(p, speeds, n in throughput) for n, p in preds.items()}


def anchors(ctx: PlanningContext, measured: Mapping[Tried, Speed]) -> dict[str, tuple[Place,
                                                                                 float]]:
    """Per device, the place a prior of that device is anchored at and its speed relative to
    the current pods: the current place for the current device; for the device the workload
    left, the place a canary measured the current place against (its speed the inverse of
    that measurement). A CPU pool after a move to GPUs 30x a CPU pod's speed is then priced
    against the CPU pods it is like, not against the GPU pods."""
    here = place_of(ctx.config)
    out = {here[0]: (here, 1.0)}
    m = measured.get(here)
    if (m is not None and m.reference_cpu is None and m.reference[0] != here[0]
            and m.factor > 0):
        out[m.reference[0]] = (m.reference, 1.0 / m.factor)
    return out


def optimistic_speeds(ctx: PlanningContext, places: list[Place],
                      measured: Mapping[Tried, Speed] | None = None) -> dict[Place, Speed]:
    """Per unobserved ``place``, the optimistic end of its prior relative to the current
    shape: :data:`PRIOR_SPREAD` times the ratio of its pod price to the price of a pod of
    the place its device is anchored at (:func:`anchors`: the current place, or the place of
    that device the current one was measured against, from ``measured``), times that
    place's speed."""
    cur = ctx.config
    anchor = anchors(ctx, measured or {})
    at = {pl: anchor.get(pl[0], (place_of(cur), 1.0)) for pl in places}
    refs = sorted({a for a, _ in at.values()}, key=str)
    configs = [*(cur.with_(replicas=1, device=d, pool=p) for d, p in refs),
               *(cur.with_(replicas=1, device=d, pool=p) for d, p in places)]
    price = prices(ctx.snapshot, CandidateBatch.of(configs)).tolist()
    ref_price = dict(zip(refs, price[:len(refs)], strict=True))
    out: dict[Place, Speed] = {}
    for place, p in zip(places, price[len(refs):], strict=True):
        ref, speed = at[place]
        if ref_price[ref] > 0 and p > 0:
            out[place] = Speed(place_of(cur), PRIOR_SPREAD * speed * p / ref_price[ref])
    return out


def pods_busy(ctx: PlanningContext) -> float | None:
    """The median utilisation (:attr:`PodState.busy`) of the workload's ready pods of its CPU
    size (``None`` where none reports one)."""
    utils = [b for p in ctx.workload.pods
             if p.ready and (b := p.busy) is not None and math.isclose(p.cpu, ctx.config.cpu)]
    return float(np.median(utils)) if utils else None


def saturated_at_centre(busy: float | None, centre: float) -> bool:
    """Whether a canary pod ``centre`` times as fast as the workload's pods (its prior's
    centre) would be saturated (at least :data:`planner.models.training.SATURATED_UTILIZATION`
    busy) by a workload pod's share of the requests, which is what it gets by round robin and
    what dispatch weights start it at: the pods' utilisation ``busy`` (:func:`pods_busy`) over
    ``centre``. A CPU pool priced like the CPU pods the workload left for GPUs 30 times as
    fast is such a place: one pod of it beside two GPU pods takes a third of the requests.
    ``False`` where no utilisation is known."""
    return busy is not None and busy / centre >= training.SATURATED_UTILIZATION


def _capacities(pods: Sequence[PodState], floor: bool) -> list[float]:
    """Requests per second over utilisation (:attr:`PodState.busy`) of the ready pods with a
    known request rate (``floor``: a pod busy less than :data:`MIN_UTILIZATION` counts as that
    busy; otherwise it is left out, too idle to measure)."""
    return [c for caps in _capacities_by_pool(pods, floor).values() for c in caps]


def _capacities_by_pool(pods: Sequence[PodState], floor: bool) -> dict[str | None, list[float]]:
    """:func:`_capacities` of ``pods``, per node pool (in pod order within each)."""
    out: dict[str | None, list[float]] = {}
    for p in pods:
        if (p.ready and p.request_rate and (b := p.busy) is not None
                and (floor or b > MIN_UTILIZATION)):
            out.setdefault(p.pool, []).append(p.request_rate / max(b, MIN_UTILIZATION))
    return out


def capacity_ratio(canary: CanaryState, workload: WorkloadState,
                   versus: float | None = None) -> float | None:
    """The canary pods' capacity per pod over that of the workload's own pods of the same CPU
    size, or of ``versus`` cores (a trial of another CPU size) (median requests per second
    over utilisation of the ready, busy pods; a canary pod busy less than
    :data:`MIN_UTILIZATION` counts as that busy, so its speed is then measured low, never
    high); ``None`` when either side has no such pod with a known request rate.

    Like is compared with like: a pod's capacity grows with its CPU size, and the workload
    may be resized while the canary runs (its pods of both sizes serve during the rollout).
    The workload's pods are those of its configured device and pool, the place the verdict
    is recorded against: a workload that moves to GPUs while a canary runs serves from CPU
    pods of the same size for a while, and a canary compared with them and recorded against
    the GPUs would be taken for as fast as a GPU (gen-2764, docs/benchmarks.md section 57).
    Measured against pods of another size, the ratio would be the device's speed times the
    size's, and :class:`MeasuredShapes` applies a place's speed at equal CPU size; a size
    trial's ratio is the size's speed, and is applied to that size alone."""
    size = canary.config.cpu if versus is None else versus
    # A canary pod too idle to measure (a GPU many times as fast, sent its share of the
    # requests) is at least ``MIN_UTILIZATION`` busy as far as anyone can tell: its capacity
    # is at least its rate over that, so the ratio is a lower bound of its speed then.
    # Node pools differ in speed too: where a canary in the workload's own place (a trial of
    # another CPU size) and the workload's pods share pools, only the pods on those pools are
    # compared (a canary on the fast one of two pools, measured against pods mostly on the
    # slow one, would carry the pool's speed into the size's: gen-5163, docs/benchmarks.md
    # section 66). A trial of another place is measured against the place the workload is
    # in, all its pools: that place is what the verdict is relative to, and a pool trial
    # compared pool by pool with the pods already on that pool would measure 1 (gen-3238,
    # section 67).
    mine_by = _capacities_by_pool(canary.pods, floor=True)
    theirs_by = _capacities_by_pool(_own_pods(workload, size), floor=False)
    if place_of(canary.config) == place_of(workload.config):
        theirs_at = {k: float(np.median(v)) for k, v in theirs_by.items() if k is not None}
        common = sorted(k for k in theirs_at if k in mine_by and theirs_at[k] > 0)
        if common:
            # Per shared pool, the canary pods' capacity over the workload's there; the pools
            # weighted by the canary pods measured on each.
            ratios = [float(np.median(mine_by[k])) / theirs_at[k] for k in common]
            return float(np.average(ratios, weights=[len(mine_by[k]) for k in common]))
    mine = _median([c for caps in mine_by.values() for c in caps])
    theirs = _median([c for caps in theirs_by.values() for c in caps])
    if mine is None or theirs is None or theirs <= 0:
        return None
    return mine / theirs


def _median(caps: list[float]) -> float | None:
    return float(np.median(caps)) if caps else None


def _own_pods(workload: WorkloadState, size: float) -> list[PodState]:
    """The workload's pods of ``size`` cores in its configured device and pool."""
    here = workload.config.with_(cpu=size)
    return [p for p in workload.pods if math.isclose(p.cpu, size)
            and runs_shape(size, p.device, p.pool, here)]


def canary_capacity(canary: CanaryState) -> float | None:
    """The canary pods' capacity per pod, as :func:`capacity_ratio` measures it."""
    return _median(_capacities(canary.pods, floor=True))


def pods_capacity(workload: WorkloadState, size: float) -> float | None:
    """The capacity per pod of the workload's own busy pods of ``size`` cores in its
    configured device and pool, as :func:`capacity_ratio` measures it."""
    return _median(_capacities(_own_pods(workload, size), floor=False))


def too_idle(canary: CanaryState) -> bool:
    """Whether every ready canary pod with a known request rate was less than
    :data:`MIN_UTILIZATION` busy: :func:`capacity_ratio` is then only a lower bound of the
    shape's speed."""
    utils = [b for p in canary.pods
             if p.ready and p.request_rate and (b := p.busy) is not None]
    return bool(utils) and all(u < MIN_UTILIZATION for u in utils)


def _what(trial: Canary) -> str:
    cpu, device, pool = trial.shape
    return f"{cpu:g} cpu {device}" + (f" in {pool}" if pool else "")


def canary_size(ctx: PlanningContext, shape: WorkloadConfig) -> int:
    """The pods of a canary of ``shape``'s (CPU size, device, pool): ``canary.fraction`` of the
    workload's replicas (rounded up), and no more pods than it takes to reach that fraction of
    what the workload costs now (at least one). Pods of the workload's price: the fraction of
    the replicas. Dearer pods: fewer (a GPU pod priced as forty CPU pods is one pod, not a
    tenth of the CPU pods in GPUs: its speed is judged per pod). Free canary pods: the fraction
    of the replicas; a free workload: one. Where dispatch weights are written (the ``weights``
    actuator), the fewer pods get a growing share of the load while they are little busy, up
    to the share the fraction's pods would carry (:func:`actuators.weights.with_canary`): one
    pod's share of a large workload can leave a fast device too idle to be measured
    (:data:`MIN_UTILIZATION`)."""
    fraction = ctx.admin.canary.fraction
    by_pods = max(1, math.ceil(fraction * ctx.config.replicas))
    price = prices(ctx.snapshot, CandidateBatch.of([ctx.config, shape.with_(replicas=1)]))
    now, each = float(price[0]), float(price[1])
    if not each > 0:
        return by_pods
    return min(by_pods, max(1, math.ceil(fraction * max(now, 0.0) / each - 1e-9)))


def _stop(ctx: PlanningContext, explorer: Explorer, actuator: CanaryActuator,
          why: str) -> tuple[list[Action], list[ReasonPart]]:
    key = ctx.intent.key
    trial = explorer.canaries.pop(key, None)
    if trial is not None:
        explorer.mark_tried(key, trial.shape, ctx.now)
    return [actuator.stop(ctx.workload.key, why)], [ReasonPart("exploration",
                                                               f"canary stopped: {why}")]


def follow(ctx: PlanningContext, explorer: Explorer, actuator: CanaryActuator,
           violated: bool) -> tuple[list[Action], list[ReasonPart], bool]:
    """This cycle's step of a canary on trial: the actions (a stop), the reason parts, and
    whether a canary is still on (no new one is proposed then)."""
    key, now, settings = ctx.intent.key, ctx.now, ctx.admin.canary
    running = ctx.workload.canary
    trial = explorer.canaries.get(key)
    if running is None and trial is None:
        return [], [], False
    if trial is None:                      # observed without a record: judge it from now
        assert running is not None
        seen = running.config
        other_size = place_of(seen) == place_of(ctx.config) and seen.cpu != ctx.config.cpu
        trial = explorer.canaries[key] = Canary(
            shape_of(seen), now, versus=ctx.config.cpu if other_size else None)
    what = _what(trial)
    if trial.judged_at is not None:
        if running is None:                # gone (deleted by hand): nothing left to follow
            del explorer.canaries[key]
            return [], [], False
        return [], [], True                # the plan decides: see :func:`after_verdict`
    if violated and not trial.rescue:
        return (*_stop(ctx, explorer, actuator,
                       f"{what}: an objective was observed violated during the trial"), False)
    if running is None:
        if now - trial.since > settings.timeout_s:
            del explorer.canaries[key]
            explorer.mark_tried(key, trial.shape, now)
            return [], [ReasonPart("exploration", f"canary {what} never appeared")], False
        return [], [], True
    pods = running.pods
    ready = len(pods) >= running.config.replicas and all(p.ready for p in pods)
    if ready and trial.ready_since is None:
        trial.ready_since = now
    elif not ready:
        trial.ready_since = None
    if trial.ready_since is not None and now - trial.ready_since >= settings.analysis_s:
        ratio = capacity_ratio(running, ctx.workload, trial.versus)
        if ratio is None and not rollout_in_progress(ctx):
            size = "its CPU size" if trial.versus is None else f"{trial.versus:g} cpu"
            return (*_stop(ctx, explorer, actuator, f"{what}: no busy pod of {size} with "
                           "a known request rate in the workload's place to judge it by"),
                    False)
        if ratio is not None:
            place = (trial.shape[1], trial.shape[2])
            table = explorer.speeds.setdefault(key, {})
            if trial.versus is None:
                table[place] = Measured(place_of(ctx.config), ratio, now,
                                        cpu=float(trial.shape[0]))
            else:
                table[trial.shape] = Measured(place, ratio, now, trial.versus,
                                              canary_capacity(running))
            trial.judged_at = now
            explorer.mark_tried(key, trial.shape, now)
            against = "the current pods" if trial.versus is None else \
                f"the current {trial.versus:g} cpu pods"
            verdict = f"{ratio:.2f}x the capacity per pod of {against}"
            if too_idle(running):
                verdict = (f"at least {verdict} (its pods were too idle to measure: less than "
                           f"{MIN_UTILIZATION:.1%} busy)")
            return [], [ReasonPart("exploration", f"canary {what} judged: {verdict}")], True
    if now - trial.since > settings.timeout_s:
        return (*_stop(ctx, explorer, actuator, f"{what}: not judged within "
                       f"{settings.timeout_s:g} s (its pods not ready, or nothing of the "
                       "workload's place to compare them with while it moved)"), False)
    return [], [ReasonPart("exploration", f"canary {what} on trial")], True


def measured_move(ctx: PlanningContext, explorer: Explorer, target: WorkloadConfig) -> bool:
    """Whether ``target`` moves the workload to a device or pool a canary measured."""
    return (place_of(target) != place_of(ctx.config)
            or rollout_in_progress(ctx)) and place_of(target) in measured_speeds(ctx, explorer)


def ready_of(ctx: PlanningContext, target: WorkloadConfig) -> int:
    """The workload's ready pods of ``target``'s shape."""
    return sum(1 for p in ctx.workload.pods if p.ready and runs(p, target))


def after_verdict(ctx: PlanningContext, explorer: Explorer, actuator: CanaryActuator,
                  target: WorkloadConfig) -> tuple[list[Action], list[ReasonPart]]:
    """A judged canary once the plan is made (from the cycle after its verdict): stopped,
    its room free for the workload's own pods when the plan moves there, or no longer
    needed when it does not."""
    trial = explorer.canaries.get(ctx.intent.key)
    if (trial is None or trial.judged_at is None or ctx.workload.canary is None
            or trial.judged_at >= ctx.now):    # judged this cycle: planned from next cycle
        return [], []
    moves = (shape_of(target) == trial.shape if trial.versus is not None
             else place_of(target) == (trial.shape[1], trial.shape[2]))
    if moves:
        return _stop(ctx, explorer, actuator, "judged; the workload moves to its shape")
    return _stop(ctx, explorer, actuator, "judged; the workload stays on its shape, the "
                 "cheapest predicted")


def measured_speeds(ctx: PlanningContext, explorer: Explorer,
                    preds: Mapping[str, Predictor] | None = None) -> dict[Tried, Speed]:
    """The speeds canaries measured for this intent that are still fresh; with ``preds``, a
    CPU size measured against pods of a size no predictor of ``preds`` vouches for any more
    re-based on the pods now (:func:`_rebased`)."""
    table = explorer.speeds.get(ctx.intent.key, {})
    return {tried: (preds is not None and _rebased(ctx, tried, m, preds))
            or Speed(m.reference, m.factor, m.reference_cpu, m.cpu)
            for tried, m in table.items() if ctx.now - m.at < MEASURED_TTL_S}


def _rebased(ctx: PlanningContext, tried: Tried, m: Measured,
             preds: Mapping[str, Predictor]) -> Speed | None:
    """A CPU size measured against the workload's pods of another size than they have now, in
    the place they are in, where some predictor of ``preds`` no longer vouches for pods of
    that size there: its capacity per pod over that of the pods now (measured as the verdict
    was), relative to their size; ``None`` otherwise, or where the pods now are too idle to
    measure. The measurement is of the canary's pods, not of the pods it was compared with:
    on the way from 0.5 to 4 cpu through 1 cpu (one size a cycle), a speed against the 0.5-cpu
    pods was no longer predicted where the explicit estimate vouches (the current size only),
    the 4-cpu target was dropped and the workload stayed at 1 cpu. Where the models still
    vouch for the size measured against (a learned model trained on it), the measurement
    stands: re-based on pods of a size it was not trained on, it lost the models' support
    (gen-3; docs/benchmarks.md section 59)."""
    cur = ctx.config
    if (len(tried) != 3 or m.capacity is None or m.reference_cpu is None
            or m.reference_cpu == cur.cpu or tried[0] == cur.cpu
            or m.reference != place_of(cur)):
        return None
    at = CandidateBatch(np.array([float(max(cur.replicas, 1))]),
                        np.array([m.reference_cpu]),
                        np.array([1.0 if cur.device == "gpu" else 0.0]), (cur.pool,))
    if all(bool(p.knows(at)[0]) for p in preds.values()):
        return None
    theirs = pods_capacity(ctx.workload, cur.cpu)
    if theirs is None or not theirs > 0:
        return None
    return Speed(m.reference, m.capacity / theirs, cur.cpu)


def speed_of(ctx: PlanningContext, explorer: Explorer, target: WorkloadConfig) -> float | None:
    """The measured speed of ``target``'s device and pool relative to the place it was
    measured against (:attr:`planner.domain.plan.Plan.target_speed`); ``None`` where not
    measured."""
    speed = measured_speeds(ctx, explorer).get(place_of(target))
    return None if speed is None else speed.factor


Scorer = Callable[[CandidateBatch, Mapping[str, Predictor]], tuple[NDArray[np.bool_],
                                                                    NDArray[np.bool_],
                                                                    NDArray[np.float64]]]
"""Scores a batch with the given predictors: (feasible, supported, score) per candidate."""


def propose(ctx: PlanningContext, explorer: Explorer, actuator: CanaryActuator,
            places: list[Place], observed: set[Place], replicas: tuple[int, ...],
            preds: Mapping[str, Predictor], throughput: set[str], score: Scorer,
            best_score: float, rescue: bool = False) -> tuple[list[Action], list[ReasonPart]]:
    """Start a canary of the (device, pool) in ``places`` that is not ``observed`` (no
    candidate of it vouched for by the models), has not been tried lately, and at the
    optimistic end of its prior would serve the load for at least ``EXPLORE_GAIN`` less than
    ``best_score``; not beside a single pod. By round robin a canary of ``size`` pods takes
    ``size / (replicas + size)`` of the requests (a third beside two pods): the trial is
    bounded in pods and in time (it stops at the first violation), not in risk-free share.

    ``rescue``: no known configuration is predicted to meet the objectives and one is observed
    violated (``best_score`` is then infinite: any place predicted feasible at its best is
    worth a trial). The trial starts although the explorer is not calm, and a violation does
    not stop it (it was there before; the canary only adds pods beside the workload's)."""
    key, cfg, now = ctx.intent.key, ctx.config, ctx.now
    if ((not rescue and not explorer.calm(key, now)) or key in explorer.trials
            or rollout_in_progress(ctx)):
        return [], []
    if cfg.replicas < 2:                   # beside one pod a canary takes half the requests
        return [], []
    measured = measured_speeds(ctx, explorer)
    known = set(measured)
    facts = ctx.snapshot.facts
    candidates = [pl for pl in places if pl != place_of(cfg) and pl not in known
                  and pl not in observed
                  and not explorer.was_tried(key, (cfg.cpu, *pl), now)
                  and (pl[0] != "gpu" or (facts.has_gpu if pl[1] is None
                                          else pl[1] in facts.first_gpu_in_pool))]
    # A place with no free room for one pod of the shape cannot run a canary now (a GPU pool
    # whose GPUs are taken); it is looked at again while it stays untried.
    room = {pl: free_slots(ctx.snapshot, cfg.with_(replicas=1, device=pl[0], pool=pl[1]))
            for pl in candidates}
    fresh = [pl for pl in candidates if room[pl] > 0]
    if not fresh:
        return [], []
    optimistic = optimistic_speeds(ctx, fresh, measured)
    if not rescue:
        busy = pods_busy(ctx)
        optimistic = {pl: sp for pl, sp in optimistic.items()
                      if not saturated_at_centre(busy, sp.factor / PRIOR_SPREAD)}
    if not optimistic:
        return [], []
    reps = np.asarray(replicas, dtype=float)
    order = list(optimistic)
    batch = CandidateBatch(np.tile(reps, len(order)), np.full(len(reps) * len(order), cfg.cpu),
                           np.repeat([1.0 if d == "gpu" else 0.0 for d, _ in order], len(reps)),
                           tuple(p for _, p in order for _ in reps))
    at_best: dict[Tried, Speed] = {pl: sp for pl, sp in optimistic.items()}
    bar = best_score * (1.0 - EXPLORE_GAIN)
    rows = np.arange(len(batch))
    weight = ctx.admin.utility.cost
    if math.isfinite(bar) and weight > 0:
        # A score is at least the cost term (its other terms are not negative): a count whose
        # price alone reaches the bar cannot pass it, and is not predicted (most of a long
        # replica axis; predicting it was the slowest part of a plan on the GPU set).
        rows = np.flatnonzero(weight * prices(ctx.snapshot, batch) < bar)
    ok = np.zeros(0, dtype=bool)
    if rows.size:
        feasible, _, scores = score(batch.take(rows),
                                    with_speeds(preds, at_best, throughput))
        ok = feasible & (scores < bar)
    if not ok.any():
        for pl in fresh:                   # not worth it even at its best: not for a while
            explorer.mark_tried(key, (cfg.cpu, *pl), now)
        return [], []
    best = first_place(batch.take(rows), ok, scores)
    i = int(rows[best])
    device, pool = order[i // len(reps)]
    place = cfg.with_(device=device, pool=pool)
    shape = place.with_(replicas=min(canary_size(ctx, place), room[(device, pool)]))
    explorer.canaries[key] = Canary((shape.cpu, device, pool), now, rescue=rescue)
    at = (f"not observed yet; at {optimistic[(device, pool)].factor:.1f}x the current pods' "
          f"speed (price parity x{PRIOR_SPREAD:g})")
    if math.isfinite(best_score):
        gain = 1.0 - float(scores[best]) / best_score
        why = f"{at} it would cost up to {gain:.0%} less than the best known configuration"
    else:
        why = (f"{at} it could meet the objectives no known configuration is predicted to "
               "meet" + ("; a rescue trial, not stopped by the violation already observed"
                         if rescue else ""))
    return [actuator.start(ctx.workload.key, shape, why)], [
        ReasonPart("exploration", f"canary {describe(shape)} started: {why}")]


def first_place(batch: CandidateBatch, ok: NDArray[np.bool_],
                scores: NDArray[np.float64]) -> int:
    """Which row of ``batch`` (candidates of several places) a canary tries: of the rows in
    ``ok`` (passing the bar at their place's optimistic speed, with ``scores``), the best;
    where places tie, a pinned pool's row before one of ``None`` ("any pool" is priced at
    the dearest pool its pods may land in, so it ties with that pool, and its pods land
    wherever there is room: its verdict would be a mix of node classes, a pinned pool's is
    that class's speed)."""
    rows = np.flatnonzero(ok)
    anywhere = np.array([batch.pool[j] is None for j in rows.tolist()], dtype=bool)
    return int(rows[np.lexsort((anywhere, scores[rows]))[0]])


def can_judge_size(ctx: PlanningContext, shape: WorkloadConfig) -> bool:
    """Whether a canary of ``shape`` (another CPU size in the workload's place) could start
    now and be judged: room for one pod of it, and ready, busy pods of the workload's size whose
    request rates are known (what :func:`capacity_ratio` compares against; a backend without
    per-pod request metrics has none)."""
    cpu = ctx.config.cpu
    return (free_slots(ctx.snapshot, shape.with_(replicas=1)) > 0
            and bool(_capacities([p for p in ctx.workload.pods if math.isclose(p.cpu, cpu)],
                                 floor=False)))


def try_size(ctx: PlanningContext, explorer: Explorer, actuator: CanaryActuator,
             shape: WorkloadConfig, why: str, rescue: bool = False
             ) -> tuple[list[Action], list[ReasonPart]]:
    """Start a canary of ``shape``, a CPU size the models have not observed on the
    workload's own device and pool (one the explorer proposed,
    :meth:`planner.planners.feedback.Explorer.propose`, or, where no known configuration is,
    one predicted to meet the objectives), instead of rolling every pod over to it:
    :func:`canary_size` pods (at most what the pool's free room schedules), judged against the
    workload's pods of their size. ``rescue``: an objective is observed violated already,
    which does not stop the trial. No actions when there is no room for one pod of it (looked
    at again while it stays untried)."""
    cfg = ctx.config
    room = free_slots(ctx.snapshot, shape.with_(replicas=1))
    if room <= 0:
        return [], []
    pods = shape.with_(replicas=min(canary_size(ctx, shape), room))
    explorer.canaries[ctx.intent.key] = Canary(shape_of(pods), ctx.now, rescue=rescue,
                                               versus=cfg.cpu)
    why = f"{why}; tried beside the {cfg.replicas} x {cfg.cpu:g} cpu pods, not instead of them"
    return [actuator.start(ctx.workload.key, pods, why)], [
        ReasonPart("exploration", f"canary {describe(pods)} started: {why}")]
