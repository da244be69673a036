"""Per intent per steady cycle of bench/scale.py's scenario (shadow, copied models): planned
rate, target, whether actions; prints how stable they are."""
import math, sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
n, nodes, pods, cycles = (int(a) for a in sys.argv[1:5])
shadow = len(sys.argv) < 6 or sys.argv[5] != "active"
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, shadow), "scale"), "grid", 1)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
rows = {}
done = 0
while done < cycles:
    o = run.advance()
    if o is None: continue
    done += 1
    for out in o:
        p = out.plan
        if p is None: continue
        rows.setdefault(out.intent.key, []).append((p.planned_rate, p.target, len(p.actions), p.reason[:90]))
same = tot = 0; rel = []
for k, seq in rows.items():
    for a, b in zip(seq, seq[1:]):
        tot += 1; same += a[1] == b[1]
        if a[0] and b[0]: rel.append(abs(b[0] / a[0] - 1))
rel.sort()
print("pairs", tot, "same target", same, "rate change p50/p90/max", rel[len(rel)//2], rel[int(.9*len(rel))], rel[-1])
k = sorted(rows)[0]
for r in rows[k][:12]: print(r)
