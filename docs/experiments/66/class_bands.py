"""class_bands.py: bench/scale.py's scenario (20 intents, 100 nodes in 10 identical pools, 200 pods
each), copied models; prints intent w0's latency model: fixed parameters, per-class log speeds and
offsets of the fit and its bootstrap (section 66, issue 13). From the repository root:
  .venv/bin/python docs/experiments/66/class_bands.py"""
import math, sys
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
run = ScenarioRun(parse_scenario(scale.scenario(20, 100, 200, True), "scale"), "grid", 1, keep_heap=True)
run.trainer.interval_s = math.inf
while run.elapsed < 12 * 60: run.advance()
scale.copy_models(run)
kb = run.controller.knowledge if hasattr(run.controller, "knowledge") else None
from planner.models import effects
docs = list(run.knowledge.effects("big/w0", with_blobs=True))
print(type(run).__dict__.keys() if not docs else len(docs))
for d in docs:
    m = effects.from_document(d)
    est = m.estimator
    if not hasattr(est, "bootstrap_thetas_"): continue
    k = est.n_classes_
    print(m.objective, m.kind, "classes", m.classes, "rs", est.residual_scale_, "n", est.n_samples_)
    th = np.vstack([est.theta_[None], est.bootstrap_thetas_])
    np.set_printoptions(precision=4, suppress=True, linewidth=200)
    print("fixed", th[:, :5])
    print("logspeed", th[:, 5:5+k])
    print("offset", th[:, 5+k:])
