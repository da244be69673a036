import sys, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
import scale
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario
from knowledge import documents
from knowledge.embedded import _encode
run = ScenarioRun(parse_scenario(scale.scenario(10, 50, 200, True), "scale"), "grid", 1)
while run.elapsed < 6*60: run.advance()
ctl = run.controller
mems = list(ctl._memory.values())
import copy
c = time.process_time()
for _ in range(100):
    for m in mems:
        m2 = copy.copy(m)
        _ = ctl._memory[m.intent] == m2
        _encode(documents.memory_document(m.intent, m.as_document()))
print("per memory %.1f us" % ((time.process_time() - c) / 100 / len(mems) * 1e6), len(_encode(documents.memory_document(mems[0].intent, mems[0].as_document()))), "bytes")
