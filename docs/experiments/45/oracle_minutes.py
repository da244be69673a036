"""The oracle's cheapest options at every N-th minute of a scenario (section 45).

    .venv/bin/python docs/experiments/45/oracle_minutes.py generated:2131 60

Per minute: the peak load and the four cheapest (cpu, device, pool, replicas, cost/h).
"""
import sys

sys.path.insert(0, "."); sys.path.insert(0, "bench")
from bench import oracle as O
from bench import slo

sc = slo.load(sys.argv[1])
at = O.setup(sc, 1)
for m in range(0, at.minutes, int(sys.argv[2])):
    rates, opts = at.options(m)
    for i, oo in enumerate(opts):
        best = sorted(oo, key=lambda o: o.cost_per_hour)[:4]
        print(m, round(max(rates[i]), 1), [(o.shape.cpu, o.shape.device, o.shape.pool,
                                            o.replicas, round(o.cost_per_hour, 3)) for o in best])
