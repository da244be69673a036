"""At a simulated minute, the learned model's predictions for 1-3 four-core GPU pods in eu-west-gpu,
its load range per device and the measured speeds (section 45, gen-3066):

    .venv/bin/python docs/experiments/45/gpu_rows.py generated:3066 89.7
"""
import sys

import numpy as np

from at_minute import at_minute
from planner.models.predictor import CandidateBatch


def probe(self, ctx, mem, inp, rate, plan):
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


at_minute(sys.argv[1], sys.argv[2], probe)
