"""Captures one cycle's sanitized documents (events, memories, statuses) of bench/scale.py's scenario at 20 intents
    into /tmp/sanitize_docs.pkl, for sanitize_time.py.  .venv/bin/python docs/experiments/47/sanitize_docs.py"""
import sys, time, math, pickle
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from knowledge import documents
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
run = ScenarioRun(parse_scenario(scale.scenario(20, 100, 200, True), "scale"), "grid", 1)
run.trainer.interval_s = math.inf
while run.elapsed < 6 * 60: run.advance()
docs = []
real = documents.sanitize
def cap(doc, where="document"):
    docs.append((doc, where)); return real(doc, where)
documents.sanitize = cap
per = round(run.cycle_s / run.step_s)
for _ in range(per): run.advance()
documents.sanitize = real
import collections
print(collections.Counter(w for _, w in docs))
with open("/tmp/sanitize_docs.pkl", "wb") as f: pickle.dump(docs, f)
