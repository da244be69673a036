"""A GPU pod is as busy as its GPU: the planners read saturation, service rates and canary
capacities from the serving device's utilisation (:attr:`PodState.busy`), not from the CPU
utilisation a GPU-bound pod barely moves (issue 15: GPU utilisation feeding the models).

On Kubernetes the GPU's utilisation comes from the DCGM exporter (``tests/test_gpu_metrics.py``
reads it through a real Prometheus and the backend); the simulator measures one busy fraction
per pod and reports a GPU pod's as its GPU's too, so there ``busy`` is that one number. The
latency model's fit reads a GPU row's service rate from its GPU's utilisation (the utilisation
law), never from the CPU of a GPU pod."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from planner.domain.events import build_event
from planner.domain.intents import parse_intent
from planner.domain.state import (
    CanaryState,
    ClusterSnapshot,
    PodState,
    WorkloadConfig,
    WorkloadState,
    serving_utilization,
)
from planner.models.observations import dataset
from planner.models.queue_estimate import estimate
from planner.planners import canary, safety
from tests.test_estimate_place import _ctx

GPU = WorkloadConfig(2, 4.0, "gpu", "gpu-pool")


def _gpu_pod(name: str, cpu_util: float | None, gpu_util: float | None,
             ready: bool = True) -> PodState:
    return PodState(name, "n", 4.0, "gpu", ready=ready, cpu_utilization=cpu_util,
                    pool="gpu-pool", request_rate=100.0, gpu_utilization=gpu_util)


def test_a_gpu_pod_is_as_busy_as_its_gpu() -> None:
    assert _gpu_pod("a", 0.04, 0.97).busy == 0.97
    assert _gpu_pod("a", 0.04, None).busy == 0.04, "no GPU reading: the CPU's"
    cpu_pod = PodState("c", "n", 1.0, "cpu", cpu_utilization=0.3, gpu_utilization=0.9)
    assert cpu_pod.busy == 0.3, "a CPU pod's requests are served by its CPU"


def test_the_workload_reads_its_ready_pods_serving_devices() -> None:
    pods = (_gpu_pod("a", 0.04, 0.9), _gpu_pod("b", 0.05, 0.5),
            _gpu_pod("c", 0.01, 0.0, ready=False))
    assert serving_utilization(pods) == pytest.approx(0.7), "the pod not ready is left out"
    mixed = (_gpu_pod("a", 0.04, 0.9), PodState("c", "n", 4.0, "cpu", cpu_utilization=0.3))
    assert serving_utilization(mixed) == pytest.approx(0.6)
    assert serving_utilization((PodState("c", "n", 1.0, "cpu", cpu_utilization=0.3),)) is None
    assert serving_utilization((_gpu_pod("a", 0.04, None),)) is None, "no GPU reading"
    wl = WorkloadState("ns", "w", GPU, pods, request_rate=200.0, cpu_utilization=0.045)
    assert wl.busy == 0.045
    assert dataclasses.replace(wl, utilization=serving_utilization(pods)).busy == (
        pytest.approx(0.7))


def _gpu_ctx(cpu_util: float, gpu_util: float | None):  # type: ignore[no-untyped-def]
    """A GPU workload at 200 req/s whose pods' CPUs are ``cpu_util`` busy and GPUs
    ``gpu_util``."""
    ctx = _ctx(GPU, 200.0, cpu_util)
    pods = tuple(_gpu_pod(f"p{i}", cpu_util, gpu_util) for i in range(GPU.replicas))
    wl = dataclasses.replace(ctx.workload, pods=pods, utilization=serving_utilization(pods))
    return dataclasses.replace(ctx, workload=wl)


def test_a_saturated_gpu_is_saturation_to_the_safety_layer() -> None:
    """The rule "observed violation + saturation always scales out" needs to see a GPU pod's
    saturation: its CPU sits at a few percent."""
    assert safety.observe(_gpu_ctx(0.05, 0.99)).saturated
    assert not safety.observe(_gpu_ctx(0.05, 0.40)).saturated
    # Without a GPU reading the CPU's is all there is (as before).
    assert not safety.observe(_gpu_ctx(0.05, None)).saturated


def test_the_explicit_estimate_reads_the_service_rate_from_the_gpu() -> None:
    ctx = _gpu_ctx(0.05, 0.5)
    est = estimate(ctx.workload, 40.0, 0.95)
    assert est is not None
    # 200 req/s over 2 pods half busy: 200 per pod, per core of a 4-core pod 50.
    assert est.mu_per_core == pytest.approx(200.0 / (2 * 0.5) / 4.0)
    cpu_read = estimate(dataclasses.replace(ctx.workload, utilization=None), 40.0, 0.95)
    assert cpu_read is not None and cpu_read.mu_per_core == pytest.approx(10 * est.mu_per_core)


def test_a_canary_s_capacity_is_read_from_its_gpu() -> None:
    """A GPU canary beside CPU pods: its capacity per pod is its request rate over its GPU's
    utilisation (its CPU's would make it look ten times faster than it is)."""
    cpu_pods = tuple(PodState(f"c{i}", "n", 4.0, "cpu", cpu_utilization=0.5, request_rate=10.0)
                     for i in range(4))
    gpu_pods = (_gpu_pod("g", 0.02, 0.2),)
    wl = WorkloadState("ns", "w", WorkloadConfig(4, 4.0, "cpu"), cpu_pods,
                       canary=CanaryState(GPU.with_(replicas=1), gpu_pods))
    assert wl.canary is not None
    # 100 req/s at 20 % against 10 req/s at 50 %: 500 against 20 req/s per pod.
    assert canary.capacity_ratio(wl.canary, wl) == pytest.approx(25.0)
    assert not canary.too_idle(wl.canary)
    idle = CanaryState(wl.canary.config, (_gpu_pod("g", 0.2, 0.001),))
    assert canary.too_idle(idle), "its GPU is idle, whatever its CPU does"


INTENT = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                       "spec": {"targetRef": {"name": "w"}, "objectives": [
                           {"name": "p95", "value": 100, "measuredBy": "p95"}]}})


