"""md5 chain of every observe() snapshot repr and plan repr over a run."""
import sys, re, hashlib
sys.path.insert(0, '.')
from dataclasses import replace
from bench import slo
from simulator.runner import ScenarioRun
name, seed = sys.argv[1], int(sys.argv[2])
dur = float(sys.argv[3]) if len(sys.argv) > 3 else None
run = ScenarioRun(slo.load(name), "grid", seed)
h = hashlib.md5(); hp = hashlib.md5(); n = [0]
orig = run.sim.observe
def obs():
    s = orig(); h.update(repr(s).encode()); n[0] += 1; return s
run.sim.observe = obs
run.controller.backend = run.sim if run.controller.backend is run.sim else run.controller.backend
def on_cycle(sim, outcomes):
    for o in outcomes:
        if o.plan is None: continue
        mem = o.plan.memory
        def norm(v):
            if isinstance(v, dict):
                return {k: (sorted(x for x in v[k].split("\n") if x) if k == "seen" and isinstance(v[k], str) else sorted(v[k]) if k == "seen" else norm(v[k])) for k in v}
            return v
        r = re.sub(r'grid of (\d+), \d+ predicted', r'grid of \1', repr(replace(o.plan, planning_ms=0.0, memory=norm(dict(mem)) if mem is not None else None)))
        hp.update(r.encode())
rep = run.run(duration=dur, on_cycle=on_cycle).as_dict()
print(name, seed, n[0], h.hexdigest(), hp.hexdigest(), rep["totals"]["violation_minutes"], round(rep["totals"]["cost"], 4))
