"""On branch plan-rounds (needs greenlet): of the plans made again after a reservation, how
many came out the same as the stale plan (what read-set validation could keep).
    .venv/bin/python stale_replans.py scale:40x100x20 1800   (bench/scale.py's scenario: intents x nodes x pods)
    .venv/bin/python stale_replans.py generated:26           (a bench/slo.py scenario, whole run)"""
import dataclasses
import sys

sys.path.insert(0, '.')
from bench import scale, slo
from planner.control import plan_rounds
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

stats = {"replans": 0, "same": 0}
orig = plan_rounds.in_order


def spy(items, view, plan, take, adds, likely=None, apart=None, batch_size=plan_rounds.BATCH):
    last = {}

    def p(item, v):
        plan(item, v)
        pl = item.out.plan
        r = None if pl is None else repr(dataclasses.replace(pl, planning_ms=0.0))
        if id(item) in last:
            stats["replans"] += 1
            stats["same"] += last[id(item)] == r
        last[id(item)] = r
    return orig(items, view, p, take, adds, likely, apart, batch_size)


plan_rounds.in_order = spy
name = sys.argv[1]
if name.startswith("scale:"):
    n, nodes, pods = (int(x) for x in name[6:].split("x"))
    sc = parse_scenario(scale.scenario(n, nodes, pods), "scale")
else:
    sc = slo.load(name)
ScenarioRun(sc, "grid", 1).run(duration=float(sys.argv[2]) if len(sys.argv) > 2 else None)
print(name, stats)
