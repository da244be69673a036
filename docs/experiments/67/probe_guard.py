"""Every cycle between T0 and T1 of a run: the current configuration and pod groups, the
planner's target, the safety layer's (guarded) target, actions, reason and vetoed shapes.
  PYTHONPATH=. python docs/experiments/67/probe_guard.py generated:3238 auto 1 7270 7400"""
import sys
sys.path.insert(0, ".")
from bench.device_pins import pinned
from bench.slo import START, load
from knowledge.connect import open_knowledge_base
from planner.planners import safety
from simulator.runner import ScenarioRun

scen, dev, seed, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
run = ScenarioRun(pinned(load(scen, None), dev), None, seed, open_knowledge_base(None), start_time=START)
orig = safety.guard
def spy(ctx, plan, memory, planner):
    out, mem = orig(ctx, plan, memory, planner)
    t = ctx.now - START
    if t0 <= t <= t1:
        print(t, "cur", ctx.config, "ready", sum(p.ready for p in ctx.workload.pods), "counts", dict(ctx.workload.pod_counts))
        print("   planner target", plan.target, "\n   guarded", out.target)
        print("   actions", [(a.actuator, a.params) for a in out.actions if a.actuator != "weights"])
        print("   reason", out.reason[:1500])
        print("   vetoed", mem.get("vetoed"))
    return out, mem
safety.guard = spy
run.run(t1 + 1)
