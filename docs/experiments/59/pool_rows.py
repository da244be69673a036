"""At a simulated minute of a grid run (seed 1), each objective's predicted mean and bound, support
and feasibility of 1-cpu CPU pods per pool over some replica counts (section 59).

    .venv/bin/python docs/experiments/59/pool_rows.py generated:1 34 eu-west-gen1,us-east-gen2,None 38,47,59,70
"""
import sys
sys.path.insert(0, "docs/experiments/45")
import numpy as np
from at_minute import at_minute
from planner.models.predictor import CandidateBatch
from planner.planners import grid as G

POOLS = sys.argv[3].split(",")
REPS = [int(x) for x in sys.argv[4].split(",")]

def probe(self, ctx, mem, inp, rate, plan):
    print("rate", round(rate, 1), "preds", {k: type(v).__name__ for k, v in inp.preds.items()})
    print("objectives", [(o.name, o.value) for o in ctx.intent.spec.objectives])
    for p in POOLS:
        pool = None if p == "None" else p
        reps = np.asarray(REPS, dtype=float)
        b = CandidateBatch(reps, np.full(len(reps), 1.0), np.zeros(len(reps), dtype=bool), (pool,) * len(reps))
        s = self.score(ctx, b, rate, inp)
        for n, pr in s.predictions.items():
            print(p, n, "mean", np.round(pr.mean, 1).tolist(), "bound", np.round(pr.bound, 1).tolist(),
                  "sup", pr.supported.astype(int).tolist())
        print(p, "feasible", s.feasible.astype(int).tolist(), "over", np.round(inp.limits.overload(b, rate), 2).tolist())

at_minute(sys.argv[1], sys.argv[2], probe)
