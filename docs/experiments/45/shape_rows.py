"""At a simulated minute, what grid predicts for each shape of the intent's space (section 45).

    .venv/bin/python docs/experiments/45/shape_rows.py generated:2620 29.5

Runs the scenario with ``grid`` (seed 1) and, at the first cycle past the minute, prints the
measured speeds, the planned load and, per (CPU size, device, pool), the fewest feasible count
and the fewest feasible and supported ("known") count over the whole replica axis.
"""
import sys

import numpy as np

from at_minute import at_minute
from planner.models.predictor import CandidateBatch
from planner.planners import grid as G


def probe(self, ctx, mem, inp, rate, plan):
    speeds = G.canary.measured_speeds(ctx, mem.explorer)
    print("planned", round(rate, 1), "req/s; measured speeds",
          {k: (v.reference, v.factor) for k, v in speeds.items()})
    space = G.space_for(ctx)
    reps = np.asarray(space.replicas, dtype=float)
    for c, g, p in zip(*space.shapes):
        b = CandidateBatch(reps, np.full(len(reps), c), np.full(len(reps), g),
                           (p,) * len(reps))
        s = self.score(ctx, b, rate, inp)
        first = np.flatnonzero(s.feasible)
        known = np.flatnonzero(s.feasible & s.supported)
        show = lambda i: None if not i.size else (int(reps[i[0]]), round(float(s.cost[i[0]]), 3))
        print(f"{c:g} cpu {'gpu' if g else 'cpu'} {p}: fewest feasible {show(first)}, "
              f"supported there {bool(s.supported[first[0]]) if first.size else None}; "
              f"fewest known {show(known)}")


at_minute(sys.argv[1], sys.argv[2], probe)
