"""gpu_options.py generated:N SEED MINUTE CYCLES [CPU]: grid on the scenario; from MINUTE on, for CYCLES cycles,
the fewest replicas per shape predicted feasible (shape_options), 1-8 GPU pods of CPU cpu (0.5
by default) in any pool scored at the planned rate (bound, mean, supported, feasible) and the
explorer's measured speeds (section 56: gen-5038 seed 1 at minute 32.3; section 57: gen-5166
seed 2 at minute 98.3 with CPU 1)."""
import sys
sys.path.insert(0, ".")
from bench import slo
from knowledge.connect import open_knowledge_base
from planner.planners import grid
from simulator.runner import ScenarioRun
T0 = float(sys.argv[3]) * 60; seed = int(sys.argv[2])
CPU = float(sys.argv[5]) if len(sys.argv) > 5 else 0.5
orig = grid.GridPlanner._plan
state = {"n": 0}
def plan(self, ctx, mem):
    if ctx.now - slo.START >= T0 and state["n"] < int(sys.argv[4]):
        state["n"] += 1
        opts = self.shape_options(ctx)
        print(round((ctx.now - slo.START) / 60, 2), "rate", ctx.workload.request_rate, flush=True)
        for o in (opts or [])[:12]:
            print("   ", o.config, round(o.cost_per_hour, 3))
        from planner.planners.search_space import CandidateBatch
        import numpy as np
        from dataclasses import replace as rp
        from planner.planners.grid import Recall
        m2 = Recall.of(ctx.intent.key, ctx.memory)
        taken = self._take_in(ctx, m2)
        inp = taken[0]
        rate, _, _ = self._planned_rate(ctx, m2, inp.preds)
        n = 8
        b = CandidateBatch(np.arange(1, n + 1, dtype=float), np.full(n, CPU), np.full(n, 1.0), (None,) * n)
        s = self.score(ctx, b, rate, inp)
        for o, pr in s.predictions.items():
            print("   rate", round(rate), o, "bound", np.round(pr.bound, 1), "mean", np.round(pr.mean, 1), "supported", pr.supported.astype(int), "feasible", s.feasible.astype(int))
        m = mem.explorer
        print("   explorer", getattr(m, "speeds", None) if hasattr(m, "speeds") else "")
    return orig(self, ctx, mem)
grid.GridPlanner._plan = plan
sc = slo.load(sys.argv[1])
ScenarioRun(sc, "grid", seed, open_knowledge_base(None), start_time=slo.START).run((T0 / 60 + 3) * 60)
