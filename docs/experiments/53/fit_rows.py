"""The rows of one saved fit (dump_fits.py; -1: the last), its fitted parameters, and per row
the load, pods, shape and node-class shares (section 53). Usage, from the repository root:
PYTHONPATH=. python docs/experiments/53/fit_rows.py /tmp/fits360.pkl -1"""
import pickle, sys, numpy as np
from planner.models import latency as L
fits = pickle.load(open(sys.argv[1], "rb"))
i = int(sys.argv[2])
f = fits[i]
X, y, u = f["X"], f["y"], f["u"]
print("t", f["t"], "pct", f["pct"], "rows", len(y), "classes", f["classes"])
th = f["theta"]; k = X.shape[1] - 5
print("theta mu %.2f alpha %.2f gpu %.2f base %.1f beta %.2f" % (np.exp(th[0]), th[1], np.exp(th[2]), th[3], th[4]),
      "speeds", np.round(np.exp(th[5:5+k]), 2), "offsets", np.round(th[5+k:], 1))
order = np.argsort(f["times"])
for j in order:
    r = X[j]
    print(f"{f['times'][j]/60:6.1f} rate {r[0]:7.1f} n {r[1]:4.0f} cpu {r[2]:.1f} gpu {r[3]:.0f} shares {np.round(r[5:],2)} y {y[j]:8.1f} u {u[j]:.2f}")
