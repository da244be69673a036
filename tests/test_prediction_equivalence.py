"""Cheaper latency prediction, the same numbers: the M/M/c mixture solve and the learned latency
model's ensemble evaluation against frozen copies of the implementations they replaced
(commit e7f8a4f), compared exactly (NaN and inf aware), so no plan can change."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from planner.models import sojourn
from planner.models.latency import (
    N_FIXED,
    STACKED_ROWS,
    QueueingLatencyRegressor,
)
from planner.models.sojourn import SATURATION, mixture_sojourn_quantile

FloatArray = NDArray[np.float64]


# -- the mixture solve as it was (planner/models/sojourn.py at e7f8a4f), verbatim but for the
# survival terms (Erlang C), which the rewrite did not touch: the current ones are used
def _old_row_sum(a: FloatArray) -> FloatArray:
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out += a[:, j]
    return out


def _old_newton(q: float, terms: Any, iterations: int) -> FloatArray:
    stable, s, theta, a1, a2 = terms
    log_p = math.log(1.0 - q)
    t = np.zeros_like(s)
    for _ in range(iterations):
        e1 = a1 * np.exp(-s * t)
        e2 = a2 * np.exp(-theta * t)
        surv = np.maximum(e1 + e2, 1e-300)
        slope = np.minimum(-s * e1 - theta * e2, -1e-300)
        t = t - (np.log(surv) - log_p) * surv / slope
    out: FloatArray = np.where(stable, t, np.inf)
    return out


def old_mixture_sojourn_quantile(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray,
                                 weight: FloatArray, iterations: int = 8) -> FloatArray:
    terms = sojourn._survival_terms(lam, mu, c)      # not rewritten: the current one
    per = _old_newton(q, terms, 7)
    if lam.shape[1] == 1:
        out1: FloatArray = per[:, 0]
        return out1
    present = weight > 0
    lo = np.min(np.where(present, per, np.inf), axis=1)
    hi = np.max(np.where(present, per, -np.inf), axis=1)
    ok = np.isfinite(hi) & np.isfinite(lo)
    _, s, theta, a1, a2 = terms
    w = np.where(present, weight, 0.0)
    log_p = math.log(1.0 - q)
    t = np.where(ok, lo, 0.0)
    hi_f = np.where(ok, hi, 0.0)
    lo_f = t.copy()
    wa1, wa2 = w * a1, w * a2
    for _ in range(iterations):
        e1 = wa1 * np.exp(-s * t[:, None])
        e2 = wa2 * np.exp(-theta * t[:, None])
        surv = np.maximum(_old_row_sum(e1 + e2), 1e-300)
        slope = np.minimum(_old_row_sum(-s * e1 - theta * e2), -1e-300)
        t = np.clip(t - (np.log(surv) - log_p) * surv / slope, lo_f, hi_f)
    out: FloatArray = np.where(ok, t, np.inf)
    return out


# -- inputs: what the latency model passes (per row one server count, weights from shares and
# dispatch pulls: one-hot, some classes absent, all present), now and then an odd value
ODD = (0.0, -0.0, -1.0, 1e-320, 1e-250, 1e250, np.inf, -np.inf, np.nan)
ODD_SERVERS = (0.0, -1.0, 0.5, 64.0, 100.0)
"""(Not NaN, inf or huge: the Erlang C loop runs to the largest server count.)"""


@st.composite
def mixture_inputs(draw: Any) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
    n = draw(st.integers(1, 40))
    k = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mu = np.exp(rng.uniform(math.log(0.5), math.log(5e4), (n, k)))
    util = rng.choice([rng.uniform(0.0, 1.1), 0.0, SATURATION, 0.97999, 0.5], (n, k))
    lam = mu * np.where(rng.random((n, k)) < 0.7, rng.uniform(0.0, 1.1, (n, k)), util)
    c = np.broadcast_to(rng.integers(1, 9, n).astype(float)[:, None], (n, k))
    if draw(st.booleans()):                      # not always one count per row
        c = rng.integers(1, 65, (n, k)).astype(float)
    kind = rng.integers(0, 4, n)                 # one-hot, some absent, all present, zeros
    w = rng.dirichlet(np.ones(k), n)
    hot = rng.integers(0, k, n)
    w = np.where((kind == 0)[:, None], np.eye(k)[hot], w)
    w = np.where((kind == 1)[:, None] & (rng.random((n, k)) < 0.5), 0.0, w)
    w = np.where((kind == 3)[:, None], 0.0, w)
    w = np.divide(w, w.sum(axis=1, keepdims=True), out=np.zeros_like(w),
                  where=w.sum(axis=1, keepdims=True) > 0)
    if draw(st.booleans()):
        arrays = [lam, mu, w] + ([c] if c.flags.writeable else [])
        for _ in range(draw(st.integers(1, 6))):
            i = draw(st.integers(0, len(arrays) - 1))
            arrays[i][draw(st.integers(0, n - 1)), draw(st.integers(0, k - 1))] = draw(
                st.sampled_from(ODD_SERVERS if i == 3 else ODD))
    q = draw(st.sampled_from((0.5, 0.9, 0.95, 0.99, 0.999)))
    return q, lam, mu, c, w


def same(a: FloatArray, b: FloatArray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


@settings(max_examples=600, deadline=None)
@given(mixture_inputs())
def test_the_mixture_quantile_is_the_old_one(case: Any) -> None:
    """Rows with one present class solved as that class alone (and whatever else changed in
    the solve): exactly the old numbers, odd inputs included."""
    q, lam, mu, c, w = case
    with np.errstate(all="ignore"):
        want = old_mixture_sojourn_quantile(q, lam, mu, c, w)
        got = mixture_sojourn_quantile(q, lam, mu, c, w)
    assert same(got, want), (got, want)


# -- the latency model's evaluation as it was (planner/models/latency.py at e7f8a4f), verbatim
# but for ``self`` (a fitted QueueingLatencyRegressor), the old mixture solve and its class
# quantities (``_classes``, which the rewrite did not touch: the current one)
def old_forward(self: QueueingLatencyRegressor, theta: FloatArray, X: FloatArray,
                shares: FloatArray | None = None) -> FloatArray:
    k = self.n_classes_
    t = np.broadcast_to(np.asarray(theta, dtype=float), (X.shape[0], N_FIXED + 2 * k))
    f, speed, pull, mu = self._classes(t, X, shares)    # not rewritten: the current one
    rate, replicas, cpu = X[:, 0], X[:, 1], X[:, 2]
    c = np.clip(np.floor(cpu), 1.0, 64.0)
    norm = (f * pull).sum(axis=1)
    lam = (rate / np.maximum(replicas, 1e-9) / norm)[:, None] * pull
    weight = f * pull / norm[:, None]
    mus = mu[:, None] * speed
    cs = np.broadcast_to(c[:, None], lam.shape)
    q = old_mixture_sojourn_quantile(self.quantile, lam, mus, cs, weight)
    offsets = (weight * t[:, N_FIXED + k:N_FIXED + 2 * k]).sum(axis=1)
    out: FloatArray = np.maximum(t[:, 3], 0.0) + offsets + q
    return out


def old_forward_many(self: QueueingLatencyRegressor, thetas: FloatArray, X: FloatArray,
                     shares: FloatArray | None = None) -> FloatArray:
    thetas = np.asarray(thetas, dtype=float)
    m, n = len(thetas), X.shape[0]
    f = self._shares(X) if shares is None else shares
    out: FloatArray = np.empty((m, n))
    per_solve = max(1, STACKED_ROWS // max(n, 1))
    for start in range(0, m, per_solve):
        chunk = thetas[start:start + per_solve]
        rows = np.repeat(chunk, n, axis=0)
        out[start:start + len(chunk)] = old_forward(
            self, rows, np.tile(X, (len(chunk), 1)), np.tile(f, (len(chunk), 1))
        ).reshape(len(chunk), n)
    return out


@st.composite
def fitted_models(draw: Any) -> tuple[QueueingLatencyRegressor, FloatArray]:
    """A latency model as a fit leaves it (parameters within the fit's bounds, a bootstrap
    ensemble near the fit) and a batch of candidate rows: pinned to one class, spread, or
    unknown; with share columns or pool codes only."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(1, 4))
    with_shares = draw(st.booleans())
    est = QueueingLatencyRegressor(quantile=draw(st.sampled_from((0.5, 0.9, 0.95, 0.99))))
    est.n_classes_ = k
    est.share_columns_ = k if with_shares else 0
    est.residual_scale_ = float(rng.uniform(0.0, 0.5))

    def theta() -> FloatArray:
        return np.concatenate([[rng.uniform(math.log(1e-3), math.log(1e6)),
                                rng.uniform(0.3, 1.2), rng.uniform(-1.0, 6.0),
                                rng.choice([0.0, rng.uniform(0.0, 500.0)]), rng.uniform(0, 1)],
                               rng.uniform(-2.5, 2.5, k) * (rng.random(k) < 0.7),
                               rng.choice([0.0, 5.0, -3.0, 1e3], k)])

    est.theta_ = theta()
    m = draw(st.sampled_from((0, 1, 8)))
    spread = rng.choice([0.0, 1e-3, 0.05, 1.0])
    est.bootstrap_thetas_ = (est.theta_ + spread * rng.standard_normal((m, len(est.theta_)))
                             if draw(st.booleans()) else
                             np.array([theta() for _ in range(m)]).reshape(m, len(est.theta_)))
    n = draw(st.integers(1, 60))
    rate = np.exp(rng.uniform(math.log(0.1), math.log(1e5), n)) * (rng.random(n) < 0.95)
    cols = [rate, rng.integers(0, 200, n).astype(float),
            rng.choice([0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 100.0], n),
            (rng.random(n) < 0.3).astype(float), rng.integers(-1, k, n).astype(float)]
    X = np.column_stack(cols)
    if with_shares:
        shares = rng.dirichlet(np.ones(k), n) * (rng.random((n, k)) < 0.6)
        shares = np.where((rng.random(n) < 0.5)[:, None], np.eye(k)[rng.integers(0, k, n)],
                          shares)
        X = np.column_stack([X, shares * rng.choice([1.0, 3.0], (n, 1))])
    return est, X