def _event(t: float, wl: WorkloadState) -> dict[str, object]:
    return build_event(INTENT, wl, ClusterSnapshot(t, (), {wl.key: wl}), {"p95": 30.0}, None,
                       False)


def test_events_record_the_serving_utilisation_and_training_rows_read_it() -> None:
    pods = tuple(_gpu_pod(f"p{i}", 0.05, 0.99) for i in range(GPU.replicas))
    gpu = WorkloadState("ns", "w", GPU, pods, request_rate=200.0, cpu_utilization=0.05,
                        utilization=serving_utilization(pods))
    ev = _event(0.0, gpu)
    assert ev["load"] == {"request_rate": 200.0, "cpu_utilization": 0.05,
                          "utilization": pytest.approx(0.99)}
    plain = dataclasses.replace(gpu, utilization=None)
    assert _event(0.0, plain)["load"] == {"request_rate": 200.0, "cpu_utilization": 0.05}, (
        "events of CPU workloads (and the simulator's) are as they were")
    # A settled minute of each: the GPU one is a saturated row, the other one is not.
    for wl, util in ((gpu, 0.99), (plain, 0.05)):
        ds = dataset([_event(t, wl) for t in range(0, 181, 15)], "p95")
        assert len(ds) > 0 and all(math.isclose(u, util) for u in ds.utilization)


def test_a_what_if_load_scales_the_gpu_reading_as_the_cpu_one() -> None:
    """The preview's what-if keeps the service rate the utilisation implies: twice the load on
    the same pods reads twice as busy, on the GPU as on the CPU (capped below 1)."""
    from planner.api import preview, schemas

    pods = tuple(_gpu_pod(f"p{i}", 0.05, 0.3) for i in range(GPU.replicas))
    wl = WorkloadState("ns", "w", GPU, pods, request_rate=200.0, cpu_utilization=0.05,
                       utilization=serving_utilization(pods))
    snap = ClusterSnapshot(0.0, (), {wl.key: wl})
    doubled = preview._what_if(wl, snap, schemas.Overrides(load=400.0))
    assert doubled.busy == pytest.approx(0.6) and doubled.cpu_utilization == pytest.approx(0.1)
    assert preview._what_if(wl, snap, schemas.Overrides(load=2000.0)).busy == 0.99
    plain = preview._what_if(dataclasses.replace(wl, utilization=None), snap,
                             schemas.Overrides(load=400.0))
    assert plain.utilization is None and plain.busy == pytest.approx(0.1)


