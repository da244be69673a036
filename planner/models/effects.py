"""Effect models as stored in the ``effects`` collection, and their predictors.

A document holds one fitted estimator for one intent and objective (see
:mod:`knowledge.base` for the envelope) with metadata: training window, features, node pools
seen, sample count, validation score and library versions. :func:`from_document` refuses
anything it cannot trust (:class:`planner.models.serialization.ModelRefused`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import metadata as importlib_metadata
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator

from planner.models import serialization
from planner.models.availability import AvailabilityRegressor
from planner.models.latency import (
    BASE_COLUMNS,
    EXTRAPOLATION_MARGIN,
    QueueingLatencyRegressor,
)
from planner.models.observations import UNKNOWN_CLASS, feature_names, pool_code
from planner.models.predictor import CandidateBatch, FloatArray, Prediction, Predictor

log = logging.getLogger(__name__)

KIND_LATENCY = "queueing-latency"
KIND_AVAILABILITY = "availability"
KINDS: dict[str, type[BaseEstimator]] = {
    KIND_LATENCY: QueueingLatencyRegressor, KIND_AVAILABILITY: AvailabilityRegressor}


def library_versions() -> dict[str, str]:
    out = {}
    for dist in ("intent-planner", "scikit-learn", "numpy", "scipy"):
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


@dataclass(frozen=True)
class EffectModel:
    intent: str
    objective: str
    kind: str
    estimator: Any
    pools: tuple[str, ...]
    timestamp: float
    static: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    classes: tuple[str, ...] = ()
    """Node classes of the share columns (see :func:`planner.models.observations.node_mix`)."""

    def features(self, batch: CandidateBatch, rate: float,
                 mix: Mapping[str, float] | None = None,
                 gpu_mix: Mapping[str, float] | None = None) -> np.ndarray:
        """The model's columns for ``batch`` at ``rate``. A pinned candidate's pods all run in
        its pool; an unpinned one's are spread as ``mix`` says (node pool -> share; default:
        unknown), an unpinned GPU candidate's as ``gpu_mix`` says when given (GPU pods land
        only where there are GPUs). A row whose pods would run on a class the model does not
        know is all zero in the share columns (the model treats it as unsupported)."""
        # Per distinct pool once, then per row a look-up: the same values as asking each row.
        # The columns are written into one array (what stacking them gives, without the
        # stacking's per-call work).
        at, rows = batch.pool_rows
        k = len(self.classes)
        X = np.empty((len(batch), BASE_COLUMNS + k))
        X[:, 0] = rate
        X[:, 1] = batch.replicas
        X[:, 2] = batch.cpu
        X[:, 3] = batch.gpu
        X[:, 4] = np.array([pool_code(p, self.pools) for p in at], dtype=float)[rows]
        if not self.classes:
            return X
        unpinned = self._shares(mix)
        per_pool = np.zeros((len(at), k))
        index = self.class_index
        for j, pool in enumerate(at):
            if pool is None:
                per_pool[j] = unpinned
            elif pool in index:
                per_pool[j, index[pool]] = 1.0
        X[:, BASE_COLUMNS:] = per_pool[rows]
        if gpu_mix is not None and None in at:
            on_gpu = batch.gpu >= 0.5
            if on_gpu.any():
                on_gpu &= rows == at.index(None)
                X[on_gpu, BASE_COLUMNS:] = self._shares(gpu_mix)
        return X

    def _shares(self, mix: Mapping[str, float] | None) -> np.ndarray:
        """The share columns of pods spread as ``mix`` says (all zero when it names a class
        the model does not know)."""
        index = self.class_index
        out = np.zeros(len(self.classes))
        spread = dict(mix) if mix else {UNKNOWN_CLASS: 1.0}
        if all(c in index for c, v in spread.items() if v > 0):
            for c, v in spread.items():
                if v > 0:
                    out[index[c]] = v
        return out

    @cached_property
    def class_index(self) -> dict[str, int]:
        """Each node class's share column (see :attr:`classes`)."""
        return {c: i for i, c in enumerate(self.classes)}

    @property
    def samples(self) -> int:
        return int(getattr(self.estimator, "n_samples_", 0))


