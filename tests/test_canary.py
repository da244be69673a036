"""Canaries: a bounded trial of a device or node pool no model has observed (issue 11,
"Devices never explored"): the simulator runs them beside the workload, a canary's speed is
measured from per-pod request rates and utilisation, measured shapes are predicted from it,
and the default planner tries a GPU that is cheaper and moves there, but not one that is not.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from planner.domain.state import WorkloadConfig
from planner.models.predictor import CandidateBatch, Prediction, Predictor
from planner.planners import canary
from planner.planners.feedback import Canary, Explorer, Measured
from simulator.cluster import SimulatedCluster
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


def _scenario(speedup: float, gpu_price: float, minutes: int = 40,
              actuators: tuple[str, ...] = ("replicas", "device", "placement"),
              step_s: int = 5, gpu_nodes: int = 2, gpus: int = 4) -> dict[str, Any]:
    return {
        "name": "gpu-trial", "duration": f"{minutes}m", "step_s": step_s,
        "cluster": {"pools": [
            {"name": "general", "nodes": 8, "cpu": 16, "cost_per_core_hour": 0.04},
            {"name": "gpu", "nodes": gpu_nodes, "cpu": 16, "cost_per_core_hour": 0.04,
             "gpus": gpus,
             "cost_per_gpu_hour": gpu_price}]},
        "workloads": [{"name": "infer", "namespace": "ml", "replicas": 24, "cpu": 1,
                       "pool": "general",
                       "service": {"rate_per_core": 50, "base_latency_ms": 5,
                                   "gpu_speedup": speedup, "startup_s": "20s"},
                       "trace": {"kind": "constant", "rate": 900, "noise": 0.03}}],
        "admin": {"actuators": list(actuators),
                  "replicas": {"min": 2, "max": 60, "maxStep": 10}, "cycleSeconds": 15},
        "manifests": [
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
             "metadata": {"name": "p95", "namespace": "ml"},
             "spec": {"type": "latency", "percentile": 95}},
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
             "metadata": {"name": "infer", "namespace": "ml"},
             "spec": {"targetRef": {"kind": "Deployment", "name": "infer"},
                      "objectives": [{"name": "p95", "value": 120, "measuredBy": "p95"}]}}],
    }


# ---------------------------------------------------------------------- the simulator
def test_the_simulator_runs_a_canary_beside_the_workload_and_removes_it() -> None:
    sim = SimulatedCluster(parse_scenario(_scenario(20.0, 0.3), "t"), seed=1, start_time=0.0)
    before = sim.observe().workloads["ml/infer"]
    assert before.canary is None
    sim.set_canary("ml/infer", WorkloadConfig(2, 1.0, "gpu", "gpu"))
    for _ in range(12):
        sim.step(5.0)
    w = sim.observe().workloads["ml/infer"]
    assert w.canary is not None and len(w.canary.pods) == 2
    assert all(p.device == "gpu" and p.pool == "gpu" and p.ready for p in w.canary.pods)
    assert len(w.pods) == 24 and all(p.device == "cpu" for p in w.pods)   # untouched
    served = sum(p.request_rate or 0.0 for p in (*w.pods, *w.canary.pods))
    assert served == pytest.approx(900, rel=0.1)        # the canary takes its share
    assert sum(r.gpus for r in sim.window("ml/infer", 5)) == 2
    sim.set_canary("ml/infer", None)
    sim.step(5.0)
    after = sim.observe()
    assert after.workloads["ml/infer"].canary is None
    assert sum(n.gpus_allocated for n in after.nodes) == 0


@pytest.mark.parametrize("speedup", [0.5, 8.0, 30.0])
def test_a_canary_measures_the_speed_of_its_shape(speedup: float) -> None:
    sim = SimulatedCluster(parse_scenario(_scenario(speedup, 0.3), "t"), seed=2,
                           start_time=0.0)
    sim.set_canary("ml/infer", WorkloadConfig(1, 1.0, "gpu", "gpu"))
    for _ in range(20):
        sim.step(5.0)
    w = sim.observe().workloads["ml/infer"]
    assert w.canary is not None
    ratio = canary.capacity_ratio(w.canary, w)
    assert ratio == pytest.approx(speedup, rel=0.05)


def test_a_canary_is_measured_against_the_workloads_pods_of_its_own_cpu_size() -> None:
    """Resized while its canary runs, the workload serves with pods of both sizes for a
    while; the canary's 1-CPU GPU pods are compared with its 1-CPU pods, and once only 2-CPU
    pods are left there is nothing to compare with: against them the GPU would read as
    8 / 2**0.9 = 4.3 times as fast, and be applied to 1-CPU pods at that speed (gen-65's
    canary, judged during a resize, measured 7.57 where the scenario's GPU is 13x)."""
    doc = _scenario(8.0, 0.3)
    doc["workloads"][0]["service"]["cpu_exponent"] = 0.9
    sim = SimulatedCluster(parse_scenario(doc, "t"), seed=2, start_time=0.0)
    sim.set_canary("ml/infer", WorkloadConfig(1, 1.0, "gpu", "gpu"))
    for _ in range(20):
        sim.step(5.0)
    sim.resize("ml/infer", 2.0)
    for _ in range(4):                                  # the new pods' start-up is 20 s
        sim.step(5.0)
    w = sim.observe().workloads["ml/infer"]
    assert w.canary is not None
    sizes = {p.cpu for p in w.pods if p.ready}
    assert sizes == {1.0, 2.0}                          # mid-rollout: both serve
    assert canary.capacity_ratio(w.canary, w) == pytest.approx(8.0, rel=0.05)
    for _ in range(40):
        sim.step(5.0)
    done = sim.observe().workloads["ml/infer"]
    assert done.canary is not None and {p.cpu for p in done.pods} == {2.0}
    assert canary.capacity_ratio(done.canary, done) is None


# ---------------------------------------------------------------------- predictions
class _Queue(Predictor):
    """Latency of one M/M/1 pod per replica at 10 req/s per replica of capacity; GPU and
    pool ``fast`` unknown (unsupported)."""

    kind = "learned"

    def predict(self, batch: CandidateBatch, rate: float) -> Prediction:
        lam = rate / batch.replicas
        mean = np.where(lam < 10.0, 1000.0 / np.maximum(10.0 - lam, 1e-9), np.inf)
        ok = (batch.gpu < 0.5) & np.array([p is None for p in batch.pool])
        return Prediction(mean, mean * 1.1, ok)


def test_a_measured_shape_is_predicted_as_the_known_one_at_its_measured_speed() -> None:
    inner = _Queue()
    speeds = {("gpu", None): canary.Speed(("cpu", None), 4.0)}
    lat = canary.MeasuredShapes(inner, speeds)
    batch = CandidateBatch(np.array([2.0, 2.0, 2.0]), np.ones(3), np.array([0.0, 1.0, 1.0]),
                           (None, None, "fast"))
    pr = lat.predict(batch, 30.0)
    assert pr.supported.tolist() == [True, True, False]
    assert np.isinf(pr.mean[0])                         # 2 CPU pods cannot carry 30 req/s
    known = inner.predict(CandidateBatch.of([WorkloadConfig(2)]), 30.0 / 4.0)
    assert pr.mean[1] == pytest.approx(float(known.mean[0]))
    assert pr.bound[1] == pytest.approx(float(known.bound[0]))
    served = canary.MeasuredShapes(inner, speeds, throughput=True).predict(batch, 30.0)
    assert served.mean[1] == pytest.approx(4.0 * float(known.mean[0]))


def test_the_explorer_remembers_canaries_and_measured_speeds() -> None:
    e = Explorer()
    e.canaries["a/b"] = Canary((1.0, "gpu", "gpu"), 100.0, 130.0)
    e.speeds["a/b"] = {("gpu", "gpu"): Measured(("cpu", None), 7.5, 250.0)}
    e.violated_at["a/b"] = 0.0
    again = Explorer()
    again.recall("a/b", e.remember("a/b"))
    assert again.canaries == e.canaries and again.speeds == e.speeds


# ---------------------------------------------------------------------- the planner
def _run(speedup: float, gpu_price: float, minutes: int = 26,
         **cluster: int) -> dict[str, Any]:
    """Per cycle of grid on the scenario: the device, the planned cost per hour and whether
    an objective was observed violated; the canaries started (their reasons and pod counts)
    and stopped, and the speeds their verdicts measured."""
    run = ScenarioRun(parse_scenario(_scenario(speedup, gpu_price, minutes, step_s=15,
                                               **cluster), "gpu-trial"), "grid", 1)
    out: dict[str, Any] = {"started": [], "stopped": [], "devices": [], "cost": [],
                           "violated": [], "judged": [], "canary_pods": []}
    while run.elapsed < minutes * 60:
        for o in run.advance() or ():
            if o.plan is None:
                continue
            out["devices"].append(o.plan.current.device)
            out["cost"].append(o.plan.cost_per_hour)
            out["violated"].append(any(v is False for v in o.met.values()))
            for a in o.plan.actions:
                if a.actuator == "canary":
                    out["started" if a.params["canary"] else "stopped"].append(a.reason)
                    if a.params["canary"]:
                        c = a.params["canary"]
                        out["canary_pods"].append((c["device"], c["replicas"]))
                    out.setdefault("first_canary", len(out["devices"]) - 1)
            out["judged"].extend(float(m) for p in o.plan.reason_parts
                                 if (m := _speed(p.text)) is not None)
    return out


def _speed(text: str) -> str | None:
    found = re.search(r"cpu gpu(?: in \S+)? judged: ([0-9.]+)x", text)   # GPU canaries
    return found.group(1) if found else None


def test_the_planner_tries_a_cheaper_gpu_through_a_canary_and_moves_there() -> None:
    # 900 req/s at 50 per core: about 24 one-core pods (0.96/h); a GPU pod is 30x as fast,
    # so two of them (the minimum) carry it for 0.68/h.
    out = _run(30.0, 0.3)
    assert out["started"], "no canary was started"
    assert out["judged"] and all(v == pytest.approx(30.0, rel=0.05) for v in out["judged"])
    assert out["devices"][-1] == "gpu", out["stopped"]
    assert "gpu" not in out["devices"][: len(out["devices"]) // 4]   # not before the trial
    moved = out["devices"].index("gpu")
    before = out["cost"][out["first_canary"]]        # planned cost/h when trying started
    assert out["cost"][-1] < 0.5 * before, (before, out["cost"][-1])
    assert not any(out["violated"][moved:]), "an objective was violated after the move"


def test_a_gpu_that_is_not_cheaper_is_judged_and_not_moved_to() -> None:
    # The same price, but the GPU only 3x as fast: two GPU pods would not pay.
    out = _run(3.0, 0.3)
    assert any("gpu" in r for r in out["started"]), "the GPU was never tried"
    assert out["judged"] and all(v == pytest.approx(3.0, rel=0.05) for v in out["judged"])
    assert set(out["devices"]) == {"cpu"}


def test_a_gpu_pool_smaller_than_the_canary_fraction_is_tried_with_the_gpus_it_has() -> None:
    # 24 pods ask for a canary of ceil(0.1 x 24) = 3 pods; the cluster has 2 GPUs. The canary
    # is as many pods as the free room holds, not skipped every cycle without a word.
    out = _run(30.0, 0.3, gpu_nodes=1, gpus=2)
    gpu_pods = [n for device, n in out["canary_pods"] if device == "gpu"]
    assert gpu_pods and max(gpu_pods) <= 2, out["canary_pods"]
    assert out["judged"] and all(v == pytest.approx(30.0, rel=0.05) for v in out["judged"])
    assert out["devices"][-1] == "gpu", out["stopped"]
