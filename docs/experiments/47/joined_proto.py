"""The first prototype (monkeypatched): each cycle's planning one by one, then again as greenlet tasks with joined
    solves; CPU of each and how many plans are the same.  .venv/bin/python docs/experiments/47/joined_proto.py 1000 5000 200 4"""
import sys, time, math, collections, dataclasses
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
from greenlet import greenlet, getcurrent
import scale
from planner.models import latency, sojourn
from planner.control import controller as C
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario

solve = sojourn.mixture_sojourn_quantile

class Planning(greenlet):
    pass

def parked(q, lam, mu, c, weight, iterations=8):
    g = getcurrent()
    if isinstance(g, Planning):
        return g.parent.switch((q, lam, mu, c, weight, iterations))
    return solve(q, lam, mu, c, weight, iterations)

def joined(reqs):
    groups = collections.defaultdict(list)
    for i, (q, lam, mu, c, w, it) in enumerate(reqs):
        groups[(q, lam.shape[1], it)].append(i)
    out = [None] * len(reqs)
    for (q, k, it), idx in groups.items():
        if len(idx) == 1:
            r = reqs[idx[0]]; out[idx[0]] = solve(*r); continue
        arrs = [np.concatenate([reqs[i][j] for i in idx]) for j in (1, 2, 3, 4)]
        res = solve(q, *arrs, it)
        at = 0
        for i in idx:
            n = reqs[i][1].shape[0]; out[i] = res[at:at + n]; at += n
    return out

def run_tasks(tasks):
    waiting = []
    for t in tasks:
        g = Planning(t)
        r = g.switch()
        if not g.dead: waiting.append((g, r))
    rounds = 0
    while waiting:
        rounds += 1
        ans = joined([r for _, r in waiting])
        nxt = []
        for (g, _), a in zip(waiting, ans):
            r = g.switch(a)
            if not g.dead: nxt.append((g, r))
        waiting = nxt
    return rounds

def key(plan):
    return None if plan is None else repr(dataclasses.replace(plan, planning_ms=0.0)) if hasattr(plan, "planning_ms") else repr(plan)

n, nodes, pods, cycles = (int(a) for a in sys.argv[1:5])
run = ScenarioRun(parse_scenario(scale.scenario(n, nodes, pods, True), "scale"), "grid", 1)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
ctl = run.controller
orig = C.IntentController._plan_in_order
stats = []
def both(self, pending, snapshot):
    t0 = time.process_time()
    res = orig(self, pending, snapshot)
    t1 = time.process_time()
    seq = [key(s.out.plan) for s in pending]
    latency.mixture_sojourn_quantile = parked
    t2 = time.process_time()
    rounds = run_tasks([lambda s=s: self._plan(s, snapshot, self.placements.get(s.out.intent.key)) for s in pending])
    t3 = time.process_time()
    latency.mixture_sojourn_quantile = solve
    same = sum(a == key(s.out.plan) for a, s in zip(seq, pending))
    stats.append((t1 - t0, t3 - t2, rounds, same, len(pending)))
    print(f"seq {t1-t0:.3f} joined {t3-t2:.3f} rounds {rounds} same {same}/{len(pending)}", flush=True)
    return res
C.IntentController._plan_in_order = both
per = round(run.cycle_s / run.step_s)
for _ in range(cycles * per): run.advance()
