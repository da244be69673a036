"""The perfect-knowledge oracle held to what changing a workload's shape takes.

The oracle (``bench/oracle.py``) picks the cheapest configuration every minute on its own: it
may run GPU pods one minute, CPU pods the next and GPU pods again, at no cost. A planner
changes CPU size, device or node pool through a rolling update that restarts every pod, at
most once per the admin's cooldown (``admin.cpu.cooldownSeconds``; the CPU, device and
placement actuators share it), and it keeps the old pods while the new ones start. So this
reference chooses, by dynamic programming over the minutes, the sequence of shapes of least
cost that

- changes shape at most once per cooldown (the first change free, as for a planner starting);
- pays, for each change, the old pods for the new ones' start-up
  (``service.startup_s``) beside the new ones;
- changes shape only where the rolling update's first step carries the load: under round-robin
  dispatch the old pods leave as the new ones are ready, so a change from ``a`` pods to more
  than ``a + maxStep`` pods of another shape is not taken (the default planner's rule too);
- within a shape, runs each minute's fewest replicas that keep every objective, as the oracle
  does (replica changes are instant and free here, as there);

with the fewest minutes where its shape cannot keep the objectives first, then the least cost.
Per intent on its own beside the workloads no intent drives (the joint packing of several
intents is not modelled: on scenarios with several active intents it can be cheaper than
what sharing allows). Like the oracle, minutes it cannot serve cost nothing.

    python bench/oracle_switching.py \\
        --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000)

One row per scenario: the oracle's cost, this reference's cost, its shape changes, the
minutes its shape could not keep the objectives and the minutes it ran GPU pods; and the
totals.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import slo  # noqa: E402
from bench.oracle import Option, Shape, oracle, setup  # noqa: E402

State = tuple[Shape, int]
"""(shape, minutes since its last change, capped at the cooldown's)."""
Score = tuple[int, float, int, int]
"""(minutes not kept, cost, shape changes, minutes on GPU pods): compared in that order."""


def switching(sc: Any, seed: int, cooldown_s: float | None = None,
              startup_s: float | None = None, max_step: int | None = None
              ) -> dict[str, dict[str, Any]]:
    """Per active intent of ``sc``: ``cost``, ``changes`` (shape changes), ``missed``
    (minutes its shape could not keep the objectives) and ``gpu_minutes`` (minutes on GPU
    pods) of the cheapest shape sequence the module describes. ``cooldown_s``, ``startup_s``
    and ``max_step`` replace the scenario's (the admin's cooldown and step limit, the
    workload's start-up)."""
    admin = sc.spec.admin
    at = setup(sc, seed)
    cooldown = admin.cpu.cooldown_s if cooldown_s is None else cooldown_s
    step = admin.replicas.max_step if max_step is None else max_step
    hold = max(1, math.ceil(cooldown / 60.0))
    found = [at.options(m)[1] for m in range(at.minutes)]
    out: dict[str, dict[str, Any]] = {}
    for k, (intent, w) in enumerate(zip(at.intents, at.workloads, strict=True)):
        start = Shape(w.cpu, w.device, w.pool)
        overlap_h = (w.service.startup_s if startup_s is None else startup_s) / 3600.0
        states: dict[State, Score] = {(start, hold): (0, 0.0, 0, 0)}
        for minute in found:
            here: dict[Shape, Option] = {o.shape: o for o in minute[k]
                                         if at.packer.fits([o])}
            states = _step(states, here, hold, overlap_h, step)
        best = min(states.values())
        out[intent.key] = {"cost": best[1], "changes": best[2], "missed": best[0],
                           "gpu_minutes": best[3]}
    return out


def _step(states: dict[State, Score], here: dict[Shape, Option], hold: int,
          overlap_h: float, max_step: int) -> dict[State, Score]:
    """One minute: every state either keeps its shape (at this minute's fewest replicas, or a
    minute not kept where its shape keeps nothing) or, past the cooldown, changes to a shape
    this minute's options hold whose first rolling step carries the load."""
    new: dict[State, Score] = {}

    def relax(state: State, score: Score) -> None:
        if state not in new or score < new[state]:
            new[state] = score

    for (shape, since), (missed, cost, changes, gpu) in states.items():
        mine = here.get(shape)
        if mine is None:
            relax((shape, min(since + 1, hold)), (missed + 1, cost, changes, gpu))
        else:
            relax((shape, min(since + 1, hold)),
                  (missed, cost + mine.cost_per_hour / 60.0, changes,
                   gpu + (shape.device == "gpu")))
        if since < hold:
            continue
        for to, opt in here.items():
            if to == shape or (mine is not None and opt.replicas > mine.replicas + max_step):
                continue
            old = mine.cost_per_hour * overlap_h if mine is not None else 0.0
            relax((to, 1 if hold > 1 else hold),
                  (missed, cost + opt.cost_per_hour / 60.0 + old, changes + 1,
                   gpu + (to.device == "gpu")))
    return new


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", required=True,
                    help="scenario files or generated:<seed> references")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{'scenario':<24}{'oracle':>10}{'switching':>11}{'changes':>9}{'missed':>8}"
          f"{'GPU min':>9}")
    totals = [0.0, 0.0, 0, 0, 0]
    for ref in args.scenarios:
        sc = slo.load(ref)
        plain = sum(float(v["cost"]) for v in oracle(sc, args.seed).values())
        held = switching(sc, args.seed).values()
        cost = sum(float(v["cost"]) for v in held)
        changes = sum(int(v["changes"]) for v in held)
        missed = sum(int(v["missed"]) for v in held)
        gpu = sum(int(v["gpu_minutes"]) for v in held)
        for i, v in enumerate((plain, cost, changes, missed, gpu)):
            totals[i] += v
        print(f"{ref:<24}{plain:>10.3f}{cost:>11.3f}{changes:>9}{missed:>8}{gpu:>9}",
              flush=True)
    print(f"{'total':<24}{totals[0]:>10.3f}{totals[1]:>11.3f}{int(totals[2]):>9}"
          f"{int(totals[3]):>8}{int(totals[4]):>9}")


if __name__ == "__main__":
    main()
