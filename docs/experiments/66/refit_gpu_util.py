"""refit_gpu_util.py SCENARIO T SEED [FROM]: run SCENARIO (auto) to T seconds at SEED, build the
first objective's latency dataset (rows from FROM seconds on, the model's training window), and
refit it twice: with the utilisation of CPU rows only (main's fit) and with the GPU rows' too
(branch gpuutil's); print the fitted parameters, predictions at 580 req/s for 1 x 4/1/0.5 cpu
GPU, 2 x 4 cpu GPU, 8 and 12 x 4 cpu CPU, and the in-sample error per device. Section 66:
  PYTHONPATH=. .venv/bin/python docs/experiments/66/refit_gpu_util.py generated:3066 18730 1 12675
  PYTHONPATH=. .venv/bin/python docs/experiments/66/refit_gpu_util.py \
      examples/scenarios/gpu-inference.yaml 10800 1
The second variant is the latency module with its CPU-only utilisation mask removed, so the
script runs on the code before 52852bd, where section 66 ran it: in a checkout of b06bca6
(`git worktree add /tmp/b06 b06bca6`, then the commands above from /tmp/b06 with this file
copied there)."""
import sys, math
sys.path.insert(0, ".")
import numpy as np
from bench.device_pins import pinned
from bench.slo import START, load
from knowledge.connect import open_knowledge_base
from simulator.runner import ScenarioRun
from planner.models import observations as obs, latency as lat
from planner.models.training import SATURATED_UTILIZATION
scen, T, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
sc = pinned(load(scen, None), "auto")
kb = open_knowledge_base(None)
run = ScenarioRun(sc, None, seed, kb, start_time=START)
run.run(T)
key = sc.intents[0].key
evs = list(kb.events(key))
obj = sc.intents[0].spec.objectives[0].name
ds = obs.dataset(evs, obj)
gpu = ds.X[:, 3] > 0.5
print("rows", len(ds), "gpu rows", int(gpu.sum()), "util gpu rows", np.round(ds.utilization[gpu][:20], 2))
pass
mb = sc.intents[0].spec.objectives[0].measured_by
pct = next(p for p in sc.profiles if p.metadata.name == mb).spec.percentile / 100
lo_t = START + float(sys.argv[4]) if len(sys.argv) > 4 else -1
keep = ds.times >= lo_t
import dataclasses
ds = dataclasses.replace(ds, X=ds.X[keep], y=ds.y[keep], times=ds.times[keep], utilization=ds.utilization[keep], window_utilization=None)
gpu = ds.X[:, 3] > 0.5
print('kept', len(ds.y), 'gpu', int(gpu.sum())); cens = ds.utilization >= SATURATED_UTILIZATION
orig_fit = lat.QueueingLatencyRegressor.fit
for label, with_gpu in (("cpu-only util", False), ("gpu util too", True)):
    src = open(lat.__file__).read()
    est = lat.QueueingLatencyRegressor(quantile=pct)
    if with_gpu:
        # monkeypatch: treat GPU rows as CPU rows for the util mask only
        X2 = ds.X.copy()
        old = lat.QueueingLatencyRegressor.fit
        import types
        def patched_fit(self, X, y, censored=None, start=None, utilization=None):
            return old(self, X, y, censored, start=start, utilization=utilization)
    util = ds.utilization
    if with_gpu:
        src2 = src.replace("util = np.where((X[:, 3] < 0.5) & ~cens", "util = np.where(~cens")
        ns = {}
        mod = types.ModuleType("lat2"); mod.__dict__["__name__"] = "lat2"
        exec(compile(src2, "lat2", "exec"), mod.__dict__)
        est = mod.QueueingLatencyRegressor(quantile=pct)
    est.fit(ds.X, ds.y, cens, utilization=util)
    th = est.theta_
    print(label, "mu", round(math.exp(th[0]), 2), "alpha", round(th[1], 3), "gpu x", round(math.exp(th[2]), 2), "base", round(th[3], 1), "beta", round(th[4], 2), "resid", round(est.residual_scale_, 3))
    k = ds.X.shape[1] - 5
    rows = []
    rate = 580.0
    for r, c, d in [(1, 4.0, 1), (1, 1.0, 1), (1, 0.5, 1), (2, 4.0, 1), (8, 4.0, 0), (12, 4.0, 0)]:
        shares = np.zeros(k); 
        # mix: the GPU rows' mean shares for gpu, CPU rows' for cpu
        sel = gpu if d else ~gpu
        shares = ds.X[sel, 5:].mean(axis=0) if sel.any() else np.ones(k) / k
        rows.append([rate, r, c, d, -1, *shares])
    X = np.asarray(rows)
    m, b = est.predict_with_bound(X)
    print("   rows (r,cpu,gpu) at 580 req/s:", [(int(x[1]), x[2], int(x[3])) for x in X])
    print("   mean", np.round(m), "bound", np.round(b))
    print("   capacity (req/s before the first pod saturates)", np.round(est.capacity(X)))
    pred = est.predict(ds.X)
    ok = ~cens
    err = np.abs(np.log(pred[ok]) - np.log(ds.y[ok]))
    print("   in-sample median |log err| cpu rows", round(float(np.median(err[~gpu[ok]])), 3), "gpu rows", round(float(np.median(err[gpu[ok]])) if gpu[ok].any() else -1, 3))
