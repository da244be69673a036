"""At a simulated minute, the grid's predictions for the current shape at 40-120 replicas, at the observed
and the planned load (section 45, gen-2988):

    .venv/bin/python docs/experiments/45/model_rows.py generated:2988 30

An optional third argument lists the replica counts (section 49: ``generated:5972 15.3
17,30,60,120,179``).
"""
import sys

import numpy as np

from at_minute import at_minute
from planner.models.predictor import CandidateBatch


def probe(self, ctx, mem, inp, rate, plan):
    print("rate", rate, "observed", ctx.workload.request_rate, "headroom", ctx.admin.headroom, "prio", ctx.intent.spec.priority, "kpis", ctx.current)
    cfg = ctx.config
    reps = (np.array([float(x) for x in sys.argv[3].split(",")]) if len(sys.argv) > 3 else
            np.array([40, 50, 60, 70, 80, 90, 100, 110, 115, 120], dtype=float)); n = len(reps)
    for r in (ctx.workload.request_rate, rate):
        b = CandidateBatch(reps, np.full(n, cfg.cpu), np.zeros(n), (cfg.pool,) * n)
        s = self.score(ctx, b, r, inp)
        print("at", round(r), "kinds", {k: type(v).__name__ for k, v in inp.preds.items()})
        for i in range(n):
            print("  ", reps[i], {k: (round(float(v.mean[i]), 1), round(float(v.bound[i]), 1), bool(v.supported[i])) for k, v in s.predictions.items()}, "feas", bool(s.feasible[i]), "cost", round(float(s.cost[i]), 3), "score", round(float(s.score[i]), 3))


at_minute(sys.argv[1], sys.argv[2], probe)
