"""compiled_solve.py: the mixture quantile solve of /tmp/calls.pkl (capture.py) timed as it is
(numpy) and as one fused loop per row compiled by numba (not a dependency: pip install --target
/tmp/nbpkgs --no-deps numba llvmlite; PYTHONPATH=/tmp/nbpkgs .venv/bin/python
docs/experiments/65/compiled_solve.py); prints the CPU time per call of each, and how many
results differ (the last bits: numba calls libm exp, numpy its own AVX-512 exp)."""
import pickle, time, math, sys
sys.path.insert(0, ".")
import numpy as np
import numba
from planner.models import sojourn as sj
calls = pickle.load(open("/tmp/calls.pkl", "rb"))
pres = np.concatenate([(c[4] > 0).sum(axis=1) for c in calls])
print("present classes per row: pct", np.percentile(pres, [10, 50, 90]))
t0 = time.process_time()
for _ in range(5):
    for q, lam, mu, c, w, it, out in calls:
        sj.mixture_sojourn_quantile(q, lam, mu, c, w, it)
tn = (time.process_time() - t0) / 5
print("numpy per call us", tn / len(calls) * 1e6)

@numba.njit(cache=False)
def erlang(c, a):
    term = 1.0; total = 1.0
    k = 1
    while k < c:
        term = term * a / k
        total = total + term
        k += 1
    last = term * a / c / max(1.0 - a / c, 1e-12)
    return last / (total + last)

@numba.njit(cache=False)
def terms(lam, mu, c):
    stable = lam < 0.98 * mu
    lam_s = lam if stable else 0.0
    s = mu / c / 1000.0
    theta = (mu - lam_s) / 1000.0
    if abs(theta - s) < 1e-3 * s:
        theta = s * 1.001
    wait = erlang(c, lam_s / (mu / c))
    a1 = (1.0 - wait) - wait * theta / (s - theta)
    a2 = wait * s / (s - theta)
    return stable, s, theta, a1, a2

@numba.njit(cache=False)
def solve(q, lam, mu, c, w, iterations):
    n, K = lam.shape
    log_p = math.log(1.0 - q)
    out = np.empty(n)
    S = np.empty(K); TH = np.empty(K); A1 = np.empty(K); A2 = np.empty(K)
    for i in range(n):
        lo = np.inf; hi = -np.inf; bad = False
        for k in range(K):
            st, s, th, a1, a2 = terms(lam[i, k], mu[i, k], c[i, k])
            S[k] = s; TH[k] = th; A1[k] = a1; A2[k] = a2
            if w[i, k] > 0:
                if not st:
                    bad = True
                t = 0.0
                for j in range(7):
                    e1 = a1 * math.exp(-s * t); e2 = a2 * math.exp(-th * t)
                    surv = max(e1 + e2, 1e-300)
                    slope = min(-s * e1 - th * e2, -1e-300)
                    t = t - (math.log(surv) - log_p) * surv / slope
                lo = min(lo, t); hi = max(hi, t)
        if bad or not (np.isfinite(lo) and np.isfinite(hi)):
            out[i] = np.inf; continue
        t = lo
        for j in range(iterations):
            surv = 0.0; slope = 0.0
            for k in range(K):
                if w[i, k] > 0:
                    e1 = w[i, k] * A1[k] * math.exp(-S[k] * t)
                    e2 = w[i, k] * A2[k] * math.exp(-TH[k] * t)
                    surv += e1 + e2
                    slope += -S[k] * e1 - TH[k] * e2
            surv = max(surv, 1e-300); slope = min(slope, -1e-300)
            t = t - (math.log(surv) - log_p) * surv / slope
            t = min(max(t, lo), hi)
        out[i] = t
    return out

q, lam, mu, c, w, it, out = calls[0]
t0 = time.perf_counter(); solve(q, lam, mu, np.ascontiguousarray(c), w, it); print("compile s", time.perf_counter() - t0)
t0 = time.process_time()
diff = 0; maxrel = 0.0; tot = 0
for _ in range(5):
    for q, lam, mu, c, w, it, out in calls:
        r = solve(q, lam, mu, np.ascontiguousarray(c), w, it)
tb = (time.process_time() - t0) / 5
for q, lam, mu, c, w, it, out in calls:
    r = solve(q, lam, mu, np.ascontiguousarray(c), w, it)
    fin = np.isfinite(out)
    diff += int((r != out).sum()); tot += out.size
    if fin.any(): maxrel = max(maxrel, float(np.max(np.abs(r[fin] - out[fin]) / np.abs(out[fin]))))
print("numba per call us", tb / len(calls) * 1e6, "speedup", tn / tb, "differ", diff, "of", tot, "max rel", maxrel)
