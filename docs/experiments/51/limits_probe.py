"""Per cycle between two simulated minutes of a scenario run (grid): the configuration, its ready
pods, the ready counts the observed limits keep for the KPI window, the pending violation, the
limits and held loads. Usage: limits_probe.py SCENARIO SEED FROM_MIN TO_MIN"""
import sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
from bench import slo
from planner.planners import observed_limits as OL
from simulator.runner import ScenarioRun
scen, seed, a, b = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
run = ScenarioRun(slo.load(scen), "grid", seed)
orig = OL.ObservedLimits.observe
def obs(self, ctx, peak, low):
    orig(self, ctx, peak, low)
    if a*60 <= run.elapsed <= b*60:
        print(f"{run.elapsed/60:6.2f} cfg={ctx.config.replicas}x{ctx.config.cpu}@{ctx.config.pool} ready={ctx.workload.ready_replicas} "
              f"serving={[r for t,r,_ in self.serving]} pending={self.pending} limits={self.limits} held={self.held}")
OL.ObservedLimits.observe = obs
while run.elapsed < b*60 + 30:
    run.advance()
