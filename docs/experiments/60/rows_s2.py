"""rows_s2.py generated:N SEED MIN [MIN...]: grid on the scenario at SEED; at the first cycle past
each simulated minute, the p50 latency the wrapped (measured speeds) and the inner learned model
predict for 1-cpu pods in us-east-gen2 at 14-38 replicas, and whether each vouches (section 60:
gen-4009 seed 2, minute 57)."""
import sys
sys.path.insert(0, ".")

import numpy as np
from bench import slo
from simulator.runner import ScenarioRun
from planner.models.predictor import CandidateBatch
from planner.planners import grid as G
mins = [float(x) for x in sys.argv[3:]]
run = ScenarioRun(slo.load(sys.argv[1]), "grid", int(sys.argv[2]))
orig = G.GridPlanner._plan
def spy(self, ctx, mem):
    plan = orig(self, ctx, mem)
    if mins and run.elapsed >= mins[0] * 60:
        mins.pop(0)
        inp = self._take_in(ctx, G.Recall.of(ctx.intent.key, mem.as_memory(ctx.intent.key)))[0]
        rate = self._planned_rate(ctx, G.Recall.of(ctx.intent.key, mem.as_memory(ctx.intent.key)), inp.preds)[0]
        reps = np.arange(14, 40, 2, dtype=float)
        b = CandidateBatch(reps, np.full(len(reps), 1.0), np.zeros(len(reps)), ("us-east-gen2",) * len(reps))
        lat = inp.preds["p50latency"]
        inner = getattr(lat, "inner", lat)
        p = lat.predict(b, rate); q = inner.predict(b, rate)
        print(f"{run.elapsed/60:.2f} rate {rate:.0f} kinds {type(lat).__name__}/{type(inner).__name__}")
        for i, r in enumerate(reps):
            print(f"   {int(r)}: wrapped {p.mean[i]:.1f} sup {p.supported[i]}  inner {q.mean[i]:.1f} sup {q.supported[i]}")
    return plan
G.GridPlanner._plan = spy
run.run(max(float(x) for x in sys.argv[3:]) * 60 + 30)
