"""A node class seen only at saturation (section 53; a reviewer's probe): 30 rows on the fast
class, 4 censored rows with every pod on a class half as fast. Prints the slow class's fitted
speed, the capacity of each class and a prediction where the slow pods saturated.
Usage, from the repository root: python docs/experiments/53/censored_class.py ."""
import sys, numpy as np, math
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1]+'/tests')
from test_node_classes import truth
from planner.models.latency import QueueingLatencyRegressor
rng = np.random.default_rng(5)
X, y = [], []
for _ in range(30):
    rate = float(rng.uniform(0.3, 0.8)) * 48.0 * 10
    X.append([rate, 10, 2.0, 0, -1, 0.0, 1.0]); y.append(truth(rate, 10, 1.0))
for u in (1.1, 1.3, 1.5, 1.2):     # all pods on the slow class, over its capacity: saturated
    rate = u * 24.0 * 10
    X.append([rate, 10, 2.0, 0, -1, 1.0, 0.0]); y.append(4000.0)
X, y = np.array(X), np.array(y)
est = QueueingLatencyRegressor(n_bootstrap=4).fit(X, y, censored=y >= 4000)
cap = est.capacity(np.array([[0, 10, 2.0, 0, -1, 1.0, 0.0], [0, 10, 2.0, 0, -1, 0.0, 1.0]]))
print("slow-class log speed", round(est.theta_[5], 3), "speed", round(math.exp(est.theta_[5]), 3))
print("capacity all-slow / all-fast", cap.round(1), "true 240 / 480 (x SATURATION)")
print("pred at 300 rps all-slow", est.predict(np.array([[300, 10, 2.0, 0, -1, 1.0, 0.0]])).round(1), "supported", est.supported(np.array([[300, 10, 2.0, 0, -1, 1.0, 0.0]])))
