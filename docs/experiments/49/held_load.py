"""At a simulated minute, the loads per pod each shape was seen holding (and violating) over a
whole window, as the grid's memory keeps them (section 49):

    .venv/bin/python docs/experiments/49/held_load.py generated:5972 15.3
"""
import sys
sys.path.insert(0, "docs/experiments/45")
from at_minute import at_minute
def probe(self, ctx, mem, inp, rate, plan):
    print("rate", rate, "reps", ctx.config, "held", inp.limits.held, "limits", inp.limits.limits)
at_minute(sys.argv[1], sys.argv[2], probe)
