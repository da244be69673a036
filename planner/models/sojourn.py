"""M/M/c response-time quantiles, vectorised: one queue per row, or a mixture of queue classes.

The learned latency model (:mod:`planner.models.latency`) evaluates these for thousands of
candidate configurations per planning cycle, so everything here is array code without Python
loops over candidates.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
SATURATION = 0.98
"""Utilisation from which a queue counts as unstable (its latency is a timeout)."""


def _class_sum(a: FloatArray, out: FloatArray) -> FloatArray:
    """``out = a.sum(axis=0)`` of a class-major ``(K, ...)`` array, class by class in order (the
    same additions, in the same order, as a row sum of the ``(n, K)`` layout)."""
    np.copyto(out, a[0])
    for j in range(1, a.shape[0]):
        np.add(out, a[j], out=out)
    return out


def erlang_c(c: FloatArray, a: FloatArray) -> FloatArray:
    """Vectorised Erlang C for integer server counts ``c`` (<= 64) and loads ``a < c``."""
    cmax = int(np.max(c)) if c.size else 1
    cmin = float(np.min(c)) if c.size else 1.0
    term = np.ones_like(a)
    total = np.ones_like(a)
    for k in range(1, cmax):
        if k < cmin:        # k < c everywhere: the masks below would select every element
            term = term * a / k
            total = total + term
        else:
            term = np.where(k < c, term * a / k, term)
            total = np.where(k < c, total + term, total)
    last = term * a / c / np.maximum(1.0 - a / c, 1e-12)
    out: FloatArray = last / (total + last)
    return out


def _survival_terms(lam: FloatArray, mu: FloatArray, c: FloatArray
                    ) -> tuple[NDArray[np.bool_], FloatArray, FloatArray, FloatArray, FloatArray]:
    """The sojourn survival ``S(t) = a1 exp(-s t) + a2 exp(-theta t)`` (t in ms) of M/M/c
    queues with arrival rate ``lam``, total service rate ``mu`` (1/s) and ``c`` servers."""
    stable = lam < SATURATION * mu
    lam_s = np.where(stable, lam, 0.0)
    s = mu / c / 1000.0
    theta = (mu - lam_s) / 1000.0
    close = np.abs(theta - s) < 1e-3 * s
    theta = np.where(close, s * 1.001, theta)
    wait = erlang_c(c, lam_s / (mu / c))
    a1 = (1.0 - wait) - wait * theta / (s - theta)
    a2 = wait * s / (s - theta)
    return stable, s, theta, a1, a2


SETTLE_STEPS = 3
"""Newton steps after which :func:`_newton` sets aside the elements the last step left
unchanged bit for bit (each such iterate is a fixed point of its element's step map, so every
later step leaves it as it is) and takes the remaining steps on the others alone: in the
latency model's solves about 88 % of the per-class iterates have settled by then."""
SETTLE_MIN = 512
"""Elements below which :func:`_newton` does not look for settled iterates (a small call's
bookkeeping would cost more than the steps it saves)."""


