"""A learned latency model: a queueing-shaped regressor with bootstrap uncertainty.

The shape is physics, the numbers are learned. Each pod is taken as an M/M/c queue with
``c = max(1, floor(cpu))`` servers and service rate ``mu * cpu**alpha * gpu_speedup * speed_k``,
where ``k`` is the pod's node class (node pool): node generations differ in speed. A
configuration's pods are a mix over node classes (the share of pods in each); the load balancer
sends a pod of class ``k`` a share proportional to ``speed_k**beta`` (``beta`` = 1: by
capacity, as dispatch weights do; 0: round robin), and the predicted percentile is solved from
the resulting mixture of Erlang-C sojourn-time distributions, shifted by a base latency plus the
mix's per-class offset (network distance). The parameters (``log mu``, ``alpha``,
``log gpu_speedup``, base, ``beta``, per-class log speeds and offsets) are fitted by robust
nonlinear least squares on log latency (``soft_l1`` loss: outliers - pods mid-restart, load
spikes inside the KPI window - pull little). Observations at saturation are right-censored
(the latency was at least what was seen, the queue may have been unstable): they penalise only
a prediction below them, and so teach the model where capacity ends. Where the pods report how
busy their serving devices are (a CPU pod's CPU, a GPU pod's GPUs), the rows below saturation
are fitted on it too (arrivals over service rate): at one load a long service time and a large
base latency fit a percentile alike, and only the utilisation tells them apart. A bootstrap
ensemble of refits gives the uncertainty band.

Follows the scikit-learn estimator API: ``__init__`` stores parameters, ``fit`` returns self,
fitted attributes end in ``_``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin

from planner.models.sojourn import SATURATION, mixture_sojourn_quantile

FloatArray = NDArray[np.float64]
BASE_COLUMNS = 5
"""``X`` columns before the node-class shares: rate, replicas, cpu, gpu, pool code."""
N_FIXED = 5
"""Leading parameters: log mu, alpha, log gpu speed-up, base latency, dispatch exponent beta."""
MAX_RESIDUAL_SCALE = 5.0
"""A fitted log-latency residual scale beyond this is no model (exp(5) = 148x)."""
EXTRAPOLATION_MARGIN = 1.5
"""How far beyond what it observed a model vouches for a configuration: CPU sizes within this
factor of the observed range (once two sizes were seen), loads per core up to this factor of
the highest seen below saturation (:class:`planner.models.effects.LearnedKPI`)."""
SPEED_BOUND = 2.5
"""Per-class log speed bound (relative to the reference class): 0.08x to 12x."""
VectorTerms = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
                    FloatArray]
"""What the latency model's prediction takes from each parameter vector alone
(:meth:`QueueingLatencyRegressor._vector_terms`)."""
UTILIZATION_RANGE = (0.02, 0.9)
"""Utilisations that measure a pod's service rate: above the metrics' noise (an idle pod's
ratio is noise) and below saturation (where the queue, not the service, sets it)."""
CLASS_EVIDENCE_ROWS = 3.0
"""Rows' worth of a node class's pods (its share summed over the rows below saturation) before
its own speed and offset are fitted: as many as the model as a whole needs (:meth:`fit`
refuses fewer than 3 rows below saturation). Below it the class is taken as the reference
class (speed 1, no offset): the node class the model knows best, not two parameters fitted to
a row's noise. Counting the saturated rows too, a class with that many rows' worth that the
rows below saturation do not free gets a speed bounded by the reference's (:meth:`fit`)."""
STACKED_ROWS = 20_000
"""Rows per stacked quantile solve when several parameter vectors are evaluated (bounds the
memory of one solve; a planner's batches are far smaller, so an ensemble is one solve)."""

def higher_quantile(a: FloatArray, q: float) -> FloatArray:
    """``np.quantile(a, q, axis=0, method="higher")`` of a 2-D array (the same values: the
    order statistic at ``ceil((n - 1) * q)``, NaN in a column with a NaN), without its
    per-call argument handling: a planner asks for it on every scoring call."""
    n = a.shape[0]
    k = math.ceil((n - 1) * q)
    part = np.partition(a, [k, n - 1], axis=0)
    out: FloatArray = part[k].copy()
    last = part[-1]
    np.copyto(out, last, where=np.isnan(last))
    return out


def _isclose(a: FloatArray, b: float) -> NDArray[np.bool_]:
    """``np.isclose(a, b)`` (its default tolerances) for a float ``b``: where ``b`` is finite
    the same comparison, ``|a - b| <= 1e-8 + 1e-5 |b|`` (``a == b`` adds nothing to it),
    without ``np.isclose``'s per-call argument handling."""
    b = float(b)
    if not math.isfinite(b):
        out: NDArray[np.bool_] = np.isclose(a, b)
        return out
    close: NDArray[np.bool_] = np.abs(a - b) <= 1e-8 + 1e-5 * abs(b)
    return close


