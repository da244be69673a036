"""A learned latency model's support is asked once per place and size and once per batch
(:attr:`CandidateBatch.places`, :attr:`CandidateBatch.answers`): every answer is the one the
rows' own features give, whatever was asked of the batch before (docs/benchmarks.md 62)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.models import serialization
from planner.models.effects import (
    KIND_LATENCY,
    EffectModel,
    LearnedKPI,
    LearnedThroughput,
)
from planner.models.latency import QueueingLatencyRegressor
from planner.models.predictor import CandidateBatch
from planner.models.sojourn import sojourn_quantile

SIZES = (0.25, 0.5, 1.0, 2.0, 4.0)


def _batch(rng: np.random.Generator, pools: tuple[str | None, ...]) -> CandidateBatch:
    """Random rows; sometimes taken from a larger batch whose pools were worked out (it
    carries them, some perhaps with no row), sometimes empty."""
    n = int(rng.integers(1, 90))
    out = CandidateBatch(rng.integers(1, 60, n).astype(float), rng.choice(SIZES, n),
                         (rng.random(n) < 0.4).astype(float),
                         tuple(pools[i] for i in rng.integers(0, len(pools), n).tolist()))
    if rng.random() < 0.4:
        assert len(out.pool_rows[1]) == n
        out = out.take(rng.integers(0, n, int(rng.integers(0, 2 * n))))
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_places_map_each_row_to_its_own_place_and_size(seed: int) -> None:
    rng = np.random.default_rng(seed)
    batch = _batch(rng, (None, "a", "b", "c"))
    sub, back = batch.places
    assert len(set(zip(sub.pool, sub.cpu.tolist(), sub.gpu.tolist(), strict=True))) == len(sub)
    for i in range(len(batch)):
        j = int(back[i])
        assert (sub.pool[j], sub.cpu[j], sub.gpu[j]) == (batch.pool[i], batch.cpu[i],
                                                         batch.gpu[i])


def _model(rng: np.random.Generator) -> EffectModel:
    """A latency model's state as a fit leaves what its support reads: node classes seen
    (with share columns, or one class per pool code), which device ran where, CPU sizes;
    sometimes a real fit, stored and loaded back."""
    k = int(rng.integers(1, 4))
    names = tuple(f"p{i}" for i in range(k))
    with_shares = bool(rng.random() < 0.6)
    meta = {"load_per_core_max": {"cpu": 30.0, "gpu": 400.0}}
    if rng.random() < 0.25:
        return EffectModel("ns/app", "p95", KIND_LATENCY, _fitted(rng, k, with_shares),
                           names, 0.0, False, meta, names if with_shares else ())
    est = QueueingLatencyRegressor()
    est.share_columns_ = k if with_shares else 0
    est.n_classes_ = k if with_shares else k + 1
    seen = sorted({int(i) for i in rng.integers(0, est.n_classes_, int(rng.integers(1, 4)))})
    est.seen_classes_ = seen
    cpu_side = [c for c in seen if rng.random() < 0.7]
    est.cpu_classes_ = cpu_side
    est.gpu_classes_ = [c for c in seen if c not in cpu_side or rng.random() < 0.3]
    est.seen_cpu_device_ = bool(cpu_side)
    est.seen_gpu_ = bool(est.gpu_classes_)
    sizes = sorted({float(s) for s in rng.choice(SIZES, int(rng.integers(1, 3)))})
    est.cpu_sizes_ = sizes
    est.cpu_range_ = (sizes[0], sizes[-1])
    return EffectModel("ns/app", "p95", KIND_LATENCY, est, names, 0.0, False, meta,
                       names if with_shares else ())


def _fitted(rng: np.random.Generator, k: int, with_shares: bool) -> QueueingLatencyRegressor:
    """A small fit on M/M/c pods in some of ``k`` pools, some on GPUs, through the stored
    form (:func:`planner.models.serialization.dumps` and ``loads``)."""
    n = 40
    pool = rng.integers(0, k, n)
    cpu = rng.choice(SIZES[:3], n)
    gpu = (rng.random(n) < 0.3).astype(float)
    X = np.column_stack([rng.uniform(20, 300, n), rng.integers(4, 20, n), cpu, gpu,
                         pool.astype(float)])
    if with_shares:
        X = np.column_stack([X, np.eye(k)[pool]])
    mu = 50.0 * cpu**0.8 * np.where(gpu > 0.5, 5.0, 1.0)
    y = 5.0 + sojourn_quantile(0.95, X[:, 0] / X[:, 1], mu, np.floor(np.maximum(cpu, 1.0)))
    ok = np.isfinite(y)
    est = QueueingLatencyRegressor(n_bootstrap=0).fit(X[ok], y[ok])
    out = serialization.loads(serialization.dumps(est))
    assert isinstance(out, QueueingLatencyRegressor)
    return out


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_support_asked_by_place_is_each_rows_own(seed: int) -> None:
    """Several predictors of one model (other node mixes, the throughput) ask one batch at
    several loads and speeds, in any order: each answer is its rows' own features' support
    (and the load range), as before the answers were shared."""
    rng = np.random.default_rng(seed)
    model = _model(rng)
    names = [f"p{i}" for i in range(len(model.pools))]

    def mix() -> dict[str, float] | None:
        if rng.random() < 0.3:
            return None
        return {n: float(v) for n, v in zip(names, rng.dirichlet(np.ones(len(names))),
                                            strict=True)}

    kpis = [LearnedKPI(model, mix()), LearnedKPI(model, mix(), mix())]
    throughput = LearnedThroughput(model, mix())
    batch = _batch(rng, (None, "zz", *names))
    for _ in range(8):
        pick = int(rng.integers(0, len(kpis) + 1))
        rate = float(rng.uniform(0.0, 3000.0))
        if pick == len(kpis):
            X = model.features(batch, rate, throughput.mix, throughput.gpu_mix)
            got = throughput.supported(batch, rate)
            assert np.array_equal(got, model.estimator.supported(X))
            got[:] = ~got             # the caller's to change: the next answer is unchanged
            continue
        p = kpis[pick]
        own = model.estimator.supported(model.features(batch, rate, p.mix, p.gpu_mix))
        how = int(rng.integers(0, 3))
        if how == 0:
            want = own & p.within_load_range(batch, rate)
            got = p.supported(batch, rate)
        elif how == 1:
            f = float(rng.choice([0.3, 2.0, 25.0]))
            want = own & p.within_load_range(batch, rate / f)
            got = p.supported_faster(batch, rate, f)
        else:
            fs = rng.choice([1.0, 0.3, 2.0, 25.0], len(batch))
            want = own & p.within_load_range(batch, rate, fs)
            got = p.supported_faster_rows(batch, rate, fs)
        assert np.array_equal(got, want)
        got[:] = ~got                 # the caller's to change: the next answer is unchanged
        assert np.array_equal(p.knows(batch), own & p.within_load_range(batch, 1e-3))