def _newton(q: float, terms: tuple[NDArray[np.bool_], FloatArray, FloatArray, FloatArray,
                                    FloatArray], iterations: int) -> FloatArray:
    """Newton's method on ``log S(t) = log(1 - q)`` from ``t = 0``, element by element.

    Each step is ``t - (log S(t) - log(1 - q)) S(t) / S'(t)`` with ``S(t)`` floored at 1e-300
    and ``S'(t)`` capped at -1e-300, written into a few work arrays reused across the steps
    (the same operations, in the same order, as the expression: the iterates of thousands of
    candidates per call would otherwise be a dozen fresh arrays per step). After
    :data:`SETTLE_STEPS` steps, the elements whose last step changed their iterate (and whose
    queue is stable: the others' answer is ``inf`` whatever it is) take the remaining steps on
    their own, when they are at most half of :data:`SETTLE_MIN` or more elements: the others
    sit at a fixed point of their step, so their iterates are already the final ones."""
    stable, s, theta, a1, a2 = terms
    log_p = math.log(1.0 - q)
    shape = np.broadcast_shapes(s.shape, theta.shape, a1.shape, a2.shape)
    dtype = np.result_type(s, theta, a1, a2)
    t = np.zeros(shape, dtype)
    neg_s, neg_theta = -s, -theta
    e1, e2, surv = np.empty(shape, dtype), np.empty(shape, dtype), np.empty(shape, dtype)
    settle = iterations > SETTLE_STEPS and t.size >= SETTLE_MIN
    before = t
    for i in range(iterations):
        if settle and i == SETTLE_STEPS - 1:
            before = t.copy()
        if settle and i == SETTLE_STEPS:
            moving = np.flatnonzero(~(t == before) & np.broadcast_to(stable, shape))
            if 2 * moving.size <= t.size:
                flat = t.reshape(-1)
                s1, s2, sn, sm, st = (np.broadcast_to(x, shape).reshape(-1)[moving]
                                      for x in (a1, a2, neg_s, neg_theta, theta))
                flat[moving] = _newton_steps(flat[moving], s1, s2, sn, sm, st, log_p,
                                             iterations - i)
                break
        if i == 0:
            # At t = 0, exp(-s * 0) is 1 (NaN where s is not finite): the same e1, e2.
            np.multiply(a1, np.where(np.isfinite(s), 1.0, np.nan), out=e1)
            np.multiply(a2, np.where(np.isfinite(theta), 1.0, np.nan), out=e2)
        else:
            _scaled_exp(a1, neg_s, t, e1)
            _scaled_exp(a2, neg_theta, t, e2)
        _newton_step(t, e1, e2, neg_s, theta, surv, log_p)
    out: FloatArray = np.where(stable, t, np.inf)
    return out


def _newton_steps(t: FloatArray, a1: FloatArray, a2: FloatArray, neg_s: FloatArray,
                  neg_theta: FloatArray, theta: FloatArray, log_p: float,
                  steps: int) -> FloatArray:
    """``steps`` later Newton steps of :func:`_newton` (``t`` not 0) on 1-d arrays, in place;
    returns ``t``."""
    e1, e2, surv = np.empty_like(t), np.empty_like(t), np.empty_like(t)
    for _ in range(steps):
        _scaled_exp(a1, neg_s, t, e1)
        _scaled_exp(a2, neg_theta, t, e2)
        _newton_step(t, e1, e2, neg_s, theta, surv, log_p)
    return t


def _scaled_exp(a: FloatArray, rate: FloatArray, t: FloatArray, out: FloatArray) -> None:
    """``out = a * exp(rate * t)``, in place."""
    np.multiply(rate, t, out=out)
    np.exp(out, out=out)
    np.multiply(a, out, out=out)


def _newton_step(t: FloatArray, e1: FloatArray, e2: FloatArray, neg_s: FloatArray,
                 theta: FloatArray, surv: FloatArray, log_p: float) -> None:
    """One Newton step on ``t`` in place, from the survival's two terms ``e1``, ``e2`` at
    ``t`` (overwritten, as is ``surv``): ``surv = max(e1 + e2, 1e-300)``,
    ``slope = min(-s e1 - theta e2, -1e-300)``,
    ``t = t - (log(surv) - log_p) * surv / slope``."""
    np.add(e1, e2, out=surv)
    np.maximum(surv, 1e-300, out=surv)
    np.multiply(neg_s, e1, out=e1)
    np.multiply(theta, e2, out=e2)
    np.subtract(e1, e2, out=e1)
    np.minimum(e1, -1e-300, out=e1)                    # the slope
    _newton_update(t, surv, e1, log_p, e2)


def _newton_update(t: FloatArray, surv: FloatArray, slope: FloatArray, log_p: float,
                   work: FloatArray) -> None:
    """``t = t - (log(surv) - log_p) * surv / slope`` in place (``work`` is overwritten)."""
    np.log(surv, out=work)
    np.subtract(work, log_p, out=work)
    np.multiply(work, surv, out=work)
    np.divide(work, slope, out=work)
    np.subtract(t, work, out=t)


