import sys, re, math, collections
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
n = int(sys.argv[1]); nodes = int(sys.argv[2]); pods = int(sys.argv[3])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
per = round(run.cycle_s / run.step_s)
ks = collections.Counter(); reasons = collections.Counter()
for _ in range(3 * per):
    o = run.advance()
    if o:
        for x in o:
            r = x.plan.reason if x.plan else ""
            m = re.search(r"grid of (\d+), (\d+) predicted", r)
            ks[(int(m.group(1)), int(m.group(2))) if m else ("full" if "grid of" in r else "none")] += 1
            reasons[r[:70]] += 1
print(sorted(ks.items(), key=lambda kv: -kv[1])[:15])
print(reasons.most_common(6))
