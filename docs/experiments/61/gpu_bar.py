"""gpu_bar.py REF_TXT GRID_JSON...: the GPU bar (grid's cost over the reference's on the fresh
set, seeds 1-3) from a saved `bench/reference.py --shapes --against ...` output (the reference's
columns; its runs do not depend on grid's) and grid's runs in bench/slo.py --json outputs; per
scenario the excess over the reference, largest first (section 61)."""
import json
import sys
from collections import defaultdict


def runs(ref_txt: str, grid_json: list[str]) -> tuple[dict, dict]:
    """The reference's (cost, GPU-hours) per (scenario, seed) from its saved printout, and
    grid's runs per (scenario, seed) from bench/slo.py --json outputs (section 62's
    gpu_use.py reads them here too)."""
    ref = {}
    with open(ref_txt) as lines:
        for line in lines:
            f = line.split()
            if len(f) == 9 and f[0].startswith("gen-"):
                ref[(f[0], int(f[1]))] = (float(f[3]), float(f[4]))
    grid = {}
    for path in grid_json:
        with open(path) as fh:
            grid.update({(r["scenario"], r["seed"]): r for r in json.load(fh)["runs"]
                         if r["planner"] == "grid"})
    return ref, grid


def main() -> None:
    ref, grid = runs(sys.argv[1], sys.argv[2:])
    per = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for key, (rc, rg) in ref.items():
        r = grid[key]
        x = per[key[0]]
        x[0] += rc
        x[1] += r["cost"]
        x[2] += rg
        x[3] += r.get("gpu_hours", 0.0)
    tr, tg = sum(x[0] for x in per.values()), sum(x[1] for x in per.values())
    print(f"{'scenario':10} {'ref':>8} {'grid':>8} {'excess':>7} {'refGPUh':>7} {'GPUh':>6}")
    for s, x in sorted(per.items(), key=lambda kv: kv[1][0] - kv[1][1])[:8]:
        print(f"{s:10} {x[0]:8.3f} {x[1]:8.3f} {x[1]-x[0]:7.3f} {x[2]:7.2f} {x[3]:6.2f}")
    print(f"total      {tr:8.3f} {tg:8.3f}  x{tg / tr:.3f}")


if __name__ == "__main__":
    main()
