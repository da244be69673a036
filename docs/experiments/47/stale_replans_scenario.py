"""On branch plan-rounds (needs greenlet): of the plans made again after a reservation in a shipped or generated
    scenario, how many came out the same as the stale plan.  .venv/bin/python stale_replans_scenario.py generated:26"""
import sys, dataclasses; sys.path.insert(0, '.')
from bench import slo
from planner.control import plan_rounds
from simulator.runner import ScenarioRun
stats = {"replans": 0, "same": 0}
orig = plan_rounds.in_order
def spy(items, view, plan, take, adds, likely=None, apart=None, batch_size=plan_rounds.BATCH):
    last = {}
    def p(item, v):
        plan(item, v)
        pl = item.out.plan
        r = None if pl is None else repr(dataclasses.replace(pl, planning_ms=0.0))
        if id(item) in last:
            stats["replans"] += 1; stats["same"] += last[id(item)] == r
        last[id(item)] = r
    return orig(items, view, p, take, adds, likely, apart, batch_size)
plan_rounds.in_order = spy
run = ScenarioRun(slo.load(sys.argv[1]), "grid", 1)
run.run()
print(sys.argv[1], stats)
