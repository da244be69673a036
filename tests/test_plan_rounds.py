"""A cycle's intents planned in batches, each on the view the earlier plans leave
(planner.control.plan_rounds)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.control import plan_rounds
from planner.control.outcome import IntentOutcome
from planner.models import joined
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


class Item:
    """An intent stand-in: whether its plan reserves room, and what it was planned on."""

    def __init__(self, reserves: bool) -> None:
        self.reserves = reserves
        self.planned_on: int | None = None
        self.plans = 0


def _run(reserves: list[bool], first: int) -> tuple[list[Item], list[int], int]:
    """The items after :func:`plan_rounds.in_order`, the views ``take`` was given in turn,
    and the last view; a view is the number of reservations so far."""
    items = [Item(r) for r in reserves]
    taken: list[int] = []

    def plan(item: Item, view: int) -> None:
        item.planned_on = view
        item.plans += 1

    def take(item: Item, view: int) -> int:
        assert item.planned_on == view     # its plan was made on the view it is taken on
        taken.append(view)
        return view + 1 if item.reserves else view

    return items, taken, plan_rounds.in_order(items, 0, plan, take, first)


@given(st.lists(st.booleans(), max_size=200), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_each_item_is_taken_once_in_order_on_the_view_one_by_one_planning_gives_it(
        reserves: list[bool], first: int) -> None:
    items, taken, last = _run(reserves, first)
    want = [sum(reserves[:i]) for i in range(len(reserves))]
    assert taken == want
    assert [item.planned_on for item in items] == want
    assert last == sum(reserves)


@given(st.lists(st.booleans(), max_size=300), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_plans_wasted_by_reservations_are_bounded(reserves: list[bool], first: int) -> None:
    items, _, _ = _run(reserves, first)
    plans = sum(item.plans for item in items)
    # the first batch can waste all but one plan; after that, one plan in three at most
    assert plans <= first + math.ceil(1.5 * len(items))


def test_a_cycle_without_reservations_plans_each_item_once_in_doubling_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    run = joined.run

    def counted(tasks: Sequence[Callable[[], None]]) -> list[joined.Outcome[None]]:
        sizes.append(len(tasks))
        return run(tasks)

    monkeypatch.setattr(joined, "run", counted)
    items, _, _ = _run([False] * 1000, 32)
    assert all(item.plans == 1 for item in items)
    assert sizes == [32, 64] + [128] * 7 + [8]


def _plans_of_a_run(monkeypatch: pytest.MonkeyPatch, one_by_one: bool
                    ) -> tuple[list[str], int]:
    """Every plan (its planning time left out) of half an hour of the shipped multi-tenant
    scenario, and the plans that were made again after an earlier plan reserved room."""
    if one_by_one:
        def in_order(items: Sequence[Any], view: Any, plan: Callable[[Any, Any], None],
                     take: Callable[[Any, Any], Any], first: int = 1) -> Any:
            for item in items:
                plan(item, view)
                view = take(item, view)
            return view
        monkeypatch.setattr(plan_rounds, "in_order", in_order)
    counts = {"plans": 0, "intents": 0}
    run = joined.run

    def counted(tasks: Sequence[Callable[[], Any]]) -> list[joined.Outcome[Any]]:
        counts["plans"] += len(tasks)
        return run(tasks)

    monkeypatch.setattr(joined, "run", counted)
    sim = ScenarioRun(load_scenario(ROOT / "examples/scenarios/multi-tenant.yaml"), "grid", 1)
    plans: list[str] = []

    def on_cycle(_sim: object, outcomes: Sequence[IntentOutcome]) -> None:
        counts["intents"] += sum(o.plan is not None for o in outcomes)
        plans.extend(repr(replace(o.plan, planning_ms=0.0)) for o in outcomes
                     if o.plan is not None)

    sim.run(duration=1800.0, on_cycle=on_cycle)
    monkeypatch.undo()
    return plans, counts["plans"] - counts["intents"]


def test_the_controller_plans_in_batches_exactly_as_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    batched, again = _plans_of_a_run(monkeypatch, one_by_one=False)
    alone, _ = _plans_of_a_run(monkeypatch, one_by_one=True)
    assert again > 0        # some plans reserved room, and the intents after them were re-planned
    assert len(batched) > 200 and batched == alone
