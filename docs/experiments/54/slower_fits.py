"""How often the latency model bounds a class's speed by saturated rows alone (section 54):
runs scenarios with the grid planner and counts the fits (bootstrap fits left out) that had
a class in `slower` (a non-empty `prior_at`). Usage, from a checkout's root:
PYTHONPATH=. python docs/experiments/54/slower_fits.py SEED generated:N [generated:M ...]"""
import sys
from bench import slo
from planner.models import latency as L
from simulator.runner import ScenarioRun

orig = L.QueueingLatencyRegressor._fit_theta
seen = {"fits": 0, "slower": 0}


def hooked(self, X, y, shares, start, lo, hi, censored, max_nfev=200, util=None, prior_at=None):
    if max_nfev == 200:                       # the main fit, not a bootstrap resample's
        seen["fits"] += 1
        seen["slower"] += int(prior_at is not None and prior_at.size > 0)
    return orig(self, X, y, shares, start, lo, hi, censored, max_nfev, util, prior_at)


L.QueueingLatencyRegressor._fit_theta = hooked
seed = int(sys.argv[1])
for scen in sys.argv[2:]:
    seen.update(fits=0, slower=0)
    run = ScenarioRun(slo.load(scen), "grid", seed)
    run.run()
    print(scen, "seed", seed, "latency fits", seen["fits"], "with a class bounded by saturated rows",
          seen["slower"], flush=True)
