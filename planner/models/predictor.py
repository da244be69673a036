"""The :class:`Predictor` interface planners use to score candidate configurations.

A predictor maps a batch of configurations (and the load they would serve) to predicted
objective values with an upper/lower bound, vectorised so that a planner can score thousands of
candidates per cycle. Implementations: the explicit queueing estimate (before anything is
learned) and the learned effect models.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter

import numpy as np
from numpy.typing import NDArray

from planner.domain.state import WorkloadConfig

FloatArray = NDArray[np.float64]

KNOWS_RATE = 1e-3
"""The load (req/s) at which :meth:`Predictor.knows` asks for support: next to none."""


@dataclass(frozen=True)
class CandidateBatch:
    """Configurations as columns: the layout every predictor accepts."""

    replicas: FloatArray
    cpu: FloatArray
    gpu: FloatArray
    """1.0 where the device is a GPU."""
    pool: tuple[str | None, ...]

    @staticmethod
    def of(configs: Sequence[WorkloadConfig]) -> CandidateBatch:
        return CandidateBatch(
            np.array([c.replicas for c in configs], dtype=float),
            np.array([c.cpu for c in configs], dtype=float),
            np.array([1.0 if c.device == "gpu" else 0.0 for c in configs]),
            tuple(c.pool for c in configs),
        )

    def __len__(self) -> int:
        return int(self.replicas.size)

    @cached_property
    def pool_rows(self) -> tuple[tuple[str | None, ...], NDArray[np.intp]]:
        """The batch's distinct pools (in order of first appearance) and per row the index of
        its pool among them: what depends on the pool alone is worked out once per pool and
        looked up per row (a batch holds a few pools over hundreds of rows). A batch taken
        from one that had worked them out keeps its pools (:meth:`take`): some may then have
        no row."""
        at = {p: j for j, p in enumerate(dict.fromkeys(self.pool))}
        rows = np.fromiter(map(at.__getitem__, self.pool), dtype=np.intp, count=len(self.pool))
        return tuple(at), rows

    def in_pool(self, pool: str | None) -> NDArray[np.bool_]:
        """Per row, whether its pool is ``pool`` (decided per distinct pool)."""
        pools, rows = self.pool_rows
        out: NDArray[np.bool_] = np.array([p == pool for p in pools], dtype=bool)[rows]
        return out

    @cached_property
    def places(self) -> tuple[CandidateBatch, NDArray[np.intp]]:
        """The batch's distinct places and sizes (pool, device and CPU size), one pod each, and
        per row the index of its own among them: what depends on the place and size alone (a
        learned latency model's support) is asked once per place and size and looked up per
        row (a batch holds a few over hundreds of rows)."""
        _, pool = self.pool_rows
        order = np.lexsort((self.cpu, self.gpu, pool))
        # In that order, a row starts a new place unless it equals the one before it.
        same = np.zeros(len(self), dtype=bool)
        same[1:] = True
        for column in (self.cpu, self.gpu, pool):
            ranked = column[order]
            same[1:] &= ranked[1:] == ranked[:-1]
        first = ~same
        back = np.empty(len(self), dtype=np.intp)
        back[order] = np.cumsum(first) - 1
        sub = self.take(order[first])
        return CandidateBatch(np.ones(len(sub)), sub.cpu, sub.gpu, sub.pool), back

    @cached_property
    def answers(self) -> dict[object, NDArray[np.bool_]]:
        """Per asker, an answer per row that it worked out once for this batch (a learned
        model's support by :attr:`places`, the same at every load): the batch is asked the
        same question many times within a plan, at several loads and by several wrappers."""
        return {}

    def take(self, rows: NDArray[np.intp]) -> CandidateBatch:
        """The rows ``rows`` of this batch, in that order."""
        picked = rows.tolist()
        pool: tuple[str | None, ...]
        if len(picked) > 1:
            pool = itemgetter(*picked)(self.pool)   # C speed; one index gives a bare item
        else:
            pool = tuple(self.pool[i] for i in picked)
        out = CandidateBatch(self.replicas[rows], self.cpu[rows], self.gpu[rows], pool)
        known = self.__dict__.get("pool_rows")
        if known is not None:
            out.__dict__["pool_rows"] = (known[0], known[1][rows])
        return out

    def config(self, i: int) -> WorkloadConfig:
        return WorkloadConfig(int(self.replicas[i]), float(self.cpu[i]),
                              "gpu" if self.gpu[i] > 0.5 else "cpu", self.pool[i])


def runs_by_source(runs: NDArray[np.int64], source: NDArray[np.int64]) -> NDArray[np.int64]:
    """``runs`` (a predictor's :meth:`Predictor.runs`) cut where the row's ``source`` changes:
    what a wrapper that predicts some rows by another predictor returns (each source keeps
    the promise among its own rows)."""
    cut = np.ones(len(runs), dtype=bool)
    cut[1:] = (runs[1:] != runs[:-1]) | (source[1:] != source[:-1])
    return np.cumsum(cut, dtype=np.int64)


@dataclass(frozen=True)
class Prediction:
    """Per candidate: the expected value and a conservative bound (upper for KPIs that are
    minimised, lower for KPIs that are maximised), and whether the model has seen anything like
    the candidate (``False``: extrapolation, treat with caution)."""

    mean: FloatArray
    bound: FloatArray
    supported: NDArray[np.bool_]


class Predictor(ABC):
    """Predicts one objective's KPI for a batch of configurations.

    Contract: ``predict`` is pure (no I/O), vectorised over ``batch``, and returns arrays of
    ``len(batch)``, each row's values from that row alone (not from the rows beside it);
    ``inf`` latency means the configuration cannot carry the load. ``kind`` says where the
    prediction comes from (``explicit``, ``learned``, ...), for plan reasons. ``monotone``
    promises that for a fixed CPU size, device and pool, from two replicas on, more replicas
    never predict a worse bound nor turn a supported candidate unsupported (one replica,
    without redundancy, may differ either way: an availability model tells it apart); the grid
    planner searches a long replica axis in a window only where every predictor promises it
    (:meth:`runs`: a wrapper may keep the promise for some rows only).
    """

    kind: str = "predictor"
    monotone: bool = True

    def runs(self, batch: CandidateBatch, rate: float) -> NDArray[np.int64]:
        """A label per row of ``batch`` at ``rate``: :attr:`monotone`'s promise holds within
        every run of adjacent rows of one shape (CPU size, device, pool), at consecutive
        replica counts, that carry the same label. This default: one label for every row when
        :attr:`monotone`, else a label of its own per row (no promise anywhere); a wrapper
        that replaces some rows' predictions by another source's (measured speeds) keeps the
        promise within each source's rows."""
        n = len(batch)
        return np.zeros(n, dtype=np.int64) if self.monotone else np.arange(n, dtype=np.int64)

    @abstractmethod
    def predict(self, batch: CandidateBatch, rate: float) -> Prediction: ...

    def predict_mean(self, batch: CandidateBatch, rate: float) -> FloatArray:
        """``predict(batch, rate).mean``; a predictor whose bound costs more than its mean
        (a learned model's bootstrap ensemble) answers without computing the bound."""
        return self.predict(batch, rate).mean

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        """``predict(batch, rate).supported``; a predictor that can tell without predicting
        (a learned model: from the rows' features alone) answers without predicting."""
        return self.predict(batch, rate).supported

    def knows(self, batch: CandidateBatch) -> NDArray[np.bool_]:
        """Rows of a place and CPU size this predictor vouches for at some load: its support
        at next to none (:data:`KNOWS_RATE`), so only the place and size can refuse, not a
        load beyond what was seen. A measured speed or the estimate of a place left stands
        in for a place only where its models know nothing of it."""
        return self.supported(batch, KNOWS_RATE)

    def predict_mean_rates(self, batch: CandidateBatch, rates: Sequence[float]) -> FloatArray:
        """``(len(rates), len(batch))``: row ``i`` is :meth:`predict_mean` at ``rates[i]``
        (the same numbers). This default asks once per rate; a predictor that can evaluate
        several loads in one vectorised call (a learned model) overrides it."""
        out: FloatArray = np.array([self.predict_mean(batch, r) for r in rates],
                                   dtype=float).reshape(len(rates), len(batch))
        return out

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        """The prediction for pods ``factor`` times as fast as ``batch``'s (a place whose
        speed a trial measured relative to ``batch``'s). This default predicts ``batch`` at
        the load divided by ``factor``: the same utilisation, with ``batch``'s own service
        time, so for a latency it errs on the slow side. A model of the service rate (the
        learned latency model) scales its service rate instead."""
        return self.predict(batch, rate / factor)

    def supported_faster(self, batch: CandidateBatch, rate: float, factor: float
                         ) -> NDArray[np.bool_]:
        """``predict_faster(batch, rate, factor).supported`` (:meth:`supported` at factor 1);
        a predictor that can tell without predicting answers without predicting."""
        if factor == 1.0:
            return self.supported(batch, rate)
        return self.predict_faster(batch, rate, factor).supported

    def supported_faster_rows(self, batch: CandidateBatch, rate: float,
                              factors: FloatArray) -> NDArray[np.bool_]:
        """Row ``i`` as :meth:`supported_faster` with ``factors[i]`` answers for it. This
        default asks once per distinct factor; a predictor that tells support from the rows'
        features (the learned model) answers in one call."""
        ok = np.zeros(len(batch), dtype=bool)
        values, group = np.unique(factors, return_inverse=True)   # NaN is one group
        for k, f in enumerate(values.tolist()):
            rows = np.flatnonzero(group.reshape(-1) == k)
            ok[rows] = self.supported_faster(batch.take(rows), rate, f)
        return ok

    def predict_faster_rows(self, batch: CandidateBatch, rate: float,
                            factors: FloatArray) -> Prediction:
        """Row ``i`` as :meth:`predict_faster` with ``factors[i]`` gives it (:meth:`predict`'s
        where the factor is 1), the same numbers. This default asks once per distinct factor;
        a model of the service rate (the learned latency model) answers in one call."""
        mean, bound = np.empty(len(batch)), np.empty(len(batch))
        ok = np.zeros(len(batch), dtype=bool)
        values, group = np.unique(factors, return_inverse=True)   # NaN is one group
        for k, f in enumerate(values.tolist()):
            rows = np.flatnonzero(group.reshape(-1) == k)
            sub = batch.take(rows)
            p = self.predict(sub, rate) if f == 1.0 else self.predict_faster(sub, rate, f)
            mean[rows], bound[rows], ok[rows] = p.mean, p.bound, p.supported
        return Prediction(mean, bound, ok)

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        """:meth:`predict_faster`'s mean at each of ``rates`` (as :meth:`predict_mean_rates`
        is :meth:`predict_mean`'s)."""
        return self.predict_mean_rates(batch, [r / factor for r in rates])

    def cpu_speedup(self, cpu: float, reference_cpu: float) -> float:
        """How many times as many requests per second this predictor takes a pod of ``cpu``
        cores to serve as one of ``reference_cpu`` (same device and place): a speed measured
        between the two sizes, divided by this, is the :meth:`predict_faster` factor for the
        size's own rows. This default: in proportion to the cores (the explicit estimate's
        assumption); the learned latency model answers with its CPU exponent."""
        return cpu / reference_cpu
