"""What solving many intents' rows in one call would save (issue 13): the latency model's
mixture solve, as one planning cycle calls it, one call per prediction against one call per
kind of solve.

Builds ``bench/scale.py``'s scenario (shadow mode, models copied after ``--warm`` simulated
minutes, as ``bench/scale.py --models copy``), runs a cycle, then records every
:func:`planner.models.sojourn.mixture_sojourn_quantile` call of the next cycle's planning and
prints:

* the calls, their rows (parameter vectors x candidates) and classes;
* the CPU time of solving them as the planner did (call by call) and concatenated, one call
  per (quantile, classes, iterations), the best of ``--repeat`` runs each;
* whether the concatenated solve gives every row's value bit for bit (it must: the solve is
  row by row, :func:`mixture_sojourn_quantile`'s docstring).

The difference bounds what planning intents in rounds, their rows solved together, could
save in the solve; what a prediction costs around the solve is not in either figure.

    .venv/bin/python bench/solve_batching.py [--intents 100 --nodes 500 --pods 200]
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import scale
from planner.models import latency
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

Call = tuple[float, Any, Any, Any, Any, int]


def record(intents: int, nodes: int, pods: int, warm_min: float) -> list[Call]:
    """Every mixture solve of one controller cycle after the warm-up (see module doc)."""
    run = ScenarioRun(parse_scenario(scale.scenario(intents, nodes, pods, True), "scale"),
                      "grid", 1)
    if run.trainer is not None:
        run.trainer.interval_s = math.inf
    while run.elapsed < warm_min * 60.0:
        run.advance()
    scale.copy_models(run)
    for _ in range(round(run.cycle_s / run.step_s)):
        run.advance()
    calls: list[Call] = []
    solve = latency.mixture_sojourn_quantile

    def recorded(q: float, lam: Any, mu: Any, c: Any, weight: Any,
                 iterations: int = 8) -> Any:
        calls.append((q, np.array(lam), np.array(mu), np.array(c), np.array(weight),
                      iterations))
        return solve(q, lam, mu, c, weight, iterations)

    latency.mixture_sojourn_quantile = recorded     # type: ignore[assignment]
    try:
        run.controller.cycle()
    finally:
        latency.mixture_sojourn_quantile = solve    # type: ignore[assignment]
    return calls


def compare(calls: list[Call], repeat: int) -> dict[str, Any]:
    """Call by call against concatenated per kind of solve: CPU seconds and exactness."""
    solve = latency.mixture_sojourn_quantile
    groups: dict[tuple[float, int, int], list[int]] = collections.defaultdict(list)
    for i, (q, lam, *_, iterations) in enumerate(calls):
        groups[(q, lam.shape[1], iterations)].append(i)
    joined = {g: tuple(np.concatenate([calls[i][j] for i in idx]) for j in (1, 2, 3, 4))
              for g, idx in groups.items()}
    each_s = joint_s = math.inf
    each: list[Any] = []
    joint: dict[tuple[float, int, int], Any] = {}
    for _ in range(repeat):
        t0 = time.process_time()
        each = [solve(*x) for x in calls]
        each_s = min(each_s, time.process_time() - t0)
        t0 = time.process_time()
        joint = {g: solve(g[0], *joined[g], g[2]) for g in groups}
        joint_s = min(joint_s, time.process_time() - t0)
    exact = True
    for g, idx in groups.items():
        at = 0
        for i in idx:
            k = len(calls[i][1])
            exact &= bool(np.array_equal(joint[g][at:at + k], each[i], equal_nan=True))
            at += k
    return {"calls": len(calls), "rows": sum(len(x[1]) for x in calls),
            "classes": dict(collections.Counter(int(x[1].shape[1]) for x in calls)),
            "solves_joined": len(groups), "call_by_call_s": each_s, "joined_s": joint_s,
            "bit_identical": exact}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intents", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--warm", type=float, default=12.0, help="simulated minutes first")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = compare(record(args.intents, args.nodes, args.pods, args.warm), args.repeat)
    print(f"{args.intents}x{args.nodes}x{args.pods}: {out['calls']} mixture solves in one "
          f"cycle's planning, {out['rows']} rows, classes {out['classes']}; call by call "
          f"{out['call_by_call_s']:.3f} s CPU, joined into {out['solves_joined']} "
          f"{out['joined_s']:.3f} s; bit-identical: {out['bit_identical']}")


if __name__ == "__main__":
    main()
