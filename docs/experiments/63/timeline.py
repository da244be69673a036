import sys, time, json
sys.path.insert(0, '.')
from bench.slo import load, START
from simulator.runner import ScenarioRun
from knowledge.connect import open_knowledge_base
sc = load(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else None)
kb = open_knowledge_base(None)
t0 = time.perf_counter()
run = ScenarioRun(sc, None, 1, kb, start_time=START)
rep = run.run(None if len(sys.argv) <= 2 else float(sys.argv[2])).as_dict()
print(json.dumps(rep["intents"], indent=None)[:1500], time.perf_counter() - t0)
ev = sorted(kb.events("vision/detect"), key=lambda e: e["time"])
for e in ev[:80:4]:
    print(int(e["time"]-ev[0]["time"]), e["load"]["request_rate"] and round(e["load"]["request_rate"]), e["config"], e["current"])
for e in ev[-3:]:
    print(e["plan"]["reason"])