def test_training_rows_read_a_gpu_s_service_from_its_gpu_only() -> None:
    """The rows the latency model fits a service rate on: a GPU row's utilisation only where
    its GPUs were measured (their CPU, at 5 %, says nothing of the service); the saturation
    flag keeps reading what it read."""
    pods = tuple(_gpu_pod(f"p{i}", 0.05, 0.6) for i in range(GPU.replicas))
    gpu = WorkloadState("ns", "w", GPU, pods, request_rate=200.0, cpu_utilization=0.05,
                        utilization=serving_utilization(pods))
    ds = dataset([_event(t, gpu) for t in range(0, 181, 15)], "p95")
    assert len(ds) > 0 and all(math.isclose(u, 0.6) for u in ds.service_utilization)
    blind = dataset([_event(t, dataclasses.replace(gpu, utilization=None))
                     for t in range(0, 181, 15)], "p95")
    assert np.isnan(blind.service_utilization).all()
    assert all(math.isclose(u, 0.05) for u in blind.utilization)
    cpu_cfg = WorkloadConfig(2, 1.0, "cpu", None)
    cpu_pods = tuple(PodState(f"c{i}", "n", 1.0, "cpu", cpu_utilization=0.4) for i in range(2))
    cpu = WorkloadState("ns", "w", cpu_cfg, cpu_pods, request_rate=50.0, cpu_utilization=0.4)
    on_cpu = dataset([_event(t, cpu) for t in range(0, 181, 15)], "p95")
    assert len(on_cpu) > 0 and all(math.isclose(u, 0.4) for u in on_cpu.service_utilization)


def _cpu_and_gpu_rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """4-core pods on CPUs and on GPUs six times as fast, at 16-89 % busy; the GPU pods' fixed
    latency (12 ms) is below the CPU pods' (30 ms), as where requests skip CPU-side work. One
    base latency serves both in the model, so on the latency alone the GPU pods' short queue
    reads as no queue at all."""
    from planner.models.sojourn import sojourn_quantile

    rng = np.random.default_rng(seed)
    cpu = np.column_stack([rng.uniform(200, 600, 30), rng.integers(6, 12, 30), np.full(30, 4.0),
                           np.zeros(30), -np.ones(30)])
    gpu = np.column_stack([rng.uniform(150, 500, 30), rng.integers(1, 3, 30), np.full(30, 4.0),
                           np.ones(30), -np.ones(30)])
    X = np.vstack([cpu, gpu])
    mu = 30 * 4.0 ** 0.9 * np.where(X[:, 3] > 0.5, 6.0, 1.0)     # per pod, requests/s
    lam = X[:, 0] / X[:, 1]
    y = np.where(X[:, 3] > 0.5, 12.0, 30.0) + sojourn_quantile(0.95, lam, mu, np.full(60, 4.0))
    util = lam / mu
    ok = np.isfinite(y) & (util < 0.9)
    return X[ok], y[ok] * np.exp(rng.normal(0, 0.02, int(ok.sum()))), util[ok]


def test_a_gpu_s_utilisation_pins_its_speed_up_and_a_smaller_gpu_pod_saturates() -> None:
    """gen-3066, traced: a 4-core GPU pod fitted on latency alone held 36 times what it holds
    (23,043 req/s against about 636); the explorer then moved the one GPU pod from 4 to 1
    core, predicted to hold 546 req/s at 35 ms, and it saturated. With the GPUs' utilisation
    in the fit, the speed-up is the truth's and a 1-core GPU pod at that load is unstable."""
    from planner.models.latency import QueueingLatencyRegressor

    X, y, util = _cpu_and_gpu_rows(3)
    on_gpu = X[:, 3] > 0.5
    probe = np.array([[450.0, 1, 4.0, 1, -1], [450.0, 1, 1.0, 1, -1]])
    blind = QueueingLatencyRegressor(n_bootstrap=4).fit(X, y,
                                                        utilization=np.where(on_gpu, np.nan, util))
    assert math.exp(blind.theta_[2]) > 20.0 and np.isfinite(blind.predict_bound(probe)).all()
    est = QueueingLatencyRegressor(n_bootstrap=4).fit(X, y, utilization=util)
    assert math.exp(est.theta_[2]) == pytest.approx(6.0, rel=0.1)
    mean, bound = est.predict_with_bound(probe)
    assert np.isfinite(mean[0]) and not np.isfinite(mean[1]) and not np.isfinite(bound[1])


def test_the_simulator_reports_a_gpu_pod_s_busy_fraction_as_its_gpu_s() -> None:
    from bench.device_pins import DEFAULT_SCENARIO, pinned
    from bench.slo import START, load
    from simulator.runner import ScenarioRun

    for device in ("gpu", "cpu"):
        run = ScenarioRun(pinned(load(DEFAULT_SCENARIO, 600.0), device), None, 1,
                          start_time=START)
        run.run(600.0)
        wl = next(iter(run.sim.observe().workloads.values()))
        ready = [p for p in wl.pods if p.ready]
        assert ready and wl.cpu_utilization is not None
        if device == "gpu":
            assert all(p.gpu_utilization == p.cpu_utilization for p in ready)
            assert wl.utilization == wl.cpu_utilization == wl.busy
        else:
            assert all(p.gpu_utilization is None for p in wl.pods) and wl.utilization is None
