"""Weight engine: policies (lvs, orca, slo), guards, and property tests of the guards."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuators import dispatch as pw
from actuators.dispatch import slo as slo_mod

REF = pw.EngineConfig().reference_weight


def sample(endpoint_id: str, t: float, **fields: float | bool | None) -> pw.EndpointMetrics:
    base: dict[str, object] = {
        "ready": True,
        "cpu_util": 0.5,
        "in_flight": 2.0,
        "request_rate": 10.0,
        "error_rate": 0.0,
        "latency_p50": 0.02,
        "latency_p95": 0.05,
        "latency_p99": 0.08,
    }
    base.update(fields)
    return pw.EndpointMetrics(endpoint_id, t, **base)  # type: ignore[arg-type]


def loaded(endpoint_id: str, t: float, capacity: float, rate: float) -> pw.EndpointMetrics:
    """An endpoint with service rate ``capacity`` serving ``rate`` req/s."""
    return sample(endpoint_id, t, request_rate=rate, cpu_util=min(1.0, rate / capacity))


def fast_engine(policy: pw.WeightPolicy | str = "slo", **cfg: Any) -> pw.WeightEngine:
    config = dataclasses.replace(
        pw.EngineConfig(blackout_s=0.0, max_relative_change=100.0, change_threshold=0.0), **cfg
    )
    return pw.WeightEngine(policy, config)


# -- registry and metrics ------------------------------------------------------------------


def test_builtin_policies_are_registered() -> None:
    assert {"lvs", "orca", "slo"} <= set(pw.REGISTRY.available())
    assert isinstance(pw.create_policy("orca"), pw.OrcaPolicy)
    with pytest.raises(KeyError, match="unknown weight policy"):
        pw.create_policy("nope")


def test_register_custom_policy_and_refuse_duplicates() -> None:
    @pw.register_policy("test-constant")
    class Constant(pw.WeightPolicy):
        def compute(
            self, samples: Mapping[str, pw.EndpointMetrics], now: float
        ) -> dict[str, pw.Suggestion]:
            return {k: pw.Suggestion(1.0, "constant") for k in samples}

    try:
        engine = fast_engine("test-constant")
        update = engine.update([sample("a", 0.0), sample("b", 0.0)], now=0.0)
        assert update.weights == {"a": REF, "b": REF}
        with pytest.raises(ValueError, match="already registered"):
            pw.register_policy("test-constant")(pw.OrcaPolicy)
    finally:
        pw.REGISTRY.unregister("test-constant")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"cpu_util": math.nan}, "cpu_util=nan"),
        ({"request_rate": -1.0}, "negative"),
        ({"latency_p99": math.inf}, "latency_p99=inf"),
        ({"cpu_util": 1.5}, "above 1"),
    ],
)
def test_problems_detects_malformed_values(fields: dict[str, float], fragment: str) -> None:
    assert any(fragment in p for p in pw.problems(sample("a", 0.0, **fields)))


def test_problems_accepts_well_formed_and_jitter_above_one() -> None:
    assert pw.problems(sample("a", 0.0)) == []
    assert pw.problems(sample("a", 0.0, cpu_util=1.01)) == []


# -- policies --------------------------------------------------------------------------------


def test_orca_formula_and_no_data_gets_mean() -> None:
    policy = pw.OrcaPolicy(error_utilization_penalty=2.0)
    samples = {
        "a": sample("a", 0, request_rate=100.0, cpu_util=0.5, error_rate=0.0),
        "b": sample("b", 0, request_rate=100.0, cpu_util=0.5, error_rate=10.0),
        "c": sample("c", 0, request_rate=0.0, cpu_util=0.0),
    }
    out = policy.compute(samples, 0.0)
    assert out["a"].value == pytest.approx(200.0)
    assert out["b"].value == pytest.approx(100.0 / (0.5 + 0.1 * 2.0))
    assert "c" not in out
    update = fast_engine(policy).update(samples.values(), now=0.0)
    assert update.decisions["c"].status is pw.Status.NO_DATA
    assert update.weights["c"] == REF
    assert update.weights["a"] > update.weights["b"]


def test_orca_requires_utilisation() -> None:
    engine = fast_engine("orca")
    update = engine.update([sample("a", 0.0, cpu_util=None)], now=0.0)
    assert update.decisions["a"].status is pw.Status.NO_DATA
    assert "utilisation" in update.decisions["a"].reason


def test_lvs_moves_weight_away_from_the_loaded_endpoint() -> None:
    policy = pw.LvsPolicy(gain=1.0, damping=1.0)
    engine = fast_engine(policy)
    for step in range(5):
        update = engine.update(
            [
                sample("hot", step, cpu_util=0.99, in_flight=20.0, latency_p95=0.5),
                sample("cold", step, cpu_util=0.10, in_flight=1.0, latency_p95=0.01),
            ],
            now=step,
        )
    assert update.weights["cold"] > 2 * update.weights["hot"]
    assert "lvs: aggregate load" in update.decisions["hot"].reason


def test_lvs_step_is_cube_root_of_distance_to_target() -> None:
    policy = pw.LvsPolicy(coefficients={"utilisation": 1.0}, gain=0.5, damping=1.0)
    out = policy.compute({"a": sample("a", 0, cpu_util=0.95 - 0.125)}, 0.0)
    assert out["a"].value == pytest.approx(1.0 + 0.5 * 0.5)
    out = policy.compute({"a": sample("a", 1, cpu_util=0.95 + 0.008)}, 1.0)
    assert out["a"].value == pytest.approx(1.25 - 0.5 * 0.2)


def test_equal_delay_shares_equalise_and_follow_spare_capacity() -> None:
    shares, delay = slo_mod.equal_delay_shares({"a": 10.0, "b": 20.0, "c": 40.0}, 49.0)
    assert sum(shares.values()) == pytest.approx(1.0)
    for k, mu in {"a": 10.0, "b": 20.0, "c": 40.0}.items():
        assert 1.0 / (mu - shares[k] * 49.0) == pytest.approx(delay)
    assert shares["a"] < shares["b"] < shares["c"]
    # low load: the slow endpoint gets nothing (the engine's minimum share applies later)
    low, _ = slo_mod.equal_delay_shares({"a": 10.0, "b": 20.0, "c": 40.0}, 5.0)
    assert low["a"] == 0.0 and low["c"] > low["b"]
    # overload: proportional to capacity
    over, delay = slo_mod.equal_delay_shares({"a": 10.0, "b": 30.0}, 50.0)
    assert over == {"a": 0.25, "b": 0.75} and math.isinf(delay)


def test_slo_policy_estimates_capacity_from_utilisation() -> None:
    engine = fast_engine(pw.SloPolicy(smoothing=1.0))
    update = engine.update(
        [loaded("s1", 0, 35.0, 20.0), loaded("s2", 0, 70.0, 40.0), loaded("s4", 0, 140.0, 80.0)],
        now=0.0,
    )
    w = update.weights
    assert w["s1"] < w["s2"] < w["s4"]
    assert "capacity 35.0 req/s" in update.decisions["s1"].reason


def test_slo_policy_uses_littles_law_and_capacity_hint_without_utilisation() -> None:
    policy = pw.SloPolicy(smoothing=1.0)
    little = sample("a", 0, cpu_util=None, latency_p50=None, request_rate=10.0, in_flight=1.0)
    estimate = policy.estimate_service_rate(little)
    assert estimate is not None and estimate[0] == pytest.approx(20.0)
    assert "in flight" in estimate[2]
    hint = sample("b", 0, cpu_util=None, latency_p50=None, in_flight=0.0, request_rate=0.0)
    assert policy.estimate_service_rate(dataclasses.replace(hint, capacity_hint=42.0)) == (
        42.0,
        1.0,
        "capacity hint",
    )
    assert policy.estimate_service_rate(hint) is None


def test_slo_policy_keeps_estimate_when_utilisation_is_too_low_to_measure() -> None:
    """An endpoint starved of traffic must not look slow (that would starve it further)."""
    policy = pw.SloPolicy(smoothing=1.0)
    policy.compute({"a": loaded("a", 0, 40.0, 20.0), "b": loaded("b", 0, 80.0, 40.0)}, 0.0)
    # "a" now gets almost nothing: 1 req/s at 2.5 % utilisation, slow-looking latency
    starved = sample("a", 1, request_rate=1.0, cpu_util=0.025, latency_p50=0.1, in_flight=1.0)
    assert policy.estimate_service_rate(starved) is None
    out = policy.compute({"a": starved, "b": loaded("b", 1, 80.0, 40.0)}, 1.0)
    assert "capacity 40.0 req/s (previous estimate" in out["a"].reason


def test_slo_policy_low_utilisation_samples_move_the_estimate_less() -> None:
    policy = pw.SloPolicy(smoothing=0.5, confident_utilisation=0.5)
    policy.compute({"a": loaded("a", 0, 100.0, 50.0)}, 0.0)  # estimate 100
    policy.compute({"a": sample("a", 1, request_rate=10.0, cpu_util=0.05)}, 1.0)  # raw 200
    # full confidence would move halfway (150); at utilisation 0.05 it moves 0.5 * 0.1
    assert (
        "capacity 105.0 req/s"
        in policy.compute({"a": sample("a", 2, request_rate=0.0, cpu_util=0.0)}, 2.0)["a"].reason
    )


def test_slo_policy_plans_for_a_load_floor() -> None:
    idle = pw.SloPolicy(smoothing=1.0, planning_floor=0.7)
    greedy = pw.SloPolicy(smoothing=1.0, planning_floor=0.0)
    samples = {"slow": loaded("slow", 0, 40.0, 2.0), "fast": loaded("fast", 0, 160.0, 8.0)}
    floored = idle.compute(samples, 0.0)
    raw = greedy.compute(samples, 0.0)
    assert raw["slow"].value == 0.0  # water filling at 10 req/s: all to the fast endpoint
    assert floored["slow"].value > 0.0
    assert "planned for 140.0" in floored["slow"].reason


def test_slo_policy_with_predictor_equalises_predicted_latency() -> None:
    total = 60.0
    capacity = {"a": 20.0, "b": 30.0, "c": 50.0}

    def predictor(endpoint: pw.EndpointMetrics, share: float) -> float:
        spare = capacity[endpoint.endpoint_id] - share * total
        return 1.0 / spare if spare > 0 else math.inf

    policy = pw.SloPolicy(slo_target=0.1, predictor=predictor)
    samples = {k: sample(k, 0.0, request_rate=None) for k in capacity}
    out = policy.compute(samples, 0.0)
    shares, delay = slo_mod.equal_delay_shares(capacity, total)
    for k in capacity:
        assert out[k].value == pytest.approx(shares[k], abs=1e-4)
    assert delay == pytest.approx(3 / 40)  # spare capacity (100 - 60) / 3 everywhere
    assert "equalised level 75 ms" in out["a"].reason
    assert "SLO 100 ms met" in out["a"].reason
    tight = pw.SloPolicy(slo_target=0.05, predictor=predictor).compute(samples, 0.0)
    assert "at risk" in tight["a"].reason


def test_slo_policy_penalises_errors() -> None:
    policy = pw.SloPolicy(smoothing=1.0)
    out = policy.compute(
        {
            "good": loaded("good", 0, 50.0, 25.0),
            "bad": dataclasses.replace(loaded("bad", 0, 50.0, 25.0), error_rate=12.5),
        },
        0.0,
    )
    assert out["good"].value > out["bad"].value


# -- engine guards ---------------------------------------------------------------------------


def test_not_ready_gets_zero_and_ready_never_zero() -> None:
    engine = fast_engine("slo", min_share=0.05)
    update = engine.update(
        [
            loaded("tiny", 0, 1.0, 0.9),
            loaded("huge", 0, 1000.0, 100.0),
            sample("down", 0, ready=False),
        ],
        now=0.0,
    )
    assert update.weights["down"] == 0
    assert update.weights["tiny"] >= 1
    assert update.weights["tiny"] / sum(update.weights.values()) >= 0.05 - 0.01
    assert "min share" in update.decisions["tiny"].reason


def test_blackout_gives_mean_weight_then_computed() -> None:
    engine = pw.WeightEngine(
        pw.SloPolicy(smoothing=1.0),
        pw.EngineConfig(blackout_s=10.0, max_relative_change=100.0, change_threshold=0.0),
    )
    first = engine.update([loaded("a", 0, 10.0, 5.0), loaded("b", 0, 100.0, 5.0)], now=0.0)
    assert first.weights == {"a": REF, "b": REF}
    assert first.decisions["a"].status is pw.Status.BLACKOUT
    assert "blackout" in first.decisions["a"].reason
    mid = engine.update([loaded("a", 9, 10.0, 5.0), loaded("b", 9, 100.0, 5.0)], now=9.0)
    assert mid.weights == {"a": REF, "b": REF}
    after = engine.update([loaded("a", 10, 10.0, 5.0), loaded("b", 10, 100.0, 5.0)], now=10.0)
    assert after.decisions["a"].status is pw.Status.COMPUTED
    assert after.weights["b"] > after.weights["a"]
    # a newcomer later is in blackout while the others keep computed weights
    late = engine.update(
        [loaded("a", 11, 10.0, 5.0), loaded("b", 11, 100.0, 5.0), loaded("c", 11, 50.0, 5.0)],
        now=11.0,
    )
    assert late.decisions["c"].status is pw.Status.BLACKOUT
    assert late.weights["c"] == REF


def test_expiry_falls_back_to_mean_and_restarts_blackout() -> None:
    cfg = pw.EngineConfig(
        blackout_s=5.0, expiry_s=180.0, max_relative_change=100.0, change_threshold=0.0
    )
    engine = pw.WeightEngine(pw.SloPolicy(smoothing=1.0), cfg)
    engine.update([loaded("a", 0, 10.0, 5.0), loaded("b", 0, 100.0, 5.0)], now=0.0)
    fresh = engine.update([loaded("a", 6, 10.0, 5.0), loaded("b", 6, 100.0, 5.0)], now=6.0)
    assert fresh.weights["a"] != REF
    # "a" stops reporting; "b" keeps reporting
    still = engine.update([loaded("b", 180, 100.0, 5.0)], now=186.0)
    assert still.decisions["a"].status is not pw.Status.EXPIRED
    stale = engine.update([loaded("b", 187, 100.0, 5.0)], now=187.0)
    assert stale.decisions["a"].status is pw.Status.EXPIRED
    assert stale.weights["a"] == REF
    assert "stale" in stale.decisions["a"].reason
    back = engine.update([loaded("a", 188, 10.0, 5.0), loaded("b", 188, 100.0, 5.0)], now=188.0)
    assert back.decisions["a"].status is pw.Status.BLACKOUT


def test_malformed_keeps_last_weight_until_expiry() -> None:
    engine = fast_engine(pw.SloPolicy(smoothing=1.0), expiry_s=30.0)
    good = engine.update([loaded("a", 0, 10.0, 5.0), loaded("b", 0, 100.0, 5.0)], now=0.0)
    kept = good.weights["a"]
    assert kept != REF
    for t in (10.0, 20.0, 30.0):
        bad = engine.update([sample("a", t, cpu_util=math.nan), loaded("b", t, 100.0, 50.0)], now=t)
        assert bad.weights["a"] == kept
        assert bad.decisions["a"].status is pw.Status.HELD
        assert "cpu_util=nan" in bad.decisions["a"].reason
    expired = engine.update(
        [sample("a", 31, request_rate=None), loaded("b", 31, 100.0, 50.0)], now=31.0
    )
    assert expired.decisions["a"].status is pw.Status.EXPIRED
    assert expired.weights["a"] == REF


def test_max_change_and_threshold() -> None:
    cfg = pw.EngineConfig(blackout_s=0.0, max_relative_change=0.25, change_threshold=0.1)
    engine = pw.WeightEngine(pw.SloPolicy(smoothing=1.0), cfg)
    engine.update([loaded("a", 0, 50.0, 10.0), loaded("b", 0, 50.0, 10.0)], now=0.0)
    assert engine.weights == {"a": REF, "b": REF}
    update = engine.update([loaded("a", 1, 10.0, 5.0), loaded("b", 1, 200.0, 5.0)], now=1.0)
    assert update.weights == {"a": REF - REF // 4, "b": REF + REF // 4}
    assert "limited by max change 25%" in update.decisions["a"].reason
    # a change below the threshold is not written
    engine2 = pw.WeightEngine("orca", cfg)
    engine2.update([loaded("a", 0, 50.0, 10.0), loaded("b", 0, 50.0, 10.0)], now=0.0)
    small = engine2.update([loaded("a", 1, 48.0, 10.0), loaded("b", 1, 52.0, 10.0)], now=1.0)
    assert small.weights == {"a": REF, "b": REF}
    assert not small.changes
    assert "below change threshold 10%" in small.decisions["a"].reason


def test_changes_carry_reasons_and_weights_fit_haproxy_range() -> None:
    engine = fast_engine("slo")
    update = engine.update(
        [loaded(f"e{i}", 0, 2.0**i, 2.0**i / 2) for i in range(8)]
        + [sample("down", 0, ready=False)],
        now=0.0,
    )
    assert update.changes
    for decision in update.changes:
        assert decision.reason and "\n" not in decision.reason
    assert all(0 <= w <= 256 for w in update.weights.values())
    assert max(update.weights.values()) == 256
    assert "clipped to 256" in update.decisions["e7"].reason


def test_failing_policy_keeps_last_weights(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(pw.OrcaPolicy):
        broken = False

        def compute(
            self, samples: Mapping[str, pw.EndpointMetrics], now: float
        ) -> dict[str, pw.Suggestion]:
            if self.broken:
                raise RuntimeError("model file missing")
            return super().compute(samples, now)

    policy = Flaky()
    engine = fast_engine(policy)
    before = engine.update([loaded("a", 0, 10.0, 5.0), loaded("b", 0, 40.0, 5.0)], now=0.0)
    policy.broken = True
    after = engine.update([loaded("a", 1, 10.0, 5.0), loaded("b", 1, 40.0, 5.0)], now=1.0)
    assert after.weights == before.weights
    assert after.decisions["a"].status is pw.Status.HELD
    assert "model file missing" in after.decisions["a"].reason
    assert "weight policy orca failed" in caplog.text


def test_forget_drops_endpoint() -> None:
    engine = fast_engine("slo")
    engine.update([loaded("a", 0, 10.0, 5.0), loaded("b", 0, 20.0, 5.0)], now=0.0)
    engine.forget("a")
    assert set(engine.update(now=1.0).weights) == {"b"}


def test_out_of_order_sample_is_ignored() -> None:
    engine = fast_engine(pw.SloPolicy(smoothing=1.0))
    engine.update([loaded("a", 10, 10.0, 5.0), loaded("b", 10, 100.0, 5.0)], now=10.0)
    before = engine.weights
    after = engine.update([loaded("a", 5, 100.0, 5.0), loaded("b", 5, 10.0, 5.0)], now=11.0)
    assert after.weights == before


# -- properties ------------------------------------------------------------------------------

KINDS = ("ok", "ok", "ok", "nan", "negative", "missing", "not-ready")
Report = tuple[str, str, float, float]  # endpoint, kind, utilisation, request rate
Scenario = tuple[str, pw.EngineConfig, list[tuple[float, list[Report]]]]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    policy = draw(st.sampled_from(["slo", "orca", "lvs"]))
    config = pw.EngineConfig(
        blackout_s=draw(st.sampled_from([0.0, 3.0, 10.0])),
        expiry_s=draw(st.sampled_from([5.0, 20.0, 180.0])),
        min_share=draw(st.sampled_from([0.0, 0.01, 0.1])),
        max_relative_change=draw(st.sampled_from([0.1, 0.5, 2.0])),
        change_threshold=draw(st.sampled_from([0.0, 0.05, 0.3])),
    )
    steps = []
    for _ in range(draw(st.integers(1, 25))):
        dt = draw(st.sampled_from([0.5, 1.0, 4.0, 30.0]))
        reports = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["a", "b", "c", "d"]),
                    st.sampled_from(KINDS),
                    st.floats(0.0, 1.0),
                    st.floats(0.0, 500.0),
                ),
                max_size=4,
                unique_by=lambda r: r[0],
            )
        )
        steps.append((dt, reports))
    return policy, config, steps


def _make(endpoint_id: str, kind: str, util: float, rate: float, t: float) -> pw.EndpointMetrics:
    if kind == "not-ready":
        return sample(endpoint_id, t, ready=False)
    if kind == "nan":
        return sample(endpoint_id, t, cpu_util=math.nan, request_rate=rate)
    if kind == "negative":
        return sample(endpoint_id, t, cpu_util=util, request_rate=-rate - 1.0)
    if kind == "missing":
        return sample(endpoint_id, t, cpu_util=None, request_rate=None)
    return sample(endpoint_id, t, cpu_util=util, request_rate=rate, in_flight=rate / 10)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_guards_hold_for_any_sequence(
    scenario: Scenario,
) -> None:
    policy, cfg, steps = scenario
    engine = pw.WeightEngine(policy, cfg)
    now = 0.0
    ready: dict[str, bool] = {}
    last_valid: dict[str, float] = {}
    valid_since: dict[str, float | None] = {}
    previous: dict[str, int] = {}
    malformed_now: set[str] = set()  # endpoints whose latest sample was malformed
    for dt, reports in steps:
        now += dt
        for endpoint_id, kind, _util, _rate in reports:
            ready[endpoint_id] = kind != "not-ready"
            if kind == "not-ready":
                valid_since[endpoint_id] = None
            elif kind == "ok" or (kind == "missing" and policy == "lvs"):
                # (lvs needs neither request rate nor utilisation)
                malformed_now.discard(endpoint_id)
                last_valid[endpoint_id] = now
                if valid_since.get(endpoint_id) is None:
                    valid_since[endpoint_id] = now
            else:
                malformed_now.add(endpoint_id)
        for endpoint_id, t in last_valid.items():  # the engine restarts blackout after expiry
            if ready.get(endpoint_id) and now - t > cfg.expiry_s:
                valid_since[endpoint_id] = None
        update = engine.update([_make(e, kind, u, r, now) for e, kind, u, r in reports], now=now)
        for endpoint_id, weight in update.weights.items():
            decision = update.decisions[endpoint_id]
            prev = previous.get(endpoint_id)
            assert 0 <= weight <= cfg.max_weight
            if ready[endpoint_id]:
                assert weight >= 1, decision  # a ready endpoint is never driven to 0
            else:
                assert weight == 0
            if ready[endpoint_id] and prev:  # change is rate limited
                assert abs(weight - prev) <= max(cfg.max_relative_change * prev, 1.0) + 1e-9
            fresh = endpoint_id in last_valid and now - last_valid[endpoint_id] <= cfg.expiry_s
            if ready[endpoint_id] and endpoint_id in malformed_now and prev and fresh:
                assert weight == prev, decision  # malformed -> keep last weight
                assert decision.status is pw.Status.HELD
            if ready[endpoint_id] and endpoint_id in last_valid and not fresh:
                assert decision.status is pw.Status.EXPIRED, decision
                assert decision.target == pytest.approx(cfg.reference_weight)
            since = valid_since.get(endpoint_id)
            if (
                ready[endpoint_id]
                and fresh
                and endpoint_id not in malformed_now
                and since is not None
                and now - since < cfg.blackout_s
            ):
                assert decision.status is pw.Status.BLACKOUT, decision
                if not prev:
                    assert weight == cfg.reference_weight
            if decision.changed:
                assert decision.reason
        previous = dict(update.weights)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.tuples(st.floats(0.1, 1000.0), st.floats(0.0, 1.0)),
        min_size=1,
    ),
    st.floats(0.0, 0.3),
)
def test_no_ready_endpoint_ever_gets_zero(
    endpoints: dict[str, tuple[float, float]], min_share: float
) -> None:
    engine = fast_engine("slo", min_share=min_share)
    samples = [loaded(k, 0, cap, cap * load) for k, (cap, load) in endpoints.items()]
    update = engine.update(samples, now=0.0)
    assert all(w >= 1 for w in update.weights.values())
    total = sum(update.weights.values())
    share = min(min_share, 1.0 / len(endpoints))
    for w in update.weights.values():  # min share holds up to integer rounding and the clamps
        assert w >= min(share * total - 1.0, share * 256 * len(endpoints)) or w == 256


# -- state: what an engine remembers, as data --------------------------------------------------


def _json(state: Mapping[str, Any]) -> dict[str, Any]:
    loaded_state: dict[str, Any] = json.loads(json.dumps(state, allow_nan=False))
    return loaded_state


@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_an_engine_restored_from_its_state_makes_the_same_updates(scenario: Scenario) -> None:
    """Rebuilding the engine from its (JSON) state before every update, as the weights actuator
    does every cycle, changes nothing: same weights, decisions and reasons."""
    policy, cfg, steps = scenario
    engine = pw.WeightEngine(policy, cfg)
    state: dict[str, Any] = {}
    now = 0.0
    for dt, reports in steps:
        now += dt
        samples = [_make(e, kind, u, r, now) for e, kind, u, r in reports]
        restored = pw.WeightEngine(policy, cfg)
        restored.restore(state)
        assert restored.weights == engine.weights
        expected = engine.update(samples, now=now)
        assert restored.update(samples, now=now) == expected
        state = _json(restored.state())
        assert state == _json(engine.state())


@pytest.mark.parametrize("policy", ["slo", "lvs"])
def test_state_round_trip_keeps_the_policy_memory(policy: str) -> None:
    engine = fast_engine(policy)
    for t in range(4):  # a's capacity changes: smoothed estimates and feedback differ from raw
        engine.update([loaded("a", t, 10.0 + 5 * t, 5.0 + t), loaded("b", t, 40.0, 5.0)],
                      now=float(t))
    state = _json(engine.state())
    assert state["policy"] == policy and state["policy_state"]  # rates / feedback weights
    assert set(state["endpoints"]) == {"a", "b"}
    a = state["endpoints"]["a"]
    assert a["ready"] is True and a["weight"] == engine.weights["a"] and a["since"] == 0.0
    assert a["sample"] == {"timestamp": 3.0, **{k: v for k, v in dataclasses.asdict(
        loaded("a", 3, 25.0, 8.0)).items() if k not in ("endpoint_id", "timestamp", "ready")
        and v is not None}}
    twin = fast_engine(policy)
    twin.restore(state)
    nxt = [loaded("a", 4, 40.0, 9.0), loaded("b", 4, 40.0, 2.0)]
    assert twin.update(nxt, now=4.0) == engine.update(nxt, now=4.0)


def test_policy_state_is_used_only_by_a_policy_of_the_same_name() -> None:
    engine = fast_engine("slo")
    engine.update([loaded("a", 0, 10.0, 5.0)], now=0.0)
    other = fast_engine("lvs")
    other.restore(_json(engine.state()))
    assert other.weights == engine.weights
    assert other.state()["policy_state"] == {"weights": {}}


@pytest.mark.parametrize("state", [
    {"endpoints": []},
    {"endpoints": {"a": {"ready": "yes"}}},
    {"endpoints": {"a": {"ready": True, "weight": 1.5}}},
    {"endpoints": {"a": {"ready": True, "since": "now"}}},
    {"endpoints": {"a": {"ready": True, "sample": {"timestamp": 1.0, "cpu_util": "x"}}}},
    {"endpoints": {"a": {"ready": True, "sample": {"timestamp": 1.0, "bogus": 1.0}}}},
    {"endpoints": {}, "policy": "slo", "policy_state": {"rates": {"a": "fast"}}},
    {"endpoints": {}, "policy_state": []},
])
def test_a_malformed_state_is_refused_and_changes_nothing(state: dict[str, Any]) -> None:
    engine = fast_engine("slo")
    engine.update([loaded("a", 0, 10.0, 5.0)], now=0.0)
    before = engine.state()
    with pytest.raises(ValueError):
        engine.restore(state)
    assert engine.state() == before
