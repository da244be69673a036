"""On branch plan-rounds: of the plans made again after a reservation, how many came out the
same as the stale plan (what read-set validation could keep). Needs greenlet.
    .venv/bin/python stale_replans.py 40 1800 100 20   (intents, seconds, nodes, pods)"""
import sys, dataclasses; sys.path.insert(0, '.')
from bench import scale
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
        k = id(item)
        if k in last:
            stats["replans"] += 1
            stats["same"] += last[k] == r
        last[k] = r
    return orig(items, view, p, take, adds, likely, apart, batch_size)
plan_rounds.in_order = spy
n, dur, nodes, pods = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods), "scale"), "grid", 1)
run.run(duration=dur)
print(n, nodes, pods, stats)
