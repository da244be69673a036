"""capture.py: bench/scale.py's scenario (20 intents, 100 nodes in 10 pools, 200 pods each), shadow
mode, copied models; records every mixture_sojourn_quantile call of four steady cycles to
/tmp/calls.pkl and prints the calls, their rows (bootstrap vectors x candidates) and classes.
Run from the repository root: .venv/bin/python docs/experiments/65/capture.py"""
import math, sys, pickle
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
import planner.models.sojourn as sj
import planner.models.latency as lat
run = ScenarioRun(parse_scenario(scale.scenario(20, 100, 200, True), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
per = round(run.cycle_s / run.step_s)
for _ in range(2 * per): run.advance()
calls = []
orig = sj.mixture_sojourn_quantile
def spy(q, lam, mu, c, weight, iterations=8):
    out = orig(q, lam, mu, c, weight, iterations)
    calls.append((q, lam.copy(), mu.copy(), c.copy(), weight.copy(), iterations, out.copy()))
    return out
lat.mixture_sojourn_quantile = spy
for _ in range(4 * per): run.advance()
pickle.dump(calls, open("/tmp/calls.pkl", "wb"))
import numpy as np
print(len(calls), "calls; rows", np.percentile([c[1].shape[0] for c in calls], [10, 50, 90]), "K", sorted({c[1].shape[1] for c in calls}))
