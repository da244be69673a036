"""Per keeper collection after the bench's warm-up: unreachable objects found, CPU, unfrozen tracked objects.
    .venv/bin/python docs/experiments/47/gcfind.py 100 500 200 8   (intents, nodes, pods, cycles)"""
import gc, sys, time, math
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
n, nodes, pods, cycles = (int(a) for a in sys.argv[1:5])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
found = []
real = gc.collect
def collect(*a):
    t = time.process_time(); k = real(*a); found.append((k, time.process_time() - t, len(gc.get_objects())))
    return k
gc.collect = collect
per = round(run.cycle_s / run.step_s)
for _ in range(cycles * per): run.advance()
print("per cycle (unreachable found, CPU s, tracked objects unfrozen):", [(k, round(s, 3), o) for k, s, o in found])
print("frozen", gc.get_freeze_count())
