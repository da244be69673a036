"""Per device, each day's violation-minutes / cost summed over the seeds of one or more
`bench/device_pins.py --days 2 --json` outputs.
  python docs/experiments/67/days.py OUT.json ..."""
import json, sys, collections
for f in sys.argv[1:]:
    d = json.load(open(f))
    acc = collections.defaultdict(lambda: [[0, 0.0], [0, 0.0]])
    scen = None
    for r in d["runs"]:
        scen = r["scenario"]
        for i, day in enumerate(r["days"]):
            acc[r["device"]][i][0] += day["violation_minutes"]
            acc[r["device"]][i][1] += day["cost"]
    print(scen, "  ".join(f"{dev}: d1 {a[0][0]}/{a[0][1]:.3f} d2 {a[1][0]}/{a[1][1]:.3f}" for dev, a in acc.items()))
