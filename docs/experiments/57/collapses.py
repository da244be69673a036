"""collapses.py RUN.json...: bench/slo.py --json outputs (a later file's run of a scenario and
seed replaces an earlier one's, as a set's seed-1 run, its seeds 2-3 and a re-run subset
combine). Grid's runs that violate more than 20 % of their objective-minutes where the oracle
finds every minute feasible (bench/slo.py's `collapses`), then the totals of grid's runs."""
import json
import sys

runs: dict[tuple[str, int], dict] = {}
collapsed: dict[tuple[str, int], int | None] = {}
for f in sys.argv[1:]:
    d = json.load(open(f))
    for r in d["runs"]:
        if r["planner"] == "grid":
            runs[(r["scenario"], r["seed"])] = r
            collapsed[(r["scenario"], r["seed"])] = None
    for c in d["collapses"].get("grid", []):
        collapsed[(c["scenario"], c["seed"])] = c["violation_minutes"]
hits = sorted((k, v) for k, v in collapsed.items() if v is not None)
for (scenario, seed), v in hits:
    print(f"  collapse: {scenario} seed {seed}: {v} of {runs[(scenario, seed)]['minutes']} minutes")
print(f"{len(runs)} runs: {sum(r['violation_minutes'] for r in runs.values())} violation-minutes, "
      f"cost {sum(r['cost'] for r in runs.values()):.3f}, {len(hits)} collapses")
