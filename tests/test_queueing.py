from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator import queueing


def single_pod(lam: float, mu: float, c: int = 1, base: float = 0.0) -> queueing.Components:
    out = queueing.step_outcome(lam, np.array([1.0]), np.array([mu]), np.array([base]), 5000.0,
                                servers=np.array([c]))
    return out.components


def test_mm1_percentile_matches_closed_form() -> None:
    c = single_pod(80.0, 100.0, base=2.0)
    p95 = queueing.quantile(c, 0.95)
    assert p95 == pytest.approx(2.0 + 1000 * math.log(20) / 20.0, rel=1e-6)


def test_erlang_c_known_value() -> None:
    # M/M/2 with offered load a = 1.6: C = 0.7111...
    assert queueing.erlang_c(2, 1.6) == pytest.approx(0.71111, rel=1e-4)
    assert queueing.erlang_c(1, 0.5) == pytest.approx(0.5)


def test_mmc_survival_is_a_distribution() -> None:
    c = single_pod(300.0, 348.0, c=4, base=3.0)
    assert queueing.survival(0.0, c) == pytest.approx(1.0)
    assert queueing.survival(3.0, c) == pytest.approx(1.0)
    assert queueing.survival(1e6, c) == pytest.approx(0.0, abs=1e-9)
    prev = 1.0
    for t in np.linspace(3, 200, 50):
        s = queueing.survival(float(t), c)
        assert s <= prev + 1e-12
        prev = s


def test_latency_climbs_sharply_near_saturation() -> None:
    p = [queueing.quantile(single_pod(u * 100.0, 100.0), 0.95) for u in (0.5, 0.8, 0.95)]
    assert p[0] is not None and p[1] is not None and p[2] is not None
    assert p[1] > 2 * p[0] and p[2] > 3 * p[1]


def test_saturated_pod_drops_and_times_out() -> None:
    out = queueing.step_outcome(150.0, np.array([1.0]), np.array([100.0]), np.array([1.0]),
                                2000.0)
    assert out.dropped == pytest.approx(150.0 - queueing.SATURATION * 100.0)
    assert queueing.quantile(out.components, 0.5) == pytest.approx(2000.0, rel=1e-6)


def test_bigger_pods_pool_better() -> None:
    # Same utilisation, more servers per pod: lower p95 (statistical multiplexing).
    p1 = queueing.quantile(single_pod(80.0, 100.0, c=1), 0.95)
    p4 = queueing.quantile(single_pod(320.0, 400.0, c=4), 0.95)
    assert p1 is not None and p4 is not None and p4 < p1


@given(st.floats(0.05, 0.9), st.integers(1, 8), st.floats(0.5, 0.99))
def test_quantile_is_consistent_with_survival(util: float, c: int, q: float) -> None:
    mu = 100.0 * c
    comps = single_pod(util * mu, mu, c=c, base=1.0)
    t = queueing.quantile(comps, q)
    assert t is not None
    assert queueing.survival(t, comps) == pytest.approx(1 - q, abs=1e-6)


def test_learned_model_quantile_matches_simulator_truth() -> None:
    """The regressor's Newton solve agrees with the simulator's bisection on M/M/c."""
    from planner.models.sojourn import sojourn_quantile

    rng = np.random.default_rng(1)
    for _ in range(200):
        c = int(rng.integers(1, 9))
        mu = float(rng.uniform(5, 1000)) * c
        lam = mu * float(rng.uniform(0.01, 0.97))
        q = float(rng.choice([0.5, 0.9, 0.95, 0.99]))
        truth = queueing.quantile(single_pod(lam, mu, c=c), q)
        ours = sojourn_quantile(q, np.array([lam]), np.array([mu]), np.array([float(c)]))[0]
        assert truth is not None and ours == pytest.approx(truth, rel=1e-6)


@given(st.lists(st.tuples(st.floats(0.01, 10.0), st.sampled_from([0.0, 0.01, 0.5, 3.0, math.inf]),
                          st.sampled_from([0.0, 2.0, 40.0, math.inf])), min_size=1, max_size=6),
       st.sampled_from([0.0, 1.0, 2.0, 39.0, 40.0, 1e6]))
def test_survival_is_the_share_of_finite_tails(parts: list[tuple[float, float, float]],
                                                t: float) -> None:
    """The mixture's survival at ``t`` weighs each component's tail, a tail that is not a
    number (an infinite rate at its own offset) counting as 0: bit for bit what it was
    when every tail went through ``nan_to_num``."""
    w, rate, offset = (np.array(x, dtype=float) for x in zip(*parts, strict=True))
    c = queueing.Components(w, offset, rate)
    with np.errstate(invalid="ignore", over="ignore"):
        tail = np.where(t < offset, 1.0, np.exp(-rate * (t - offset)))
    expected = float((w * np.nan_to_num(tail, nan=0.0)).sum() / w.sum())
    got = queueing.survival(t, c)
    assert got == expected