def to_document(model: EffectModel) -> dict[str, Any]:
    """The stored form of ``model``; ``metadata.model_sha256`` names the serialised estimator,
    so a reader holding a model can tell from the document without its blob whether it is
    still the stored one (:class:`planner.planners.effect_cache.EffectCache`)."""
    blob = serialization.dumps(model.estimator)
    return {
        "intent": model.intent, "objective": model.objective, "timestamp": model.timestamp,
        "static": model.static, "kind": model.kind, "format": serialization.FORMAT,
        "blob": blob,
        "metadata": {**model.metadata, "features": feature_names(model.classes),
                     "pools": list(model.pools), "classes": list(model.classes),
                     "samples": model.samples,
                     "format_version": serialization.FORMAT_VERSION,
                     "model_sha256": hashlib.sha256(blob).hexdigest()},
    }


def from_document(doc: dict[str, Any]) -> EffectModel:
    kind = doc.get("kind")
    if kind not in KINDS:
        raise serialization.ModelRefused(f"unknown model kind {kind!r}")
    if doc.get("format") != serialization.FORMAT:
        raise serialization.ModelRefused(f"unknown format {doc.get('format')!r}")
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise serialization.ModelRefused("no metadata")
    classes = meta.get("classes", [])
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise serialization.ModelRefused("metadata.classes must be a list of node pool names")
    want = feature_names(classes)
    if list(meta.get("features", [])) != want:
        raise serialization.ModelRefused(f"features {meta.get('features')!r} do not match "
                                         f"this planner's {want}")
    blob = doc.get("blob")
    if not isinstance(blob, bytes | bytearray):
        raise serialization.ModelRefused("no model blob")
    est = serialization.loads(bytes(blob))
    if not isinstance(est, KINDS[str(kind)]):
        raise serialization.ModelRefused(f"blob holds {type(est).__name__}, not a {kind} model")
    pools = meta.get("pools", [])
    if not isinstance(pools, list) or not all(isinstance(p, str) for p in pools):
        raise serialization.ModelRefused("metadata.pools must be a list of names")
    if isinstance(est, QueueingLatencyRegressor) and est.share_columns_ != len(classes):
        raise serialization.ModelRefused(f"the model has {est.share_columns_} node classes, "
                                         f"metadata.classes {len(classes)}")
    return EffectModel(str(doc.get("intent")), str(doc.get("objective")), str(kind), est,
                       tuple(pools), float(doc.get("timestamp", 0.0)), bool(doc.get("static")),
                       meta, tuple(classes))


def _fixed(mix: Mapping[str, float] | None) -> Mapping[str, float] | None:
    """A read-only copy of ``mix``: what a learned predictor answers depends on it, and its
    answers are kept per batch (:func:`_vouched`)."""
    return None if mix is None else MappingProxyType(dict(mix))


def _vouched(pred: LearnedKPI | LearnedThroughput, batch: CandidateBatch, rate: float
             ) -> NDArray[np.bool_]:
    """``pred``'s estimator's own support of ``batch``'s rows (without the load range; do not
    write to it). A latency model's depends on the rows' places and sizes alone
    (:meth:`QueueingLatencyRegressor.supported`), so it is asked once per place and size
    (:attr:`CandidateBatch.places`) and once per batch and predictor
    (:attr:`CandidateBatch.answers`): within a plan a batch is asked at several loads and by
    several wrappers (on gen-6429, half the support questions were repeats, about 870 rows
    each over a few dozen places and sizes; docs/benchmarks.md 62)."""
    est = pred.model.estimator
    if not isinstance(est, QueueingLatencyRegressor):
        out: NDArray[np.bool_] = est.supported(pred.model.features(batch, rate, pred.mix,
                                                                   pred.gpu_mix))
        return out
    known = batch.answers.get(pred)
    if known is None:
        sub, back = batch.places
        known = est.supported(pred.model.features(sub, 0.0, pred.mix, pred.gpu_mix))[back]
        known.flags.writeable = False
        batch.answers[pred] = known
    return known


