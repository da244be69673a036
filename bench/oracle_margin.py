"""The perfect-knowledge oracle's cost when it keeps a margin below every latency target: how
much of a planner's cost over the oracle is the room any planner without perfect knowledge
must keep (the oracle plans to the millisecond: 48.7 ms against a 49 ms target).

    python bench/oracle_margin.py --margins 0 0.05 0.1 0.2 \\
        --scenarios $(python bench/gpu_scenarios.py --seeds 201..3000)

One row per scenario (the oracle's cost at each margin, seed 1 of the trace) and the totals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import slo  # noqa: E402
from bench.oracle import oracle  # noqa: E402


def costs(ref: str, margins: list[float], seed: int = 1) -> list[float]:
    """The oracle's total cost on scenario ``ref`` at each latency margin."""
    sc = slo.load(ref)
    return [sum(float(v["cost"]) for v in oracle(sc, seed, latency_margin=m).values())
            for m in margins]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--margins", nargs="+", type=float, default=[0.0, 0.05, 0.1, 0.2])
    ap.add_argument("--scenarios", nargs="+", required=True,
                    help="scenario files or generated:<seed> references")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if any(not 0.0 <= m < 1.0 for m in args.margins):
        ap.error("--margins: each a fraction in [0, 1), e.g. 0.1 for 10 %")
    totals = [0.0] * len(args.margins)
    print(f"{'scenario':<24}" + "".join(f"{f'margin {m:g}':>12}" for m in args.margins))
    for ref in args.scenarios:
        row = costs(ref, args.margins, args.seed)
        totals = [t + c for t, c in zip(totals, row, strict=True)]
        print(f"{ref:<24}" + "".join(f"{c:>12.3f}" for c in row), flush=True)
    print(f"{'total':<24}" + "".join(f"{c:>12.3f}" for c in totals))


if __name__ == "__main__":
    main()
