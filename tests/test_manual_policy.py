"""The ``manual`` weight policy and the engine's guard for pinned endpoints; the ``balance``
name; policy parameters by name (camelCase); the node pool in engine samples."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuators import dispatch as pw
from actuators import weights as weights_actuator
from actuators.dispatch.manual import ManualPolicy
from planner.domain import admin as admin_config
from planner.domain.errors import SpecError
from planner.domain.state import PodState

REF = pw.EngineConfig().reference_weight


@pytest.fixture
def registered() -> Iterator[None]:
    """``manual`` by name: its entry point is only seen once the package is reinstalled."""
    added = "manual" not in pw.REGISTRY.available()
    if added:
        pw.register_policy("manual")(ManualPolicy)
    yield
    if added:
        pw.REGISTRY.unregister("manual")


def pod(endpoint_id: str, t: float = 0.0, pool: str | None = None,
        ready: bool = True) -> pw.EndpointMetrics:
    return pw.EndpointMetrics(endpoint_id, t, ready=ready, pool=pool)


def engine(policy: pw.WeightPolicy, **cfg: Any) -> pw.WeightEngine:
    return pw.WeightEngine(policy, pw.EngineConfig(**cfg))


# -- rules ------------------------------------------------------------------------------------


def test_pod_weight_beats_pool_weight_beats_default() -> None:
    policy = ManualPolicy(weights={"a": 5}, pool_weights={"gpu": 3}, default_weight=1)
    out = policy.compute({"a": pod("a", pool="gpu"), "b": pod("b", pool="gpu"),
                          "c": pod("c", pool="cpu"), "d": pod("d")}, 0.0)
    assert {e: s.value for e, s in out.items()} == {"a": 5.0, "b": 3.0, "c": 1.0, "d": 1.0}
    assert out["a"].reason == "manual: pod weight 5"
    assert out["b"].reason == "manual: pool gpu weight 3"
    assert not any(s.pinned_away for s in out.values())


def test_weights_are_relative_and_the_engine_scales_them_at_once() -> None:
    # rules only: no blackout, the first sample is computed (blackout_s is the default 10 s)
    update = engine(ManualPolicy(weights={"a": 3, "b": 1})).update([pod("a"), pod("b")], 0.0)
    assert update.weights == {"a": 96, "b": 32}
    assert {d.status for d in update.decisions.values()} == {pw.Status.COMPUTED}


def test_pinned_away_gets_zero_only_by_the_rule() -> None:
    policy = ManualPolicy(pinned_away=["b"], pinned_away_pools=["spot"])
    update = engine(policy).update([pod("a"), pod("b"), pod("c", pool="spot"), pod("d")], 0.0)
    assert update.weights == {"a": REF, "b": 0, "c": 0, "d": REF}
    assert update.decisions["b"].status is pw.Status.PINNED
    assert update.decisions["b"].reason == "manual: pinned away (pinnedAway)"
    assert update.decisions["c"].reason == "manual: pool spot pinned away (pinnedAwayPools)"
    # the same endpoints without the pin: no ready endpoint gets 0 (the guard still holds)
    plain = engine(ManualPolicy()).update([pod("a"), pod("b"), pod("c", pool="spot")], 0.0)
    assert min(plain.weights.values()) > 0


def test_pin_to_pods_and_pools_leaves_only_those_serving() -> None:
    policy = ManualPolicy(pin_to=["a"], pin_to_pools=["gpu"], pinned_away=["g2"])
    update = engine(policy).update(
        [pod("a", pool="cpu"), pod("b", pool="cpu"), pod("g1", pool="gpu"),
         pod("g2", pool="gpu"), pod("x")], 0.0)
    assert {e for e, w in update.weights.items() if w > 0} == {"a", "g1"}
    assert update.decisions["b"].reason == "manual: not in pinTo/pinToPools (pool cpu)"
    assert update.decisions["x"].reason == "manual: not in pinTo/pinToPools (pool unknown)"


def test_a_serving_endpoint_pinned_away_drains_within_the_change_limit() -> None:
    eng = engine(ManualPolicy(), max_relative_change=0.5)
    assert eng.update([pod("a"), pod("b")], 0.0).weights == {"a": REF, "b": REF}
    eng.policy = ManualPolicy(pinned_away=["b"])  # the owner changes the rules
    seen, reasons = [], []
    for t in range(1, 10):
        update = eng.update([pod("a", t), pod("b", t)], float(t))
        seen.append(update.weights["b"])
        reasons.append(update.decisions["b"].reason)
        assert update.weights["a"] == REF
    assert seen == [32, 16, 8, 4, 2, 1, 0, 0, 0]
    assert reasons[0] == ("manual: pinned away (pinnedAway); limited by max change 50% per "
                          "update")
    assert reasons[-1] == "manual: pinned away (pinnedAway)"
    # unpinned: back to the mean weight (from 0 a weight is set at once, like a new endpoint)
    eng.policy = ManualPolicy()
    assert eng.update([pod("a", 11), pod("b", 11)], 11.0).weights["b"] == REF


def test_the_change_threshold_still_holds_for_other_endpoints() -> None:
    eng = engine(ManualPolicy(weights={"a": 1.0, "b": 1.0}), change_threshold=0.1,
                 max_relative_change=1.0)
    eng.update([pod("a"), pod("b")], 0.0)
    eng.policy = ManualPolicy(weights={"a": 1.04, "b": 1.0})
    update = eng.update([pod("a", 1), pod("b", 1)], 1.0)
    assert update.weights == {"a": REF, "b": REF}
    assert "below change threshold" in update.decisions["a"].reason


def test_pins_that_would_leave_no_endpoint_serving_are_ignored_with_the_reason() -> None:
    for policy in (ManualPolicy(pinned_away=["a", "b"]), ManualPolicy(pin_to=["typo"])):
        update = engine(policy).update([pod("a"), pod("b"), pod("c", ready=False)], 0.0)
        assert update.weights == {"a": REF, "b": REF, "c": 0}
        reason = update.decisions["a"].reason
        assert "no other ready endpoint would serve: pin ignored" in reason
        assert update.decisions["a"].status is pw.Status.COMPUTED


def test_pins_hold_while_another_ready_endpoint_serves_on_the_mean_weight() -> None:
    # c's sample is malformed from the start: no data, the mean weight, but it serves
    eng = engine(ManualPolicy(pinned_away=["a", "b"]))
    bad = pw.EndpointMetrics("c", 0.0, cpu_util=float("nan"))
    update = eng.update([pod("a"), pod("b"), bad], 0.0)
    assert update.weights == {"a": 0, "b": 0, "c": REF}
    assert update.decisions["c"].status is pw.Status.NO_DATA


def test_not_ready_is_zero_and_other_policies_never_pin() -> None:
    update = engine(ManualPolicy(weights={"a": 2})).update([pod("a", ready=False), pod("b")], 0)
    assert update.weights == {"a": 0, "b": REF}
    assert update.decisions["a"].status is pw.Status.NOT_READY


def test_engine_state_keeps_the_pool_and_restores_the_same_updates() -> None:
    policy = ManualPolicy(pool_weights={"gpu": 4}, pinned_away_pools=["spot"])
    eng = engine(policy)
    eng.update([pod("a", pool="gpu"), pod("b", pool="cpu"), pod("c", pool="spot")], 0.0)
    state = json.loads(json.dumps(eng.state()))
    assert state["endpoints"]["a"]["sample"]["pool"] == "gpu"
    twin = engine(policy)
    twin.restore(state)
    # no new sample: both compute from what they remember (the pool included)
    assert twin.update([], 1.0) == eng.update([], 1.0)
    assert twin.weights == {"a": 102, "b": 26, "c": 0}


# -- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize(("params", "fragment"), [
    ({"weights": {"a": 0}}, r"weights\['a'\] must be a number > 0.*use pinnedAway"),
    ({"poolWeights": {"gpu": -1}}, r"poolWeights\['gpu'\] .*use pinnedAwayPools"),
    ({"weights": ["a"]}, "weights must map pod names to relative weights"),
    ({"defaultWeight": float("inf")}, "defaultWeight must be a number > 0"),
    ({"pinnedAway": "a"}, r"pinnedAway must be a list of pod names.*write \['a'\]"),
    ({"pinToPools": [""]}, "pinToPools must list pool names"),
    ({"pinTo": ["a"], "pinnedAway": ["a"]}, r"\['a'\] in both pinTo and pinnedAway"),
    ({"pinToPools": ["g"], "pinnedAwayPools": ["g"]}, "in both pinToPools and pinnedAwayPools"),
    ({"pinAway": ["a"]}, r"unknown parameter\(s\) \['pin_away'\]; it takes"),
])
def test_bad_rules_name_the_field_and_the_fix(registered: None, params: dict[str, Any],
                                              fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        pw.create_policy("manual", **params)


def test_created_by_name_with_camel_case_rules(registered: None) -> None:
    policy = pw.create_policy("manual", poolWeights={"gpu": 2}, pinnedAway=["x"],
                              pinToPools=["gpu", "cpu"])
    assert isinstance(policy, ManualPolicy) and policy.name == "manual"
    assert policy.pool_weights == {"gpu": 2.0} and policy.pinned_away == {"x"}
    assert policy.pin_to_pools == {"gpu", "cpu"} and not policy.measures


# -- balance, parameters by name, pools in samples --------------------------------------------


def test_balance_is_the_slo_policy() -> None:
    policy = pw.create_policy("balance", headroom=0.3, sloTarget=0.2)
    assert isinstance(policy, pw.SloPolicy) and policy.name == "slo"
    assert policy.headroom == 0.3 and policy.slo_target == 0.2
    assert pw.resolve_name("balance") == "slo" and pw.resolve_name("orca") == "orca"
    assert pw.WeightEngine("balance").state()["policy"] == "slo"  # one memory for both names
    with pytest.raises(KeyError, match="'balance'"):
        pw.create_policy("nope")


def test_the_admin_may_name_balance_and_a_bad_parameter_names_the_field() -> None:
    ok = admin_config.AdminConfig.model_validate({"dispatch": {"policy": "balance"}})
    actuator = weights_actuator.WeightsActuator(ok)
    assert isinstance(actuator.engine().policy, pw.SloPolicy)
    bad = admin_config.AdminConfig.model_validate(
        {"dispatch": {"policy": "balance", "policyParams": {"headroom": 0.3, "typo": 1}}})
    with pytest.raises(SpecError, match="typo"):
        weights_actuator.WeightsActuator(bad)


def test_engine_samples_carry_the_pods_pool() -> None:
    scheduled = PodState("p", "node-1", 1.0, pool="gpu", cpu_utilization=0.4)
    assert weights_actuator.endpoint_metrics(scheduled, 10.0, 0.5, 0.0).pool == "gpu"
    no_util = PodState("q", "node-1", 1.0, pool="cpu")
    sample = weights_actuator.endpoint_metrics(no_util, None, None, 0.0)
    assert sample.pool == "cpu" and sample.ready
    assert ManualPolicy().missing(sample) is None  # manual needs no measurement
    assert pw.problems(pw.EndpointMetrics("r", 0.0, pool=3)) == [  # type: ignore[arg-type]
        "pool is not a string (3)"]


# -- property: 0 only when pinned away, never every ready endpoint ----------------------------


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from("abcde"), st.booleans(), min_size=1), min_size=1,
             max_size=12),
    st.sets(st.sampled_from("abcdef")), st.sets(st.sampled_from("abcdef")),
    st.sampled_from([0.1, 0.5, 2.0]),
)
def test_zero_only_when_pinned_away_and_never_for_every_ready_endpoint(
    steps: list[dict[str, bool]], away: set[str], pin_to: set[str], max_change: float
) -> None:
    pin_to -= away
    policy = ManualPolicy(pinned_away=sorted(away), pin_to=sorted(pin_to))
    eng = engine(policy, max_relative_change=max_change)
    ready: dict[str, bool] = {}
    for t, readiness in enumerate(steps):
        ready.update(readiness)
        before = dict(eng.weights)
        update = eng.update([pod(e, t, ready=r) for e, r in readiness.items()], float(t))
        serving = [e for e, w in update.weights.items() if ready[e] and w > 0]
        assert serving or not any(ready.values())  # someone ready always serves
        for e, weight in update.weights.items():
            pinned = e in away or (bool(pin_to) and e not in pin_to)
            if not ready[e]:
                assert weight == 0
            elif weight == 0:
                assert pinned, update.decisions[e]
            if ready[e] and before.get(e):
                assert abs(weight - before[e]) <= max(max_change * before[e], 1.0)
