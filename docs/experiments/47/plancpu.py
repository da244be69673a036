"""Sum of the plan phase's CPU over a run, and the run's violation-minutes and cost.
    .venv/bin/python docs/experiments/47/plancpu.py scale:40x100x20 1800   (or a bench/slo.py scenario name)"""
import sys; sys.path.insert(0, '.')
from bench import scale, slo
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
name = sys.argv[1]; dur = float(sys.argv[2]) if len(sys.argv) > 2 else None
if name.startswith("scale:"):
    n, nodes, pods = (int(x) for x in name[6:].split("x"))
    sc = parse_scenario(scale.scenario(n, nodes, pods), "scale")
else:
    sc = slo.load(name)
run = ScenarioRun(sc, "grid", 1)
tot = [0.0, 0]
def on_cycle(sim, outcomes):
    tot[0] += run.controller.clock.seconds.get("plan", 0.0); tot[1] += 1
rep = run.run(duration=dur, on_cycle=on_cycle).as_dict()
print(name, "plan CPU s", round(tot[0], 3), "cycles", tot[1], rep["totals"]["violation_minutes"], round(rep["totals"]["cost"], 4))