@settings(max_examples=300, deadline=None)
@given(fitted_models())
def test_the_latency_model_predicts_what_it_did(case: Any) -> None:
    """The ensemble evaluated with per-vector quantities computed once per vector and the
    one-class rows solved alone: the same means and bounds, and the same single-vector
    predictions, as the old stacked evaluation (exactly, inf and NaN included)."""
    est, X = case
    with np.errstate(all="ignore"):
        thetas = np.vstack([est.theta_[None, :], est.bootstrap_thetas_])
        want = old_forward_many(est, thetas, X)
        assert same(est._forward_many(thetas, X), want)
        # predict_with_bound's mean is the fitted vector's row (its bound is derived from the
        # rows by code the rewrite did not touch)
        assert same(est.predict_with_bound(X)[0], want[0])
        assert same(est.predict(X), old_forward(est, est.theta_, X))
        per_row = np.repeat(thetas, X.shape[0], axis=0)[:X.shape[0]]
        assert same(est._forward(per_row, X), old_forward(est, per_row, X))


@settings(max_examples=300, deadline=None)
@given(mixture_inputs(), st.integers(0, 9), st.booleans())
def test_the_single_queue_quantile_is_the_old_one(case: Any, iterations: int,
                                                 broadcast: bool) -> None:
    """Newton's method on one queue per element, written into reused work arrays: the old
    iterates exactly, for any number of steps, also when the inputs only broadcast together
    (one server count, one service rate for every row)."""
    q, lam, mu, c, _ = case
    if broadcast:
        mu, c = mu[:1, :1], c[:1, :1]
    with np.errstate(all="ignore"):
        terms = sojourn._survival_terms(lam, mu, c)
        want = _old_newton(q, terms, iterations)
        got = sojourn._newton(q, terms, iterations)
    assert same(got, want), (got, want)


