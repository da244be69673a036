"""The scenario table of docs/benchmarks.md section 1: ``intent-planner simulate --json`` for
every shipped scenario and planner at the scenario's own seed, as Markdown rows.

    python bench/table.py [--planners grid queueing hpa]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))


def row(scenario: Path, planner: str) -> str:
    out = subprocess.run([sys.executable, "-m", "planner.cli", "simulate", "--scenario",
                          str(scenario), "--planner", planner, "--json"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    r = json.loads(out)
    t = r["totals"]
    att = "; ".join(f"{key} {name} {o['attainment']:.1%}"
                    for key, v in sorted(r["intents"].items())
                    for name, o in sorted(v["objectives"].items()))
    return (f"| {r['scenario']} | {planner} | {att} | {t['violation_minutes']} | "
            f"{t['core_hours']:.2f} | {t['cost']:.3f} | {t['actions']} | "
            f"{t['plan_ms_p50']:.2f} / {t['plan_ms_p99']:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--planners", nargs="+", default=["grid", "queueing", "hpa"])
    args = ap.parse_args()
    print("| scenario | planner | attainment per objective | violation-min | core-hours | cost "
          "| actions | plan ms p50 / p99 |")
    print("|---|---|---|---|---|---|---|---|")
    for s in SCENARIOS:
        for p in args.planners:
            print(row(s, p), flush=True)


if __name__ == "__main__":
    main()