def _faster(terms: VectorTerms, speedup: float | FloatArray) -> VectorTerms:
    """``terms`` (:meth:`QueueingLatencyRegressor._vector_terms`) of pods ``speedup`` times as
    fast: every vector's base service rate scaled (by one factor, or by one per row: the base
    rate becomes ``(m, n)``, each element the product the scalar path computes)."""
    speed, pull, mu0, alpha, gpu_factor, offset, base = terms
    if isinstance(speedup, np.ndarray):
        return speed, pull, mu0 * speedup[None, :], alpha, gpu_factor, offset, base
    return speed, pull, mu0 * float(speedup), alpha, gpu_factor, offset, base


class QueueingLatencyRegressor(RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Predicts a latency percentile (ms) from ``X`` = [rate, replicas, cpu, gpu, pool,
    share_0, ..., share_{K-1}].

    ``pool`` is the pinned node pool's code (-1: none). The optional ``share_k`` columns are
    the fraction of the pods on node class ``k``; without them, each pool code is its own class
    (the pods of a pinned configuration all run in its pool) and "none" is one more.

    Parameters
    ----------
    quantile: the percentile predicted, as a fraction (0.95 for p95).
    n_bootstrap: refits on resampled rows for the uncertainty band (0: none).
    bound_quantile: which quantile of the bootstrap predictions ``predict_bound`` returns.
    timeout_ms: observations at or above this are saturation: censored at the timeout (the
        latency is at least that), kept for what they say about capacity.
    random_state: seed of the bootstrap.
    cpu_exponent_prior: how a pod's service rate grows with its CPU size (``cpu**alpha``)
        until two sizes have been observed; then ``alpha`` is learned.
    """

    _batched_jacobian = True
    """Evaluate the finite-difference Jacobian in one vectorised pass (same numbers as scipy's
    one-at-a-time evaluation; a switch for the test that shows it)."""

    def __init__(self, quantile: float = 0.95, n_bootstrap: int = 8,
                 bound_quantile: float = 0.9, timeout_ms: float = 4000.0,
                 random_state: int = 0, cpu_exponent_prior: float = 0.9) -> None:
        self.quantile = quantile
        self.n_bootstrap = n_bootstrap
        self.bound_quantile = bound_quantile
        self.timeout_ms = timeout_ms
        self.random_state = random_state
        self.cpu_exponent_prior = cpu_exponent_prior

    # -- node classes
    def _shares(self, X: FloatArray) -> FloatArray:
        """``(n, n_classes_)`` share of the pods per node class; all-zero rows: unknown."""
        if self.share_columns_ > 0:
            shares = np.zeros((X.shape[0], self.n_classes_))
            k = min(X.shape[1] - BASE_COLUMNS, self.n_classes_)
            # np.clip with no upper bound is this maximum, after its per-call handling
            shares[:, :k] = np.maximum(X[:, BASE_COLUMNS:BASE_COLUMNS + k], 0.0)
            total = shares.sum(axis=1, keepdims=True)
            out: FloatArray = np.divide(shares, total, out=np.zeros_like(shares),
                                        where=total > 0)
            return out
        codes = X[:, 4].astype(int)
        idx = np.clip(np.where(codes >= 0, codes, self.n_classes_ - 1), 0, self.n_classes_ - 1)
        onehot: FloatArray = np.zeros((X.shape[0], self.n_classes_))
        onehot[np.arange(X.shape[0]), idx] = 1.0
        return onehot

    # -- parameter vector: [log_mu, alpha, log_gpu, base, beta, log_speeds..., offsets...]
    def _classes(self, theta: FloatArray, X: FloatArray, shares: FloatArray | None
                 ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Per row the class shares ``f`` (unknown rows: uniform), the class ``speed`` and the
        relative dispatch share of one pod ``pull`` (``(n, K)``), and the pod's base ``mu``.
        ``theta`` is one parameter vector, or one per row (``(n, P)``)."""
        k = self.n_classes_
        t = np.broadcast_to(np.asarray(theta, dtype=float), (X.shape[0], N_FIXED + 2 * k))
        speed = np.exp(t[:, N_FIXED:N_FIXED + k])
        pull = speed ** t[:, 4:5]
        f = self._shares(X) if shares is None else shares
        f = np.where(f.sum(axis=1, keepdims=True) > 0, f, 1.0 / k)
        mu = np.exp(t[:, 0]) * X[:, 2] ** t[:, 1] * np.where(X[:, 3] > 0.5, np.exp(t[:, 2]),
                                                           1.0)
        return f, speed, pull, mu

    def _forward(self, theta: FloatArray, X: FloatArray,
                 shares: FloatArray | None = None) -> FloatArray:
        """Predicted percentile per row of ``X``; ``theta`` is one parameter vector or one per
        row. Everything is per row, so a row's prediction does not depend on the others (the
        batched Jacobian in :meth:`_fit_theta` relies on it)."""
        k = self.n_classes_
        t = np.broadcast_to(np.asarray(theta, dtype=float), (X.shape[0], N_FIXED + 2 * k))
        f, speed, pull, mu = self._classes(t, X, shares)
        out: FloatArray = self._solve(
            X, f[None], speed[None], pull[None], mu[None],
            t[None, :, N_FIXED + k:N_FIXED + 2 * k], t[None, :, 3])[0]
        return out

    def _solve(self, X: FloatArray, f: FloatArray, speed: FloatArray, pull: FloatArray,
               mu: FloatArray, offset: FloatArray, base: FloatArray) -> FloatArray:
        """``(m, n)``: :meth:`_forward` for ``m`` parameter vectors and the ``n`` rows of
        ``X``, from the class quantities of :meth:`_classes` (``f``, ``speed``, ``pull``,
        ``offset``: ``(m or 1, n or 1, K)``; ``mu`` ``(m, n)``; ``base`` ``(m, n or 1)``).
        Element by element the same operations as on the ``m * n`` rows stacked, and the row
        sums over the same ``(m * n, K)`` layout."""
        rate, replicas, cpu = X[:, 0], X[:, 1], X[:, 2]
        c = np.minimum(np.maximum(np.floor(cpu), 1.0), 64.0)    # np.clip's values
        fp = f * pull
        m, n, k = fp.shape
        norm = fp.reshape(m * n, k).sum(axis=1).reshape(m, n)   # mean pull over the pods
        lam = (rate / np.maximum(replicas, 1e-9) / norm)[:, :, None] * pull
        weight = fp / norm[:, :, None]                  # share of the requests per class
        mus = mu[:, :, None] * speed
        cs = np.broadcast_to(np.broadcast_to(c, (m, n)).reshape(m * n, 1), (m * n, k))
        q = mixture_sojourn_quantile(self.quantile, lam.reshape(m * n, k),
                                     mus.reshape(m * n, k), cs, weight.reshape(m * n, k))
        offsets = (weight * offset).reshape(m * n, k).sum(axis=1).reshape(m, n)
        out: FloatArray = np.maximum(base, 0.0) + offsets + q.reshape(m, n)
        return out

    def _forward_many(self, thetas: FloatArray, X: FloatArray,
                      shares: FloatArray | None = None,
                      terms: VectorTerms | None = None) -> FloatArray:
        """``(m, n)``: the predictions of ``m`` parameter vectors for the rows of ``X``, in
        one vectorised evaluation (a bootstrap band, a finite-difference Jacobian).

        The same numbers as :meth:`_forward` with the vectors repeated over the rows (tested
        bit for bit): what depends on a vector alone (class speeds and pulls, the service rate
        factors: :meth:`_vector_terms`, or ``terms`` when given: the fitted ensemble's, worked
        out once) is computed once per vector, what depends on a row alone once per row."""
        thetas = np.asarray(thetas, dtype=float)
        m, n = len(thetas), X.shape[0]
        k = self.n_classes_
        f = self._shares(X) if shares is None else shares
        f = np.where(f.sum(axis=1, keepdims=True) > 0, f, 1.0 / k)
        gpu = X[:, 3] > 0.5
        speed, pull, mu0, alpha, gpu_factor, offset, base = (
            self._vector_terms(thetas) if terms is None else terms)
        out: FloatArray = np.empty((m, n))
        per_solve = max(1, STACKED_ROWS // max(n, 1))   # bounds one solve's memory
        for start in range(0, m, per_solve):
            at = slice(start, start + per_solve)
            mu = mu0[at] * X[:, 2] ** alpha[at] * np.where(gpu, gpu_factor[at], 1.0)
            out[at] = self._solve(X, f[None], speed[at], pull[at], mu, offset[at], base[at])
        return out

    def _utilization_many(self, thetas: FloatArray, X: FloatArray,
                          shares: FloatArray) -> FloatArray:
        """``(m, n)``: the pods' mean utilisation (arrivals over service rate, averaged over
        the pods) each of ``m`` parameter vectors predicts for the rows of ``X``: what a CPU
        pod's CPU utilisation measures, so it pins the service rate apart from the base
        latency (at one load they fit a latency percentile alike)."""
        k = self.n_classes_
        f = np.where(shares.sum(axis=1, keepdims=True) > 0, shares, 1.0 / k)
        speed = np.exp(thetas[:, N_FIXED:N_FIXED + k])                  # (m, K)
        pull = speed ** thetas[:, 4:5]
        mu = (np.exp(thetas[:, 0])[:, None] * X[None, :, 2] ** thetas[:, 1:2]
              * np.where(X[None, :, 3] > 0.5, np.exp(thetas[:, 2])[:, None], 1.0))
        norm = f @ pull.T                                               # (n, m)
        per_speed = f @ (pull / speed).T
        out: FloatArray = (X[:, 0] / np.maximum(X[:, 1], 1e-9))[None, :] * (
            per_speed / norm).T / mu
        return out

    def _vector_terms(self, thetas: FloatArray) -> VectorTerms:
        """What :meth:`_forward_many` takes from each parameter vector alone, one row per
        vector: the class speeds and dispatch pulls (``(m, 1, K)``), the base service rate,
        the CPU exponent and the GPU speed-up (``(m, 1)``), the class offsets (``(m, 1, K)``)
        and the base latency (``(m, 1)``)."""
        k = self.n_classes_
        speed = np.exp(thetas[:, N_FIXED:N_FIXED + k])
        pull = speed ** thetas[:, 4:5]
        return (speed[:, None], pull[:, None], np.exp(thetas[:, 0])[:, None], thetas[:, 1:2],
                np.exp(thetas[:, 2])[:, None], thetas[:, None, N_FIXED + k:N_FIXED + 2 * k],
                thetas[:, 3:4])

    def _ensemble(self) -> tuple[FloatArray, VectorTerms]:
        """The fitted parameters and the bootstrap ensemble as one ``(1 + B, P)`` array, and
        their :meth:`_vector_terms`: worked out once per fitted model (kept while
        ``theta_`` and ``bootstrap_thetas_`` are the same arrays; a refit or a load sets new
        ones) instead of on every prediction."""
        cached = self.__dict__.get("_ensemble_cache")
        if (cached is not None and cached[0] is self.theta_
                and cached[1] is self.bootstrap_thetas_):
            return cached[2], cached[3]
        thetas = np.vstack([self.theta_[None, :], self.bootstrap_thetas_])
        terms = self._vector_terms(thetas)
        self.__dict__["_ensemble_cache"] = (self.theta_, self.bootstrap_thetas_, thetas, terms)
        return thetas, terms

    def _fit_theta(self, X: FloatArray, y: FloatArray, shares: FloatArray, start: FloatArray,
                   lo: FloatArray, hi: FloatArray, censored: NDArray[np.bool_],
                   max_nfev: int = 200, util: FloatArray | None = None,
                   prior_at: NDArray[np.intp] | None = None) -> FloatArray:
        """Robust least squares on log latency, and on log utilisation where ``util`` says
        which rows' utilisation is a measure (finite there, NaN elsewhere). The parameters
        at ``prior_at`` get one more residual each, the parameter itself: a prior at 0 worth
        one row, for parameters only an inequality bounds (a class's log speed that only
        saturated rows tell: the fit then stops at about the fastest speed they allow, a
        little above it where the prior outweighs a small censored residual, not anywhere
        below it)."""
        logy = np.log(y)
        measured = np.zeros(len(y), dtype=bool) if util is None else np.isfinite(util)
        logu = None if util is None or not measured.any() else np.log(util[measured])
        Xu, su = X[measured], shares[measured]

        def residuals_of(pred: FloatArray, thetas: FloatArray) -> FloatArray:
            """``(m, n)`` residuals of the predictions ``pred`` of ``thetas``."""
            finite = np.isfinite(pred)
            logp = np.log(np.maximum(np.where(finite, pred, 1e300), 1e-6))
            r: FloatArray = logp - logy
            if not finite.all():
                # An unstable prediction for an observed (finite) latency: a large penalty
                # that grows with the predicted overload, so the solve is pulled towards the
                # service rate that carried the load (a flat penalty has no slope: a device
                # whose first rows the prior calls unstable would stay unstable).
                load = self._utilization_many(thetas, X, shares)
                over = np.log(np.maximum(load / SATURATION, 1.0))
                r = np.where(finite, r, 5.0 + over)
            # A censored row only says "at least y": a prediction below it is the error, one
            # above it (or an unstable queue) is not.
            r = np.where(censored, np.minimum(logp - logy, 0.0), r)
            return r

        def with_util(r: FloatArray, thetas: FloatArray) -> FloatArray:
            """``r`` (``(m, n)``) and the log-utilisation residuals of ``thetas``."""
            if prior_at is not None and prior_at.size:
                r = np.concatenate([r, thetas[:, prior_at]], axis=1)
            if logu is None:
                return r
            u = self._utilization_many(thetas, Xu, su)
            return np.concatenate([r, np.log(np.maximum(u, 1e-12)) - logu], axis=1)

        def residuals(theta: FloatArray) -> FloatArray:
            one = theta[None, :]
            out: FloatArray = with_util(residuals_of(self._forward(theta, X, shares)[None, :],
                                                     one), one)[0]
            return out

        def batched(_fun: Any, points: Any) -> list[FloatArray]:
            """scipy's finite-difference Jacobian evaluates ``residuals`` at one perturbed
            vector per parameter through this map (``workers``): all of them in one
            vectorised pass, each row as ``residuals`` would compute it."""
            thetas = np.asarray(list(points), dtype=float)
            return list(with_util(residuals_of(self._forward_many(thetas, X, shares), thetas),
                                  thetas))

        res = least_squares(residuals, start, bounds=(lo, hi), loss="soft_l1", f_scale=0.1,
                            max_nfev=max_nfev, x_scale="jac",
                            workers=batched if self._batched_jacobian else None)
        out: FloatArray = res.x
        return out

    def fit(self, X: Any, y: Any, censored: Any = None,
            start: Any = None, utilization: Any = None) -> QueueingLatencyRegressor:
        """Fit on ``X``, ``y``; ``censored`` (optional, per row) marks observations that are a
        lower bound only (the pods were saturated: the latency is at least what was seen).
        Rows at or above ``timeout_ms`` are censored at the timeout whatever ``censored``
        says: saturation teaches where the cliff is, so it is kept, not dropped.

        ``utilization`` (optional, per row; NaN: unknown): the mean utilisation of the devices
        that serve the row's requests: a CPU pod's CPU, a GPU pod's GPUs (NaN for a GPU row
        whose GPUs were not measured: a GPU pod's CPU utilisation does not measure its
        service). It is arrivals over service rate (the utilisation law), so the rows below
        saturation where it is measurable (:data:`UTILIZATION_RANGE`) are fitted on it too: a
        workload seen at one load fits a latency percentile as well with a short service time
        as with a large base latency, and only the utilisation tells them apart (which one it
        is decides what a faster device or node, or a smaller CPU size, can do). On a GPU the
        latency alone hardly tells: its service is short beside the base latency.

        ``start`` (optional): a previous fit's ``theta_`` over the same columns to start the
        solve from (warm start); ignored when its length does not match this data's classes.
        Parameters the data now fixes (an unseen class, a single CPU size) are clipped to
        their bounds, so a warm fit answers the same question as a cold one."""
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if X.ndim != 2 or X.shape[1] < BASE_COLUMNS or X.shape[0] != y.shape[0]:
            raise ValueError("X must be (n, 5 + K): rate, replicas, cpu, gpu, pool, then K "
                             "node-class shares; y (n,)")
        cens = (np.zeros(len(y), dtype=bool) if censored is None
                else np.asarray(censored, dtype=bool).reshape(-1))
        if cens.shape != y.shape:
            raise ValueError("censored must have one flag per row of X")
        y = np.where(np.isnan(y), y, np.minimum(y, self.timeout_ms))
        cens = cens | (y >= self.timeout_ms)
        util = (np.full(len(y), np.nan) if utilization is None
                else np.asarray(utilization, dtype=float).reshape(-1))
        if util.shape != y.shape:
            raise ValueError("utilization must have one value per row of X")
        lo_u, hi_u = UTILIZATION_RANGE
        util = np.where(~cens & (util >= lo_u) & (util <= hi_u), util, np.nan)
        keep = np.isfinite(y) & (y > 0) & (X[:, 0] > 0)
        X, y, cens, util = X[keep], y[keep], cens[keep], util[keep]
        if int((~cens).sum()) < 3:
            raise ValueError(f"need at least 3 usable observations below saturation, got "
                             f"{int((~cens).sum())}")
        self.share_columns_ = X.shape[1] - BASE_COLUMNS
        # Without share columns: one class per pool code, plus "no pool pinned".
        self.n_classes_ = (self.share_columns_ if self.share_columns_ > 0
                           else int(max(X[:, 4].max() + 1, 0)) + 1)
        shares = self._shares(X)
        usable = shares.sum(axis=1) > 0
        X, y, shares, cens = X[usable], y[usable], shares[usable], cens[usable]
        util = util[usable]
        if int((~cens).sum()) < 3:
            raise ValueError("need at least 3 observations below saturation with known node "
                             f"classes, got {int((~cens).sum())}")
        k = self.n_classes_
        on_gpu = X[:, 3] > 0.5
        self.seen_gpu_ = bool(on_gpu.any())
        self.seen_cpu_device_ = bool((X[:, 3] < 0.5).any())
        self.seen_classes_ = [int(i) for i in np.flatnonzero(shares.sum(axis=0) > 0)]
        self.cpu_classes_ = [int(i) for i in np.flatnonzero(shares[~on_gpu].sum(axis=0) > 0)]
        self.gpu_classes_ = [int(i) for i in np.flatnonzero(shares[on_gpu].sum(axis=0) > 0)]
        self.cpu_range_ = (float(X[:, 2].min()), float(X[:, 2].max()))
        self.cpu_sizes_ = sorted({float(c) for c in X[:, 2]})
        # Speeds and offsets are relative to the class most pods ran on below saturation (the
        # base latency is that class's); classes never seen keep speed 1 and offset 0. What the data
        # cannot tell stays at its prior: the CPU exponent until two sizes were seen, a
        # class's own speed and offset until its pods carried enough rows to tell them (a
        # class glimpsed in one row, with a tenth of the pods, would otherwise fit that row's
        # noise into two free parameters and extrapolate it to configurations all on it).
        evidence = shares[~cens].sum(axis=0)
        ref = int(np.argmax(evidence))
        free = evidence >= CLASS_EVIDENCE_ROWS
        free[ref] = False
        # A class with enough rows' worth only counting the saturated rows: those rows say its
        # pods carried less than the load they were given, an upper bound on its speed and
        # nothing on its offset, so its speed may only fall below the reference's.
        slower = (shares.sum(axis=0) >= CLASS_EVIDENCE_ROWS) & ~free
        slower[ref] = False
        alpha = float(self.cpu_exponent_prior)
        alpha_lo, alpha_hi = (0.3, 1.2) if len(self.cpu_sizes_) > 1 else (alpha, alpha)
        # Start: service rate from the measured utilisations (the utilisation law), else from
        # the busiest observation; base from the lightest.
        per_core = X[~cens, 0] / (X[~cens, 1] * X[~cens, 2])
        y_obs = y[~cens]
        known = np.isfinite(util)
        mu_start = (float(np.median(X[known, 0] / X[known, 1] / util[known]
                                    / X[known, 2] ** alpha)) if known.any()
                    else per_core.max() * 1.3)
        initial = np.concatenate([[math.log(max(mu_start, 1e-3)), alpha, 0.0,
                                   float(np.min(y_obs)) * 0.5, 0.5], np.zeros(k), np.zeros(k)])
        if known.any():
            # The service rate is measured: the base starts where it leaves the rows' latency
            # (a start far above it is walked down slowly).
            initial[3] = 0.0
            q0 = self._forward(initial, X[~cens], shares[~cens])
            gap = y_obs - q0
            initial[3] = float(np.median(gap[np.isfinite(gap)])) if np.isfinite(gap).any() \
                else float(np.min(y_obs)) * 0.5
        eps = 1e-9
        lo = np.concatenate([[math.log(1e-3), alpha_lo - eps, -1.0 if self.seen_gpu_ else -eps,
                              0.0, 0.0], np.where(free | slower, -SPEED_BOUND, -eps),
                             np.where(free, -1e3, -eps)])
        hi = np.concatenate([[math.log(1e6), alpha_hi + eps, 6.0 if self.seen_gpu_ else eps,
                              float(np.max(y_obs)), 1.0], np.where(free, SPEED_BOUND, eps),
                             np.where(free, 1e4, eps)])
        warm = None if start is None else np.asarray(start, dtype=float).reshape(-1)
        if warm is not None and warm.shape == initial.shape and np.isfinite(warm).all():
            # Free parameters start where the previous fit ended, inside their bounds; those
            # the data pins (bounds of width ~0: the offset of a class below
            # CLASS_EVIDENCE_ROWS, and its speed unless saturated rows bound it; the CPU
            # exponent with one size seen) start as a cold fit's do.
            width = hi - lo
            inside = np.clip(warm, lo + 1e-3 * width, hi - 1e-3 * width)
            initial = np.where(width > 1e-6, inside, initial)
        initial = np.clip(initial, lo + 1e-12, hi - 1e-12)
        prior_at = N_FIXED + np.flatnonzero(slower)
        self.theta_ = self._fit_theta(X, y, shares, initial, lo, hi, cens, util=util,
                                      prior_at=prior_at)
        pred = self._forward(self.theta_, X, shares)
        ok = np.isfinite(pred) & ~cens
        resid = np.log(np.maximum(pred[ok], 1e-6)) - np.log(y[ok])
        mad = float(np.median(np.abs(resid - np.median(resid)))) if resid.size else 0.0
        self.residual_scale_ = 1.4826 * mad
        self.n_samples_ = len(y)
        rng = np.random.default_rng(self.random_state)
        thetas = []
        for _ in range(self.n_bootstrap):
            idx = rng.integers(0, len(y), len(y))
            # A resample that holds none of a slower class's saturated rows has only the prior
            # for that class's speed, and gives it the reference's (with 4 such rows in 34,
            # (30/34)^34: 1.4 % of resamples).
            while int((~cens[idx]).sum()) < 3:   # a resample needs rows below saturation
                idx = rng.integers(0, len(y), len(y))
            thetas.append(self._fit_theta(X[idx], y[idx], shares[idx], self.theta_, lo, hi,
                                          cens[idx], max_nfev=40, util=util[idx],
                                          prior_at=prior_at))
        self.bootstrap_thetas_ = np.asarray(thetas, dtype=float).reshape(-1, len(self.theta_))
        return self

    def check_fitted(self) -> None:
        """``ValueError`` unless the fitted attributes fit together (a loaded document)."""
        for name in ("quantile", "bound_quantile"):
            v = getattr(self, name)
            if not isinstance(v, float | int) or isinstance(v, bool) or not 0.0 < v < 1.0:
                raise ValueError(f"{name} must be a number between 0 and 1, got {v!r}")
        for name in ("timeout_ms", "cpu_exponent_prior"):
            v = getattr(self, name)
            if not isinstance(v, float | int) or isinstance(v, bool) or not 0.0 < v < 1e6:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        if not 0.0 <= self.residual_scale_ <= MAX_RESIDUAL_SCALE:
            raise ValueError(f"residual_scale_ must be within [0, {MAX_RESIDUAL_SCALE}]")
        k = self.n_classes_
        if k < 1 or self.share_columns_ not in (0, k):
            raise ValueError(f"{k} node classes with {self.share_columns_} share columns")
        if self.theta_.shape != (N_FIXED + 2 * k,) or not np.isfinite(self.theta_).all():
            raise ValueError(f"theta_ must hold {N_FIXED + 2 * k} finite numbers")
        if self.bootstrap_thetas_.ndim != 2 or self.bootstrap_thetas_.shape[1:] != (
                N_FIXED + 2 * k,):
            raise ValueError("bootstrap_thetas_ does not match theta_")
        if not np.isfinite(self.bootstrap_thetas_).all():
            raise ValueError("bootstrap_thetas_ must be finite")
        if not all(float(i).is_integer() and 0 <= i < k for i in self.seen_classes_):
            raise ValueError("seen_classes_ must be class indices")
        self.seen_classes_ = [int(i) for i in self.seen_classes_]
        for name in ("cpu_classes_", "gpu_classes_"):
            seen = getattr(self, name)
            if not all(float(i).is_integer() and int(i) in self.seen_classes_ for i in seen):
                raise ValueError(f"{name} must be indices of seen classes")
            setattr(self, name, [int(i) for i in seen])
        if set(self.cpu_classes_) | set(self.gpu_classes_) != set(self.seen_classes_):
            raise ValueError("cpu_classes_ and gpu_classes_ must cover the seen classes")
        if len(self.cpu_range_) != 2:
            raise ValueError("cpu_range_ must be (min, max)")

    def predict(self, X: Any) -> FloatArray:
        return self._forward(self.theta_, np.asarray(X, dtype=float))

    def predict_bound(self, X: Any) -> FloatArray:
        """A conservative (upper) prediction: the ``bound_quantile`` of the bootstrap
        predictions, widened by the residual scale."""
        return self.predict_with_bound(X)[1]

    def predict_with_bound(self, X: Any) -> tuple[FloatArray, FloatArray]:
        """:meth:`predict` and :meth:`predict_bound` at once: the fitted parameters and the
        bootstrap ensemble evaluated together in one stacked solve (what a planner scoring
        candidates needs)."""
        X = np.asarray(X, dtype=float)
        thetas, terms = self._ensemble()
        return self._with_bound(self._forward_many(thetas, X, self._shares(X), terms))

    def _with_bound(self, preds: FloatArray) -> tuple[FloatArray, FloatArray]:
        """The mean and the bound of :meth:`predict_with_bound` from the ensemble's
        predictions (the fitted parameters' first)."""
        mean: FloatArray = preds[0]
        if len(self.bootstrap_thetas_) == 0:
            return mean, mean * math.exp(self.residual_scale_)
        q = higher_quantile(preds[1:], self.bound_quantile)
        out: FloatArray = np.maximum(q, mean) * math.exp(self.residual_scale_)
        return mean, out

    def cpu_exponent(self) -> float:
        """The fitted ``alpha`` of a pod's service rate ``mu * cpu**alpha``."""
        return float(self.theta_[1])

    def capacity(self, X: Any) -> FloatArray:
        """Requests per second each configuration serves before its first pod saturates
        (the ``rate`` column is ignored)."""
        X = np.asarray(X, dtype=float)
        f, speed, pull, mu = self._classes(self.theta_, X, None)
        # A class-k pod gets rate * pull_k / (replicas * f @ pull): it saturates first.
        per_class = SATURATION * mu[:, None] * speed / pull
        first = np.min(np.where(f > 0, per_class, np.inf), axis=1)
        out: FloatArray = first * X[:, 1] * (f * pull).sum(axis=1)
        return out

    def supported(self, X: Any) -> NDArray[np.bool_]:
        """Rows like something seen in training: device and node classes observed (each class
        with the row's device, unless some class ran pods of both devices), CPU size observed
        (or within a margin of the observed range once two sizes have been seen)."""
        X = np.asarray(X, dtype=float)
        return self._supported(X, self._shares(X))

    def predict_with_support(self, X: Any, speedup: float | FloatArray = 1.0
                             ) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
        """:meth:`predict_with_bound` and :meth:`supported` at once (the node-class shares
        of the rows worked out once).

        ``speedup``: predict for pods ``speedup`` times as fast as the rows say (every
        parameter vector's service rate scaled by it, as the model's own GPU and node-class
        factors scale it): how a place whose speed was measured, not learned, answers. Its
        support is the rows' own. An array: one factor per row (the numbers each row gets
        with its factor alone)."""
        X = np.asarray(X, dtype=float)
        shares = self._shares(X)
        thetas, terms = self._ensemble()
        if isinstance(speedup, np.ndarray) or speedup != 1.0:
            terms = _faster(terms, speedup)
        mean, bound = self._with_bound(self._forward_many(thetas, X, shares, terms))
        return mean, bound, self._supported(X, shares)

    def predict_faster(self, X: Any, speedup: float) -> FloatArray:
        """:meth:`predict_with_support`'s mean at ``speedup`` (the fitted parameters alone)."""
        X = np.asarray(X, dtype=float)
        theta = self.theta_[None, :]
        terms = _faster(self._vector_terms(theta), speedup)
        out: FloatArray = self._forward_many(theta, X, None, terms)[0]
        return out

    def _supported(self, X: FloatArray, shares: FloatArray) -> NDArray[np.bool_]:
        """:meth:`supported` from ``X`` as floats and its rows' :meth:`_shares`."""
        gpu = X[:, 3] > 0.5
        dev_ok = np.where(gpu, self.seen_gpu_, self.seen_cpu_device_)
        unseen = np.ones(self.n_classes_, dtype=bool)
        unseen[self.seen_classes_] = False
        if self.share_columns_ == 0:
            codes = X[:, 4].astype(int)
            known = (codes >= -1) & (codes < self.n_classes_ - 1)
        else:
            known = shares.sum(axis=1) > 0
        class_ok = known & ~(shares[:, unseen] > 0).any(axis=1)
        if not set(self.cpu_classes_) & set(self.gpu_classes_):
            # No node class has run pods of both devices: a class's speed and the GPU's
            # factor are told apart by nothing (a class seen only with GPU pods could be fast
            # or its GPU very fast), so a device is vouched for only on the classes it ran on.
            own = np.zeros((2, self.n_classes_), dtype=bool)
            own[0, self.cpu_classes_] = True
            own[1, self.gpu_classes_] = True
            class_ok &= ~((shares > 0) & ~own[gpu.astype(int)]).any(axis=1)
        lo, hi = self.cpu_range_
        if len(self.cpu_sizes_) < 2:
            # One CPU size seen: how latency scales with CPU is unknown; do not extrapolate.
            cpu_ok = _isclose(X[:, 2], lo)
        else:
            cpu_ok = (X[:, 2] >= lo / EXTRAPOLATION_MARGIN) & (X[:, 2] <= hi * EXTRAPOLATION_MARGIN)
        out: NDArray[np.bool_] = dev_ok & class_ok & cpu_ok
        return out