# -- the latency model's batches as the grid planner asks them: hundreds of replica counts of
# one shape, so every row has the same node classes present (some classes absent from the
# whole call), many rows saturated; each parameter vector a block of rows
@st.composite
def planner_batches(draw: Any) -> tuple[float, FloatArray, FloatArray, FloatArray, FloatArray]:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(2, 10))
    m = draw(st.sampled_from((1, 3, 9)))
    reps = np.arange(1.0, draw(st.integers(2, 400)) + 1.0)
    n = len(reps)
    mix = rng.dirichlet(np.ones(k)) * (rng.random(k) < draw(st.sampled_from((0.3, 0.7, 1.0))))
    if not mix.any():
        mix[rng.integers(0, k)] = 1.0
    pull = np.exp(rng.uniform(-2.5, 2.5, (m, 1, k)) * rng.uniform(0, 1, (m, 1, 1)))
    fp = mix[None, None, :] * pull
    norm = fp.sum(axis=2)
    rate = np.exp(rng.uniform(math.log(1.0), math.log(5e4)))
    lam = (rate / reps[None, :] / norm)[:, :, None] * pull
    weight = np.broadcast_to(fp / norm[:, :, None], (m, n, k)).copy()
    mu = np.exp(rng.uniform(math.log(1.0), math.log(2e3), (m, 1, 1))) * pull ** rng.uniform(
        0.0, 1.0) * np.ones((1, n, 1))
    cpu = draw(st.sampled_from((1.0, 2.0, 4.0, 0.5)))
    c = np.broadcast_to(np.array([max(1.0, math.floor(cpu))]), (m * n, k))
    shape = (m * n, k)
    lam, mu, weight = lam.reshape(shape), mu.reshape(shape), weight.reshape(shape)
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 4))):
            a = draw(st.sampled_from((lam, mu, weight)))
            a[rng.integers(0, m * n), rng.integers(0, k)] = draw(st.sampled_from(ODD))
    q = draw(st.sampled_from((0.5, 0.9, 0.95, 0.99)))
    return q, lam, mu, c, weight


