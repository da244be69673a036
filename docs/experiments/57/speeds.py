"""speeds.py generated:N SEED FROM TO: grid on the scenario; each cycle between simulated
minutes FROM and TO, the workload's configuration, whether a rollout is in progress, the
plan's target and the speeds canaries measured (section 57: gen-2764 seed 1, minutes
14.3-32.6, at c71364e)."""
import sys
sys.path.insert(0, ".")
from bench import slo
from knowledge.connect import open_knowledge_base
from planner.planners import grid, canary
from simulator.runner import ScenarioRun
T0, T1 = float(sys.argv[3]) * 60, float(sys.argv[4]) * 60
orig = grid.GridPlanner._plan
def plan(self, ctx, mem):
    t = ctx.now - slo.START
    out = orig(self, ctx, mem)
    if T0 <= t <= T1:
        print(round(t / 60, 2), ctx.config, "rollout", canary.rollout_in_progress(ctx), "->", out.target if hasattr(out, "target") else None)
        for k, m in mem.explorer.speeds.get(ctx.intent.key, {}).items():
            print("     ", k, m)
    return out
grid.GridPlanner._plan = plan
ScenarioRun(slo.load(sys.argv[1]), "grid", int(sys.argv[2]), open_knowledge_base(None), start_time=slo.START).run(T1 + 30)
