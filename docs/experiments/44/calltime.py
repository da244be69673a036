import sys, math, time, collections
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from planner.planners import grid
n = int(sys.argv[1]); nodes = int(sys.argv[2]); pods = int(sys.argv[3])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
orig = grid.GridPlanner._predict
stats = collections.defaultdict(lambda: [0, 0.0])
def timed(ctx, batch, rate, inp):
    c = time.process_time(); out = orig(ctx, batch, rate, inp); d = time.process_time() - c
    b = len(batch); key = "1" if b == 1 else "2-32" if b <= 32 else "33-64" if b <= 64 else ">64"
    stats[key][0] += 1; stats[key][1] += d; return out
grid.GridPlanner._predict = staticmethod(timed)
per = round(run.cycle_s / run.step_s)
for _ in range(3 * per): run.advance()
for k, (c, t) in sorted(stats.items()): print(k, c, "calls", "%.3f ms/call" % (t / c * 1e3), "total %.3f s" % t)
# capture one call's args and profile it repeated
cap = []
def capture(ctx, batch, rate, inp):
    if 16 <= len(batch) <= 32 and not cap: cap.append((ctx, batch, rate, inp))
    return orig(ctx, batch, rate, inp)
grid.GridPlanner._predict = staticmethod(capture)
while not cap: run.advance()
ctx, batch, rate, inp = cap[0]
import cProfile, pstats
c = time.process_time()
for _ in range(300): orig(ctx, batch, rate, inp)
print("one call of", len(batch), "rows: %.3f ms" % ((time.process_time() - c) / 300 * 1e3), {k: type(v).__name__ for k, v in inp.preds.items()})
cProfile.run("for _ in range(300): orig(ctx, batch, rate, inp)", "/tmp/onecall.prof")
pstats.Stats("/tmp/onecall.prof").sort_stats("tottime").print_stats(30)