@settings(max_examples=300, deadline=None)
@given(planner_batches())
def test_the_mixture_quantile_of_planner_batches_is_the_old_one(case: Any) -> None:
    """Saturated rows answered ``inf`` unsolved, classes absent from every row left out of the
    solve, settled Newton iterates set aside: exactly the old numbers on batches shaped like
    the grid planner's (and with an odd value here and there)."""
    q, lam, mu, c, w = case
    with np.errstate(all="ignore"):
        want = old_mixture_sojourn_quantile(q, lam, mu, c, w)
        got = mixture_sojourn_quantile(q, lam, mu, c, w)
    assert same(got, want), (got, want)


@settings(max_examples=300, deadline=None)
@given(mixture_inputs(), st.integers(0, 9), st.booleans())
def test_newton_with_settled_iterates_set_aside_is_the_old_one(case: Any, iterations: int,
                                                                broadcast: bool) -> None:
    """Setting aside the iterates that stopped changing, on every call however small: the
    old iterates exactly, for any number of steps, broadcast inputs included; and so the
    mixture's."""
    q, lam, mu, c, w = case
    if broadcast:
        mu, c = mu[:1, :1], c[:1, :1]
    old_min = sojourn.SETTLE_MIN
    sojourn.SETTLE_MIN = 0
    try:
        with np.errstate(all="ignore"):
            terms = sojourn._survival_terms(lam, mu, c)
            assert same(sojourn._newton(q, terms, iterations),
                        _old_newton(q, terms, iterations))
            if not broadcast:
                assert same(mixture_sojourn_quantile(q, lam, mu, c, w),
                            old_mixture_sojourn_quantile(q, lam, mu, c, w))
    finally:
        sojourn.SETTLE_MIN = old_min


def test_absent_classes_out_of_range_still_enter_the_mixture() -> None:
    """A class absent from every row but with inputs out of range (here a NaN service rate:
    its terms are NaN, and ``0 * NaN`` makes the old mixture NaN) is solved with the others,
    so the answer stays the old one; in range, it is left out and the answer is the same."""
    rng = np.random.default_rng(7)
    n, k = 50, 3
    mu = rng.uniform(50.0, 100.0, (n, k))
    lam = mu * rng.uniform(0.1, 0.9, (n, k))
    c = np.ones((n, k))
    w = np.column_stack([np.full(n, 0.4), np.zeros(n), np.full(n, 0.6)])
    for odd in (np.nan, np.inf, 0.0, 75.0):
        mu[:, 1] = odd
        with np.errstate(all="ignore"):
            assert same(mixture_sojourn_quantile(0.95, lam, mu, c, w),
                        old_mixture_sojourn_quantile(0.95, lam, mu, c, w)), odd


def old_supported(self: QueueingLatencyRegressor, X: FloatArray) -> NDArray[np.bool_]:
    """``supported`` as it was at f9f11cd (``np.isclose``, the shares worked out again)."""
    gpu = X[:, 3] > 0.5
    dev_ok = np.where(gpu, self.seen_gpu_, self.seen_cpu_device_)
    shares = self._shares(X)
    unseen = np.ones(self.n_classes_, dtype=bool)
    unseen[self.seen_classes_] = False
    if self.share_columns_ == 0:
        codes = X[:, 4].astype(int)
        known = (codes >= -1) & (codes < self.n_classes_ - 1)
    else:
        known = shares.sum(axis=1) > 0
    class_ok = known & ~(shares[:, unseen] > 0).any(axis=1)
    lo, hi = self.cpu_range_
    if len(self.cpu_sizes_) < 2:
        cpu_ok = np.isclose(X[:, 2], lo)
    else:
        cpu_ok = (X[:, 2] >= lo / 1.5) & (X[:, 2] <= hi * 1.5)
    out: NDArray[np.bool_] = dev_ok & class_ok & cpu_ok
    return out


