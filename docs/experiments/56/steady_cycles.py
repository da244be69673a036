"""steady_cycles.py N NODES PODS CYCLES: bench/scale.py's scenario in shadow mode with copied models; after
the warm-up writes the pid to $READY_FILE (default /tmp/steady_cycles.ready) (attach a sampling profiler: py-spy record --pid
PID -r 200 -f raw -o OUT) and prints the mean CPU seconds per phase over CYCLES cycles."""
import math, sys, time, os
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
n, nodes, pods, cycles = (int(a) for a in sys.argv[1:5])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
per = round(run.cycle_s / run.step_s)
for _ in range(2 * per): run.advance()
open(os.environ.get("READY_FILE", "/tmp/steady_cycles.ready"), "w").write(str(os.getpid()))
time.sleep(1.0)
ctl = run.controller
tot = {}
for _ in range(cycles):
    for _ in range(per):
        o = run.advance()
        if o is not None:
            for k, v in ctl.clock.seconds.items(): tot[k] = tot.get(k, 0) + v
print({k: round(v / cycles, 3) for k, v in tot.items()}, flush=True)
