"""How well the rows tell a node class's speed (section 54, a probe for the next step): each
case is fitted with every seen class free, then the standard error of the predicted log
latency with every pod on the second class is taken from the fit's Jacobian (sigma^2 (J'J)^-1,
sigma the residual scale, parameters at their bounds' width ~0 left out). Cases: one glimpse
row, a constant small share, a steady half-and-half mix with varying load, a few rows with
every pod moved. Beside it, the spread of the same prediction over the model's own 8
bootstrap fits. Usage, from a checkout's root: PYTHONPATH=.:tests python
docs/experiments/54/speed_uncertainty.py"""
import math
import numpy as np
import planner.models.latency as L
from test_node_classes import _rows_at, truth
from simulator import queueing

L.CLASS_EVIDENCE_ROWS = 0.0        # every seen class free: the measure is what is probed


def steady_mix(n_rows: int = 80):
    sp = np.array([1.0, 0.6])
    rng = np.random.default_rng(2)
    rows, ys = [], []
    for _ in range(n_rows):
        n = int(rng.integers(3, 17)); counts = [n - n // 2, n // 2]
        rate = float(rng.uniform(0.3, 0.8)) * 24.0 * float(np.dot(sp, counts))
        speeds = np.repeat(sp, counts); mu = 24.0 * speeds
        out = queueing.step_outcome(rate, mu / mu.sum(), mu, np.full(n, 20.0), 5000.0,
                                    servers=np.full(n, 2, dtype=np.int64))
        rows.append([rate, n, 2.0, 0.0, -1.0, *(np.array(counts) / n)])
        ys.append(queueing.quantile(out.components, 0.95))
    return np.asarray(rows), np.asarray(ys), 144.0 / 240.0


def se_all_on(est, X, y, k):
    theta = est.theta_.copy()
    ok = np.isfinite(est._forward(theta, X, est._shares(X)))
    Xo, yo = X[ok], y[ok]
    sh = est._shares(Xo)
    probe = Xo[:1].copy(); probe[0, 0] = float(np.median(Xo[:, 0])); probe[0, 5:] = 0; probe[0, 5 + k] = 1
    def f(t):
        return np.log(np.maximum(est._forward(t, np.vstack([Xo, probe]),
                                              est._shares(np.vstack([Xo, probe]))), 1e-9))
    base = f(theta)
    cols = []
    free = [i for i in range(len(theta)) if i not in (1, 2)]   # CPU exponent, GPU: one size, no GPU
    for i in free:
        t = theta.copy(); h = 1e-4 * max(1.0, abs(t[i])); t[i] += h
        cols.append((f(t) - base) / h)
    J = np.array(cols).T
    Jr, g = J[:-1], J[-1]
    sigma = max(est.residual_scale_, 0.02)
    if not np.isfinite(J).all() or base[-1] <= math.log(1e-9):
        # unstable, or a latency at or below zero, predicted with every pod on the class
        return math.inf, float(np.exp(base[-1]))
    info = Jr.T @ Jr
    # A direction the rows do not constrain gets the variance of a ridge of 1e-9 of the
    # information's scale: huge, not the zero a pseudo-inverse would give it.
    cov = sigma ** 2 * np.linalg.inv(info + 1e-9 * np.trace(info) * np.eye(len(free)))
    return float(math.sqrt(max(g @ cov @ g, 0.0))), float(np.exp(base[-1]))


cases = []
X, y = _rows_at([0.0] * 30 + [0.1], 7); y[-1] *= 1.6
cases.append(("one glimpse row (10 %, 60 % slow)", X, y, 2.0))
X, y = _rows_at([0.1] * 40, 9)
cases.append(("40 rows at a constant 10 %", X, y, 2.0))
X, y = _rows_at([0.05] * 80, 3)
cases.append(("80 rows at a constant 5 %", X, y, 2.0))
X, y, s = steady_mix()
cases.append(("80 rows half and half, load varies", X, y, s))
X, y = _rows_at([0.0] * 30 + [1.0] * 3, 8)
cases.append(("30 rows at 0 %, 3 at 100 %", X, y, 2.0))
X, y = _rows_at([0.0] * 20 + [0.5] * 10 + [1.0] * 10, 8)
cases.append(("20 at 0 %, 10 at 50 %, 10 at 100 %", X, y, 2.0))
def bootstrap_spread(est, X):
    """The standard deviation of the log latency with every pod on the second class over the
    model's own bootstrap fits (the default 8), where every one is finite and positive."""
    probe = X[:1].copy(); probe[0, 0] = float(np.median(X[:, 0])); probe[0, 5:] = 0; probe[0, 6] = 1
    preds = np.array([est._forward(t, probe, est._shares(probe))[0] for t in est.bootstrap_thetas_])
    if not (np.isfinite(preds).all() and (preds > 0).all()):
        return math.inf
    return float(np.std(np.log(preds)))


for name, X, y, true_speed in cases:
    est = L.QueueingLatencyRegressor().fit(X, y)
    se, pred = se_all_on(est, X, y, 1)
    print(f"{name:40s} speed {math.exp(est.theta_[L.N_FIXED + 1]):6.3f} (truth {true_speed:.2f})"
          f"  SE of log latency, every pod on it: {se:8.3f}; bootstrap spread {bootstrap_spread(est, X):8.3f}")
