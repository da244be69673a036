"""Pods busy less than the explicit estimate reads a service rate from
(:data:`~planner.models.queue_estimate.MIN_READ_UTILIZATION`) still bound it from below: each
serves at least ``rate / (ready x MIN_READ_UTILIZATION)``. Without the bound, a workload moved
to GPU kept its CPU estimate while nine GPU pods idled at 0.7 %, and no smaller count was ever
predicted to hold (gpu-inference pinned to GPU, docs/benchmarks.md section 64)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.queue_estimate import (
    MIN_READ_UTILIZATION,
    QueueEstimate,
    floored,
    idle_bound,
)
from planner.planners.online import updated_estimate
from planner.planners.predictors import calibrated_estimate
from tests.test_estimate_place import _ctx

CPU = WorkloadConfig(9, 1.0, "cpu", "gpu-pool")
GPU = WorkloadConfig(9, 2.0, "gpu", "gpu-pool")


def _seen(cfg: WorkloadConfig, rate: float, util: float, p95: float):  # type: ignore[no-untyped-def]
    return dataclasses.replace(_ctx(cfg, rate, util), current={"p95": p95})


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 500.0), st.floats(0.0, 0.0199), st.integers(1, 20),
       st.sampled_from([0.5, 1.0, 4.0]))
def test_the_bound_is_below_the_speed_the_pods_have(rate: float, util: float, ready: int,
                                                     cpu: float) -> None:
    """Pods whose true utilisation is ``util`` serve ``rate / (ready x util)`` each: the bound
    never says more; it says exactly that at the reading's threshold."""
    ctx = _seen(WorkloadConfig(ready, cpu, "gpu", "gpu-pool"), rate, util, 30.0)
    low = idle_bound(ctx.workload, 30.0)
    assert low is not None
    assert low.mu_per_core * cpu <= rate / (ready * max(util, 1e-12)) + 1e-9
    assert low.mu_per_core * cpu == pytest.approx(rate / (ready * MIN_READ_UTILIZATION))
    assert low.base_ms == 30.0 and low.place == ("gpu", "gpu-pool") and low.cpu == cpu


def test_no_bound_where_the_rate_is_read_or_there_is_nothing_to_read() -> None:
    assert idle_bound(_seen(GPU, 50.0, MIN_READ_UTILIZATION, 30.0).workload, 30.0) is None
    assert idle_bound(_seen(GPU, 0.5, 0.001, 30.0).workload, 30.0) is None     # < 1 req/s
    # The base is capped as a fitted one is, and unknown without an observed latency.
    assert idle_bound(_seen(GPU, 50.0, 0.005, 900.0).workload, 900.0, 200.0) is not None
    capped = idle_bound(_seen(GPU, 50.0, 0.005, 900.0).workload, 900.0, 200.0)
    assert capped is not None and capped.base_ms == 200.0
    blind = idle_bound(_seen(GPU, 50.0, 0.005, 900.0).workload, None)
    assert blind is not None and blind.base_ms != blind.base_ms          # NaN


def test_an_estimate_below_the_bound_is_raised_and_one_above_is_kept() -> None:
    low = QueueEstimate(100.0, 30.0, {}, ("gpu", "gpu-pool"), 2.0)
    slow = QueueEstimate(40.0, 20.0, {"p95": 20.0}, ("gpu", "gpu-pool"), 2.0)
    fast = QueueEstimate(400.0, 20.0, {"p95": 20.0}, ("gpu", "gpu-pool"), 2.0)
    raised = floored(slow, low)
    assert raised.mu_per_core == 100.0 and raised.bases == {"p95": 20.0}
    assert raised.base_ms == 20.0                    # the bound's base is not blended in
    assert floored(fast, low) is fast
    other = QueueEstimate(10.0, 0.0, {}, ("cpu", "gpu-pool"), 1.0)
    assert floored(other, low).place == ("gpu", "gpu-pool")
    assert floored(other, low).mu_per_core == 100.0


def test_a_workload_moved_to_idle_gpu_pods_leaves_the_cpu_estimate() -> None:
    """Nine 2-core GPU pods at 0.7 % serving 50 req/s after a move from CPU pods read at 10
    req/s per core: the estimate becomes the GPU pods' lower bound (139 req/s per core, the
    observed p95 as base), so one or two GPU pods are predicted to carry the load."""
    before = QueueEstimate(10.0, 0.0, {}, ("cpu", "gpu-pool"), 1.0)
    ctx = _seen(GPU, 50.0, 0.007, 28.0)
    est = calibrated_estimate(ctx, before)
    assert est is not None and est.place == ("gpu", "gpu-pool")
    assert est.mu_per_core == pytest.approx(50.0 / (9 * MIN_READ_UTILIZATION) / 2.0)
    assert est.bases == {"p95": 28.0}
    one = dataclasses.replace(GPU, replicas=1)
    assert est.latency_ms(50.0, one, 0.95, "p95") < 100.0
    # Without the bound (busier than it reads from) nothing changes: the rate is read.
    read = updated_estimate(_seen(CPU, 40.0, 0.5, 60.0), before)
    assert read is not None and read.mu_per_core != before.mu_per_core
