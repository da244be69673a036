"""The plans of one intent between two simulated minutes, as the safety layer returns them:
the configuration, the target, the actions and the reason parts (section 48, gen-4009):

    .venv/bin/python docs/experiments/48/held_step.py generated:4009 13.4 15.2
"""
import sys

sys.path.insert(0, ".")

from bench import slo
from planner.control import controller
from simulator.runner import ScenarioRun

scenario, start, end = sys.argv[1], float(sys.argv[2]) * 60, float(sys.argv[3]) * 60
run = ScenarioRun(slo.load(scenario), "grid", 1)
plan_safely = controller.safety.plan_safely


def spy(planner, ctx, mem):
    plan, memory = plan_safely(planner, ctx, mem)
    if start <= run.elapsed <= end:
        print(round(run.elapsed / 60, 2), "config", ctx.config, "\n  target", plan.target,
              "\n  actions", [(a.actuator, a.params) for a in plan.actions],
              "\n  parts", [(p.kind, p.text[:150]) for p in plan.reason_parts])
    return plan, memory


controller.safety.plan_safely = spy
while run.elapsed < end + 1:
    run.advance()
