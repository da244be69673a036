"""The explicit estimate knows the place (device, node pool) of the pods it was calibrated on:
it vouches for that place alone, starts afresh when the pods it observes are elsewhere, and the
place survives a restart through memory."""

from __future__ import annotations

import numpy as np
import pytest

from actuators import registry
from planner.domain.admin import AdminConfig
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import (
    ClusterSnapshot,
    NodeState,
    PodState,
    WorkloadConfig,
    WorkloadState,
)
from planner.models.predictor import CandidateBatch
from planner.models.queue_estimate import QueueEstimate
from planner.planners import places_left
from planner.planners.base import PlanningContext
from planner.planners.online import estimate_memory, recalled_estimate, updated_estimate
from planner.planners.predictors import PredictorMemory, PredictorSource, calibrated_estimate

NOW = 10_000.0


def _ctx(cfg: WorkloadConfig, rate: float, util: float) -> PlanningContext:
    """A workload of ``cfg`` whose pods have served steadily for an hour at ``rate`` req/s
    and ``util`` CPU utilisation, under one p95 latency objective."""
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 100, "measuredBy": "p95"}]}})
    profiles = {"p95": parse_profile({"kind": "KPIProfile",
                                      "metadata": {"name": "p95", "namespace": "ns"},
                                      "spec": {"type": "latency", "percentile": 95}})}
    pods = tuple(PodState(f"p{i}", "n", cfg.cpu, cfg.device, cpu_utilization=util,
                          pool=cfg.pool, started_at=NOW - 3600.0)
                 for i in range(cfg.replicas))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=rate, cpu_utilization=util)
    admin = AdminConfig()
    node = NodeState("n", "gpu-pool", "eu", 64.0, 8.0, gpus=4)
    return PlanningContext(intent, profiles, wl, ClusterSnapshot(NOW, (node,), {"ns/w": wl}),
                           {"p95": 20.0}, admin, registry.create(admin.actuators, admin),
                           None, NOW)


CPU = WorkloadConfig(8, 1.0, "cpu", "gpu-pool")
GPU = WorkloadConfig(2, 1.0, "gpu", "gpu-pool")


def test_the_estimate_records_where_its_pods_ran_and_memory_keeps_it() -> None:
    est = updated_estimate(_ctx(CPU, 80.0, 0.5), None)
    assert est is not None and est.place == ("cpu", "gpu-pool")
    again = recalled_estimate(estimate_memory(est))
    assert again == est
    # Memory written before the place was kept still reads, with the place unknown.
    old = estimate_memory(est)
    assert old is not None
    del old["place"]
    legacy = recalled_estimate(old)
    assert legacy is not None and legacy.place is None
    assert legacy.mu_per_core == est.mu_per_core


def test_pods_in_another_place_start_the_estimate_afresh() -> None:
    """20 req/s per CPU core at half load; then GPU pods serving 80 req/s at a tenth of a
    core's load each (400 req/s per core): the blend would say 146 req/s per core, which is
    neither. The estimate of the GPU pods alone is taken; at the same place it is blended."""
    cpu = calibrated_estimate(_ctx(CPU, 80.0, 0.5), None)
    assert cpu is not None and cpu.mu_per_core == pytest.approx(20.0)
    gpu_ctx = _ctx(GPU, 80.0, 0.1)
    moved = calibrated_estimate(gpu_ctx, cpu)
    assert moved == updated_estimate(gpu_ctx, None)
    assert moved is not None and moved.mu_per_core == pytest.approx(400.0)
    assert moved.place == ("gpu", "gpu-pool")
    # The same place: blended with what was known, as before.
    again = calibrated_estimate(_ctx(CPU, 120.0, 0.5), cpu)
    assert again == updated_estimate(_ctx(CPU, 120.0, 0.5), cpu)
    assert again is not None and 20.0 < again.mu_per_core < 30.0
    # An estimate whose place is not known (older memory) is blended, as before.
    legacy = QueueEstimate(cpu.mu_per_core, cpu.base_ms, dict(cpu.bases))
    assert calibrated_estimate(gpu_ctx, legacy) == updated_estimate(gpu_ctx, legacy)