def sojourn_quantile(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray,
                     iterations: int = 7) -> FloatArray:
    """``q`` quantile (ms) of the M/M/c sojourn time; ``inf`` where the queue is unstable.

    Solves ``log S(t) = log(1 - q)`` by Newton's method from ``t = 0``; the iterates rise to the
    root (to ~1e-11 relative in 6 steps over utilisations 1-97 % and 1-8 servers; checked
    against bisection in the tests).
    """
    return _newton(q, _survival_terms(lam, mu, c), iterations)


SHORT_AXIS_ROWS = 32
"""Rows per column up to which a reduction along the short axis of an ``(n, K)`` boolean
array beats one call per column (its per-row cost is higher, its per-call cost lower); either
way the same booleans and counts."""


def _short(a: NDArray[np.bool_]) -> bool:
    return bool(a.shape[0] <= SHORT_AXIS_ROWS * a.shape[1])


def _rows_all(a: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``a.all(axis=1)`` of an ``(n, K)`` array; for many rows column by column (for a
    handful of columns several times faster than a reduction along the short axis)."""
    if _short(a):
        return cast(NDArray[np.bool_], a.all(axis=1))
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out &= a[:, j]
    return out


def _rows_any(a: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """``a.any(axis=1)`` of an ``(n, K)`` array; for many rows column by column."""
    if _short(a):
        return cast(NDArray[np.bool_], a.any(axis=1))
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        out |= a[:, j]
    return out


def _rows_count(a: NDArray[np.bool_]) -> NDArray[np.intp]:
    """``a.sum(axis=1)`` of an ``(n, K)`` boolean array; for many rows column by column."""
    if _short(a):
        short: NDArray[np.intp] = a.sum(axis=1, dtype=np.intp)
        return short
    out = a[:, 0].astype(np.intp)
    for j in range(1, a.shape[1]):
        out += a[:, j]
    return out


def _one_class_rows(present: NDArray[np.bool_], lam: FloatArray, mu: FloatArray,
                    c: FloatArray, weight: FloatArray) -> NDArray[np.bool_]:
    """Rows with exactly one present class whose every class (present or not) has finite
    inputs in range: a load ``0 <= lam < inf``, ``1e-200 < mu < 1e200``, ``1 <= c <= 64`` and
    a finite weight.
    For them the mixture's survival terms are finite in every class, so the absent classes
    add exact zeros and the bracketed Newton solve stays at the present class's own quantile
    (its bracket is that one point): the row's answer is that class's quantile alone."""
    sane = ((lam >= 0.0) & (lam < np.inf) & (mu > 1e-200) & (mu < 1e200) & (c >= 1.0)
            & (c <= 64.0) & np.isfinite(weight))
    out: NDArray[np.bool_] = (_rows_count(present) == 1) & _rows_all(sane)
    return out


def _class_major(lam: FloatArray, mu: FloatArray, c: FloatArray, weight: FloatArray,
                 rows: NDArray[np.intp] | None = None
                 ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``(K, n)`` contiguous copies of the ``(n, K)`` inputs, of the rows ``rows`` only if
    given (in their order). A server count that is one per row, broadcast over the classes
    (as the latency model passes it), stays a broadcast: it only enters exactly rounded
    arithmetic (``/``, ``*``, comparisons), whose results do not depend on the memory
    layout."""
    def copy(a: FloatArray) -> FloatArray:
        out: FloatArray = (np.ascontiguousarray(a.T) if rows is None
                           else a.T.take(rows, axis=1))
        return out

    if c.strides[1] == 0:
        per_row = c[:, 0] if rows is None else c[:, 0][rows]
        cs: FloatArray = np.broadcast_to(per_row, (c.shape[1], len(per_row)))
    else:
        cs = copy(c)
    return copy(lam), copy(mu), cs, copy(weight)


def mixture_sojourn_quantile(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray,
                             weight: FloatArray, iterations: int = 8) -> FloatArray:
    """``q`` quantile (ms) of a mixture of M/M/c queues, one row per configuration.

    All arrays are ``(n, K)``: per row, ``K`` classes of pods with per-pod arrival rate
    ``lam``, service rate ``mu`` and ``c`` servers, and the share ``weight`` of the requests
    each class serves (rows sum to 1; a class with weight 0 is absent). ``inf`` where a present
    class is unstable. The root lies between the smallest and the largest per-class quantile;
    Newton's method starts at the smallest (where the mixture survival is still above
    ``1 - q``) and is kept inside that bracket.

    A row with an unstable present class (``lam < SATURATION * mu`` false: saturated, or NaN)
    is ``inf`` without a solve: that class's own quantile is ``inf`` (NaN at worst), so the
    row's bracket is not finite and the solve's value for it would be replaced by ``inf``. A row
    with one present class (a configuration pinned to one node class) is solved as that class
    alone: the same number (:func:`_one_class_rows`), a fraction of the work. The other rows
    are solved on class-major ``(K, n)`` copies of their inputs (:func:`_mixture`): element by
    element the same operations, but a row's value broadcast over its classes is one long inner
    loop, not ``n`` loops of ``K``. Every operation of the solve is element by element (a class
    sum adds a row's own classes), so a row's numbers do not depend on the rows solved beside
    it.
    """
    if lam.shape[1] == 1:
        return _newton(q, _survival_terms(lam, mu, c), 7)[:, 0]
    present = weight > 0
    unstable = _rows_any(present & ~(lam < SATURATION * mu))
    one = _one_class_rows(present, lam, mu, c, weight) & ~unstable
    if not one.any() and not unstable.any():
        return _mixture(q, *_class_major(lam, mu, c, weight), iterations)
    out: FloatArray = np.full(lam.shape[0], np.inf)
    rest = ~(one | unstable)
    if one.any():
        rows = np.flatnonzero(one)
        # The one present class of each such row, in row order.
        at = np.flatnonzero(present[rows].reshape(-1))
        alone = _newton(q, _survival_terms(*(a[rows].reshape(-1)[at] for a in (lam, mu, c))),
                        7)
        out[rows] = np.where(np.isfinite(alone), alone, np.inf)
        # A negative quantile (not seen in practice) could make an absent class's exp
        # overflow inside the mixture solve: such rows take the general path, as do all the
        # others.
        rest[rows[alone < 0.0]] = True
    if rest.any():
        out[rest] = _mixture(q, *_class_major(lam, mu, c, weight, np.flatnonzero(rest)),
                             iterations)
    return out


def _zero_classes(lam: FloatArray, mu: FloatArray, c: FloatArray) -> bool:
    """Whether every element of these classes has inputs in range: a load ``0 <= lam < inf``,
    ``1e-200 < mu < 1e200`` and ``1 <= c <= 64`` (as :func:`_one_class_rows` asks). Their
    survival terms are then finite with ``s > 0`` and ``theta > 0``, so at any ``t >= 0`` such
    a class with weight 0 adds exact zeros to the mixture's survival and slope sums
    (``0 * a * exp(-s t)``, ``exp`` of a finite non-positive number)."""
    return bool(((lam >= 0.0) & (lam < np.inf) & (mu > 1e-200) & (mu < 1e200) & (c >= 1.0)
                 & (c <= 64.0)).all())


def _mixture(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray, weight: FloatArray,
             iterations: int) -> FloatArray:
    """:func:`mixture_sojourn_quantile` for ``K > 1`` classes and rows whose present classes are
    stable; the arrays are class-major ``(K, n)``.

    A class absent from every row (weight 0 throughout) is not solved on its own: its quantile
    enters no row's bracket. When its inputs are in range (:func:`_zero_classes`) and every
    bracket starts at ``t >= 0`` (the iterates stay in their bracket), it adds exact zeros to
    the mixture's sums, so the mixture is solved without it as well: the other classes' terms
    are added in the same order, and the sums are floored at 1e-300 (survival) and capped at
    -1e-300 (slope) before any use, so not even the sign of a zero sum reaches the iterate.
    Else the mixture is solved over every class, as it always was."""
    present = weight > 0
    used = present.any(axis=1)               # per class: present in some row
    if used.all():
        terms = _survival_terms(lam, mu, c)    # once: Erlang C is the costly part
        return _mixture_newton(q, terms, weight, present, *_bracket(q, terms, present),
                               iterations)
    if not used.any():                       # no row has a class: no bracket
        return np.full(lam.shape[1], np.inf)
    idle = ~used
    own = _survival_terms(lam[used], mu[used], c[used])
    ok, lo_f, hi_f = _bracket(q, own, present[used])
    if _zero_classes(lam[idle], mu[idle], c[idle]) and bool((lo_f >= 0.0).all()):
        return _mixture_newton(q, own, weight[used], present[used], ok, lo_f, hi_f,
                               iterations)
    return _mixture_newton(q, _survival_terms(lam, mu, c), weight, present, ok, lo_f, hi_f,
                           iterations)


Terms = tuple[NDArray[np.bool_], FloatArray, FloatArray, FloatArray, FloatArray]


def _bracket(q: float, terms: Terms, present: NDArray[np.bool_]
             ) -> tuple[NDArray[np.bool_], FloatArray, FloatArray]:
    """Per row of class-major survival ``terms``: whether its bracket is finite, and the
    bracket (the smallest and largest quantile of its present classes; 0 and 0 where not
    finite)."""
    per = _newton(q, terms, 7)
    lo = np.min(np.where(present, per, np.inf), axis=0)
    hi = np.max(np.where(present, per, -np.inf), axis=0)
    ok = np.isfinite(hi) & np.isfinite(lo)
    return ok, np.where(ok, lo, 0.0), np.where(ok, hi, 0.0)


def _mixture_newton(q: float, terms: Terms, weight: FloatArray, present: NDArray[np.bool_],
                    ok: NDArray[np.bool_], lo_f: FloatArray, hi_f: FloatArray,
                    iterations: int) -> FloatArray:
    """Newton's method on the mixture survival of class-major ``terms`` (weights ``weight``
    where ``present``), from each row's bracket start ``lo_f`` and kept inside
    ``[lo_f, hi_f]``; ``inf`` where the bracket is not finite (``ok`` false).

    The survival's two terms are computed stacked (``(2, K, n)``: ``w a1 exp(-s t)`` and
    ``w a2 exp(-theta t)``): one call where there were two, with the same operations element
    by element (on a planner's small batches a call's fixed cost is much of its time)."""
    _, s, theta, a1, a2 = terms
    w = np.where(present, weight, 0.0)
    log_p = math.log(1.0 - q)
    t = lo_f.copy()
    shape = (2, *w.shape)
    wa, rates, slopes = np.empty(shape), np.empty(shape), np.empty(shape)
    np.multiply(w, a1, out=wa[0])
    np.multiply(w, a2, out=wa[1])
    np.negative(s, out=rates[0])
    np.negative(theta, out=rates[1])
    slopes[0] = rates[0]
    slopes[1] = theta
    e = np.empty(shape)
    both = np.empty(w.shape)
    surv, slope, work = np.empty_like(t), np.empty_like(t), np.empty_like(t)
    for _ in range(iterations):
        np.multiply(rates, t, out=e)
        np.exp(e, out=e)
        np.multiply(wa, e, out=e)                   # e1, e2
        _class_sum(np.add(e[0], e[1], out=both), surv)
        np.maximum(surv, 1e-300, out=surv)
        np.multiply(slopes, e, out=e)               # -s e1, -theta e2
        _class_sum(np.subtract(e[0], e[1], out=both), slope)
        np.minimum(slope, -1e-300, out=slope)
        _newton_update(t, surv, slope, log_p, work)
        np.maximum(t, lo_f, out=t)                  # np.clip without its per-call handling
        np.minimum(t, hi_f, out=t)
    out: FloatArray = np.where(ok, t, np.inf)
    return out
