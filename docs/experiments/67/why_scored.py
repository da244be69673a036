"""Run a scenario to --until at --seed and search the last cycle again: per shape (CPU size,
device, pool) of the grid, how many candidates are feasible and known, the fewest feasible
and known and the most replicas, with each objective's (mean, bound, supported); and the
shapes the safety layer vetoes.
  PYTHONPATH=. python docs/experiments/67/why_scored.py --scenario generated:3238 \
      --until 7711 --seed 1"""
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
from planner.planners.search_space import space_for
from planner.planners import feedback
print("t =", round(ctx.now - START), ctx.config, "rate", round(ctx.workload.request_rate, 1),
      "observed", {k: round(v) for k, v in ctx.current.items()}, "vetoed", ctx.vetoed)
mem = Recall.of(key, memory)
inp, violated, trial = planner._take_in(ctx, mem)
rate, corrected, fc = planner._planned_rate(ctx, mem, inp.preds)
print("planned rate", round(rate, 1), "violated", violated, "trial", trial)
space = space_for(ctx)
scored, how = planner._search(ctx, space, rate, inp)
b = scored.batch
shapes = {}
for i in range(len(b)):
    c = b.config(i)
    sh = (c.cpu, c.device, c.pool)
    shapes.setdefault(sh, []).append(i)
for sh, idx in sorted(shapes.items(), key=lambda kv: str(kv[0])):
    feas = [i for i in idx if scored.feasible[i]]
    known = [i for i in idx if scored.feasible[i] and scored.supported[i]]
    first = min(feas, key=lambda i: b.replicas[i]) if feas else None
    def desc(i):
        if i is None: return None
        preds = {n: (round(float(p.mean[i]), 1), round(float(p.bound[i]), 1), bool(p.supported[i])) for n, p in scored.predictions.items()}
        return (int(b.replicas[i]), round(float(scored.cost[i]), 3), preds)
    print(sh, "n", len(idx), "feasible", len(feas), "known", len(known), "first feasible", desc(first),
          "first known", desc(min(known, key=lambda i: b.replicas[i]) if known else None),
          "most", desc(max(idx, key=lambda i: b.replicas[i])))
