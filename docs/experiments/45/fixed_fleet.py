"""Write copies of a generated scenario with a fixed fleet at a constant load (section 45).

    .venv/bin/python bench/generate.py --seeds 2131 --out /tmp/sc
    .venv/bin/python docs/experiments/45/fixed_fleet.py /tmp/sc/gen-2131.yaml 948 11 14 18 24
    .venv/bin/python bench/trace.py /tmp/sc/fixed-11.yaml --every 8 --reason-chars 10

Each copy runs 15 minutes at the given rate (no noise) with ``replicas`` pods of the
scenario's own shape, held there (only ``remove-pod`` enabled, min = max = replicas): the
trace then shows the simulator's own KPI for that fleet.
"""
import sys
from pathlib import Path

import yaml

src, rate, counts = Path(sys.argv[1]), float(sys.argv[2]), [int(x) for x in sys.argv[3:]]
for r in counts:
    doc = yaml.safe_load(src.read_text())
    doc["name"], doc["duration"] = f"fixed-{r}", 900.0
    w = doc["workloads"][0]
    w["replicas"] = r
    w["trace"] = {"kind": "step", "initial": rate, "steps": [{"at": 800.0, "rate": rate}],
                  "noise": 0.0}
    doc["admin"]["actuators"] = ["remove-pod"]
    doc["admin"]["replicas"].update(min=r, max=r)
    out = src.parent / f"fixed-{r}.yaml"
    out.write_text(yaml.safe_dump(doc))
    print(out)
