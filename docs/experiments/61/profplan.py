"""profplan.py SCENARIO SEED OUT.prof [SORT]: one grid run with cProfile enabled only inside
`plan_safely` (the per-intent plans), saved to OUT.prof and its top 70 printed by SORT (default
cumulative; section 61). Run from the repository root."""
import sys, cProfile, pstats
sys.path.insert(0, ".")
from bench import slo
from simulator.runner import ScenarioRun
from planner.planners import safety
prof = cProfile.Profile()
orig = safety.plan_safely
def wrapped(*a, **k):
    prof.enable()
    try:
        return orig(*a, **k)
    finally:
        prof.disable()
safety.plan_safely = wrapped
sc = slo.load(sys.argv[1]); seed = int(sys.argv[2])
run = ScenarioRun(sc, "grid", seed)
run.run()
prof.dump_stats(sys.argv[3])
p = pstats.Stats(sys.argv[3]); p.sort_stats(sys.argv[4] if len(sys.argv) > 4 else "cumulative").print_stats(70)
