"""At a simulated minute, the learned model's predictions for 1-3 four-core GPU pods in eu-west-gpu,
its load range per device and the measured speeds (section 45, gen-3066):

    .venv/bin/python docs/experiments/45/gpu_rows.py generated:3066 89.7
"""
import sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
from bench import slo
from simulator.runner import ScenarioRun
from planner.planners import grid as G
from planner.models.predictor import CandidateBatch
scen, at = sys.argv[1], float(sys.argv[2]) * 60
run = ScenarioRun(slo.load(scen), "grid", 1)
orig = G.GridPlanner._plan
def spy(self, ctx, mem):
    plan = orig(self, ctx, mem)
    if run.elapsed >= at and not getattr(spy, "done", False):
        spy.done = True
        inp = self._take_in(ctx, G.Recall.of(ctx.intent.key, mem.as_memory(ctx.intent.key)))[0]
        rate, corr, fc = self._planned_rate(ctx, mem, inp.preds)
        print("cfg", ctx.config, "rate", round(rate), "obs", ctx.workload.request_rate, ctx.current)
        for name, p in inp.preds.items():
            inner = getattr(p, "inner", p)
            print(name, type(p).__name__, type(inner).__name__, getattr(getattr(inner, "model", None), "metadata", {}).get("load_per_core_max"))
            print("   speeds", getattr(p, "speeds", None))
        b = CandidateBatch(np.array([1., 2., 3.]), np.full(3, 4.0), np.ones(3), ("eu-west-gpu",) * 3)
        s = self.score(ctx, b, rate, inp)
        for i in range(3):
            print("  ", b.replicas[i], {k: (round(float(v.mean[i]), 1), round(float(v.bound[i]), 1), bool(v.supported[i])) for k, v in s.predictions.items()}, s.feasible[i])
        print("plan", plan.target, plan.reason[:300])
    return plan
G.GridPlanner._plan = spy
while run.elapsed < at + 30:
    run.advance()
