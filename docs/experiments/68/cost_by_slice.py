"""cost_by_slice.py SCENARIO DEVICE SEED [SLICE_S]: one bench/device_pins.py run (device pinned or auto),
printed every SLICE_S simulated seconds (default 1,800): the slice's cost and violation-minutes, the
configuration at its end, the request rate and the GPU-hours so far.
  .venv/bin/python docs/experiments/68/cost_by_slice.py examples/scenarios/gpu-inference.yaml auto 1"""
import sys
sys.path.insert(0, ".")
from bench.device_pins import _totals, pinned
from bench.slo import START, load
from knowledge.connect import open_knowledge_base
from simulator.runner import ScenarioRun

ref, device, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
step = float(sys.argv[4]) if len(sys.argv) > 4 else 1800.0
sc = pinned(load(ref, None), device)
keys = {i.key for i in sc.intents if i.spec.active}
sim = ScenarioRun(sc, None, seed, open_knowledge_base(None), start_time=START)
before = _totals({}, keys)
t = 0.0
while t < float(sc.spec.duration):
    t += step
    sim.run(t)
    now = _totals(sim.accountant.tallies, keys)
    snap = sim.sim.observe()
    cfgs = " ".join(f"{w.key}={w.config.replicas}x{w.config.cpu:g}:{w.config.device} "
                    f"ready={sum(p.ready for p in w.pods)} rate={w.request_rate or 0:.0f}"
                    for w in snap.workloads.values())
    print(f"{t / 3600:5.2f} h  cost {now['cost'] - before['cost']:7.3f}  viol "
          f"{now['violation_minutes'] - before['violation_minutes']:4.0f}  gpu-h "
          f"{now['gpu_hours']:6.2f}  {cfgs}", flush=True)
    before = now
