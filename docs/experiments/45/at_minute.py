"""The shared part of section 45's probes: run a scenario with ``grid`` (seed 1) and, at the first
cycle past a simulated minute, hand the planner, its context and memory, its inputs and the
planned load to a probe (``probe(planner, ctx, mem, inp, rate, plan)``), once."""
import sys

sys.path.insert(0, "."); sys.path.insert(0, "bench")

from bench import slo
from planner.planners import grid as G
from simulator.runner import ScenarioRun


def at_minute(scen, minute, probe):
    at = float(minute) * 60
    run = ScenarioRun(slo.load(scen), "grid", 1)
    orig = G.GridPlanner._plan

    def spy(self, ctx, mem):
        plan = orig(self, ctx, mem)
        if run.elapsed >= at and not getattr(spy, "done", False):
            spy.done = True
            inp = self._take_in(ctx, G.Recall.of(ctx.intent.key,
                                                 mem.as_memory(ctx.intent.key)))[0]
            rate, _, _ = self._planned_rate(ctx, mem, inp.preds)
            probe(self, ctx, mem, inp, rate, plan)
        return plan

    G.GridPlanner._plan = spy
    while run.elapsed < at + 30:
        run.advance()
