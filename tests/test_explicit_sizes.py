"""The explicit latency estimate's bigger pods: more servers, not faster ones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import WorkloadConfig
from planner.models.explicit import ExplicitLatency
from planner.models.predictor import CandidateBatch
from planner.models.queue_estimate import QueueEstimate
from planner.planners.predictors import CurrentSizeOnly
from simulator.queueing import Components, pod_components, quantile


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(5.0, 500.0), base=st.floats(0.0, 50.0),
       current=st.sampled_from([0.5, 1.0, 2.0]), quantile=st.sampled_from([0.5, 0.9, 0.99]),
       load=st.floats(0.0, 0.85), replicas=st.integers(1, 30))
def test_a_bigger_pod_serves_no_request_sooner_than_a_current_pod(
        mu: float, base: float, current: float, quantile: float, load: float,
        replicas: int) -> None:
    """With ``parallel_sizes``, a pod of 2, 4 or 8 times the current whole cores (a current pod
    of half a core counts as one) is predicted no faster than a current pod's own service time
    at one core (the quantile of one request served alone), at any load; rows of half the
    current size or the current size are the textbook M/M/1's, unchanged."""
    est = QueueEstimate(mu, base)
    cfg = WorkloadConfig(replicas, current)
    whole = max(current, 1.0)
    sizes = [current / 2, current, 2 * whole, 4 * whole, 8 * whole]
    batch = CandidateBatch.of([WorkloadConfig(replicas, c) for c in sizes])
    rate = load * replicas * mu * current * 2       # up to 1.7x what the current pods serve
    parallel = ExplicitLatency(est, quantile, cfg, parallel_sizes=True).predict(batch, rate)
    textbook = ExplicitLatency(est, quantile, cfg).predict(batch, rate)
    assert np.array_equal(parallel.mean[:2], textbook.mean[:2])
    alone = base + 1000.0 * math.log(1.0 / (1.0 - quantile)) / (mu * whole)
    assert (parallel.mean[2:] >= alone * (1 - 1e-9)).all()
    assert (parallel.mean[2:] >= textbook.mean[2:] * (1 - 1e-9)).all()
    # Capacity is the same either way: a row is stable in one exactly when in the other.
    assert np.array_equal(np.isfinite(parallel.mean), np.isfinite(textbook.mean))


def test_a_share_of_a_core_is_slower_per_request_than_a_whole_core() -> None:
    """A current pod of half a core serves each request at half a core's speed (its quota): a
    one-core pod is one server twice as fast, as in the textbook estimate; two cores are two
    servers of one core each."""
    est = QueueEstimate(40.0, 5.0)
    cfg = WorkloadConfig(10, 0.5)
    batch = CandidateBatch.of([WorkloadConfig(10, 1.0), WorkloadConfig(5, 2.0)])
    parallel = ExplicitLatency(est, 0.9, cfg, parallel_sizes=True).predict(batch, 100.0)
    textbook = ExplicitLatency(est, 0.9, cfg).predict(batch, 100.0)
    assert parallel.mean[0] == textbook.mean[0]
    alone = 5.0 + 1000.0 * math.log(10.0) / 40.0
    assert parallel.mean[1] >= alone * (1 - 1e-9) > textbook.mean[1]


def test_the_textbook_estimate_takes_a_bigger_pod_as_faster_per_request() -> None:
    """What ``parallel_sizes`` changes, at one point: the unloaded p95 of 4-cpu pods by the
    textbook estimate (one server four times as fast) is under a third of the current pods';
    by the parallel one it is the current pods' (a request served alone takes as long)."""
    est = QueueEstimate(50.0, 0.0)
    cfg = WorkloadConfig(12, 1.0)
    batch = CandidateBatch.of([WorkloadConfig(40, 4.0)])
    one = 1000.0 * math.log(20.0) / 50.0
    assert ExplicitLatency(est, 0.95, cfg).predict(batch, 1.0).mean[0] < one / 3
    parallel = ExplicitLatency(est, 0.95, cfg, parallel_sizes=True).predict(batch, 1.0).mean[0]
    assert parallel >= one * (1 - 1e-9)


def _mmc(lam: float, mu: float, servers: int, base: float, q: float) -> float:
    """The simulator's M/M/c quantile (closed form, bisection): ms."""
    arr = np.asarray(pod_components(lam, mu, servers, lam, base, 1e9, False))
    out = quantile(Components(arr[:, 0], arr[:, 1], arr[:, 2]), q)
    assert out is not None
    return out


@pytest.mark.parametrize(("current", "size", "servers"), [
    (1.0, 2.0, 2), (1.0, 4.0, 4), (2.0, 4.0, 2), (0.5, 2.0, 2), (2.0, 3.0, 2), (1.0, 1.5, 2),
    (4.0, 6.0, 2), (2.0, 2.5, 2), (1.0, 1.25, 2), (1.5, 2.0, 2), (1.0, 3.5, 4)])
def test_a_bigger_pod_is_the_m_m_c_queue_of_the_simulator(current: float, size: float,
                                                          servers: int) -> None:
    """The rows are the M/M/c quantile with ``ceil(size / u)`` servers sharing the pod's rate
    (``u = max(current, 1)``), as the simulator's own closed form and bisection give it
    (:mod:`simulator.queueing`); where the size is no whole multiple of ``u`` (3 cpu beside 2),
    the sooner of that and ``floor(size / u)`` servers of ``u`` cores each. No server is
    faster per request than ``u`` cores."""
    mu_core, base, q = 40.0, 3.0, 0.95
    est = QueueEstimate(mu_core, base)
    cfg = WorkloadConfig(10, current)
    unit = max(current, 1.0)
    whole = math.floor(size / unit + 1e-9)
    for lam in (1.0, 0.5 * mu_core * size, 0.85 * mu_core * size):
        got = ExplicitLatency(est, q, cfg, parallel_sizes=True).predict(
            CandidateBatch.of([WorkloadConfig(1, size)]), lam).mean[0]
        want = _mmc(lam, mu_core * size, servers, base, q)
        if whole < servers and lam < 0.9 * whole * unit * mu_core:
            want = min(want, _mmc(lam, whole * unit * mu_core, whole, base, q))
        assert got == pytest.approx(want, rel=1e-4)
        assert mu_core * size / servers <= mu_core * unit + 1e-9


