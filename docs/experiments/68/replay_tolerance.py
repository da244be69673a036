"""replay_tolerance.py [CALLS]: the mixture solves recorded by docs/experiments/65/capture.py (default
/tmp/calls.pkl) solved exact and with the tolerance 1e-3, alternated twice: CPU microseconds a call, the
largest relative difference, and the rows two queues pin (_pinned_rows). Needs branch rtol's
planner/models/sojourn.py: run it in a worktree of rtol (PYTHONPATH=.)."""
import pickle, sys, time
import numpy as np
sys.path.insert(0, ".")
import planner.models.sojourn as sj
calls = pickle.load(open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/calls.pkl", "rb"))
exact = None
for rtol in (0.0, 1e-3, 0.0, 1e-3):
    t0 = time.process_time()
    outs = [sj.mixture_sojourn_quantile(*c[:5], c[5], rtol=rtol) for c in calls]
    print(f"rtol {rtol:g}: {1e6 * (time.process_time() - t0) / len(calls):.0f} us a call")
    if rtol == 0.0:
        exact = outs
        continue
    worst = 0.0
    for a, b in zip(exact, outs):
        ok = np.isfinite(a) & np.isfinite(b)
        assert np.array_equal(np.isfinite(a), np.isfinite(b))
        if ok.any():
            worst = max(worst, float(np.max(np.abs(a[ok] - b[ok]) / a[ok])))
    print(f"  largest relative difference {worst:.2e}")
rows = pinned = left = 0
for q, lam, mu, c, w, *_ in calls:
    present = w > 0
    unstable = sj._rows_any(present & ~(lam < sj.SATURATION * mu))
    rest = ~(sj._one_class_rows(present, lam, mu, c, w) & ~unstable | unstable)
    p = sj._pinned_rows(q, lam, mu, c, present, rest, 1e-3, np.full(len(lam), np.inf))
    rows += len(lam); pinned += int(p.sum()); left += int((rest & ~p).sum())
print(f"rows {rows}: pinned by two queues {pinned}, left for the mixture's steps {left}")
