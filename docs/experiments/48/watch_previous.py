"""The safety layer's stuck-rollout watch of a grid run, each time its shape or whether it holds a
shape to roll back to changes (section 48): the shape, the one before, the change time and the
oldest pod's start.

    .venv/bin/python docs/experiments/48/watch_previous.py generated:4009 20
"""
import sys

sys.path.insert(0, ".")
from bench import slo
from planner.planners import safety
from simulator.runner import ScenarioRun
run = ScenarioRun(slo.load(sys.argv[1]), "grid", 1)
orig = safety._stuck
last = {}
start = []
def spy(ctx, obs, watch):
    before = watch.previous
    r = orig(ctx, obs, watch)
    k = ctx.intent.key
    state = (watch.shape and tuple(watch.shape.values()), watch.previous is not None)
    if last.get(k) != state:
        started = sorted(p.started_at for p in ctx.workload.pods)
        start.append(start[0] if start else ctx.now)
        print(round((ctx.now - start[0]) / 60, 2), k, "shape", watch.shape, "previous", watch.previous, "changed", watch.changed,
              "oldest start", started[0] if started else None, "stuck" if r else "")
        last[k] = state
    return r
safety._stuck = spy
while run.elapsed < float(sys.argv[2]) * 60:
    run.advance()
