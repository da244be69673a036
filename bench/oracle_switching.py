"""A model of the perfect-knowledge oracle held to what changing a workload's shape takes.

The oracle (``bench/oracle.py``) picks the cheapest configuration every minute on its own: it
may run GPU pods one minute, CPU pods the next and GPU pods again, at no cost. A planner
changes CPU size, device or node pool through a rolling update that restarts every pod, keeps
the old pods while the new ones start, and waits ``admin.cpu.cooldownSeconds`` before the same
actuator changes again. This model chooses, by dynamic programming over the minutes, the
sequence of shapes of least cost that

- changes shape at most once per cooldown (the first change free, as for a planner starting).
  Stricter than a planner, whose CPU, device and placement actuators each keep their own
  clock (a device change, then a CPU size a minute later); and a minute granularity: the
  cooldown rounded up to whole minutes;
- pays, for each change, the old pods for the new ones' start-up (``service.startup_s``)
  beside the new ones;
- changes shape only where the rolling update's first step carries the load: under round-robin
  dispatch the old pods leave as the new ones are ready, so a change from ``a`` pods to more
  than ``a + maxStep`` pods of another shape is not taken (the default planner's rule too).
  Looser than a planner where the old shape keeps no objective that minute: then the change
  is free of this rule and of the old pods' cost;
- within a shape, runs each minute's fewest replicas that keep every objective, as the oracle
  does (replica changes are instant and free here, as there);

with the fewest minutes where its shape cannot keep the objectives first, then the least cost.
Per intent on its own beside the workloads no intent drives (the joint packing of several
intents is not modelled: on scenarios with several active intents it can be cheaper than
what sharing allows). Like the oracle, minutes it cannot serve cost nothing. Without the three
limits (cooldown 0, start-up 0, an unbounded step) it is the oracle's choice minute by minute.

    python bench/oracle_switching.py \\
        --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000)

One row per scenario: the oracle's cost and shape changes, this model's cost, shape changes,
minutes its shape could not keep the objectives and minutes on GPU pods, and its cost and
missed minutes with CPU pods only (what GPUs save it, where both miss none); and the totals.
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
from bench.oracle import Option, Setup, Shape, oracle, setup  # noqa: E402

State = tuple[Shape, int]
"""(shape, minutes since its last change, capped at the cooldown's)."""
Score = tuple[int, float, int, int]
"""(minutes not kept, cost, shape changes, minutes on GPU pods): compared in that order."""


Minutes = list[list[list[Option]]]
"""Per minute, per active intent, every shape's option (:meth:`bench.oracle.Setup.options`)."""


def prepare(sc: Any, seed: int) -> tuple[Setup, Minutes]:
    """The oracle's view of ``sc`` and every minute's options: what :func:`switching` searches
    (computed once for several searches)."""
    at = setup(sc, seed)
    return at, [at.options(m)[1] for m in range(at.minutes)]


def switching(sc: Any, seed: int, cooldown_s: float | None = None,
              startup_s: float | None = None, max_step: int | None = None,
              devices: tuple[str, ...] | None = None,
              prepared: tuple[Setup, Minutes] | None = None) -> dict[str, dict[str, Any]]:
    """Per active intent of ``sc``: ``cost``, ``changes`` (shape changes), ``change_minutes``
    (the minutes they are made in), ``missed`` (minutes its shape could not keep the
    objectives), ``gpu_minutes`` (minutes on GPU pods) and ``path`` (the shape of every
    minute) of the cheapest shape sequence the
    module describes. ``cooldown_s``, ``startup_s`` and ``max_step`` replace the scenario's
    (the admin's cooldown and step limit, the workload's start-up); ``devices``: only shapes
    on these devices (the start shape kept whatever its device); ``prepared``: what
    :func:`prepare` returns for ``sc`` and ``seed``, when already at hand."""
    admin = sc.spec.admin
    at, found = prepare(sc, seed) if prepared is None else prepared
    cooldown = admin.cpu.cooldown_s if cooldown_s is None else cooldown_s
    step = admin.replicas.max_step if max_step is None else max_step
    hold = max(1, math.ceil(cooldown / 60.0))
    out: dict[str, dict[str, Any]] = {}
    for k, (intent, w) in enumerate(zip(at.intents, at.workloads, strict=True)):
        start = Shape(w.cpu, w.device, w.pool)
        overlap_h = (w.service.startup_s if startup_s is None else startup_s) / 3600.0
        states: dict[State, Score] = {(start, hold): (0, 0.0, 0, 0)}
        parents: list[dict[State, State]] = []
        for minute in found:
            here: dict[Shape, Option] = {
                o.shape: o for o in minute[k] if at.packer.fits([o]) and (
                    devices is None or o.shape.device in devices or o.shape == start)}
            states, parent = _step(states, here, hold, overlap_h, step)
            parents.append(parent)
        end = min(states, key=lambda s: states[s])
        best = states[end]
        path = _path(end, parents)
        out[intent.key] = {
            "cost": best[1], "changes": best[2], "missed": best[0], "gpu_minutes": best[3],
            "path": path,
            "change_minutes": [m for m, shape in enumerate(path)
                               if shape != (path[m - 1] if m else start)]}
    return out


def _path(end: State, parents: list[dict[State, State]]) -> list[Shape]:
    """The shape of each minute on the way to ``end`` (``parents``: per minute, each state's
    predecessor)."""
    shapes: list[Shape] = []
    state = end
    for parent in reversed(parents):
        shapes.append(state[0])
        state = parent[state]
    shapes.reverse()
    return shapes


def _step(states: dict[State, Score], here: dict[Shape, Option], hold: int,
          overlap_h: float, max_step: int) -> tuple[dict[State, Score], dict[State, State]]:
    """One minute: every state either keeps its shape (at this minute's fewest replicas, or a
    minute not kept where its shape keeps nothing) or, past the cooldown, changes to a shape
    this minute's options hold whose first rolling step carries the load. The best score of
    each state after the minute, and the state it came from."""
    new: dict[State, Score] = {}
    parent: dict[State, State] = {}

    def relax(state: State, score: Score, came_from: State) -> None:
        if state not in new or score < new[state]:
            new[state] = score
            parent[state] = came_from

    for (shape, since), (missed, cost, changes, gpu) in states.items():
        was = (shape, since)
        mine = here.get(shape)
        if mine is None:
            relax((shape, min(since + 1, hold)), (missed + 1, cost, changes, gpu), was)
        else:
            relax((shape, min(since + 1, hold)),
                  (missed, cost + mine.cost_per_hour / 60.0, changes,
                   gpu + (shape.device == "gpu")), was)
        if since < hold:
            continue
        for to, opt in here.items():
            if to == shape or (mine is not None and opt.replicas > mine.replicas + max_step):
                continue
            old = mine.cost_per_hour * overlap_h if mine is not None else 0.0
            relax((to, 1 if hold > 1 else hold),
                  (missed, cost + opt.cost_per_hour / 60.0 + old, changes + 1,
                   gpu + (to.device == "gpu")), was)
    return new, parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="+", required=True,
                    help="scenario files or generated:<seed> references")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{'scenario':<24}{'oracle':>9}{'changes':>8}{'switching':>10}{'changes':>8}"
          f"{'missed':>7}{'GPU min':>8}{'CPU only':>9}{'missed':>7}")
    totals = [0.0, 0, 0.0, 0, 0, 0, 0.0, 0]
    for ref in args.scenarios:
        sc = slo.load(ref)
        free = oracle(sc, args.seed).values()
        prepared = prepare(sc, args.seed)
        held = switching(sc, args.seed, prepared=prepared).values()
        cpu = switching(sc, args.seed, devices=("cpu",), prepared=prepared).values()
        row = (sum(float(v["cost"]) for v in free), sum(int(v["shape_changes"]) for v in free),
               sum(float(v["cost"]) for v in held), sum(int(v["changes"]) for v in held),
               sum(int(v["missed"]) for v in held), sum(int(v["gpu_minutes"]) for v in held),
               sum(float(v["cost"]) for v in cpu), sum(int(v["missed"]) for v in cpu))
        totals = [t + v for t, v in zip(totals, row, strict=True)]
        print(_row(ref, row), flush=True)
    print(_row("total", tuple(totals)))


def _row(name: str, row: tuple[float, ...]) -> str:
    free, free_changes, cost, changes, missed, gpu, cpu, cpu_missed = row
    return (f"{name:<24}{free:>9.3f}{int(free_changes):>8}{cost:>10.3f}{int(changes):>8}"
            f"{int(missed):>7}{int(gpu):>8}{cpu:>9.3f}{int(cpu_missed):>7}")


if __name__ == "__main__":
    main()