def test_right_after_a_move_the_estimate_vouches_for_the_place_it_knows() -> None:
    """The workload was switched to GPU pods and its rollout is under way (the new pods not
    yet settled, so the estimate is the CPU pods'): the explicit predictors vouch for the CPU
    pods' place, not for the GPU pods the estimate has never observed, which they would
    otherwise predict at the CPU pods' speed as known."""
    cpu = calibrated_estimate(_ctx(CPU, 80.0, 0.5), None)
    ctx = _ctx(GPU, 80.0, 0.1)
    pods = tuple(PodState(p.name, p.node, p.cpu, p.device, cpu_utilization=p.cpu_utilization,
                          pool=p.pool, started_at=NOW - 10.0) for p in ctx.workload.pods)
    wl = WorkloadState("ns", "w", GPU, pods, request_rate=80.0, cpu_utilization=0.1)
    ctx = PlanningContext(ctx.intent, ctx.profiles, wl, ctx.snapshot, ctx.current, ctx.admin,
                          ctx.actuators, None, NOW)
    mem = PredictorMemory(cpu)
    preds = PredictorSource(None).predictors(ctx, mem)
    assert mem.estimate == cpu                    # not steady: the CPU pods' estimate kept
    batch = CandidateBatch.of([GPU, CPU])
    assert preds["p95"].supported(batch, 80.0).tolist() == [False, True]
    # Once the GPU pods are observed steady, the estimate is theirs and vouches for them; the
    # CPU pods' estimate is kept for the place they left, and vouches for it alone
    # (tests/test_places_left.py).
    steady = _ctx(GPU, 80.0, 0.1)
    mem = PredictorMemory(cpu)
    preds = PredictorSource(None).predictors(steady, mem)
    assert mem.estimate is not None and mem.estimate.place == ("gpu", "gpu-pool")
    assert set(mem.left) == {("cpu", "gpu-pool")} and mem.left[("cpu", "gpu-pool")].estimate == cpu
    assert preds["p95"].supported(batch, 80.0).tolist() == [True, True]
    p = preds["p95"].predict(batch, 80.0)
    assert np.isfinite(p.mean[0])
    assert cpu is not None and p.mean[1] == pytest.approx(
        cpu.latency_ms(80.0, CPU, 0.95, "p95"), rel=1e-9)
    assert p.mean[0] < p.mean[1]


def test_saturated_pods_in_another_place_do_not_cap_the_estimate_of_the_old_one() -> None:
    """GPU pods saturated at 30 req/s on two pods say nothing of the CPU pods' service rate
    (20 req/s per core): the CPU pods' estimate is kept as it was, not capped to 15."""
    cpu = calibrated_estimate(_ctx(CPU, 80.0, 0.5), None)
    assert cpu is not None
    assert calibrated_estimate(_ctx(GPU, 30.0, 0.97), cpu) == cpu
    # Saturated pods where the estimate was calibrated still cap it.
    capped = calibrated_estimate(_ctx(CPU, 80.0, 0.97), cpu)
    assert capped is not None and capped.mu_per_core == pytest.approx(10.0)


def test_on_the_way_back_the_place_left_is_vouched_for() -> None:
    """After CPU -> GPU the plan goes back to CPU: while the CPU pods roll out (the
    configuration CPU, the pods serving still GPU, the estimate still theirs), the CPU place
    it goes back to is vouched for by the estimate it left there (the device filter is the
    serving pods', not the configuration's), and the GPU pods by their own."""
    cpu = calibrated_estimate(_ctx(CPU, 80.0, 0.5), None)
    gpu = calibrated_estimate(_ctx(GPU, 80.0, 0.1), cpu)
    assert cpu is not None and gpu is not None and gpu.place == ("gpu", "gpu-pool")
    ctx = _ctx(CPU, 80.0, 0.1)
    pods = tuple(PodState(f"g{i}", "n", 1.0, "gpu", cpu_utilization=0.1, pool="gpu-pool",
                          started_at=NOW - 3600.0) for i in range(2)) + tuple(
        PodState(f"c{i}", "n", 1.0, "cpu", pool="gpu-pool", ready=False, started_at=NOW - 5.0)
        for i in range(8))
    wl = WorkloadState("ns", "w", CPU, pods, request_rate=80.0, cpu_utilization=0.1)
    ctx = PlanningContext(ctx.intent, ctx.profiles, wl, ctx.snapshot, ctx.current, ctx.admin,
                          ctx.actuators, None, NOW)
    mem = PredictorMemory(gpu, left=places_left.updated({}, cpu, gpu, NOW - 600.0))
    preds = PredictorSource(None).predictors(ctx, mem)
    assert mem.estimate == gpu                     # not steady: the GPU pods' estimate kept
    assert preds["p95"].supported(CandidateBatch.of([CPU, GPU]), 80.0).tolist() == [True, True]
