"""The two per-pod cuts of section 48 timed in one process against the code before them, on 1,000
workloads of 200 pods (steady: every pod seen, none pending; inside the sampler's interval):

    .venv/bin/python docs/experiments/48/per_pod_cuts.py
"""
import sys
import time

sys.path.insert(0, ".")

from planner.control.event_detail import PodDetailSampler
from planner.domain.state import PodState, WorkloadConfig, WorkloadState
from planner.models.forecast import LoadForecast, _Startup

workloads = [WorkloadState("ns", f"w{i}", WorkloadConfig(200, 1.0),
                           tuple(PodState(f"w{i}-{j}", f"n{j % 50}", 1.0, started_at=1.0)
                                 for j in range(200))) for i in range(1000)]


def old_wants(sampler, intent, workload, now):
    fingerprint = hash(tuple((p.name, p.node, p.ready, p.restarts, p.cpu, p.device)
                             for p in workload.pods))
    last = sampler._last.get(intent)
    if last is not None and (last[0] == fingerprint or now - last[1] < sampler.min_interval_s):
        return False
    sampler._last[intent] = (fingerprint, now if last is not None else now + sampler.phase(intent))
    return True


def old_observe_pods(fc, key, t, pods):
    st = fc._startup.setdefault(key, _Startup())
    present = set()
    for p in pods:
        present.add(p.name)
        if p.name in st.pending:
            pass
        elif p.name not in st.seen:
            st.seen[p.name] = None
    for gone in [n for n in st.pending if n not in present]:
        del st.pending[gone]


def best(f, reps=5):
    out = []
    for _ in range(reps):
        t0 = time.process_time()
        f()
        out.append(time.process_time() - t0)
    return min(out)


sampler = PodDetailSampler()
for w in workloads:
    sampler.wants(w.key, w, 0.0)
new_s = best(lambda: [sampler.wants(w.key, w, 15.0) for w in workloads])
old_s = best(lambda: [old_wants(sampler, w.key, w, 15.0) for w in workloads])
fc = LoadForecast()
for w in workloads:
    fc.observe_pods(w.key, 1.0, w.pods)
new_f = best(lambda: [fc.observe_pods(w.key, 2.0, w.pods) for w in workloads])
old_f = best(lambda: [old_observe_pods(fc, w.key, 2.0, w.pods) for w in workloads])
print(f"sampler inside its interval, 1,000 intents: {old_s * 1000:.1f} -> {new_s * 1000:.1f} ms")
print(f"forecast start-up watch, steady, 1,000 intents: {old_f * 1000:.1f} -> {new_f * 1000:.1f} ms")
