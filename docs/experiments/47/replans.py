"""On branch plan-rounds (2fa2255) only: per cycle, the intents planned, the plans made, which plans reserved room and
    which intents were hinted; the plans made again in all.  .venv/bin/python docs/experiments/47/replans.py 40 1800 100 20"""
import sys, collections; sys.path.insert(0,'.')
from bench import scale
from planner.control import plan_rounds
from planner.models import joined
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
log = []
orig = plan_rounds.in_order
def spy(items, view, plan, take, adds, likely=None, batch_size=plan_rounds.BATCH):
    rec = {"n": len(items), "plans": 0, "res": [], "likely": [i for i, it in enumerate(items) if likely and likely(it)]}
    def p(item, v): rec["plans"] += 1; plan(item, v)
    def t(item, v):
        a = take(item, v)
        if a is not v: rec["res"].append(items.index(item))
        return a
    out = orig(items, view, p, t, adds, likely, batch_size); log.append(rec); return out
plan_rounds.in_order = spy
n = int(sys.argv[1]); dur = float(sys.argv[2])
run = ScenarioRun(parse_scenario(scale.scenario(n, int(sys.argv[3]), int(sys.argv[4])), "scale"), "grid", 1)
run.run(duration=dur)
waste = sum(r["plans"] - r["n"] for r in log)
print("cycles", len(log), "waste", waste, "cycles with reservations", sum(1 for r in log if r["res"]))
for r in log[:40]:
    if r["res"] or r["plans"] > r["n"]: print(r)
