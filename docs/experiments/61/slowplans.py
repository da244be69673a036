"""slowplans.py SCENARIO SEED [N]: run grid on SCENARIO at SEED in this process and print the
run's totals, its plan time (sum, p50/p90/p99/max of the per-intent plans, wall clock as the
controller measures it) and the N slowest plans (default 12) with their minute, current and
target configuration and reason (section 61). Run from the repository root."""
import sys
sys.path.insert(0, ".")

import numpy as np
from bench import slo
from simulator.runner import ScenarioRun

run = ScenarioRun(slo.load(sys.argv[1]), "grid", int(sys.argv[2]))
rows = []


def on_cycle(sim, outcomes):
    for o in outcomes:
        p = o.plan
        if p is not None and p.planning_ms is not None:
            rows.append((p.planning_ms, sim.elapsed / 60, str(p.current), str(p.target),
                         p.reason[:150]))


t = run.run(on_cycle=on_cycle).as_dict()["totals"]
print("totals", t["violation_minutes"], t["cost"], t["actions"])
ms = np.array([r[0] for r in rows])
print("n", len(ms), "sum %.0f" % ms.sum(),
      "p50 %.1f p90 %.1f p99 %.1f max %.1f" % tuple(np.percentile(ms, [50, 90, 99, 100])))
for r in sorted(rows, reverse=True)[:int(sys.argv[3]) if len(sys.argv) > 3 else 12]:
    print("%.1f ms  min %.1f  %s -> %s | %s" % r)
