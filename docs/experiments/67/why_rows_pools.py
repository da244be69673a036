"""Section 64's why_rows.py with gen-3238's rows: 21 x 1 cpu CPU pods in eu-west-gpu, unpinned
and in eu-west-gen2, 16 in eu-west-gen1; what each predictor layer predicts and vouches for,
the canaries' measured speeds, the estimate and the places left (section 67: the unpinned
row vouched for by a model that knew only eu-west-gen2).
  PYTHONPATH=. python docs/experiments/67/why_rows_pools.py --scenario generated:3238 \
      --until 7291 --seed 1"""
from __future__ import annotations

import argparse
import copy
import sys

import numpy as np

sys.path.insert(0, ".")
from bench.device_pins import pinned
from bench.slo import START, load
from knowledge.connect import open_knowledge_base
from planner.models.predictor import CandidateBatch
from planner.planners.grid import GridPlanner, Recall
from simulator.runner import ScenarioRun

ap = argparse.ArgumentParser()
ap.add_argument("--scenario", default="examples/scenarios/gpu-inference.yaml")
ap.add_argument("--until", type=float, default=1800.0)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--device", default="auto")
args = ap.parse_args()
sc = pinned(load(args.scenario, None), args.device)
kb = open_knowledge_base(None)
run = ScenarioRun(sc, None, args.seed, kb, start_time=START)
seen = {}
orig = GridPlanner._plan
def spy(self, ctx, mem):
    seen[ctx.intent.key] = (self, ctx, copy.deepcopy(dict(ctx.memory)))
    return orig(self, ctx, mem)
GridPlanner._plan = spy
run.run(args.until)
GridPlanner._plan = orig
planner, ctx, memory = next(iter(seen.values()))
key = ctx.intent.key
print("t =", round(ctx.now - START), ctx.config, "rate", round(ctx.workload.request_rate, 1),
      "observed", {k: round(v) for k, v in ctx.current.items()})
mem = Recall.of(key, memory)
print("explorer speeds:", {t: (round(m.factor, 3), m.reference, m.reference_cpu, round(m.at - START), m.capacity)
                           for t, m in mem.explorer.speeds.get(key, {}).items()})
print("estimate:", mem.predictors.estimate)
print("left:", mem.predictors.left)
inp, violated, trial = planner._take_in(ctx, mem)
rate, corrected, fc = planner._planned_rate(ctx, mem, inp.preds)
print("planned rate", round(rate, 1), "violated", violated, "trial", trial)
def chain(p, depth=0):
    print("  " * depth + type(p).__name__, getattr(p, "kind", ""))
    for attr in ("inner", "base"):
        q = getattr(p, attr, None)
        if q is not None and hasattr(q, "predict"):
            chain(q, depth + 1)
    for q in getattr(p, "others", []) or []:
        print("  " * depth + " other:")
        chain(q, depth + 2)
rows = [(21, 1.0, "cpu"), (21, 1.0, "cpu"), (21, 1.0, "cpu"), (16, 1.0, "cpu")]
b = CandidateBatch(np.array([float(r) for r, _, _ in rows]), np.array([c for _, c, _ in rows]),
                   np.array([1.0 if d == "gpu" else 0.0 for _, _, d in rows]), ("eu-west-gpu", None, "eu-west-gen2", "eu-west-gen1"))
for n, p in inp.preds.items():
    chain(p)
    def show(q, depth=0):
        try:
            pr = q.predict(b, rate)
            kn = q.knows(b) if hasattr(q, "knows") else None
            print("  " * depth + type(q).__name__, "mean", np.round(pr.mean), "bound", np.round(pr.bound),
                  "supported", pr.supported.astype(int), "knows", None if kn is None else kn.astype(int))
        except Exception as e:
            print("  " * depth + type(q).__name__, "error", e)
        for attr in ("inner", "base"):
            r = getattr(q, attr, None)
            if r is not None and hasattr(r, "predict"):
                show(r, depth + 1)
        for o in getattr(q, "others", []) or []:
            show(o, depth + 2)
    print("rows", rows)
    show(p)
def find_model(p):
    m = getattr(p, "model", None)
    if m is not None and hasattr(m, "estimator"):
        return m
    for attr in ("inner", "base"):
        q = getattr(p, attr, None)
        if q is not None:
            r = find_model(q)
            if r is not None:
                return r
    return None
for n, p in inp.preds.items():
    model = find_model(p)
    if model is None:
        print("no learned model"); continue
    est = model.estimator
    print("model samples", model.samples, "cpu sizes", getattr(est, "cpu_sizes_", None),
          "alpha", round(float(est.theta_[1]), 3), "mu", round(float(np.exp(est.theta_[0])), 3),
          "gpu x", round(float(np.exp(est.theta_[2])), 2), "base", round(float(est.theta_[3]), 1),
          "resid", round(est.residual_scale_, 3), "meta", model.metadata)
    print("  bootstrap gpu x", np.round(np.exp(est.bootstrap_thetas_[:, 2]), 1))
