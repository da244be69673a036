"""by_scenario.py REF_TXT [REF_TXT2]: bench/reference.py --shapes --against output, summed per
scenario over seeds: reference cost, grid cost, the excess, GPU-hours of each; with a second
output, its grid cost beside (section 60)."""
import sys
from collections import defaultdict


def rows(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) == 9 and f[0].startswith("gen-"):
            out[(f[0], int(f[1]))] = (float(f[3]), float(f[4]), int(f[5]), float(f[6]),
                                      float(f[7]))
    return out


a = rows(sys.argv[1])
b = rows(sys.argv[2]) if len(sys.argv) > 2 else None
agg = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0, 0, 0])
for (s, seed), (rc, rg, v, c, g) in a.items():
    x = agg[s]
    x[0] += rc; x[1] += c; x[2] += rg; x[3] += g; x[5] += v
    if b:
        x[4] += b[(s, seed)][3]; x[6] += b[(s, seed)][2]
print(f"{'scenario':10} {'ref':>8} {'grid':>8} {'excess':>7} {'refGPUh':>7} {'GPUh':>6} viol"
      + ("   other  o.viol  delta" if b else ""))
for s, x in sorted(agg.items(), key=lambda kv: kv[1][0] - kv[1][1]):
    print(f"{s:10} {x[0]:8.3f} {x[1]:8.3f} {x[1]-x[0]:7.3f} {x[2]:7.2f} {x[3]:6.2f} {x[5]:4d}"
          + (f" {x[4]:8.3f} {x[6]:6d} {x[4]-x[1]:+7.3f}" if b else ""))
t = [sum(x[i] for x in agg.values()) for i in range(7)]
print(f"{'total':10} {t[0]:8.3f} {t[1]:8.3f} {t[1]-t[0]:7.3f} {t[2]:7.2f} {t[3]:6.2f} {t[5]:4d}"
      + (f" {t[4]:8.3f} {t[6]:6d} {t[4]-t[1]:+7.3f}" if b else ""))
