"""A canary's speed is measured against the workload's pods on the node pools it runs on: pools
differ in speed, and a ratio across pools carries the pool's speed into the shape's (gen-5163,
``docs/benchmarks.md`` section 66: a 4-core canary on a 1.6x pool, measured against 1-core pods
mostly on a 1x one, read 3.78 = 2.36 x 1.6 and vouched for CPU pods that saturated)."""

from __future__ import annotations

import pytest

from planner.domain.state import CanaryState, PodState, WorkloadConfig, WorkloadState
from planner.planners.canary import capacity_ratio

ONE = WorkloadConfig(4, 1.0, "cpu", None)
FOUR = WorkloadConfig(1, 4.0, "cpu", None)


def _pod(name: str, cpu: float, pool: str, capacity: float, busy: float = 0.5) -> PodState:
    return PodState(name, f"node-{pool}", cpu, "cpu", cpu_utilization=busy, pool=pool,
                    request_rate=capacity * busy)


def _workload() -> WorkloadState:
    pods = (_pod("s1", 1.0, "slow", 230.0), _pod("s2", 1.0, "slow", 230.0),
            _pod("s3", 1.0, "slow", 230.0), _pod("f1", 1.0, "fast", 368.0))
    return WorkloadState("ns", "w", ONE, pods, request_rate=600.0, cpu_utilization=0.5)


def test_a_size_canary_is_compared_with_the_pods_on_its_own_pool() -> None:
    canary = CanaryState(FOUR, (_pod("c1", 4.0, "fast", 870.0),))
    assert capacity_ratio(canary, _workload(), versus=1.0) == pytest.approx(870.0 / 368.0)


def test_on_a_pool_the_workload_does_not_run_on_it_is_compared_with_all_its_pods() -> None:
    canary = CanaryState(FOUR, (_pod("c1", 4.0, "other", 870.0),))
    assert capacity_ratio(canary, _workload(), versus=1.0) == pytest.approx(870.0 / 230.0)


def test_canary_pods_on_several_pools_count_where_the_workload_runs_too() -> None:
    canary = CanaryState(FOUR, (_pod("c1", 4.0, "fast", 870.0), _pod("c2", 4.0, "slow", 544.0),
                                _pod("c3", 4.0, "other", 2000.0)))
    # Pool by pool where both run (fast and slow), the size's own speed on each.
    assert capacity_ratio(canary, _workload(), versus=1.0) == pytest.approx(
        (870.0 / 368.0 + 544.0 / 230.0) / 2)


def test_a_pool_canary_is_compared_with_the_place_the_workload_is_in() -> None:
    # A trial of the fast pool for a workload spread over both: the verdict is the pool's
    # speed relative to the spread, so it is measured against all the workload's pods (pool by
    # pool, against the one pod already on the fast pool, it would read 1: gen-3238).
    canary = CanaryState(WorkloadConfig(1, 1.0, "cpu", "fast"),
                         (_pod("c1", 1.0, "fast", 368.0),))
    assert capacity_ratio(canary, _workload()) == pytest.approx(368.0 / 230.0)
