"""A steady mix of two node classes (section 54; from a reviewer's probe): 80 rows of 3-16 pods
split half and half (the scheduler's spread) over a class and one 0.6x as fast, at 30-80 % of
their capacity. Prints the fitted speeds and offsets and the capacity with every pod on each
class. The load's variation at a steady mix tells the speeds; the share's contrast is ~0.
Usage, from a checkout's root: PYTHONPATH=. python docs/experiments/54/steady_mix.py"""
import numpy as np
from simulator import queueing
from planner.models.latency import QueueingLatencyRegressor, N_FIXED
SP = np.array([1.0, 0.6]); BASE = np.array([20.0, 20.0])
def truth(rate, counts):
    speeds = np.repeat(SP, counts); base = np.repeat(BASE, counts)
    mu = 24.0 * speeds; out = queueing.step_outcome(rate, mu / mu.sum(), mu, base, 5000.0,
        servers=np.full(len(mu), 2, dtype=np.int64))
    return queueing.quantile(out.components, 0.95)
rng = np.random.default_rng(2); rows, ys = [], []
for i in range(80):
    n = int(rng.integers(3, 17)); counts = [n - n // 2, n // 2]
    rate = float(rng.uniform(0.3, 0.8)) * 24.0 * float(np.dot(SP, counts))
    rows.append([rate, n, 2.0, 0.0, -1.0, *(np.array(counts) / n)]); ys.append(truth(rate, counts))
X, y = np.asarray(rows), np.asarray(ys)
est = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)
print("speeds", np.round(np.exp(est.theta_[N_FIXED:N_FIXED+2]), 3), "offsets", np.round(est.theta_[N_FIXED+2:], 2))
q = np.array([[0, 10, 2.0, 0, -1, 1, 0], [0, 10, 2.0, 0, -1, 0, 1]], float)
print("capacity all-on R,B", np.round(est.capacity(q), 1), "truth", 24*10*SP)
