"""proposals.py generated:N SEED FROM TO: grid on the scenario; for each canary proposal between
simulated minutes FROM and TO where places tie or compete (canary.first_place), the places
worth a trial with their best optimistic score and first counts, and the row chosen (section 57:
gen-4009 seed 2, minutes 11-13, at 6b42046). Written against that commit's first_place(batch, place, ok,
scores, at_centre); it does not run at later commits."""
import sys
sys.path.insert(0, ".")
import numpy as np
from bench import slo
from knowledge.connect import open_knowledge_base
from planner.planners import canary
from simulator.runner import ScenarioRun
T0, T1 = float(sys.argv[3]) * 60, float(sys.argv[4]) * 60
orig = canary.first_place
def fp(batch, place, ok, scores, at_centre):
    def wrapped(sub):
        f, s, sc = at_centre(sub)
        sel = np.flatnonzero(np.isin(place, np.unique(place[ok])))
        for k in np.unique(place[sel]):
            m = place[sel] == k
            rows = np.flatnonzero(m)
            b = sub.take(rows)
            fe = f[m]
            print("   place", k, b.gpu[0], b.pool[0] if len(b) else None, "centre feasible counts", b.replicas[fe][:5], "scores", np.round(sc[m][fe][:5], 3))
        return f, s, sc
    for k in np.unique(place[ok]):
        m = ok & (place == k)
        print("  ok place", k, batch.gpu[m][0], batch.take(np.flatnonzero(m)).pool[0], "best opt", round(float(scores[m].min()), 3), "counts", batch.replicas[m][:5])
    out = orig(batch, place, ok, scores, wrapped)
    print("  ->", out)
    return out
canary.first_place = fp
ScenarioRun(slo.load(sys.argv[1]), "grid", int(sys.argv[2]), open_knowledge_base(None), start_time=slo.START).run(T1 + 60)
