import sys, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.cluster import SimulatedCluster
from simulator.scenario import parse_scenario
n = int(sys.argv[1])
sc = parse_scenario(scale.scenario(n, 5 * n, 200, True), "scale")
sim = SimulatedCluster(sc, 1, start_time=0.0)
for _ in range(40): sim.step(5.0)
prof = {p.metadata.name: p for p in sc.profiles}["p95"]
ts = []; vals = []
for _ in range(3):
    c = time.process_time(); vals = [sim.measure(i, prof) for i in sc.intents]; ts.append(time.process_time() - c)
print(n, "KPI solve min %.3f" % min(ts), hash(tuple(vals)))
