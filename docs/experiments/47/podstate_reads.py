"""Per-pod reads (the pod-detail fingerprint, pod_groups, the census) of 1,000 intents x 200 pods, with pods as a frozen
    dataclass against PodState (run where PodState is a NamedTuple, 16d38eb).  .venv/bin/python docs/experiments/47/podstate_reads.py"""
import sys, time
sys.path.insert(0, '.')
from dataclasses import dataclass
from typing import NamedTuple
from planner.domain.state import PodState, WorkloadState, WorkloadConfig
from planner.domain import events
@dataclass(frozen=True)
class D:
    name: str; node: str|None; cpu: float; device: str="cpu"; ready: bool=True; restarts: int=0; started_at: float=0.0; cpu_utilization: float|None=None; pool: str|None=None; request_rate: float|None=None
    def as_dict(self): return PodState.as_dict(self)
for K in (D, PodState):
    pods = tuple(K(f"p{i}", f"n{i%50}", 1.0, "cpu", True, 0, 1.0, 0.5, f"pool{i%3}", 2.0) for i in range(200))
    w = WorkloadState("ns", "w", WorkloadConfig(200, 1.0), pods)
    t = time.process_time()
    for _ in range(1000):
        hash(tuple((p.name, p.node, p.ready, p.restarts, p.cpu, p.device) for p in pods))
        events.pod_groups(pods)
        w2 = WorkloadState("ns", "w", WorkloadConfig(200, 1.0), pods); w2.pod_counts
    print(K.__name__, round(time.process_time() - t, 3), "s per 1000 intents")
