"""The pod groups of one intent's workload, cycle by cycle, between two minutes of a generated
scenario run by grid (section 52). Usage, from the repository root:
PYTHONPATH=. python docs/experiments/52/pods_probe.py SEED_OF_SCENARIO RUN_SEED WORKLOAD FROM TO
e.g. 360 3 payments/search 59.5 62.6"""
import sys
from collections import Counter

from bench import slo
from simulator.runner import ScenarioRun

scenario, seed, workload = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lo, hi = float(sys.argv[4]), float(sys.argv[5])
run = ScenarioRun(slo.load(f"generated:{scenario}"), "grid", seed)


def on_cycle(sim, outcomes):
    t = sim.elapsed / 60
    if lo <= t <= hi:
        wl = sim.observe().workload(workload)
        groups = Counter((p.cpu, p.device, p.pool, p.node is not None, p.ready) for p in wl.pods)
        util = sorted({round(p.cpu_utilization, 2) for p in wl.pods if p.ready})
        print(f"{t:6.2f} cfg={wl.config} (cpu, device, pool, on a node, ready): {dict(groups)} "
              f"rate={wl.request_rate:.0f} utilisation of ready pods={util[:6]}", flush=True)


run.run(duration=hi * 60 + 1, on_cycle=on_cycle)
