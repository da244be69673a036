"""Find generated scenarios where GPUs pay: the seeds whose perfect-knowledge oracle
(``bench/oracle.py``) runs GPU pods, as ``generated:<seed>`` references for ``bench/slo.py``.

    python bench/gpu_scenarios.py --seeds 201..3000            # one reference per line
    python bench/slo.py --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000) \\
        --planners grid --seeds 1 --workers 2 --json

The generator draws GPU speed-ups around the price break-even, so about one scenario in a
hundred is one; only scenarios with a GPU pool and the ``device`` actuator are asked (the
oracle cannot use a GPU elsewhere). ``--verbose`` adds the oracle's GPU-hours and cost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.generate import parse_seeds  # noqa: E402
from bench.slo import GENERATED, oracle_totals  # noqa: E402


def gpu_can_pay(seed: int) -> bool:
    """Whether generated scenario ``seed`` has a GPU pool the planners may move to."""
    from simulator.generate import generate

    doc = generate(seed)
    return (any(p.get("gpus") for p in doc["cluster"]["pools"])
            and "device" in doc["admin"]["actuators"])


def find(seeds: list[int]) -> list[tuple[int, float, float]]:
    """``(seed, GPU-hours, cost)`` of the oracle (seed 1 of the trace) where it uses GPUs."""
    out = []
    for seed in seeds:
        if not gpu_can_pay(seed):
            continue
        o = oracle_totals(f"{GENERATED}{seed}", 1)
        if o["gpu_hours"] > 0:
            out.append((seed, float(o["gpu_hours"]), float(o["cost"])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", nargs="+", required=True, type=str,
                    help="generator seeds: A..B ranges and single seeds")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    try:
        seeds = parse_seeds(args.seeds)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    for seed, hours, cost in find(seeds):
        print(f"{GENERATED}{seed}" + (f"  {hours:.2f} GPU-h  {cost:.3f}" if args.verbose
                                      else ""), flush=True)


if __name__ == "__main__":
    main()
