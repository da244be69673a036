"""table_seeds.py RUN.json... : bench/slo.py --json outputs of the issue table (any planners, any
seeds; a later file's run of a planner, scenario and seed replaces an earlier one's). Per
planner: runs, violation-minutes, cost and its ratio to the oracle's cost over the same
scenarios and seeds; grid per seed; and grid's runs that violate more than 20 % of their
objective-minutes where the oracle finds every minute feasible."""
import json
import sys

runs: dict[tuple[str, str, int], dict] = {}
oracle: dict[tuple[str, int], dict] = {}
for f in sys.argv[1:]:
    d = json.load(open(f))
    for r in d["runs"]:
        runs[(r["planner"], r["scenario"], r["seed"])] = r
    for o in d["oracle"]:
        oracle[(o["scenario"], o["seed"])] = o
for planner in sorted({p for p, _, _ in runs}):
    mine = [r for (p, _, _), r in runs.items() if p == planner]
    cost = sum(r["cost"] for r in mine)
    theirs = sum(oracle[(r["scenario"], r["seed"])]["cost"] for r in mine)
    print(f"{planner}: {len(mine)} runs, {sum(r['violation_minutes'] for r in mine)} "
          f"violation-minutes, cost {cost:.3f}, x{cost / theirs:.3f} the oracle's {theirs:.3f}")
print(f"oracle: {len(oracle)} runs, cost {sum(o['cost'] for o in oracle.values()):.3f}")
grid = [r for (p, _, _), r in runs.items() if p == "grid"]
for seed in sorted({r["seed"] for r in grid}):
    g = [r for r in grid if r["seed"] == seed]
    o = sum(oracle[(r["scenario"], seed)]["cost"] for r in g)
    c = sum(r["cost"] for r in g)
    print(f"  seed {seed}: grid {sum(r['violation_minutes'] for r in g)} / {c:.3f}, "
          f"oracle {o:.3f}, x{c / o:.3f}")
print("grid collapses against the oracle:", sorted(
    (r["scenario"], r["seed"], r["violation_minutes"], r["minutes"]) for r in grid
    if r["violation_minutes"] > 0.2 * r["minutes"]
    and oracle[(r["scenario"], r["seed"])]["infeasible_minutes"] == 0))
