"""generated:360 seed 3 (grid) at one minute: the 1-cpu CPU candidates the grid judged (the p90
model's mean and bound, supported, feasible) and the learned model's fitted parameters and
the candidate's feature row (section 52). Usage, from the repository root:
PYTHONPATH=. python docs/experiments/52/judge_probe.py 65.08"""
import sys

import numpy as np

from bench import slo
from planner.models import effects as E
from planner.models import latency as L
from planner.planners import grid as G
from simulator.runner import ScenarioRun

at = float(sys.argv[1])
run = ScenarioRun(slo.load("generated:360"), "grid", 3)
judge, predict = G.GridPlanner._judge, E.LearnedKPI.predict
shown = [False]


def now_at() -> bool:
    return abs(run.elapsed / 60 - at) < 0.13


def judged(self, ctx, batch, rate, predictions, inp, slack=0.0, monotone_only=False):
    out = judge(self, ctx, batch, rate, predictions, inp, slack, monotone_only)
    if now_at():
        pr = next(iter(predictions.values()))
        for i in np.flatnonzero((np.abs(batch.cpu - 1.0) < 1e-9) & (batch.gpu == 0))[:40]:
            print(f"rate {rate:.0f} n {int(batch.replicas[i])} mean {pr.mean[i]:.0f} bound "
                  f"{pr.bound[i]:.0f} supported {bool(pr.supported[i])} feasible "
                  f"{bool(out.feasible[i])} cost {out.cost[i]:.3f}")
        print("--", flush=True)
    return out


def predicted(self, batch, rate):
    out = predict(self, batch, rate)
    sel = np.flatnonzero((np.abs(batch.cpu - 1.0) < 1e-9) & (batch.gpu == 0))
    if now_at() and len(sel) and not shown[0]:
        shown[0] = True
        est = self.model.estimator
        th, k = est.theta_, est.n_classes_
        print("classes", self.model.classes, "mix", self.mix)
        print(f"mu {np.exp(th[0]):.2f} alpha {th[1]:.2f} gpu {np.exp(th[2]):.1f} base "
              f"{th[3]:.1f} beta {th[4]:.2f} class speeds "
              f"{np.round(np.exp(th[L.N_FIXED:L.N_FIXED + k]), 2).tolist()} class offsets "
              f"{np.round(th[L.N_FIXED + k:], 2).tolist()}")
        X = self.model.features(batch, rate, self.mix, self.gpu_mix)
        print("row", np.round(X[sel[0]], 3).tolist(), out.mean[sel[0]], out.bound[sel[0]])
    return out


G.GridPlanner._judge = judged
E.LearnedKPI.predict = predicted
while run.elapsed < (at + 0.2) * 60:
    run.advance()
