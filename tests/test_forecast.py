"""The load forecast: raises the planned rate on a persistent rise only, bounded, with bounded
memory, and the grid planner plans for it and says so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.state import PodState
from planner.models.forecast import LoadForecast, theil_sen_slope
from tests.support.memory import Remembering
from tests.test_grid_planner import TrueLatency, context, planner_with

CYCLE = 15.0
KEY = "ns/w"


def feed(fc: LoadForecast, rates: list[float], t0: float = 0.0) -> float:
    """Observe ``rates`` one cycle apart; returns the time of the last observation."""
    t = t0
    for i, r in enumerate(rates):
        t = t0 + i * CYCLE
        fc.observe(KEY, t, r)
    return t


def test_theil_sen_ignores_a_minority_of_outliers() -> None:
    t = np.arange(10.0)
    y = 2.0 * t + 5.0
    y[3] = 500.0
    y[7] = -300.0
    assert theil_sen_slope(t, y) == pytest.approx(2.0)
    assert theil_sen_slope([1.0, 1.0], [0.0, 5.0]) == 0.0
    assert theil_sen_slope([], []) == 0.0


def test_flat_noisy_load_is_not_raised() -> None:
    rng = np.random.default_rng(0)
    fc = LoadForecast()
    raised = 0
    for i in range(200):
        fc.observe(KEY, i * CYCLE, 300.0 * float(np.exp(rng.normal(0.0, 0.03))))
        f = fc.forecast(KEY, 300.0, 45.0)
        raised += f.raised
        assert f.rate <= 300.0 * 1.05
    assert raised <= 10  # 3 % noise is below the significance threshold almost always


def test_rising_ramp_is_raised_by_slope_times_horizon() -> None:
    fc = LoadForecast()
    slope = 1.0  # req/s per second: +60 req/s per minute
    rates = [200.0 + slope * i * CYCLE for i in range(13)]
    feed(fc, rates)
    horizon = 55.0
    f = fc.forecast(KEY, rates[-1], horizon)
    assert f.raised
    assert f.slope == pytest.approx(slope, rel=0.01)
    assert f.rate == pytest.approx(rates[-1] + slope * horizon, rel=0.01)
    assert f.pct_per_min == pytest.approx(100 * 60 * slope / rates[-1], rel=0.01)


def test_falling_load_is_never_lowered() -> None:
    fc = LoadForecast()
    rates = [600.0 - 3.0 * i * CYCLE for i in range(12)]
    feed(fc, rates)
    f = fc.forecast(KEY, rates[-1], 60.0)
    assert f.slope < 0
    assert f.rate == rates[-1]
    assert not f.raised


def test_a_spike_is_not_extrapolated() -> None:
    fc = LoadForecast()
    feed(fc, [300.0] * 11 + [900.0])
    f = fc.forecast(KEY, 900.0, 60.0)
    assert f.rate == 900.0  # the spike is the current rate; its jump is not a trend


def test_a_step_is_not_extrapolated_once_flat() -> None:
    """After a flash sale's onset the load is flat at its new level: no raise, although the
    long window still sees the jump."""
    fc = LoadForecast()
    rates = [250.0] * 7 + [600.0] + [900.0] * 5
    feed(fc, rates)
    assert theil_sen_slope(np.arange(13) * CYCLE, rates) > 0  # the long window alone rises
    assert not fc.forecast(KEY, 900.0, 55.0).raised


def test_the_raise_is_capped() -> None:
    fc = LoadForecast(max_ratio=2.0)
    feed(fc, [10.0 * 2 ** i for i in range(10)])  # exponential: the trend is huge
    f = fc.forecast(KEY, 100.0, 600.0)
    assert f.rate == 200.0
    with pytest.raises(ValueError):
        LoadForecast(max_ratio=0.5)


def test_needs_enough_history() -> None:
    fc = LoadForecast(min_points=4)
    feed(fc, [100.0, 200.0, 300.0])
    assert not fc.forecast(KEY, 300.0, 60.0).raised
    fc.observe(KEY, 45.0, 400.0)
    assert fc.forecast(KEY, 400.0, 60.0).raised


def test_memory_is_bounded() -> None:
    fc = LoadForecast(window_s=180.0, max_points=32)
    feed(fc, [100.0 + i for i in range(10_000)])
    assert len(fc) <= 180.0 / CYCLE + 1
    fc2 = LoadForecast(window_s=1e9, max_points=32)
    t = feed(fc2, [100.0 + i for i in range(10_000)])
    assert len(fc2) == 32
    # pods: only pods still present are awaited, samples are capped
    for i in range(500):
        pod = PodState(f"p{i}", "n0", 1.0, ready=False, started_at=t + i)
        fc2.observe_pods(KEY, t + i, [pod])
        fc2.observe_pods(KEY, t + i + 20.0, [PodState(f"p{i}", "n0", 1.0, ready=True,
                                                       started_at=t + i)])
    st = fc2._startup[KEY]
    assert len(st.samples) <= fc2.max_samples
    assert len(st.pending) == 0
    assert len(st.seen) <= 512


def test_repeated_or_backwards_time_does_not_corrupt_the_history() -> None:
    fc = LoadForecast()
    feed(fc, [100.0 + 10 * i for i in range(8)])
    fc.observe(KEY, 7 * CYCLE, 170.0)  # same instant again: replaced, not duplicated
    assert len(fc) == 8
    fc.observe(KEY, 0.0, 100.0)  # the clock went back: start over
    assert len(fc) == 1
    fc.observe(KEY, 30.0, None)
    assert len(fc) == 1


def test_startup_is_learned_from_pod_readiness() -> None:
    fc = LoadForecast(default_startup_s=30.0)
    assert fc.horizon_s(KEY, CYCLE) == 45.0
    # A pod created at t=1000, seen not ready at +15, +30, +45 and ready at +60: its start-up
    # took between 45 and 60 s, learned as the midpoint.
    for t in (1015.0, 1030.0, 1045.0):
        fc.observe_pods(KEY, t, [PodState("new", "n0", 1.0, ready=False, started_at=1000.0)])
    fc.observe_pods(KEY, 1060.0, [PodState("new", "n0", 1.0, ready=True, started_at=1000.0)])
    assert fc.startup_s(KEY) == pytest.approx(52.5)
    assert fc.horizon_s(KEY, CYCLE) == pytest.approx(67.5)
    # Seen ready on first sight, a restart of a known pod, or no creation time: nothing learned.
    fc.observe_pods(KEY, 1075.0, [PodState("old", "n0", 1.0, ready=True, started_at=900.0)])
    fc.observe_pods(KEY, 1090.0, [PodState("old", "n0", 1.0, ready=False, started_at=900.0)])
    fc.observe_pods(KEY, 1105.0, [PodState("old", "n0", 1.0, ready=True, started_at=900.0)])
    fc.observe_pods(KEY, 1120.0, [PodState("anon", "n0", 1.0, ready=False)])
    fc.observe_pods(KEY, 1135.0, [PodState("anon", "n0", 1.0, ready=True)])
    assert fc.startup_s(KEY) == pytest.approx(52.5)


def test_the_pods_seen_survive_a_restart_in_either_written_form() -> None:
    """The pod names looked at are written down as one string (a name per line) and read
    back from it, or from the list earlier versions wrote: a pod seen before the restart is
    not judged again on its first sight after it (a restart would otherwise teach the
    start-up time from a pod whose start was not watched)."""
    fc = LoadForecast(default_startup_s=30.0)
    fc.observe_pods(KEY, 1000.0, [PodState(f"web-{i}", "n0", 1.0, ready=False,
                                           started_at=990.0) for i in range(3)])
    written = fc.remember(KEY)
    assert written["startup"]["seen"] == "web-0\nweb-1\nweb-2"
    earlier = {**written, "startup": {**written["startup"], "pending": {},
                                      "seen": ["web-0", "web-1", "web-2"]}}
    empty = {**written, "startup": {**written["startup"], "pending": {}, "seen": ""}}
    learned = []
    for memory in (earlier, {**written, "startup": {**written["startup"], "pending": {}}},
                   empty):
        back = LoadForecast(default_startup_s=30.0)
        back.recall(KEY, memory)
        # web-1 is ready now; had it been unknown it would be awaited from its next
        # not-ready sight and teach a start-up time
        back.observe_pods(KEY, 1015.0, [PodState("web-1", "n0", 1.0, ready=False,
                                                 started_at=990.0)])
        back.observe_pods(KEY, 1030.0, [PodState("web-1", "n0", 1.0, ready=True,
                                                 started_at=990.0)])
        learned.append(back.startup_s(KEY))
    assert learned[0] == learned[1] == 30.0
    assert learned[2] == pytest.approx(32.5)      # not seen before: judged on first sight


def _observed(planner: Remembering, rates: list[float]) -> None:
    """Give the planner the forecast memory a controller would have produced."""
    fc = LoadForecast()
    for i, r in enumerate(rates[:-1]):
        fc.observe("ns/w", 1000.0 - (len(rates) - 1 - i) * CYCLE, r)
    planner.memory = {"forecast": fc.remember("ns/w")}


def test_planner_plans_for_the_forecast_on_a_ramp_and_says_so() -> None:
    ramp = [100.0 + 1.0 * i * CYCLE for i in range(13)]  # 100 -> 280 req/s over 3 min
    p = planner_with(TrueLatency())
    _observed(p, ramp)
    ctx = context(rate=ramp[-1], cpu_sizes=(1.0,))
    plan = p.plan(ctx)
    remembered = LoadForecast()
    remembered.recall("ns/w", plan.memory["forecast"])
    horizon = remembered.horizon_s("ns/w", ctx.admin.cycle_s)
    assert f"{ramp[-1] + horizon:.0f} req/s planned (forecast +" in plan.reason
    assert "%/min" in plan.reason

    flat = planner_with(TrueLatency())
    _observed(flat, [ramp[-1]] * 13)
    flat_plan = flat.plan(context(rate=ramp[-1], cpu_sizes=(1.0,)))
    assert "forecast" not in flat_plan.reason
    assert f"{ramp[-1]:.0f} req/s planned)" in flat_plan.reason
    # Planning for more load never asks for less capacity.
    assert plan.target.replicas > flat_plan.target.replicas


def test_planner_does_not_lower_the_rate_on_falling_load() -> None:
    fall = [400.0 - 1.0 * i * CYCLE for i in range(13)]
    p = planner_with(TrueLatency())
    _observed(p, fall)
    plan = p.plan(context(rate=fall[-1]))
    assert "forecast" not in plan.reason
    assert f"{fall[-1]:.0f} req/s planned)" in plan.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40).map(float), st.floats(-1e4, 1e4)), max_size=32))
def test_theil_sen_with_the_kept_pairs_equals_fresh_pairs(points: list[tuple[float, float]]
                                                          ) -> None:
    """The pairs of points are kept per count (read-only): the same slope as with
    ``np.triu_indices`` computed on each call, asked twice."""
    ta = np.asarray([t for t, _ in points], dtype=float)
    ya = np.asarray([y for _, y in points], dtype=float)
    i, j = np.triu_indices(len(ta), k=1)
    dt = ta[j] - ta[i]
    ok = dt > 0
    want = float(np.median((ya[j] - ya[i])[ok] / dt[ok])) if ok.any() else 0.0
    for _ in range(2):
        got = theil_sen_slope([t for t, _ in points], [y for _, y in points])
        assert got == want or (np.isnan(got) and np.isnan(want))
