"""Approximate cost per phase (0-2700 s, the day, 18900-21600 s) of traces written by
trace_cycles.py (the configuration after each cycle's actions, rollouts' doubled pods not
counted): python docs/experiments/64/cost_phases.py auto3.txt gpu3.txt"""
import re
import sys


def load(path):
    rows = []
    for line in open(path):
        p = line.split()
        if len(p) < 4 or not p[0].isdigit(): continue
        t, r, c, d = int(p[0]), int(p[1]), float(p[2]), p[3]
        m = re.search(r"'replicas': (\d+), 'from'", line); r = int(m.group(1)) if m else r
        m = re.search(r"\"cpu:\{'cpu': ([\d.]+), 'from'", line); c = float(m.group(1)) if m else c
        m = re.search(r"'device': '(\w+)', 'from'", line); d = m.group(1) if m else d
        rows.append((t, r, c, d))
    return rows
cuts = [0, 2700, 18900, 21600]
for path in sys.argv[1:]:
    rows = load(path)
    tot = [0.0] * (len(cuts) - 1)
    for (t, r, c, d), nxt in zip(rows, rows[1:] + [(21600, 0, 0, "")]):
        price = r * (c * 0.04 + (2.5 if d == "gpu" else 0))
        for k in range(len(cuts) - 1):
            a, b = max(t, cuts[k]), min(nxt[0], cuts[k + 1])
            if b > a: tot[k] += price * (b - a) / 3600
    print(path.split("/")[-1], "phases", cuts, [round(x, 2) for x in tot], "sum", round(sum(tot), 2))
