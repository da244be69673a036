"""sets.py DIR...: per runall output directory (docs/experiments/60/runall.sh or 61/runL.sh),
per set file: grid's violation-minutes, cost, GPU-hours and its collapses (against the oracle,
and beyond the reference), from the bench/slo.py --json outputs (section 61)."""
import json
import os
import sys

for d in sys.argv[1:]:
    print(d)
    for name in ("fresh_s1", "fresh_s23", "unseen_s1", "g31_s1", "table_s123"):
        path = os.path.join(d, name + ".json")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            continue
        rep = json.load(open(path))
        runs = [r for r in rep["runs"] if r["planner"] == "grid"]
        col = rep.get("collapses", {}).get("grid", [])
        beyond = rep.get("collapses_beyond_reference", {}).get("grid", [])
        p99 = max(r["plan_ms_p99"] for r in runs)
        print(f"  {name:11} runs {len(runs):3}  viol {sum(r['violation_minutes'] for r in runs):5}"
              f"  cost {sum(r['cost'] for r in runs):8.3f}"
              f"  GPU-h {sum(r.get('gpu_hours', 0.0) for r in runs):6.2f}"
              f"  collapses {len(col)} (beyond reference {len(beyond)})  worst plan p99 {p99:.1f} ms")
