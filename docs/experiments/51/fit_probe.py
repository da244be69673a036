"""Each latency-model fit of generated:5038 seed 3 up to minute 46 (grid): its rows, GPU rows,
the node classes of its CPU rows and of its GPU rows, the fitted class speeds and GPU factor.
Run at f1778d1 (before the device rule). Usage: fit_probe.py"""
import sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
from bench import slo
from planner.models import latency as L
from simulator.runner import ScenarioRun
run = ScenarioRun(slo.load("generated:5038"), "grid", 3)
orig = L.QueueingLatencyRegressor.fit
def fit(self, X, y, *a, **k):
    out = orig(self, X, y, *a, **k)
    Xa = np.asarray(X, dtype=float); gpu = Xa[:, 3] > 0.5
    sh = self._shares(Xa)
    k_ = self.n_classes_
    speeds = np.exp(self.theta_[L.N_FIXED:L.N_FIXED + k_])
    print(f"{run.elapsed/60:6.2f} rows {len(Xa)} gpu rows {int(gpu.sum())} "
          f"cpu-row classes {sorted(set(np.flatnonzero(sh[~gpu].sum(0) > 0).tolist()))} "
          f"gpu-row classes {sorted(set(np.flatnonzero(sh[gpu].sum(0) > 0).tolist()))} speeds {np.round(speeds, 2).tolist()} gpu factor {np.exp(self.theta_[2]):.2f}", flush=True)
    return out
L.QueueingLatencyRegressor.fit = fit
while run.elapsed < 46 * 60:
    run.advance()
