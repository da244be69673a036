"""Large simulated clusters (issue 13, first part): how long building the cluster and running
controller cycles take as intents, nodes and pods grow.

Builds a scenario in memory: ``--nodes`` nodes of 32 cores in 10 pools, ``--intents`` workloads
(one latency intent each) of ``--pods`` one-core pods each, constant load at about 60 % of what
the pods serve, the default planner. Prints, per size, the wall time of building the simulated
cluster and the controller, the CPU time of each controller cycle (with the simulated steps
between cycles: observe, KPIs, plan, act, record, status, and the simulator's own serving) as
p50 / max over ``--cycles`` cycles, and the process's peak RSS. Not yet split per phase, and no
model training at this scale (the first model comes after some simulated minutes).

    .venv/bin/python bench/scale.py [--sizes 10x50x100,10x10000x1000] [--cycles 3]

A size is INTENTSxNODESxPODS (pods per workload).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

POOLS = 10


def scenario(intents: int, nodes: int, pods: int) -> dict[str, Any]:
    per_pool = max(1, nodes // POOLS)
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
         "metadata": {"name": "p95", "namespace": "big"},
         "spec": {"type": "latency", "percentile": 95}}]
    manifests += [
        {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
         "metadata": {"name": f"w{i}", "namespace": "big"},
         "spec": {"targetRef": {"kind": "Deployment", "name": f"w{i}"},
                  "objectives": [{"name": "p95", "value": 60, "measuredBy": "p95"}]}}
        for i in range(intents)]
    return {
        "name": f"scale-{intents}x{nodes}x{pods}", "duration": "1h", "step_s": 5,
        "cluster": {"pools": [{"name": f"p{i}", "nodes": per_pool, "cpu": 32,
                               "cost_per_core_hour": 0.03 + 0.001 * i}
                              for i in range(POOLS)]},
        "workloads": [{"name": f"w{i}", "namespace": "big", "replicas": pods, "cpu": 1,
                       "service": {"rate_per_core": 100, "base_latency_ms": 3},
                       "trace": {"kind": "constant", "rate": 60.0 * pods, "noise": 0.05}}
                      for i in range(intents)],
        "admin": {"replicas": {"min": 1, "max": min(max(2 * pods, 10), 10_000), "maxStep": 100},
                  "cycleSeconds": 15},
        "manifests": manifests,
    }


def measure(intents: int, nodes: int, pods: int, cycles: int) -> dict[str, float]:
    t0 = time.perf_counter()
    run = ScenarioRun(parse_scenario(scenario(intents, nodes, pods), "scale"), "grid", 1)
    built = time.perf_counter() - t0
    per_cycle = round(run.cycle_s / run.step_s)
    spent = []
    for _ in range(cycles):
        c0 = time.process_time()
        for _ in range(per_cycle):
            run.advance()
        spent.append(time.process_time() - c0)
    spent.sort()
    return {"build_s": built, "cycle_p50_s": spent[len(spent) // 2], "cycle_max_s": spent[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10x50x100,10x10000x1000")
    ap.add_argument("--cycles", type=int, default=3)
    args = ap.parse_args()
    print(f"{'intents x nodes x pods/workload':<32}{'build':>10}{'cycle p50':>12}"
          f"{'cycle max':>12}{'peak RSS':>12}")
    for size in args.sizes.split(","):
        intents, nodes, pods = (int(x) for x in size.split("x"))
        m = measure(intents, nodes, pods, args.cycles)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{size:<32}{m['build_s']:>9.2f}s{m['cycle_p50_s']:>11.2f}s"
              f"{m['cycle_max_s']:>11.2f}s{rss:>9.0f} MiB")


if __name__ == "__main__":
    main()
