"""Why no GPU canary (section 46): every call of canary.propose on a scenario run with grid, with
the GPU places, whether observed, tried lately, and their free room; and what it proposed.
    python docs/experiments/46/probe_canary.py generated:878 180"""
import sys
sys.path.insert(0, '.')
from bench import slo
from planner.planners import canary
from planner.planners.capacity import free_slots
from simulator.runner import ScenarioRun

ref, minutes = sys.argv[1], float(sys.argv[2])
orig = canary.propose

def wrapped(ctx, explorer, actuator, places, observed, replicas, preds, throughput, score,
            best_score, rescue=False):
    key, cfg, now = ctx.intent.key, ctx.config, ctx.now
    facts = ctx.snapshot.facts
    info = []
    for pl in places:
        room = free_slots(ctx.snapshot, cfg.with_(replicas=1, device=pl[0], pool=pl[1]))
        info.append((pl, pl in observed, explorer.was_tried(key, (cfg.cpu, *pl), now), room))
    out = orig(ctx, explorer, actuator, places, observed, replicas, preds, throughput, score,
               best_score, rescue)
    print(f"{(now - 1_767_225_600.0) / 60:7.2f} {key} calm={explorer.calm(key, now)} "
          f"rescue={rescue} best={best_score:.3f} reps={cfg.replicas} has_gpu={facts.has_gpu} "
          f"{[i for i in info if i[0][0] == 'gpu']} -> {[a.params for a in out[0]]}", flush=True)
    return out

canary.propose = wrapped
sc = slo.load(ref)
ScenarioRun(sc, "grid", 1).run(minutes * 60)