@settings(max_examples=60, deadline=None)
@given(current=st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]), load=st.floats(0.0, 200.0),
       quantile_=st.sampled_from([0.5, 0.95, 0.99]))
def test_a_bigger_pod_is_never_predicted_slower(current: float, load: float,
                                               quantile_: float) -> None:
    """Over sizes from the current one up, the prediction at a given load per pod never rises
    with the size (a 1.25-cpu pod beside 1-cpu ones is no slower than they are)."""
    est = QueueEstimate(40.0, 3.0)
    cfg = WorkloadConfig(10, current)
    sizes = sorted({current, *(x for x in (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 6.0, 8.0)
                               if x > current)})
    batch = CandidateBatch.of([WorkloadConfig(1, c) for c in sizes])
    mean = ExplicitLatency(est, quantile_, cfg, parallel_sizes=True).predict(batch, load).mean
    finite = mean[np.isfinite(mean)]
    assert (np.diff(finite) <= 1e-9 * finite[1:]).all()
    assert np.isfinite(mean).tolist() == sorted(np.isfinite(mean).tolist())


def test_more_than_max_servers_are_capped_in_servers_and_capacity() -> None:
    """A pod of 128 times the current cores is 64 servers of a current pod's speed: its
    capacity is theirs, not 128 cores'."""
    est = QueueEstimate(10.0, 1.0)
    cfg = WorkloadConfig(4, 1.0)
    pred = ExplicitLatency(est, 0.9, cfg, parallel_sizes=True)
    batch = CandidateBatch.of([WorkloadConfig(1, 128.0)])
    assert math.isinf(pred.predict(batch, 0.95 * 64 * 10.0).mean[0])
    assert math.isfinite(pred.predict(batch, 0.5 * 64 * 10.0).mean[0])
    assert pred.predict(batch, 1.0).mean[0] >= 1.0 + 1000.0 * math.log(10.0) / 10.0 - 1e-6


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(5.0, 500.0), base=st.floats(0.0, 50.0),
       current=st.sampled_from([0.5, 1.0, 2.0]), quantile=st.sampled_from([0.5, 0.9, 0.99]),
       load=st.floats(0.0, 3.0), replicas=st.integers(1, 30), factor=st.floats(0.2, 60.0),
       parallel=st.booleans())
def test_a_faster_place_serves_each_request_sooner_not_only_more_of_them(
        mu: float, base: float, current: float, quantile: float, load: float, replicas: int,
        factor: float, parallel: bool) -> None:
    """Pods ``factor`` times as fast (a place a canary measured, or one at the optimistic end
    of its prior) are the estimate with its service rate per core scaled, as the learned
    latency model scales its own, whichever way bigger sizes are taken; wrapped as the planner
    wraps the estimate (vouched for at the current size only), the numbers are the same."""
    cfg = WorkloadConfig(replicas, current)
    batch = CandidateBatch.of([WorkloadConfig(replicas, c) for c in (current / 2, current,
                                                                     2 * current, 4.0)])
    rate = load * replicas * mu * current
    faster = ExplicitLatency(QueueEstimate(mu, base), quantile, cfg,
                             parallel_sizes=parallel).predict_faster(batch, rate, factor)
    scaled = ExplicitLatency(QueueEstimate(mu * factor, base), quantile, cfg,
                             parallel_sizes=parallel).predict(batch, rate)
    np.testing.assert_allclose(faster.mean, scaled.mean, rtol=1e-9)
    np.testing.assert_array_equal(faster.supported, scaled.supported)
    wrapped = CurrentSizeOnly(ExplicitLatency(QueueEstimate(mu, base), quantile, cfg,
                                              parallel_sizes=parallel), current)
    again = wrapped.predict_faster(batch, rate, factor)
    np.testing.assert_allclose(again.mean, faster.mean, rtol=1e-9)
    np.testing.assert_array_equal(again.supported, faster.supported & (batch.cpu == current))
    rates = [rate, rate / 2]
    np.testing.assert_allclose(wrapped.predict_mean_rates_faster(batch, rates, factor),
                               [wrapped.predict_faster(batch, r, factor).mean for r in rates],
                               rtol=1e-9)


def test_a_target_the_current_service_time_misses_is_met_by_a_place_fast_enough() -> None:
    """A p50 of 40 ms where a current pod's median service time alone is 46 ms: no count of
    current pods meets it, and pods at the same load per pod, 3x as fast, do (the default,
    the same service time at a third of the load, never would)."""
    est = QueueEstimate(1000.0 / 66.7, 0.0)
    cfg = WorkloadConfig(10, 1.0)
    latency = CurrentSizeOnly(ExplicitLatency(est, 0.5, cfg, parallel_sizes=True), 1.0)
    batch = CandidateBatch.of([WorkloadConfig(n, 1.0) for n in (1, 10, 100, 1000)])
    assert (latency.predict(batch, 5.0).mean > 40.0).all()
    fast = latency.predict_faster(batch, 5.0, 3.0).mean
    assert (fast[1:] < 40.0).all()
