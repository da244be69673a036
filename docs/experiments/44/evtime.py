import sys, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from dataclasses import replace
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from planner.domain.events import build_event
run = ScenarioRun(parse_scenario(scale.scenario(20, 100, 200, True), "scale"), "grid", 1)
while run.elapsed < 4*60: run.advance()
snap = run.sim.observe()
sc = run.scenario
ts = []
for _ in range(5):
    c = time.process_time()
    for i in sc.intents:
        w = snap.workload(i.workload_key)
        w = replace(w)          # a fresh state: the census is not kept between calls
        build_event(i, w, snap, {"p95": 50.0}, None, False, pod_detail=False)
    ts.append(time.process_time() - c)
print("build_event per intent, 200 pods: %.1f us" % (min(ts) / len(sc.intents) * 1e6))
ws = [replace(snap.workload(i.workload_key)) for i in sc.intents]
c = time.process_time()
for w in ws:
    w.pod_counts
t = time.process_time() - c
print("census per intent %.1f us" % (t / len(ws) * 1e6))
ts = []
for _ in range(5):
    c = time.process_time()
    for i, w in zip(sc.intents, ws):
        build_event(i, w, snap, {"p95": 50.0}, None, False, pod_detail=False)
    ts.append(time.process_time() - c)
print("build_event with the census kept: %.1f us" % (min(ts) / len(sc.intents) * 1e6))
