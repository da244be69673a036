"""What the explicit estimate knew of a place the workload left.

The explicit estimate (:class:`~planner.models.queue_estimate.QueueEstimate`) describes the
pods it was calibrated on, and starts afresh when the workload's pods are in another place
(device, node pool): a GPU pod's service rate blended into the CPU pods' describes neither
(:func:`planner.planners.predictors.calibrated_estimate`). What it knew of the place left was
then lost. A learned model may never have known it: a workload rescued from an overload runs
canaries and rollouts until it moves, and none of those minutes is settled enough to train on
(:func:`planner.models.observations.settled`). After the move the models know only the new
place, so the place left, and every place a canary measured against it, is predicted by no one
who saw it: not a configuration to go back to when the load falls, only a trial (gen-3238: one
GPU at $3.2/h through the day's trough, where 1-cpu pods in the 1.4x pool meet the p90 at a
fraction of the price; docs/benchmarks.md section 61).

So the estimate of a place left is kept (:class:`Left`, planner memory) for
:data:`LEFT_TTL_S`, and :class:`WithPlacesLeft` predicts the rows a predictor does not vouch
for in such a place by that estimate, vouched for there at the size its pods had: the explicit
model's answer where it was calibrated, as before the move.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from planner.models.predictor import (
    CandidateBatch,
    FloatArray,
    Prediction,
    Predictor,
    runs_by_source,
)
from planner.models.queue_estimate import QueueEstimate
from planner.planners.online import estimate_memory, recalled_estimate

Place = tuple[str, str | None]

LEFT_TTL_S = 24 * 3600.0
"""How long the estimate of a place left is used (as a canary's measured speed: the workload
may change)."""


@dataclass(frozen=True)
class Left:
    """The explicit estimate of pods the workload had in a place it left (its place and CPU
    size known), and when it left."""

    estimate: QueueEstimate
    at: float

    @property
    def place(self) -> Place:
        assert self.estimate.place is not None
        return self.estimate.place

    @property
    def cpu(self) -> float:
        assert self.estimate.cpu is not None
        return self.estimate.cpu

    def as_memory(self) -> dict[str, Any]:
        return {"estimate": estimate_memory(self.estimate), "at": self.at}

    @staticmethod
    def recall(memory: Any) -> Left | None:
        """A :meth:`as_memory` record; ``None`` when it is not one."""
        if not isinstance(memory, Mapping):
            return None
        try:
            est = recalled_estimate(memory.get("estimate"))
            at = float(memory["at"])
        except (KeyError, TypeError, ValueError):
            return None
        if (est is None or est.place is None or est.cpu is None
                or not (math.isfinite(est.cpu) and est.cpu > 0) or not math.isfinite(at)):
            return None
        return Left(est, at)


def updated(left: Mapping[Place, Left], previous: QueueEstimate | None,
            now_estimate: QueueEstimate | None, now: float) -> dict[Place, Left]:
    """``left`` after a cycle whose estimate went from ``previous`` to ``now_estimate``: where
    it started afresh in another place, ``previous`` is kept for the place and size of the
    pods it described (not where either is unknown: an estimate written before they were
    kept); the place the estimate describes now is no longer left; records older than
    :data:`LEFT_TTL_S` (or from the future) go."""
    out = {p: lf for p, lf in left.items() if 0.0 <= now - lf.at < LEFT_TTL_S}
    if (previous is not None and now_estimate is not None and previous.place is not None
            and previous.cpu is not None and now_estimate.place is not None
            and now_estimate.place != previous.place):
        out[previous.place] = Left(previous, now)
    if now_estimate is not None and now_estimate.place is not None:
        out.pop(now_estimate.place, None)
    return out


def left_memory(left: Mapping[Place, Left]) -> list[dict[str, Any]]:
    return [lf.as_memory() for lf in left.values()]


def recalled_left(memory: Any) -> dict[Place, Left]:
    """The records :func:`left_memory` wrote (unreadable ones dropped)."""
    out: dict[Place, Left] = {}
    for row in memory if isinstance(memory, list) else []:
        lf = Left.recall(row)
        if lf is not None:
            out[lf.place] = lf
    return out


Ask = Callable[[Predictor, CandidateBatch, NDArray[np.intp]], Prediction]
"""One predictor's prediction for some rows (the batch's rows, and their indices in it)."""


class WithPlacesLeft(Predictor):
    """``inner``'s predictions, except for rows of a place and size it knows nothing of (does
    not vouch for at any load) that one of ``others`` (the explicit predictors of places left,
    each vouching for its own place and size) vouches for: those are predicted by it. Where
    ``inner`` knows the place at some loads, a load beyond them stays its own, unvouched (as
    for a measured speed: :meth:`planner.planners.canary.MeasuredShapes._unknown`). Not
    :attr:`Predictor.monotone`: each source's rows keep the promise among themselves
    (:meth:`runs`).

    ``places`` (optional, one per predictor of ``others``): the place and CPU size it was
    calibrated on. A row of that place at another size is predicted by it too (its
    prediction of a pod of another size, unvouched) where ``inner`` knows the place at
    neither size: what ``inner`` would say there is an extrapolation from another device or
    pool (a model trained on GPU pods alone, whose GPU factor nothing told apart, predicted
    4-cpu CPU pods as fast as the GPU: docs/benchmarks.md section 63), and the explorer
    tries such rows on that prediction."""

    monotone = False

    def __init__(self, inner: Predictor, others: Sequence[Predictor],
                 places: Sequence[tuple[Place, float]] | None = None) -> None:
        self.inner = inner
        self.others = tuple(others)
        if places is not None and len(places) != len(self.others):
            raise ValueError(f"places: one (place, cpu) per predictor of others "
                             f"({len(self.others)}), got {len(places)}")
        self.places = None if places is None else tuple(places)
        self.kind = inner.kind
        self.model: Any = getattr(inner, "model", None)
        """``inner``'s learned model, if it has one (what plans report as the model used)."""

    def _stands_in(self, k: int, batch: CandidateBatch) -> NDArray[np.bool_]:
        """Rows of ``batch`` in the place of ``others[k]`` that ``inner`` knows at neither the
        row's CPU size nor the size ``others[k]`` was calibrated at (all ``False`` without
        :attr:`places`). The caller has asked for the rows' own size already."""
        if self.places is None or not len(batch):
            return np.zeros(len(batch), dtype=bool)
        (device, pool), cpu = self.places[k]
        out: NDArray[np.bool_] = (((batch.gpu > 0.5) == (device == "gpu"))
                                  & batch.in_pool(pool))
        if out.any():
            rows = np.flatnonzero(out)
            sub = batch.take(rows)
            at = CandidateBatch(sub.replicas, np.full(len(sub), float(cpu)), sub.gpu, sub.pool)
            out[rows] = ~self.inner.knows(at)
        return out

    # ------------------------------------------------------------ merging
    def _merged(self, batch: CandidateBatch, p: Prediction, ask: Ask,
                vouched: Callable[[Predictor, CandidateBatch, NDArray[np.intp]],
                                  NDArray[np.bool_]]) -> Prediction:
        todo = ~p.supported
        if todo.any():
            todo &= self._unknown(batch)
        if not todo.any():
            return p
        mean, bound, ok = p.mean.copy(), p.bound.copy(), p.supported.copy()
        for k, other in enumerate(self.others):
            rows = np.flatnonzero(todo)
            if rows.size == 0:
                break
            sub = batch.take(rows)
            rows = rows[vouched(other, sub, rows) | self._stands_in(k, sub)]
            if rows.size == 0:
                continue
            q = ask(other, batch.take(rows), rows)
            mean[rows], bound[rows], ok[rows] = q.mean, q.bound, q.supported
            todo[rows] = False
        return Prediction(mean, bound, ok)

    def _sources(self, batch: CandidateBatch, rate: float, factor: float = 1.0
                 ) -> NDArray[np.int64]:
        """Per row, the index in :attr:`others` of the predictor that predicts it for pods
        ``factor`` times as fast at ``rate``, or -1 (``inner``)."""
        source = np.full(len(batch), -1, dtype=np.int64)
        todo = ~self.inner.supported_faster(batch, rate, factor)
        if todo.any():
            todo &= self._unknown(batch)
        for k, other in enumerate(self.others):
            if not todo.any():
                break
            hit = todo & (other.supported_faster(batch, rate, factor)
                          | self._stands_in(k, batch))
            source[hit] = k
            todo &= ~hit
        return source

    def _unknown(self, batch: CandidateBatch) -> NDArray[np.bool_]:
        """Rows of a place and size ``inner`` does not vouch for at any load
        (:meth:`Predictor.knows`)."""
        out: NDArray[np.bool_] = ~self.inner.knows(batch)
        return out

    # ------------------------------------------------------------ predictions
    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        return self._merged(batch, self.inner.predict(batch, rate),
                            lambda o, b, _: o.predict(b, rate),
                            lambda o, b, _: o.supported(b, rate))

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        return self._merged(batch, self.inner.predict_faster(batch, rate, factor),
                            lambda o, b, _: o.predict_faster(b, rate, factor),
                            lambda o, b, _: o.supported_faster(b, rate, factor))

    def predict_faster_rows(self, batch: CandidateBatch, rate: float,
                            factors: FloatArray) -> Prediction:
        f = np.asarray(factors, dtype=float)
        return self._merged(batch, self.inner.predict_faster_rows(batch, rate, f),
                            lambda o, b, rows: o.predict_faster_rows(b, rate, f[rows]),
                            lambda o, b, rows: o.supported_faster_rows(b, rate, f[rows]))

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        return self._either(self.inner.supported(batch, rate), batch,
                            lambda o: o.supported(batch, rate))

    def supported_faster(self, batch: CandidateBatch, rate: float, factor: float
                         ) -> NDArray[np.bool_]:
        return self._either(self.inner.supported_faster(batch, rate, factor), batch,
                            lambda o: o.supported_faster(batch, rate, factor))

    def supported_faster_rows(self, batch: CandidateBatch, rate: float,
                              factors: FloatArray) -> NDArray[np.bool_]:
        return self._either(self.inner.supported_faster_rows(batch, rate, factors), batch,
                            lambda o: o.supported_faster_rows(batch, rate, factors))

    def _either(self, own: NDArray[np.bool_], batch: CandidateBatch,
                vouched: Callable[[Predictor], NDArray[np.bool_]]) -> NDArray[np.bool_]:
        """``own`` (``inner``'s support), or a place left's where ``inner`` knows nothing of
        the row's place and size."""
        if own.all():
            return own
        unknown = self._unknown(batch)
        if not unknown.any():
            return own
        out = own.copy()
        for other in self.others:
            out |= unknown & vouched(other)
        return out

    def predict_mean(self, batch: CandidateBatch, rate: float) -> FloatArray:
        out: FloatArray = self.predict_mean_rates(batch, [rate])[0]
        return out

    def predict_mean_rates(self, batch: CandidateBatch, rates: Sequence[float]) -> FloatArray:
        return self._mean_rates(batch, rates, 1.0)

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        return self._mean_rates(batch, rates, factor)

    def _mean_rates(self, batch: CandidateBatch, rates: Sequence[float],
                    factor: float) -> FloatArray:
        """``inner``'s means at each rate (one call), then per rate the rows it does not vouch
        for that a place left does, from that place's estimate."""
        out = np.array(self.inner.predict_mean_rates(batch, rates) if factor == 1.0
                       else self.inner.predict_mean_rates_faster(batch, rates, factor),
                       dtype=float).reshape(len(rates), len(batch))
        for i, rate in enumerate(rates):
            source = self._sources(batch, rate, factor)
            for k in np.unique(source[source >= 0]).tolist():
                rows = np.flatnonzero(source == k)
                other = self.others[k]
                sub = batch.take(rows)
                out[i, rows] = (other.predict_mean_rates(sub, [rate]) if factor == 1.0
                                else other.predict_mean_rates_faster(sub, [rate], factor))[0]
        return out

    def cpu_speedup(self, cpu: float, reference_cpu: float) -> float:
        return self.inner.cpu_speedup(cpu, reference_cpu)

    def runs(self, batch: CandidateBatch, rate: float) -> NDArray[np.int64]:
        """``inner``'s runs, cut where a row's source changes (``inner``, or the place left
        that predicts it: each monotone in replicas where it promises to be)."""
        out = self.inner.runs(batch, rate)
        source = self._sources(batch, rate)
        for k, other in enumerate(self.others):
            if not other.monotone:
                rows = source == k
                source[rows] = len(self.others) + np.flatnonzero(rows)
        return runs_by_source(out, source)
