import cProfile, pstats, sys, time, math
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
n = int(sys.argv[1]); nodes = int(sys.argv[2]); out = sys.argv[3]; cycles = int(sys.argv[4]) if len(sys.argv) > 4 else 3
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, int(sys.argv[5]), True, int(sys.argv[6])), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
print("copy", scale.copy_models(run)[0].__len__(), flush=True)
per = round(run.cycle_s / run.step_s)
for _ in range(2 * per): run.advance()
ctl = run.controller
pr = cProfile.Profile()
orig = ctl.cycle
def prof_cycle():
    pr.enable()
    try:
        return orig()
    finally:
        pr.disable()
ctl.cycle = prof_cycle
for _ in range(cycles):
    for _ in range(per):
        c0 = time.process_time()
        o = run.advance()
        if o is not None:
            print("cycle", round(ctl.clock.total, 3), {k: round(v, 3) for k, v in ctl.clock.seconds.items()}, flush=True)
pr.dump_stats(out)
