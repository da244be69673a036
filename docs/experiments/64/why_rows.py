"""Run gpu-inference (or --scenario) to --until seconds at --seed with --device, re-read the
last cycle's predictors and print, for a few rows (1 x 4/1/0.5 cpu gpu, 9-30 x 4 cpu cpu),
what each predictor layer predicts, vouches for (supported) and knows; the canaries' measured
speeds, the explicit estimate, the places left and the learned model's fit and load range.
  .venv/bin/python docs/experiments/64/why_rows.py --until 1800 --seed 1
--rows REPLICASxCPU:DEVICE[@POOL] ... picks the rows (unpinned without @POOL), e.g.
  --rows 21x1:cpu@eu-west-gpu 21x1:cpu 21x1:cpu@eu-west-gen2 16x1:cpu@eu-west-gen1
--shapes prints, instead, the last cycle's grid searched again: per shape (CPU size, device,
pool) the feasible and known candidates, the fewest of each and the most replicas, with every
objective's (mean, bound, supported), and the shapes the safety layer vetoes (section 67)."""
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
ap.add_argument("--rows", nargs="*", default=["1x4:gpu", "1x1:gpu", "1x0.5:gpu", "9x4:cpu",
                                              "12x4:cpu", "24x4:cpu", "30x4:cpu"])
ap.add_argument("--shapes", action="store_true")
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
      "observed", {k: round(v) for k, v in ctx.current.items()}, "vetoed", ctx.vetoed)
mem = Recall.of(key, memory)
print("explorer speeds:", {t: (round(m.factor, 3), m.reference, m.reference_cpu, round(m.at - START), m.capacity)
                           for t, m in mem.explorer.speeds.get(key, {}).items()})
print("estimate:", mem.predictors.estimate)
print("left:", mem.predictors.left)
inp, violated, trial = planner._take_in(ctx, mem)
rate, corrected, fc = planner._planned_rate(ctx, mem, inp.preds)
print("planned rate", round(rate, 1), "violated", violated, "trial", trial)
if args.shapes:
    from planner.planners.search_space import space_for
    scored, how = planner._search(ctx, space_for(ctx), rate, inp)
    b = scored.batch
    by_shape = {}
    for i in range(len(b)):
        c = b.config(i)
        by_shape.setdefault((c.cpu, c.device, c.pool), []).append(i)
    def desc(i):
        if i is None:
            return None
        preds = {n: (round(float(p.mean[i]), 1), round(float(p.bound[i]), 1), bool(p.supported[i]))
                 for n, p in scored.predictions.items()}
        return (int(b.replicas[i]), round(float(scored.cost[i]), 3), preds)
    fewest = lambda idx: min(idx, key=lambda i: b.replicas[i]) if idx else None
    for sh, idx in sorted(by_shape.items(), key=lambda kv: str(kv[0])):
        feas = [i for i in idx if scored.feasible[i]]
        known = [i for i in feas if scored.supported[i]]
        print(sh, "n", len(idx), "feasible", len(feas), "known", len(known), "first feasible",
              desc(fewest(feas)), "first known", desc(fewest(known)), "most",
              desc(max(idx, key=lambda i: b.replicas[i])))
    sys.exit(0)
def chain(p, depth=0):
    print("  " * depth + type(p).__name__, getattr(p, "kind", ""))
    for attr in ("inner", "base"):
        q = getattr(p, attr, None)
        if q is not None and hasattr(q, "predict"):
            chain(q, depth + 1)
    for q in getattr(p, "others", []) or []:
        print("  " * depth + " other:")
        chain(q, depth + 2)
def parse_row(text):
    shape, _, pool = text.partition("@")
    size, _, device = shape.partition(":")
    reps, _, cpu = size.partition("x")
    return int(reps), float(cpu), device, pool or None
parsed = [parse_row(r) for r in args.rows]
rows = [(r, c, d) for r, c, d, _ in parsed]
b = CandidateBatch(np.array([float(r) for r, _, _ in rows]), np.array([c for _, c, _ in rows]),
                   np.array([1.0 if d == "gpu" else 0.0 for _, _, d in rows]),
                   tuple(p for *_, p in parsed))
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
    print("rows", args.rows)
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
