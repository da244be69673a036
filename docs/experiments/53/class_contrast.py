"""Identifiability of a node class's speed and offset (section 53; a reviewer's probe): rows
where the fast class always has the same small share, or a share that varies, and what the fit
gives for configurations with every pod on one class, against the simulator's truth.
Usage, from the repository root: python docs/experiments/53/class_contrast.py ."""
import sys, numpy as np, math
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1]+'/tests')
from test_node_classes import truth
from planner.models.latency import QueueingLatencyRegressor
rng = np.random.default_rng(3)
def rows(shares, noise=0.05):
    X, y = [], []
    for f in shares:
        rate = float(rng.uniform(0.3, 0.7)) * 24.0 * (20 + 20 * f)
        X.append([rate, 20, 2.0, 0.0, -1.0, 1-f, f]); y.append(truth(rate, 20, f))
    y = np.array(y) * np.exp(rng.normal(0, noise, len(y)))
    return np.array(X), y
for name, shares in [("const 5% x 80", [0.05]*80), ("const 10% x 40", [0.1]*40), ("0 x30 + 10% x 35", [0.0]*30+[0.1]*35), ("0 x30 + 10% x 25", [0.0]*30+[0.1]*25), ("0 x30 + 50%x3 + 100%x3", [0.0]*30+[0.5]*3+[1.0]*3)]:
    X, y = rows(shares)
    est = QueueingLatencyRegressor(n_bootstrap=2).fit(X, y)
    allfast = np.array([[150.0, 10, 2.0, 0, -1, 0, 1], [150.0, 10, 2.0, 0, -1, 1, 0]])
    true = [truth(150.0, 10, 1.0), truth(150.0, 10, 0.0)]
    print(name, "speed", round(math.exp(est.theta_[6]),3), "offset", round(est.theta_[8],2), "pred all-fast/all-slow", est.predict(allfast).round(1), "truth", np.round(true,1))
