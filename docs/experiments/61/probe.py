"""probe.py SCEN SEED MIN OBJ POOL CPU DEV R0 R1: at the first plan past simulated minute MIN of grid
on SCEN at SEED, the intent's explicit estimate and places left, then per objective the wrapped
and inner predictions (mean/bound, vouched) for DEV pods of CPU cores in POOL (- for none) at
R0..R1 replicas, and the grid's judgement of them (section 61). Run from the repository root."""
import sys
sys.path.insert(0, ".")
import numpy as np
from bench import slo
from simulator.runner import ScenarioRun
from planner.models.predictor import CandidateBatch
from planner.planners import grid as G
scen, seed, minute, obj, pool, cpu, dev, r0, r1 = sys.argv[1:10]
pool = None if pool == "-" else pool
done = []
run = ScenarioRun(slo.load(scen), "grid", int(seed))
orig = G.GridPlanner._plan
def spy(self, ctx, mem):
    plan = orig(self, ctx, mem)
    if not done and run.elapsed >= float(minute) * 60:
        done.append(1)
        rec = G.Recall.of(ctx.intent.key, mem.as_memory(ctx.intent.key))
        inp = self._take_in(ctx, rec)[0]
        rate = self._planned_rate(ctx, rec, inp.preds)[0]
        reps = np.arange(int(r0), int(r1) + 1, dtype=float)
        n = len(reps)
        b = CandidateBatch(reps, np.full(n, float(cpu)), np.full(n, 1.0 if dev == "gpu" else 0.0), (pool,) * n)
        print(f"{run.elapsed/60:.2f} rate {rate:.1f} current {ctx.config}")
        pm = getattr(mem, "predictors", None); print("  estimate", getattr(pm, "estimate", None)); print("  left", getattr(pm, "left", None))
        for name, lat in inp.preds.items():
            inner = getattr(lat, "inner", lat)
            p = lat.predict(b, rate); q = inner.predict(b, rate)
            print(f"  {name}: {type(lat).__name__}/{type(inner).__name__} speeds {getattr(lat, 'speeds', None)}")
            for i, r in enumerate(reps):
                print(f"   {int(r)}: wrapped {p.mean[i]:.1f}/{p.bound[i]:.1f} sup {p.supported[i]}  inner {q.mean[i]:.1f}/{q.bound[i]:.1f} sup {q.supported[i]}")
        s = self.score(ctx, b, rate, inp)
        print("  feasible", s.feasible.astype(int).tolist(), "supported", s.supported.astype(int).tolist())
        print("  cost", np.round(s.cost, 3).tolist())
        print("  reason:", plan.reason[:600])
    return plan
G.GridPlanner._plan = spy
run.run(float(minute) * 60 + 30)
