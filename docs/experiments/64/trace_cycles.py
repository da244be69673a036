"""Every grid planning cycle with actions (and every --every-th): time, replicas, cpu, device,
ready, rate, util, observed KPIs, the explicit estimate (mu per core, base), actions, reason.
  .venv/bin/python docs/experiments/64/trace_cycles.py examples/scenarios/gpu-inference.yaml \
      --device auto --seed 3 > auto3.txt"""
import argparse
import sys

sys.path.insert(0, ".")
from bench.device_pins import pinned
from bench.slo import START, load
from knowledge.connect import open_knowledge_base
from planner.planners.grid import GridPlanner
from simulator.runner import ScenarioRun

ap = argparse.ArgumentParser()
ap.add_argument("scenario")
ap.add_argument("--device", default="gpu")
ap.add_argument("--until", type=float, default=21600.0)
ap.add_argument("--every", type=int, default=20)
ap.add_argument("--seed", type=int, default=1)
args = ap.parse_args()
run = ScenarioRun(pinned(load(args.scenario, None), args.device), None, args.seed, open_knowledge_base(None), start_time=START)
orig = GridPlanner.plan
n = [0]
def spy(self, ctx):
    plan = orig(self, ctx)
    n[0] += 1
    w = ctx.workload
    est = (plan.memory or {}).get("predictors", {}).get("estimate")
    acts = [a.actuator + ":" + str(a.params) for a in plan.actions] if hasattr(plan, "actions") else []
    if n[0] % args.every == 0 or acts:
        print(round(ctx.now - START), w.config.replicas, w.config.cpu, w.config.device,
              "ready", w.ready_replicas, "rate", round(w.request_rate or 0, 1), "util",
              None if w.cpu_utilization is None else round(w.cpu_utilization, 3), "p95",
              {k: None if v is None else round(v) for k, v in ctx.current.items()}, "est",
              None if est is None else (round(est["mu_per_core"], 2), round(est["base_ms"], 1)),
              acts, (plan.reason or "")[:160] if acts else "")
    return plan
GridPlanner.plan = spy
run.run(args.until)
