"""The ``squeeze`` weight policy: packing order, spill at the threshold, latency spill, no
flapping, idle and missing data, memory as data; and through the engine."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuators import dispatch as pw
from actuators.dispatch.squeeze import SqueezePolicy


@pytest.fixture
def registered() -> Iterator[None]:
    """``squeeze``/``manual`` by name: their entry points are only seen once the package is
    reinstalled, so register them in this process when they are not."""
    added = []
    for name, cls in (("squeeze", pw.SqueezePolicy), ("manual", pw.ManualPolicy)):
        if name not in pw.REGISTRY.available():
            pw.register_policy(name)(cls)
            added.append(name)
    yield
    for name in added:
        pw.REGISTRY.unregister(name)


def load(endpoint_id: str, capacity: float, rate: float, t: float = 0.0,
         **fields: Any) -> pw.EndpointMetrics:
    """An endpoint of service rate ``capacity`` serving ``rate`` req/s."""
    return pw.EndpointMetrics(endpoint_id, t, cpu_util=min(1.0, rate / capacity),
                              request_rate=rate, **fields)


def batch(rates: Mapping[str, float], capacity: float | Mapping[str, float] = 10.0,
          t: float = 0.0) -> dict[str, pw.EndpointMetrics]:
    caps = capacity if isinstance(capacity, Mapping) else dict.fromkeys(rates, capacity)
    return {e: load(e, caps[e], r, t) for e, r in rates.items()}


def values(suggestions: Mapping[str, pw.Suggestion]) -> dict[str, float]:
    return {e: round(s.value, 6) for e, s in suggestions.items()}


# -- packing ----------------------------------------------------------------------------------


def test_spill_fills_in_order_up_to_the_threshold_and_spills_the_remainder() -> None:
    policy = SqueezePolicy(utilisation_threshold=0.8, spread="spill")
    # four alike endpoints of 10 req/s, 20 req/s of demand spread evenly: 2.5 pods at 0.8
    out = policy.compute(batch(dict.fromkeys("abcd", 5.0)), 0.0)
    assert values(out) == {"a": 8.0, "b": 8.0, "c": 4.0, "d": 0.0}
    assert "full at 8.0 req/s (utilisation threshold 0.80)" in out["a"].reason
    assert "remainder 4.0 req/s spilled past full a, b" in out["c"].reason
    assert "not needed" in out["d"].reason and "threshold 0.80" in out["d"].reason
    assert policy.state()["hot"] == ["a", "b", "c"]


def test_most_capable_first_then_by_id() -> None:
    caps = {"a": 10.0, "b": 40.0, "c": 20.0, "d": 20.0}
    samples = batch(dict.fromkeys(caps, 10.0), caps)  # demand 40
    out = SqueezePolicy(spread="spill").compute(samples, 0.0)
    # b carries 32 (0.8 x 40), then c before d (same capacity: by id) takes the other 8
    assert values(out) == {"a": 0.0, "b": 32.0, "c": 8.0, "d": 0.0}
    # even: the same two, by capacity at the threshold (32 : 16)
    out = SqueezePolicy().compute(samples, 0.0)
    assert values(out) == {"a": 0.0, "b": pytest.approx(80 / 3), "c": pytest.approx(40 / 3),
                           "d": 0.0}


def test_endpoints_in_use_stay_first_when_another_looks_more_capable() -> None:
    policy = SqueezePolicy(smoothing=1.0)
    policy.compute(batch({"a": 6.0, "b": 1.0}, {"a": 10.0, "b": 10.0}), 0.0)
    assert policy.state()["hot"] == ["a"]
    # b now measures twice as capable; a keeps the load (no churn of the hot set)
    out = policy.compute(batch({"a": 7.0, "b": 1.0}, {"a": 10.0, "b": 20.0}), 1.0)
    assert values(out)["a"] == 8.0 and values(out)["b"] == 0.0
    assert policy.state()["hot"] == ["a"]


def test_even_spread_uses_the_same_pods_less_busy() -> None:
    spill = SqueezePolicy(spread="spill").compute(batch(dict.fromkeys("abcd", 5.0)), 0.0)
    even = SqueezePolicy().compute(batch(dict.fromkeys("abcd", 5.0)), 0.0)
    assert [e for e, s in spill.items() if s.value > 0] == ["a", "b", "c"]
    assert values(even) == {"a": pytest.approx(20 / 3), "b": pytest.approx(20 / 3),
                            "c": pytest.approx(20 / 3), "d": 0.0}
    assert even["c"].reason.startswith(
        "squeeze: #3 of 3 in use, 6.7 of 20.0 req/s at utilisation 0.67 (the fewest under the "
        "utilisation threshold 0.80: 2 would be at 1.00)")


def test_even_weights_hold_while_the_hot_set_does() -> None:
    policy = SqueezePolicy()
    for t, demand in enumerate([19.0, 21.0, 18.0, 22.0]):  # three endpoints in use throughout
        out = policy.compute(batch(dict.fromkeys("abcd", demand / 4)), float(t))
        shares = {e: s.value / demand for e, s in out.items()}
        assert shares == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3),
                          "c": pytest.approx(1 / 3), "d": 0.0}


def test_overload_shares_by_capacity() -> None:
    caps = {"a": 10.0, "b": 30.0}
    out = SqueezePolicy().compute(batch({"a": 10.0, "b": 30.0}, caps), 0.0)  # 40 > 0.8 x 40
    assert values(out) == {"a": 10.0, "b": 30.0}
    assert all("every endpoint full" in s.reason for s in out.values())


# -- latency threshold ------------------------------------------------------------------------


def test_an_endpoint_over_the_latency_threshold_counts_as_full() -> None:
    policy = SqueezePolicy(latency_threshold_ms=200, latency_step=0.1, hysteresis=0.1,
                           spread="spill")
    slow = {"a": load("a", 10.0, 6.0, latency_p99=0.35),  # under 0.8 x 10 but slow
            "b": load("b", 10.0, 0.5, latency_p99=0.05)}
    out = policy.compute(slow, 0.0)
    assert values(out)["a"] == pytest.approx(0.9 * 6.0)  # sheds 10 % of what it carries
    assert values(out)["b"] == pytest.approx(6.5 - 5.4)  # the rest spills past it
    assert "p99 350 ms over latency threshold 200 ms" in out["a"].reason
    assert "spilled past full a" in out["b"].reason
    # latency back under the threshold by the margin: the cap rises by 10 % of 8 per update
    fine = {"a": load("a", 10.0, 5.4, latency_p99=0.1), "b": load("b", 10.0, 1.1)}
    assert values(policy.compute(fine, 1.0))["a"] == pytest.approx(5.4 + 0.8)
    # within the margin (190 ms > 180 ms): the cap is held
    near = {"a": load("a", 10.0, 6.2, latency_p99=0.19), "b": load("b", 10.0, 0.3)}
    out = policy.compute(near, 2.0)
    assert values(out)["a"] == pytest.approx(6.2) and "cap held" in out["a"].reason


def test_the_latency_cap_is_dropped_once_it_reaches_the_utilisation_threshold() -> None:
    policy = SqueezePolicy(latency_threshold_ms=200, latency_step=0.5)
    policy.compute({"a": load("a", 10.0, 6.0, latency_p99=0.3), "b": load("b", 10.0, 1.0)}, 0.0)
    assert policy.state()["latency_caps"] == {"a": pytest.approx(3.0)}
    for t in (1.0, 2.0):
        policy.compute({"a": load("a", 10.0, 5.0, latency_p99=0.05),
                        "b": load("b", 10.0, 2.0)}, t)
    assert policy.state()["latency_caps"] == {}


# -- hysteresis -------------------------------------------------------------------------------


def _hot_sets(policy: SqueezePolicy, demands: list[float]) -> list[tuple[str, ...]]:
    seen = []
    for t, demand in enumerate(demands):
        # the demand spread as the last weights would; capacity 10 each, threshold 0.8
        policy.compute(batch(dict.fromkeys("abcd", demand / 4)), float(t))
        seen.append(tuple(policy.state()["hot"]))
    return seen


def test_demand_hovering_at_a_boundary_does_not_flap_the_hot_set() -> None:
    hovering = [16.5, 15.5] * 5  # around 16 = what two endpoints carry at 0.8
    assert set(_hot_sets(SqueezePolicy(hysteresis=0.1), hovering)) == {("a", "b", "c")}
    # the same demand without hysteresis flaps (so the assertion above could fail)
    assert set(_hot_sets(SqueezePolicy(hysteresis=0.0), hovering)) == {("a", "b", "c"),
                                                                       ("a", "b")}


def test_the_hot_set_shrinks_once_demand_is_clearly_lower() -> None:
    policy = SqueezePolicy(hysteresis=0.1)
    assert _hot_sets(policy, [20.0, 15.0, 14.0]) == [("a", "b", "c"), ("a", "b", "c"),
                                                     ("a", "b")]  # 14 <= 0.9 x 16
    policy.compute(batch(dict.fromkeys("abcd", 15.0 / 4)), 3.0)
    assert policy.state()["hot"] == ["a", "b"]  # grows only when demand needs it


def test_min_pods_keeps_endpoints_in_use() -> None:
    out = SqueezePolicy(min_pods=2, spread="spill").compute(batch(dict.fromkeys("abc", 1.0)), 0)
    assert [e for e, s in out.items() if " of 2 in use" in s.reason] == ["a", "b"]
    assert values(out) == {"a": 3.0, "b": 0.0, "c": 0.0}
    assert "kept in use (minPods 2)" in out["b"].reason


# -- idle, zero traffic, missing data ---------------------------------------------------------


def test_zero_traffic_keeps_the_first_endpoint_in_use() -> None:
    policy = SqueezePolicy()
    policy.compute(batch(dict.fromkeys("abc", 4.0)), 0.0)  # learns capacities, 2 in use
    out = policy.compute(batch(dict.fromkeys("abc", 0.0)), 1.0)
    assert values(out) == {"a": 8.0, "b": 0.0, "c": 0.0}
    assert "no demand" in out["a"].reason


def test_no_capacity_known_gives_equal_weights_with_the_reason() -> None:
    idle = {e: pw.EndpointMetrics(e, 0.0, cpu_util=0.0, request_rate=0.0) for e in "ab"}
    out = SqueezePolicy().compute(idle, 0.0)
    assert values(out) == {"a": 1.0, "b": 1.0}
    assert "no capacity known (utilisation 0.00 too low to measure)" in out["a"].reason


def test_capacity_hint_or_the_median_stand_in_for_a_missing_measurement() -> None:
    samples = {"a": load("a", 10.0, 5.0), "b": load("b", 20.0, 10.0),
               "c": pw.EndpointMetrics("c", 0.0, request_rate=0.0),  # reports no utilisation
               "d": pw.EndpointMetrics("d", 0.0, request_rate=0.0, capacity_hint=50.0)}
    out = SqueezePolicy().compute(samples, 0.0)
    # the median of 10, 20 and the hint 50
    assert "capacity 20.0 req/s (no utilisation reported: assumed the others' median)" in \
        out["c"].reason
    assert values(out)["d"] == 15.0 and "capacity hint" in out["d"].reason  # 40 at 0.8: first


def test_a_sample_without_request_rate_is_refused_and_gets_the_mean_weight() -> None:
    policy = SqueezePolicy()
    assert policy.missing(pw.EndpointMetrics("a", 0.0, cpu_util=0.5)) == "missing request_rate"
    engine = pw.WeightEngine(policy, pw.EngineConfig(blackout_s=0.0))
    update = engine.update([pw.EndpointMetrics("a", 0.0, cpu_util=0.5), load("b", 10.0, 4.0)],
                           now=0.0)
    assert update.decisions["a"].status is pw.Status.NO_DATA
    assert update.weights["a"] == pw.EngineConfig().reference_weight


# -- memory -----------------------------------------------------------------------------------


def test_restored_from_its_state_it_makes_the_same_next_update() -> None:
    policy = SqueezePolicy(latency_threshold_ms=200)
    steps = [{"a": load("a", 10.0, 6.0, latency_p99=0.3), "b": load("b", 12.0, 3.0),
              "c": load("c", 8.0, 1.0)},
             {"a": load("a", 10.0, 5.0, latency_p99=0.1), "b": load("b", 12.0, 4.0),
              "c": load("c", 8.0, 0.5)}]
    for t, samples in enumerate(steps):
        policy.compute(samples, float(t))
    copy = SqueezePolicy(latency_threshold_ms=200)
    copy.restore(json.loads(json.dumps(policy.state())))
    following = {"a": load("a", 10.0, 6.5, latency_p99=0.12), "b": load("b", 12.0, 2.0),
                 "c": load("c", 8.0, 0.2)}
    assert copy.compute(following, 9.0) == policy.compute(following, 9.0)
    assert copy.state() == policy.state()
    # without the memory the next update differs (so the assertion above could fail)
    assert SqueezePolicy(latency_threshold_ms=200).compute(following, 9.0) != \
        copy.compute(following, 10.0)


def test_an_engine_restored_from_its_state_makes_the_same_updates() -> None:
    config = pw.EngineConfig(blackout_s=1.0)
    engine = pw.WeightEngine(SqueezePolicy(), config)
    for t in range(4):
        engine.update(batch(dict.fromkeys("abcd", 3.0 + t), t=float(t)).values(), now=float(t))
    twin = pw.WeightEngine(SqueezePolicy(), config)
    twin.restore(json.loads(json.dumps(engine.state())))
    for t in range(4, 8):
        samples = list(batch({"a": 7.0, "b": 6.0, "c": 2.0, "d": 0.5}, t=float(t)).values())
        assert twin.update(samples, now=float(t)) == engine.update(samples, now=float(t))


@pytest.mark.parametrize("state", [{"hot": "a"}, {"hot": [1]}, {"rates": {"a": "x"}},
                                   {"latency_caps": []}])
def test_a_malformed_state_is_refused(state: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SqueezePolicy().restore(state)


def test_forget_drops_the_endpoint_everywhere() -> None:
    policy = SqueezePolicy(latency_threshold_ms=100)
    policy.compute({"a": load("a", 10.0, 6.0, latency_p99=0.3), "b": load("b", 10.0, 2.0)}, 0)
    policy.forget("a")
    state = policy.state()
    assert "a" not in state["rates"] and "a" not in state["hot"] and not state["latency_caps"]


# -- through the engine -----------------------------------------------------------------------


def test_through_the_engine_idle_endpoints_keep_the_smallest_positive_weight() -> None:
    engine = pw.WeightEngine(SqueezePolicy(), pw.EngineConfig(blackout_s=0.0))
    rates = dict.fromkeys([f"p{i}" for i in range(6)], 18.0)  # 108 req/s on 6 x 40
    for t in range(3):
        update = engine.update(batch(rates, 40.0, float(t)).values(), now=float(t))
        total = sum(update.weights.values())
        rates = {e: 108.0 * w / total for e, w in update.weights.items()}
    w = update.weights
    assert w["p0"] == w["p1"] == w["p2"] == w["p3"] > w["p4"] == w["p5"] >= 1
    assert rates["p0"] <= 0.8 * 40 and rates["p4"] < 0.02 * 108
    assert "raised to min share" in update.decisions["p5"].reason


# -- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "field"), [
    ({"utilisationThreshold": 1.5}, "utilisationThreshold"),
    ({"latencyThresholdMs": 0}, "latencyThresholdMs"),
    ({"hysteresis": 1.0}, "hysteresis"),
    ({"spread": "pack"}, "spread"),
    ({"minPods": 0}, "minPods"),
    ({"min_pods": True}, "minPods"),
    ({"latencyStep": 0}, "latencyStep"),
])
def test_bad_parameters_name_the_field(registered: None, params: dict[str, Any],
                                       field: str) -> None:
    with pytest.raises(ValueError, match=f"squeeze: {field} must be"):
        pw.create_policy("squeeze", **params)


def test_created_by_name_with_camel_case_parameters(registered: None) -> None:
    policy = pw.create_policy("squeeze", utilisationThreshold=0.6, latencyThresholdMs=250,
                              spread="even", minPods=2)
    assert isinstance(policy, SqueezePolicy) and policy.name == "squeeze"
    assert (policy.utilisation_threshold, policy.latency_threshold_s, policy.spread,
            policy.min_pods) == (0.6, 0.25, "even", 2)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['threshold'\]"):
        pw.create_policy("squeeze", threshold=0.6)
    with pytest.raises(ValueError, match="given twice"):
        pw.create_policy("squeeze", minPods=2, min_pods=3)


# -- properties: the engine's guards and the memory, for any sequence -------------------------

KINDS = ("ok", "ok", "slow", "not-ready", "nan", "no-rate")
Report = tuple[str, str, float, float]


def _report(endpoint_id: str, kind: str, util: float, rate: float,
            t: float) -> pw.EndpointMetrics:
    if kind == "not-ready":
        return pw.EndpointMetrics(endpoint_id, t, ready=False)
    if kind == "nan":
        return pw.EndpointMetrics(endpoint_id, t, cpu_util=float("nan"), request_rate=rate)
    if kind == "no-rate":
        return pw.EndpointMetrics(endpoint_id, t, cpu_util=util)
    latency = 0.5 if kind == "slow" else 0.05
    return pw.EndpointMetrics(endpoint_id, t, cpu_util=util, request_rate=rate,
                              latency_p99=latency)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.5, 1.0, 5.0, 40.0]), st.lists(
        st.tuples(st.sampled_from("abcd"), st.sampled_from(KINDS), st.floats(0.0, 1.0),
                  st.floats(0.0, 200.0)), max_size=4, unique_by=lambda r: r[0])),
             min_size=1, max_size=20),
    st.sampled_from([0.0, 0.01, 0.1]), st.sampled_from([0.1, 0.5, 2.0]),
    st.sampled_from(["even", "spill"]),
)
def test_guards_and_memory_hold_for_any_sequence(
    steps: list[tuple[float, list[Report]]], min_share: float, max_change: float, spread: str
) -> None:
    """A ready endpoint never gets 0, a not-ready one always does, changes are rate limited,
    and an engine rebuilt from its JSON state before every update (as the weights actuator
    does) makes the same updates."""
    config = pw.EngineConfig(blackout_s=1.0, expiry_s=30.0, min_share=min_share,
                             max_relative_change=max_change)

    def policy() -> SqueezePolicy:
        return SqueezePolicy(latency_threshold_ms=200, spread=spread)

    engine = pw.WeightEngine(policy(), config)
    state: dict[str, Any] = {}
    ready: dict[str, bool] = {}
    now = 0.0
    for dt, reports in steps:
        now += dt
        samples = [_report(e, kind, u, r, now) for e, kind, u, r in reports]
        ready.update({e: kind != "not-ready" for e, kind, _, _ in reports})
        restored = pw.WeightEngine(policy(), config)
        restored.restore(state)
        before = dict(engine.weights)
        update = engine.update(samples, now=now)
        assert restored.update(samples, now=now) == update
        state = json.loads(json.dumps(restored.state(), allow_nan=False))
        for e, weight in update.weights.items():
            assert weight >= 1 if ready[e] else weight == 0, update.decisions[e]
            if ready[e] and before.get(e):
                assert abs(weight - before[e]) <= max(max_change * before[e], 1.0)
