"""The training schedule: within the CPU budget, only intents with new data, stalest and
worst-fitting first; the budget's ledger; the admin's training settings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.control.training_schedule import (
    HOUR_S,
    CpuLedger,
    ModelState,
    choose,
    priority,
)
from planner.domain.admin import parse_admin
from planner.domain.errors import SpecError

NOW = 100_000.0

states = st.lists(
    st.builds(
        ModelState,
        intent=st.text("abcdefgh", min_size=1, max_size=4),
        new_rows=st.integers(0, 50),
        last_fit=st.one_of(st.none(), st.floats(NOW - 86_400, NOW)),
        error=st.one_of(st.none(), st.floats(0, 5)),
        cost_s=st.one_of(st.none(), st.floats(0.01, 30)),
    ),
    max_size=30, unique_by=lambda s: s.intent)
budgets = st.one_of(st.none(), st.floats(0, 500))


@settings(max_examples=300, deadline=None)
@given(states, budgets, st.one_of(st.none(), st.floats(0.01, 30)))
def test_never_over_budget_never_without_new_data(pool: list[ModelState], budget: float | None,
                                                 unknown: float | None) -> None:
    picked = choose(pool, NOW, budget, unknown)
    assert all(s.new_rows >= 1 for s in picked)
    assert len({s.intent for s in picked}) == len(picked)
    if budget is None:
        assert {s.intent for s in picked} == {s.intent for s in pool if s.new_rows >= 1}
        return
    costs = [s.cost_s if s.cost_s is not None else unknown for s in picked]
    if all(c is not None for c in costs):
        assert sum(c for c in costs if c is not None) <= budget + 1e-9
    else:
        # Nothing measured to go by: one such intent, taking what is left, then no more.
        assert costs[-1] is None and all(c is not None for c in costs[:-1])


@settings(max_examples=300, deadline=None)
@given(states, st.floats(0, 500))
def test_prefers_staler_and_worse_fitting(pool: list[ModelState], budget: float) -> None:
    picked = {s.intent for s in choose(pool, NOW, budget, 5.0)}
    ready = [s for s in pool if s.new_rows >= 1]
    for a in ready:
        for b in ready:
            if b.intent in picked and a.intent not in picked:
                # Whoever was left out ranks below everyone picked.
                assert priority(a, NOW) <= priority(b, NOW)


def test_priority_grows_with_age_and_error() -> None:
    old = ModelState("a", 5, NOW - 3600, 0.1, 1.0)
    young = ModelState("b", 5, NOW - 600, 0.1, 1.0)
    bad = ModelState("c", 5, NOW - 600, 0.9, 1.0)
    assert priority(old, NOW) > priority(young, NOW)
    assert priority(bad, NOW) > priority(young, NOW)
    assert priority(ModelState("d", 5, None), NOW) == math.inf   # no model yet: first
    assert priority(ModelState("e", 5, NOW - 600, None), NOW) == priority(
        ModelState("e", 5, NOW - 600, 1.0), NOW)                    # unknown error: the worst
    # The stalest first while the budget lasts; an intent without new data never.
    pool = [young, bad, old, ModelState("z", 0, NOW - 86_400, 1.0, 1.0)]
    assert [s.intent for s in choose(pool, NOW, 2.5)] == ["a", "c"]
    # An expensive stale model is not starved by cheaper ones behind it.
    pool = [ModelState("big", 5, NOW - 7200, 0.1, 10.0), young]
    assert choose(pool, NOW, 5.0) == []


def test_ledger_counts_the_last_hour() -> None:
    ledger = CpuLedger()
    ledger.charge(NOW - HOUR_S - 1, 100.0)
    ledger.charge(NOW - 10, 7.0)
    ledger.charge(NOW - 5, 3.0)
    assert ledger.spent(NOW) == pytest.approx(10.0)
    assert ledger.available(NOW, 60.0, reserved_s=20.0) == pytest.approx(30.0)
    assert ledger.available(NOW, None) is None
    assert ledger.mean_cost() == pytest.approx(5.0)


@pytest.mark.parametrize("bad", ["lots", -1, 0, True, [3600], "Unlimited"])
def test_bad_training_budget_names_the_field_and_the_fix(bad: object) -> None:
    with pytest.raises(SpecError) as err:
        parse_admin({"training": {"cpuSecondsPerHour": bad}}, "admin.yaml")
    msg = str(err.value)
    assert "admin.training.cpuSecondsPerHour" in msg
    assert "unlimited" in msg and "> 0" in msg


def test_training_settings() -> None:
    assert parse_admin(None).training.budget_s == 3600.0
    assert parse_admin({"training": {"cpuSecondsPerHour": "unlimited"}}).training.budget_s is None
    t = parse_admin({"training": {"cpuSecondsPerHour": 600, "executor": "dask",
                                  "daskScheduler": "tcp://dask:8786", "workers": 4}}).training
    assert (t.budget_s, t.executor, t.workers) == (600.0, "dask", 4)
    with pytest.raises(SpecError, match=r"training.*set executor: dask"):
        parse_admin({"training": {"daskScheduler": "tcp://dask:8786"}})
    with pytest.raises(SpecError, match=r"admin.training.executor.*use one of"):
        parse_admin({"training": {"executor": "spark"}})
