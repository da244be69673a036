"""Every canary proposal of a grid run between two simulated minutes, on branch `parity` (section 48:
the centre-ranking patch): each place's optimistic speed, its best score there and at price
parity, and the place chosen.

    .venv/bin/python docs/experiments/48/centre_probe.py generated:4009 9.5 10.5
"""
import sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
from bench import slo
from planner.planners import canary as C
from simulator.runner import ScenarioRun
run = ScenarioRun(slo.load(sys.argv[1]), "grid", 1)
t0, t1 = float(sys.argv[2])*60, float(sys.argv[3])*60
orig_ml = C._most_likely
def ml(ok, scores, rows, batch, optimistic, preds, throughput, score):
    cand = np.flatnonzero(ok)
    centre = {pl: C.Speed(sp.reference, sp.factor / C.PRIOR_SPREAD) for pl, sp in optimistic.items()}
    f, _, s = score(batch.take(rows[cand]), C.with_speeds(preds, centre, throughput))
    sub = batch.take(rows[cand])
    print(round(run.elapsed/60,2), "optimistic", {k: round(v.factor,2) for k,v in optimistic.items()})
    for pl in optimistic:
        m = C.place_mask(sub, pl)
        if m.any():
            j = np.flatnonzero(m)
            fj = j[f[j]]
            print("  ", pl, "ok rows", len(j), "best opt", round(float(scores[cand][j].min()),3), "centre feasible", len(fj), "best centre", round(float(s[fj].min()),3) if len(fj) else None)
    r = orig_ml(ok, scores, rows, batch, optimistic, preds, throughput, score)
    print("  chosen", batch.config(int(rows[r])))
    return r
C._most_likely = ml
orig_p = C.propose
def prop(ctx, explorer, actuator, places, observed, *a, **k):
    if t0 <= run.elapsed <= t1:
        print(round(run.elapsed/60,2), "propose places", places, "observed", observed, "rescue", k.get("rescue"), "tried", explorer.tried if hasattr(explorer,'tried') else None)
    return orig_p(ctx, explorer, actuator, places, observed, *a, **k)
C.propose = prop
while run.elapsed < t1:
    run.advance()
