"""Every cycle of grid on tests/support/gpu_trial.py's scenario (30x GPU at 0.3/GPU-h; GPUs per
node and GPU nodes as arguments, 4 and 2 by default): the observed KPIs, the configuration, the
plan's target, actions and reason (section 46: the hand-over after a GPU canary's verdict).
    python docs/experiments/46/gpu_trial_cycles.py | sed -n 80,90p"""
import sys
sys.path.insert(0, '.')
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from tests.support.gpu_trial import gpu_trial

gpus, nodes = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (4, 2)
run = ScenarioRun(parse_scenario(gpu_trial(30.0, 0.3, 26, step_s=15, gpu_nodes=nodes, gpus=gpus),
                                 "gpu-trial"), "grid", 1)
while run.elapsed < 26 * 60:
    for o in run.advance() or ():
        if o.plan is None:
            continue
        w = o.plan
        print(f"{run.elapsed / 60:6.2f} {dict(o.current)} {w.current.replicas}x{w.current.device}"
              f" -> {w.target.replicas}x{w.target.device} met={o.met} "
              f"acts={[a.params for a in w.actions]} | {w.reason[:260]}")
