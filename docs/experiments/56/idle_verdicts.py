"""Canary verdicts judged from pods too idle to measure (issue 11, section 56).

python docs/experiments/56/idle_verdicts.py SEED generated:N ...

Runs grid on each scenario (as bench/slo.py does) and prints every canary verdict: the shape,
the measured capacity ratio, the canary pods' CPU utilisation, and whether every canary pod
was below canary.MIN_UTILIZATION (the ratio is then only a lower bound of the shape's speed).
"""
from __future__ import annotations

import sys

sys.path.insert(0, ".")
from bench import slo  # noqa: E402
from knowledge.connect import open_knowledge_base  # noqa: E402
from planner.planners import canary  # noqa: E402
from simulator.runner import ScenarioRun  # noqa: E402

seed = int(sys.argv[1])
original = canary.capacity_ratio
for path in sys.argv[2:]:
    seen: list[tuple[str, float | None, list[float], bool]] = []

    def ratio(running, workload, versus=None):  # type: ignore[no-untyped-def]
        out = original(running, workload, versus)
        utils = [p.cpu_utilization for p in running.pods
                 if p.ready and p.request_rate and p.cpu_utilization is not None]
        seen.append((f"{running.config.replicas}x{running.config.cpu:g} {running.config.device}"
                     f"@{running.config.pool}", out, [round(u, 4) for u in utils],
                     bool(utils) and all(u < canary.MIN_UTILIZATION for u in utils)))
        return out

    canary.capacity_ratio = ratio
    sc = slo.load(path)
    report = ScenarioRun(sc, "grid", seed, open_knowledge_base(None),
                         start_time=slo.START).run(None).as_dict()
    canary.capacity_ratio = original
    # One line per trial: capacity_ratio is asked every cycle until the verdict.
    last: dict[str, tuple[str, float | None, list[float], bool]] = {}
    for s in seen:
        last[s[0]] = s
    for shape, r, utils, idle in last.values():
        print(f"{path} seed {seed}: {shape} ratio {r if r is None else round(r, 2)} "
              f"canary utilisation {utils[:4]} {'IDLE: a lower bound' if idle else ''}",
              flush=True)
