"""class_spreads.py N NODES PODS: bench/scale.py's scenario (shadow mode) warmed 12 simulated minutes, its
models copied (scale.copy_models); per fitted intent, the latency model's dispatch exponent beta and the
spread of its node classes' log speeds in each parameter vector (fit first, then the bootstrap).
Run from the repository root: .venv/bin/python docs/experiments/68/class_spreads.py 1000 5000 200"""
import math, sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from planner.models import serialization
n, nodes, pods = (int(a) for a in sys.argv[1:4])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
fitted, unc = scale.copy_models(run)
print("fitted", fitted, "uncovered", len(unc))
from planner.models.effects import from_document
from planner.models.latency import QueueingLatencyRegressor, N_FIXED
for key in fitted:
    for doc in run.knowledge.effects(key, with_blobs=True):
        m = from_document(doc)
        est = getattr(m, "estimator", None) or getattr(m, "model", None) or m
        for a in vars(m).values():
            if isinstance(a, QueueingLatencyRegressor): est = a
        if isinstance(est, QueueingLatencyRegressor):
            k = est.n_classes_
            th = np.vstack([est.theta_[None], est.bootstrap_thetas_])
            sp = th[:, N_FIXED:N_FIXED + k]
            np.set_printoptions(precision=4, suppress=True, linewidth=150)
            print(key, doc["objective"], "beta", th[:, 4], "\nlog speed spread per vector", sp.max(1) - sp.min(1))
            print("fit log speeds", sp[0])
        break
