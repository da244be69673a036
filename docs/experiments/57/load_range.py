"""load_range.py generated:N SEED MINUTE: grid on the scenario; at MINUTE, per objective, the
predictor's type, its learned model's highest load per core seen below saturation per device
(`load_per_core_max`, what a latency model vouches for up to 1.5x) and its training window
(section 57: gen-5166 seed 2 at minute 36)."""
import sys
sys.path.insert(0, ".")
from bench import slo
from knowledge.connect import open_knowledge_base
from planner.planners import grid
from simulator.runner import ScenarioRun
T0 = float(sys.argv[3]) * 60; seed = int(sys.argv[2])
orig = grid.GridPlanner._plan
state = {"n": 0}
def plan(self, ctx, mem):
    if ctx.now - slo.START >= T0 and state["n"] < 1:
        state["n"] += 1
        from planner.planners.grid import Recall
        m2 = Recall.of(ctx.intent.key, ctx.memory)
        inp = self._take_in(ctx, m2)[0]
        for name, p in inp.preds.items():
            inner = getattr(p, "inner", p)
            model = getattr(inner, "model", None)
            print(name, type(p).__name__, type(inner).__name__, model and model.metadata.get("load_per_core_max"), model and model.metadata.get("training_window"))
    return orig(self, ctx, mem)
grid.GridPlanner._plan = plan
ScenarioRun(slo.load(sys.argv[1]), "grid", seed, open_knowledge_base(None), start_time=slo.START).run((T0 / 60 + 1) * 60)
