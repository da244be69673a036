"""Availability from pod restarts (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.domain.state import PodState
from planner.kpi.availability import DEFAULT_MTTR, pod_availability, workload_availability


def pod(
    restarts: int = 0, started_at: float = 0.0, ready: bool = True, name: str = "p"
) -> PodState:
    return PodState(
        name=name, node="n1", cpu=1.0, ready=ready, restarts=restarts, started_at=started_at
    )


def test_default_mttr_is_30s() -> None:
    assert DEFAULT_MTTR == 30.0


def test_pod_without_restarts_is_fully_available() -> None:
    assert pod_availability(pod(0), now=10.0) == 1.0


def test_pod_mtbf_over_mtbf_plus_mttr() -> None:
    # uptime 540 s, 2 restarts: MTBF 270 s, MTTR 30 s -> 0.9
    assert pod_availability(pod(2, started_at=60.0), now=600.0) == pytest.approx(0.9)
    assert pod_availability(pod(2, started_at=60.0), now=600.0, mttr=90.0) == pytest.approx(0.75)


def test_workload_is_one_minus_product_over_ready_pods() -> None:
    pods = [pod(1, name="a"), pod(1, name="b"), pod(5, ready=False, name="c")]
    # a = b = 270 / 300 = 0.9 at now=270; c is not ready and ignored
    assert workload_availability(pods, now=270.0) == pytest.approx(1 - 0.1 * 0.1)


def test_one_healthy_ready_pod_makes_the_workload_available() -> None:
    assert workload_availability([pod(100, name="a"), pod(0, name="b")], now=50.0) == 1.0


def test_no_ready_pods_is_zero() -> None:
    assert workload_availability([], now=100.0) == 0.0
    assert workload_availability([pod(0, ready=False)], now=100.0) == 0.0


def test_clock_skew_and_zero_uptime() -> None:
    assert pod_availability(pod(1, started_at=200.0), now=100.0) == 0.0  # uptime clamped to 0
    assert pod_availability(pod(1, started_at=100.0), now=100.0, mttr=0.0) == 1.0


@pytest.mark.parametrize("mttr", [-1.0, float("nan"), float("inf")])
def test_bad_mttr_is_rejected(mttr: float) -> None:
    with pytest.raises(ValueError):
        pod_availability(pod(1), now=100.0, mttr=mttr)


pods_st = st.lists(
    st.builds(
        pod,
        restarts=st.integers(min_value=0, max_value=10_000),
        started_at=st.floats(min_value=0.0, max_value=1e7),
        ready=st.booleans(),
    ),
    max_size=8,
)
now_st = st.floats(min_value=0.0, max_value=2e7)
mttr_st = st.floats(min_value=0.0, max_value=1e5)


@given(pods_st, now_st, mttr_st)
def test_availability_within_unit_interval(pods: list[PodState], now: float, mttr: float) -> None:
    a = workload_availability(pods, now, mttr)
    assert 0.0 <= a <= 1.0
    for p in pods:
        assert 0.0 <= pod_availability(p, now, mttr) <= 1.0


@given(pods_st.filter(bool), now_st, mttr_st, st.integers(min_value=1, max_value=1000), st.data())
def test_monotone_in_restarts(
    pods: list[PodState], now: float, mttr: float, extra: int, data: st.DataObject
) -> None:
    i = data.draw(st.integers(min_value=0, max_value=len(pods) - 1))
    worse = list(pods)
    worse[i] = pod(pods[i].restarts + extra, pods[i].started_at, pods[i].ready)
    assert pod_availability(worse[i], now, mttr) <= pod_availability(pods[i], now, mttr)
    assert workload_availability(worse, now, mttr) <= workload_availability(pods, now, mttr)


@given(pods_st, now_st, mttr_st, st.floats(min_value=0.0, max_value=1e5))
def test_monotone_in_mttr(pods: list[PodState], now: float, mttr: float, more: float) -> None:
    assert workload_availability(pods, now, mttr + more) <= workload_availability(pods, now, mttr)


@given(pods_st, now_st, mttr_st, st.integers(min_value=0, max_value=100))
def test_adding_a_ready_pod_never_lowers_availability(
    pods: list[PodState], now: float, mttr: float, restarts: int
) -> None:
    more = [*pods, pod(restarts, 0.0, True, name="new")]
    assert workload_availability(more, now, mttr) >= workload_availability(pods, now, mttr)