class LearnedKPI(Predictor):
    """A learned model's own prediction: mean, conservative bound and support."""

    kind = "learned"

    def __init__(self, model: EffectModel, mix: Mapping[str, float] | None = None,
                 gpu_mix: Mapping[str, float] | None = None) -> None:
        self.model = model
        self.mix = _fixed(mix)
        self.gpu_mix = _fixed(gpu_mix)
        """Where unpinned GPU pods run (``None``: as ``mix`` says)."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        X = self.model.features(batch, rate, self.mix, self.gpu_mix)
        est: QueueingLatencyRegressor | AvailabilityRegressor = self.model.estimator
        mean, bound, supported = est.predict_with_support(X)
        return Prediction(mean, bound, supported & self.within_load_range(batch, rate))

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        """:meth:`predict`'s ``supported`` without predicting."""
        out: NDArray[np.bool_] = (_vouched(self, batch, rate)
                                  & self.within_load_range(batch, rate))
        return out

    def predict_mean(self, batch: CandidateBatch, rate: float) -> FloatArray:
        """The fitted model's prediction alone (no bootstrap ensemble)."""
        out: FloatArray = self.model.estimator.predict(
            self.model.features(batch, rate, self.mix, self.gpu_mix))
        return out

    def predict_mean_rates(self, batch: CandidateBatch, rates: Sequence[float]) -> FloatArray:
        """:meth:`predict_mean` at each of ``rates`` in one evaluation of the fitted model:
        ``batch``'s feature rows repeated once per rate, the rate column set to that rate.
        Both estimators predict each row from that row alone, so every row is the number
        :meth:`predict_mean` gives for it alone (tested bit for bit)."""
        X = self._at_rates(batch, rates)
        out: FloatArray = self.model.estimator.predict(X).reshape(len(rates), len(batch))
        return out

    def _at_rates(self, batch: CandidateBatch, rates: Sequence[float]) -> np.ndarray:
        """``batch``'s feature rows repeated once per rate, the rate column set to it."""
        X = np.tile(self.model.features(batch, 0.0, self.mix, self.gpu_mix), (len(rates), 1))
        X[:, 0] = np.repeat(np.asarray(rates, dtype=float), len(batch))
        return X

    def predict_faster(self, batch: CandidateBatch, rate: float, factor: float) -> Prediction:
        """A latency model's prediction with its service rate scaled by ``factor`` (vouched
        for where ``batch`` is, at the load per core of ``batch``'s pods at ``rate / factor``);
        other models: the default (the load divided by ``factor``)."""
        if self.model.kind != KIND_LATENCY:
            return super().predict_faster(batch, rate, factor)
        X = self.model.features(batch, rate, self.mix, self.gpu_mix)
        mean, bound, supported = self.model.estimator.predict_with_support(X, speedup=factor)
        return Prediction(mean, bound, supported & self.within_load_range(batch, rate / factor))

    def supported_faster(self, batch: CandidateBatch, rate: float, factor: float
                         ) -> NDArray[np.bool_]:
        """:meth:`predict_faster`'s ``supported`` from the rows' features alone (another
        model than a latency's predicts pods ``factor`` times as fast at the load divided by
        ``factor``: its support there)."""
        if factor == 1.0:
            return self.supported(batch, rate)
        if self.model.kind != KIND_LATENCY:
            return self.supported(batch, rate / factor)
        out: NDArray[np.bool_] = (_vouched(self, batch, rate)
                                  & self.within_load_range(batch, rate / factor))
        return out

    def supported_faster_rows(self, batch: CandidateBatch, rate: float,
                              factors: FloatArray) -> NDArray[np.bool_]:
        """A latency model: :meth:`supported_faster` with a factor per row, from one set of
        features (a row's support depends on its own row and factor alone); other models:
        the default."""
        if self.model.kind != KIND_LATENCY:
            return super().supported_faster_rows(batch, rate, factors)
        out: NDArray[np.bool_] = (_vouched(self, batch, rate)
                                  & self.within_load_range(batch, rate, factors))
        return out

    def predict_faster_rows(self, batch: CandidateBatch, rate: float,
                            factors: FloatArray) -> Prediction:
        """A latency model: :meth:`predict_faster` with a factor per row, in one evaluation
        (each row's numbers those of its factor alone); other models: the default."""
        if self.model.kind != KIND_LATENCY:
            return super().predict_faster_rows(batch, rate, factors)
        X = self.model.features(batch, rate, self.mix, self.gpu_mix)
        mean, bound, supported = self.model.estimator.predict_with_support(
            X, speedup=np.asarray(factors, dtype=float))
        return Prediction(mean, bound, supported & self.within_load_range(batch, rate, factors))

    def cpu_speedup(self, cpu: float, reference_cpu: float) -> float:
        """A latency model: ``(cpu / reference_cpu) ** alpha``, its fitted CPU exponent (its
        prior until two sizes were seen); other models: the default."""
        est = self.model.estimator
        if self.model.kind != KIND_LATENCY or not isinstance(est, QueueingLatencyRegressor):
            return super().cpu_speedup(cpu, reference_cpu)
        return float((cpu / reference_cpu) ** est.cpu_exponent())

    def predict_mean_rates_faster(self, batch: CandidateBatch, rates: Sequence[float],
                                  factor: float) -> FloatArray:
        if self.model.kind != KIND_LATENCY:
            return super().predict_mean_rates_faster(batch, rates, factor)
        X = self._at_rates(batch, rates)
        out: FloatArray = self.model.estimator.predict_faster(X, factor).reshape(
            len(rates), len(batch))
        return out

    def within_load_range(self, batch: CandidateBatch, rate: float,
                          factors: FloatArray | None = None) -> NDArray[np.bool_]:
        """Candidates whose load per core is at most :data:`EXTRAPOLATION_MARGIN` times the
        highest the model saw below saturation on that device (all of them when the model's
        metadata does not say: models trained before it was recorded). A model fitted on calm
        minutes knows nothing of a pod carrying five times that load. ``factors``: per row,
        the load is ``rate`` divided by it (pods that many times as fast)."""
        seen = self.model.metadata.get("load_per_core_max")
        ok = np.ones(len(batch), dtype=bool)
        if self.model.kind != KIND_LATENCY or not isinstance(seen, Mapping):
            return ok
        load = rate if factors is None else rate / np.asarray(factors, dtype=float)
        per_core = load / np.maximum(batch.replicas * batch.cpu, 1e-9)
        for name, rows in (("cpu", batch.gpu < 0.5), ("gpu", batch.gpu >= 0.5)):
            top = seen.get(name)
            if isinstance(top, int | float) and top > 0:
                ok &= ~rows | (per_core <= EXTRAPOLATION_MARGIN * float(top))
        return ok


LearnedLatency = LearnedKPI
LearnedAvailability = LearnedKPI


class LearnedThroughput(Predictor):
    """Throughput from the learned latency model's capacity: ``min(rate, capacity)``."""

    kind = "learned"

    def __init__(self, model: EffectModel, mix: Mapping[str, float] | None = None,
                 gpu_mix: Mapping[str, float] | None = None) -> None:
        self.model = model
        self.mix = _fixed(mix)
        self.gpu_mix = _fixed(gpu_mix)
        """Where unpinned GPU pods run (``None``: as ``mix`` says)."""

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        X = self.model.features(batch, rate, self.mix, self.gpu_mix)
        est: QueueingLatencyRegressor = self.model.estimator
        cap = est.capacity(X)
        served = np.minimum(rate, cap)
        return Prediction(served, np.minimum(rate, cap * 0.9), est.supported(X))

    def supported(self, batch: CandidateBatch, rate: float) -> NDArray[np.bool_]:
        """:meth:`predict`'s ``supported`` from the rows' features alone, without the
        capacity (asked at every measured speed and place left, docs/benchmarks.md 61)."""
        out: NDArray[np.bool_] = _vouched(self, batch, rate).copy()
        return out