@settings(max_examples=200, deadline=None)
@given(fitted_models(), st.sampled_from((0.1, 0.5, 1.0, 2.0, 1e-300, 0.0, np.inf, np.nan)),
       st.booleans(), st.data())
def test_prediction_with_support_and_the_cached_ensemble(case: Any, lo: float, one_size: bool,
                                                         data: Any) -> None:
    """``predict_with_support`` is ``predict_with_bound`` and ``supported``; ``supported`` is
    what it was; the ensemble's per-vector terms, kept on the model, follow a reassigned
    ``theta_`` or ``bootstrap_thetas_`` (as a refit or a load sets them)."""
    est, X = case
    k = est.n_classes_
    est.seen_gpu_, est.seen_cpu_device_ = data.draw(st.booleans()), True
    est.seen_classes_ = sorted(data.draw(st.sets(st.integers(0, k - 1))))
    est.cpu_classes_ = est.gpu_classes_ = list(est.seen_classes_)   # both devices on each
    est.cpu_range_ = (lo, lo) if one_size else (lo, 4.0)
    est.cpu_sizes_ = [lo] if one_size else [lo, 4.0]
    odd = X.copy()     # CPU sizes at and near the one seen (a NaN size is not predicted)
    edge = lo + (1e-8 + 1e-5 * abs(lo))    # np.isclose's tolerance, at its edge
    odd[::3, 2] = [data.draw(st.sampled_from((lo, np.nextafter(lo, 0.0), lo * (1 + 1e-6), edge,
                                              np.nextafter(edge, np.inf), 1.0, np.inf,
                                              np.nan))) for _ in odd[::3, 2]]
    with np.errstate(all="ignore"):
        assert est.supported(odd).tolist() == old_supported(est, odd).tolist()
        mean, bound, ok = est.predict_with_support(X)
        want_mean, want_bound = est.predict_with_bound(X)
        assert same(mean, want_mean) and same(bound, want_bound)
        assert ok.tolist() == est.supported(X).tolist() == old_supported(est, X).tolist()
        fresh = QueueingLatencyRegressor(quantile=est.quantile)
        fresh.__dict__.update({n: v for n, v in est.__dict__.items() if n.endswith("_")})
        assert same(fresh.predict_with_bound(X)[1], bound)
        for name, value in (("theta_", est.theta_ + 0.25),
                            ("bootstrap_thetas_", est.bootstrap_thetas_[::-1] * 1.01)):
            setattr(est, name, value)
            thetas = np.vstack([est.theta_[None, :], est.bootstrap_thetas_])
            want = old_forward_many(est, thetas, X)
            mean, bound, _ = est.predict_with_support(X)
            assert same(mean, want[0])
            fresh = QueueingLatencyRegressor(quantile=est.quantile)   # nothing kept yet
            fresh.__dict__.update({n: v for n, v in est.__dict__.items() if n.endswith("_")})
            assert same(bound, fresh.predict_with_bound(X)[1])


def old_erlang_c(c: FloatArray, a: FloatArray) -> FloatArray:
    """``sojourn.erlang_c`` as it was at f9f11cd."""
    cmax = int(np.max(c)) if c.size else 1
    term = np.ones_like(a)
    total = np.ones_like(a)
    for k in range(1, cmax):
        term = np.where(k < c, term * a / k, term)
        total = np.where(k < c, total + term, total)
    last = term * a / c / np.maximum(1.0 - a / c, 1e-12)
    out: FloatArray = last / (total + last)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from((0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 64.0)), min_size=1,
                max_size=12),
       st.lists(st.sampled_from((*ODD, 0.3, 1.7, 3.9, 63.0)), min_size=1, max_size=12),
       st.booleans())
def test_erlang_c_is_the_old_one(servers: list[float], loads: list[float],
                                 per_row: bool) -> None:
    """Steps below every row's server count taken without the masks: the same numbers."""
    n = max(len(servers), len(loads))
    c = np.resize(np.asarray(servers), n)
    a = np.resize(np.asarray(loads), n)
    if per_row:        # a server count per row, broadcast over classes (the latency model's)
        c = np.broadcast_to(c[None, :], (3, n))
        a = np.vstack([a, a[::-1], a * 0.5])
    with np.errstate(all="ignore"):
        assert same(sojourn.erlang_c(c, a), old_erlang_c(c, a))
