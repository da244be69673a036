"""Per intent and cycle at bench/scale.py's scenario (copied models, shadow mode): how many
learned-model predict calls the plan makes, their rows, the rows predicted twice at one rate,
and each call's CPU time by caller. Usage: predcalls.py INTENTS NODES PODS CYCLES"""
import collections, math, sys, time, traceback
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from planner.models import effects

n, nodes, pods, cycles = (int(a) for a in sys.argv[1:5])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1,
                  keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60:
    run.advance()
scale.copy_models(run)
per = round(run.cycle_s / run.step_s)
for _ in range(2 * per):
    run.advance()
log: list = []
orig = effects.LearnedKPI.predict
def predict(self, batch, rate):
    c0 = time.process_time()
    out = orig(self, batch, rate)
    dt = time.process_time() - c0
    st = traceback.extract_stack(limit=6)
    caller = ",".join(f"{f.name}" for f in st[-5:-1])
    rows = [(rate, c.replicas, c.cpu, c.device, c.pool) for c in
            (batch.config(i) for i in range(len(batch)))]
    log.append((id(self), caller, rows, dt))
    return out
effects.LearnedKPI.predict = predict
ctl = run.controller
orig_plan = ctl._plan
plans = []
def plan(*a, **k):
    start = len(log)
    out = orig_plan(*a, **k)
    plans.append(log[start:])
    return out
ctl._plan = plan
for _ in range(cycles * per):
    run.advance()
calls = [len(p) for p in plans]
rows = [sum(len(c[2]) for c in p) for p in plans]
dup = []
for p in plans:
    seen = collections.Counter((c[0], r) for c in p for r in c[2])
    dup.append(sum(v - 1 for v in seen.values()))
t = [sum(c[3] for c in p) for p in plans]
print(f"plans {len(plans)}: calls/plan {sum(calls)/len(plans):.2f}, rows/plan {sum(rows)/len(plans):.1f}, "
      f"rows predicted again {sum(dup)/len(plans):.1f}/plan, predict CPU {1000*sum(t)/len(plans):.3f} ms/plan")
by = collections.defaultdict(lambda: [0, 0, 0.0])
for p in plans:
    for c in p:
        b = by[c[1]]; b[0] += 1; b[1] += len(c[2]); b[2] += c[3]
for k, (cnt, r, dt) in sorted(by.items(), key=lambda kv: -kv[1][2]):
    print(f"{cnt/len(plans):6.2f} calls {r/max(cnt,1):7.1f} rows {1000*dt/len(plans):7.3f} ms/plan  {k}")
