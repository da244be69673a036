"""why_no_canary.py generated:N SEED FROM TO: grid on the scenario; at each canary proposal
between simulated minutes FROM and TO, the gates of canary.propose in order (calm, trial,
rollout, untried places, their room, the optimistic speeds) and what it returned (section 60)."""
import sys
sys.path.insert(0, ".")
from bench import slo
from knowledge.connect import open_knowledge_base
from planner.planners import canary
from planner.planners.capacity import free_slots
from simulator.runner import ScenarioRun
T0, T1 = float(sys.argv[3]) * 60, float(sys.argv[4]) * 60
orig = canary.propose


def probe(ctx, explorer, actuator, places, observed, replicas, preds, throughput, score,
          best_score, rescue=False):
    out = orig(ctx, explorer, actuator, places, observed, replicas, preds, throughput, score,
               best_score, rescue)
    if T0 <= ctx.now - slo.START <= T1 and (ctx.now - slo.START) % 60 < 15:
        key, cfg, now = ctx.intent.key, ctx.config, ctx.now
        measured = canary.measured_speeds(ctx, explorer)
        info = []
        for pl in places:
            room = free_slots(ctx.snapshot, cfg.with_(replicas=1, device=pl[0], pool=pl[1]))
            info.append(f"{pl[0]}/{pl[1]}: room {room}"
                        + (" measured" if pl in measured else "")
                        + (" observed" if pl in observed else "")
                        + (" tried" if explorer.was_tried(key, (cfg.cpu, *pl), now) else ""))
        print(f"{(now - slo.START) / 60:7.2f} {cfg.replicas}x{cfg.cpu:g} {cfg.device}/{cfg.pool}"
              f" calm={explorer.calm(key, now)} rescue={rescue} trial={key in explorer.trials}"
              f" rollout={canary.rollout_in_progress(ctx)} best={best_score:.3f} -> "
              f"{[a.reason[:80] for a in out[0]]}\n        " + "; ".join(info))
    return out


canary.propose = probe
import planner.planners.grid as grid  # noqa: E402
grid.canary.propose = probe
ScenarioRun(slo.load(sys.argv[1]), "grid", int(sys.argv[2]), open_knowledge_base(None),
            start_time=slo.START).run(T1 + 60)
