"""The availability rows a run's trainer fitted on, with the utilisation of the events around
each (section 55). Prints, per intent, every training row that lost more than 0.1 % of its
requests: the row's time, pods, rate, utilisation and availability, and the highest
utilisation of any event within the KPI window before it (60 s) and of the next event.
Usage, from the repository root:
PYTHONPATH=. python docs/experiments/55/avail_rows.py generated:26 1 60"""
import sys

import numpy as np

from bench import slo
from planner.models import fit_job
from simulator.runner import ScenarioRun

scen, seed, at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
run = ScenarioRun(slo.load(scen), "grid", seed)
orig = fit_job.fit_effect
last: dict[str, tuple] = {}


def hooked(intent, objective, spec, ds, now, min_samples, start=None):
    if spec.type.value == "availability":
        last[intent] = (ds.X.copy(), ds.y.copy(), ds.times.copy(), ds.utilization.copy())
    return orig(intent, objective, spec, ds, now, min_samples, start)


fit_job.fit_effect = hooked
while run.elapsed < at * 60:
    run.advance()
for intent, (X, y, times, util) in last.items():
    evs = run.knowledge.events(intent)
    et = np.array([float(e["time"]) for e in evs])
    eu = np.array([float((e.get("load") or {}).get("cpu_utilization") or np.nan) for e in evs])
    lossy = np.flatnonzero(y < 0.999)
    print(f"{intent}: {len(y)} rows, {len(lossy)} below 0.999, mean {y.mean():.4f}")
    for i in lossy:
        t = times[i]
        before = eu[(et > t - 60) & (et <= t)]
        after = eu[et > t][:1]
        print(f"  t={t / 60:6.2f} min  pods={X[i, 1]:.0f} rate={X[i, 0]:.0f} util={util[i]:.2f} "
              f"avail={y[i]:.4f}  window max util={np.nanmax(before):.2f}  next util="
              f"{after[0] if after.size else float('nan'):.2f}")
