"""Every latency fit of a scenario run with the grid planner up to minute AT, saved for
fit_rows.py (section 53). Usage, from the repository root:
PYTHONPATH=. python docs/experiments/53/dump_fits.py generated:360 3 66 /tmp/fits360.pkl"""
import pickle, sys
from bench import slo
from planner.models import training as T
from simulator.runner import ScenarioRun

scen, seed, at, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
run = ScenarioRun(slo.load(scen), "grid", seed)
orig = T.fit_latency
fits = []
def hooked(ds, percentile, validate=True, start=None):
    res = orig(ds, percentile, validate, start)
    fits.append({"t": run.elapsed / 60, "X": ds.X.copy(), "y": ds.y.copy(), "u": ds.utilization.copy(),
                 "times": ds.times.copy(), "pct": percentile, "theta": res[0].theta_.copy(),
                 "classes": ds.classes})
    return res
T.fit_latency = hooked
import planner.models.training
while run.elapsed < at * 60:
    run.advance()
pickle.dump(fits, open(out, "wb"))
print(len(fits), [round(f["t"], 1) for f in fits])
