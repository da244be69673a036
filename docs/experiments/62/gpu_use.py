"""gpu_use.py REF_TXT GRID_JSON...: the GPU bar's runs split by GPU use, the reference with
shapes' (a saved `bench/reference.py --shapes --against ...` printout, read as
docs/experiments/61/gpu_bar.py reads it) against grid's runs (bench/slo.py --json): per group
the runs, the reference's cost, grid's and their ratio (section 62; section 49's split)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "61"))
from gpu_bar import runs

ref, grid = runs(sys.argv[1], sys.argv[2:])
groups: dict[str, list[float]] = {}
for key, (cost, gpu_h) in ref.items():
    g = grid[key]
    mine = g.get("gpu_hours", 0.0) > 0
    name = ("the reference uses GPUs, grid none" if gpu_h > 0 and not mine
            else "both use GPUs" if gpu_h > 0 else
            "grid uses GPUs, the reference none" if mine else "neither uses GPUs")
    x = groups.setdefault(name, [0, 0.0, 0.0])
    x[0] += 1
    x[1] += cost
    x[2] += g["cost"]
for name, (n, rc, gc) in groups.items():
    print(f"{name:36} {n:3} runs  reference {rc:8.3f}  grid {gc:8.3f}  x{gc / rc:.3f}")
