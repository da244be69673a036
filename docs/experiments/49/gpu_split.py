"""Split a ``bench/reference.py --shapes --against GRID.json`` printout by GPU use: the runs
where the reference uses GPUs and grid does not, where both do, and where the reference does
not; per group the reference's cost, grid's and their ratio (section 49):

    .venv/bin/python bench/reference.py --shapes --against OUT.json --workers 1 \\
        --scenarios ... > REF.txt
    python docs/experiments/49/gpu_split.py REF.txt
"""
import sys

groups: dict[str, list[float]] = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 9 or not parts[0].startswith("gen-"):
        continue
    ref_cost, ref_gpu, cost, gpu = float(parts[3]), float(parts[4]), float(parts[6]), float(parts[7])
    key = ("reference GPU, grid none" if ref_gpu > 0 and gpu == 0 else
           "both GPU" if ref_gpu > 0 else "reference no GPU")
    g = groups.setdefault(key, [0, 0.0, 0.0])
    g[0] += 1; g[1] += ref_cost; g[2] += cost
for key, (n, ref, cost) in groups.items():
    print(f"{key:26} {int(n):3} runs  reference {ref:8.3f}  grid {cost:8.3f}  x{cost / ref:.3f}")
