"""At a simulated minute: the newest latency model's residual scale, and per training row its
prediction and log residual (section 49):

    .venv/bin/python docs/experiments/49/model_residuals.py generated:5972 15.4 payments/checkout p99latency
"""
import sys, math
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import numpy as np
from bench import slo
from simulator.runner import ScenarioRun
from planner.models.observations import dataset
from planner.models.effects import from_document

scen, minute, intent, obj = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
run = ScenarioRun(slo.load(scen), "grid", 1)
while run.elapsed < minute * 60:
    run.advance()
kb = run.knowledge
now = run.elapsed
docs = [d for d in kb.effects() if d.get("objective") == obj]; print([(d.get("intent"), d.get("timestamp")) for d in docs]); doc = max(docs, key=lambda d: d.get("timestamp"))
doc = kb.effect(doc["intent"], obj, doc["timestamp"] + 1, 1e9)
m = from_document(doc)
est = m.estimator
print("model ts", doc.get("timestamp"), "resid scale", est.residual_scale_, "theta", np.round(est.theta_, 3))
events = kb.events(intent, since=doc["timestamp"] - 1e6, limit=100000)
ds = dataset(events, obj)
print("rows", len(ds), "classes", ds.classes)
pred = est.predict(ds.X)
for i in range(len(ds)):
    r = ds.X[i]
    print(f"t={(ds.times[i] - ds.times[0])/60:6.2f} rate={r[0]:7.1f} reps={r[1]:4.0f} cpu={r[2]:4.2f} gpu={r[3]:.0f} util={ds.utilization[i]:.2f} y={ds.y[i]:8.1f} pred={pred[i]:8.1f} logres={math.log(max(pred[i],1e-6)/ds.y[i]):+.2f}")
