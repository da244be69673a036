"""The oracle's cost of gpu-inference per phase (0-45 min, the day, the last 45 min) with the
device left to it and pinned to GPU, from bench/oracle.py's own functions (noise-free trace,
the minute's peak): .venv/bin/python docs/experiments/64/oracle_phases.py"""
import math
import sys

sys.path.insert(0, ".")
from bench.oracle import Failures, Shape, fewest_replicas, price_per_pod_hour, requirements
from bench.slo import load

sc = load("examples/scenarios/gpu-inference.yaml", None)
w = sc.spec.workloads[0]; pools = sc.spec.cluster.pools
intent = [i for i in sc.intents if i.spec.active][0]
need, _ = requirements(intent, {p.key: p for p in sc.profiles}, Failures.of(w, sc.spec.step_s))
def best(dev, rate):
    out = []
    for c in (0.25, 0.5, 1.0, 2.0, 4.0):
        r = fewest_replicas(w, pools, Shape(c, dev, None), rate, need, False, (1, 400))
        if r: out.append(r * price_per_pod_hour(pools, Shape(c, dev, None), r))
    return min(out)
cuts = [0, 2700, 18900, 21600]
auto = [0.0] * 3; gpu = [0.0] * 3; cpu_min = []
for m in range(360):
    lam = max(1000 + 950 * math.sin(2 * math.pi * (m * 60 + s) / 21600 - 1.57) for s in range(0, 61, 5))
    c, g = best("cpu", lam), best("gpu", lam)
    k = 0 if m * 60 < 2700 else 1 if m * 60 < 18900 else 2
    auto[k] += min(c, g) / 60; gpu[k] += g / 60
    if c < g: cpu_min.append(m)
print("oracle auto by phase", [round(x, 2) for x in auto], round(sum(auto), 3))
print("oracle gpu  by phase", [round(x, 2) for x in gpu], round(sum(gpu), 3))
print("CPU minutes", len(cpu_min), "morning until minute", max(x for x in cpu_min if x < 180), "evening from", min(x for x in cpu_min if x > 180))
