"""compare_grid.py NEW.json BASE.json...: bench/slo.py --json outputs; per (scenario, seed) of
NEW's grid runs that differ from the same run in BASE (any number of files), before -> after,
and the totals over NEW's runs."""
import json
import sys

new = [r for r in json.load(open(sys.argv[1]))["runs"] if r["planner"] == "grid"]
base = {(r["scenario"], r["seed"]): r for f in sys.argv[2:]
        for r in json.load(open(f))["runs"] if r["planner"] == "grid"}
bv = tv = 0
bc = tc = 0.0
for r in sorted(new, key=lambda r: (r["scenario"], r["seed"])):
    b = base[(r["scenario"], r["seed"])]
    bv += b["violation_minutes"]
    tv += r["violation_minutes"]
    bc += b["cost"]
    tc += r["cost"]
    if (r["violation_minutes"], round(r["cost"], 3)) != (b["violation_minutes"], round(b["cost"], 3)):
        print(f"  {r['scenario']} s{r['seed']}: {b['violation_minutes']} / {b['cost']:.3f} -> "
              f"{r['violation_minutes']} / {r['cost']:.3f} (GPU-hours {b['gpu_hours']:.2f} -> "
              f"{r['gpu_hours']:.2f})")
print(f"total {len(new)} runs: {bv} / {bc:.3f} -> {tv} / {tc:.3f}")
