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

from planner.models.sojourn import SATURATION, mixture_sojourn_quantile

FloatArray = NDArray[np.float64]


# -- the mixture solve as it was (planner/models/sojourn.py at e7f8a4f), verbatim
def _old_row_sum(a: FloatArray) -> FloatArray:
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out += a[:, j]
    return out


def _old_erlang_c(c: FloatArray, a: FloatArray) -> FloatArray:
    cmax = int(np.max(c)) if c.size else 1
    term = np.ones_like(a)
    total = np.ones_like(a)
    for k in range(1, cmax):
        term = np.where(k < c, term * a / k, term)
        total = np.where(k < c, total + term, total)
    last = term * a / c / np.maximum(1.0 - a / c, 1e-12)
    out: FloatArray = last / (total + last)
    return out


def _old_survival_terms(lam: FloatArray, mu: FloatArray, c: FloatArray) -> Any:
    stable = lam < SATURATION * mu
    lam_s = np.where(stable, lam, 0.0)
    s = mu / c / 1000.0
    theta = (mu - lam_s) / 1000.0
    close = np.abs(theta - s) < 1e-3 * s
    theta = np.where(close, s * 1.001, theta)
    wait = _old_erlang_c(c, lam_s / (mu / c))
    a1 = (1.0 - wait) - wait * theta / (s - theta)
    a2 = wait * s / (s - theta)
    return stable, s, theta, a1, a2


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
    terms = _old_survival_terms(lam, mu, c)
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

