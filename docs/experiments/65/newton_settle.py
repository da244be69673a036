"""newton_settle.py: over the first 50 calls of /tmp/calls.pkl (capture.py), the share of rows whose
iterate changes at each of the mixture Newton solve's 8 steps (a row whose iterate stops changing
bit for bit could be set aside exactly; rows that keep moving by an ulp cannot).
Run from the repository root: .venv/bin/python docs/experiments/65/newton_settle.py"""
import math
import pickle
import sys

import numpy as np

sys.path.insert(0, ".")
from planner.models import sojourn as sj

calls = pickle.load(open("/tmp/calls.pkl", "rb"))
changed_at: list[list[float]] = []


def mixture_newton(q, terms, weight, present, ok, lo_f, hi_f, iterations):
    """sojourn._mixture_newton's steps, written out, counting the rows each step moves."""
    _, s, theta, a1, a2 = terms
    w = np.where(present, weight, 0.0)
    log_p = math.log(1.0 - q)
    t = lo_f.copy()
    changed = []
    for _ in range(iterations):
        prev = t.copy()
        e1 = w * a1 * np.exp(-s * t)
        e2 = w * a2 * np.exp(-theta * t)
        surv = np.maximum((e1 + e2).sum(axis=0), 1e-300)
        slope = np.minimum((-s * e1 - theta * e2).sum(axis=0), -1e-300)
        t = np.minimum(np.maximum(t - (np.log(surv) - log_p) * surv / slope, lo_f), hi_f)
        changed.append(float((t != prev).mean()))
    changed_at.append(changed)
    return np.where(ok, t, np.inf)


sj._mixture_newton = mixture_newton
for q, lam, mu, c, w, it, _ in calls[:50]:
    sj.mixture_sojourn_quantile(q, lam, mu, c, w, it)
print("share of rows moved per step:", np.round(np.mean(changed_at, axis=0), 3))
