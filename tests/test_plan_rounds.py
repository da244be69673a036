"""A cycle's intents planned in batches, each on the view the earlier plans leave
(planner.control.plan_rounds)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import scale
from planner.control import plan_rounds
from planner.control.outcome import IntentOutcome
from planner.models import joined
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


class Item:
    """An intent stand-in: whether its plan reserves room, and what it was planned on."""

    def __init__(self, reserves: bool) -> None:
        self.reserves = reserves
        self.planned_on: int | None = None
        self.plans = 0


def _run(reserves: list[bool], size: int) -> tuple[list[Item], list[int], int]:
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

    def adds(item: Item) -> bool:
        return item.reserves

    return items, taken, plan_rounds.in_order(items, 0, plan, take, adds, batch_size=size)


@given(st.lists(st.booleans(), max_size=200), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_each_item_is_taken_once_in_order_on_the_view_one_by_one_planning_gives_it(
        reserves: list[bool], size: int) -> None:
    items, taken, last = _run(reserves, size)
    want = [sum(reserves[:i]) for i in range(len(reserves))]
    assert taken == want
    assert [item.planned_on for item in items] == want
    assert last == sum(reserves)


@given(st.lists(st.booleans(), max_size=300), st.integers(1, 40))
@settings(max_examples=200, deadline=None)
def test_no_item_is_planned_more_than_twice_when_the_hints_are_right(
        reserves: list[bool], size: int) -> None:
    items, _, _ = _run(reserves, size)
    assert all(1 <= item.plans <= 2 for item in items)


@pytest.mark.parametrize(("pattern", "most"), [
    ("every 32nd", 1.02), ("every 7th", 1.02), ("every 3rd", 1.02), ("all", 1.02),
    ("a tenth at random", 1.2), ("a third at random", 1.2), ("a hundredth at random", 1.1),
    ("none", 1.0)])
def test_the_plans_a_thousand_items_take(pattern: str, most: float) -> None:
    rng = random.Random(1)
    chance = {"a tenth at random": 0.1, "a third at random": 0.3,
              "a hundredth at random": 0.01}.get(pattern)
    reserves = [rng.random() < chance if chance is not None else
                {"every 32nd": i % 32 == 0, "every 7th": i % 7 == 0, "every 3rd": i % 3 == 0,
                 "all": True, "none": False}[pattern] for i in range(1000)]
    items, _, _ = _run(reserves, plan_rounds.BATCH)
    assert sum(item.plans for item in items) <= most * len(items)


def test_a_cycle_without_reservations_plans_each_item_once_in_full_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    run = joined.run

    def counted(tasks: Sequence[Callable[[], None]]) -> list[joined.Outcome[None]]:
        sizes.append(len(tasks))
        return run(tasks)

    monkeypatch.setattr(joined, "run", counted)
    items, _, _ = _run([False] * 1000, 16)
    assert all(item.plans == 1 for item in items)
    assert sizes == [16] * 62 + [8]


def _plans_of_a_run(monkeypatch: pytest.MonkeyPatch, one_by_one: bool
                    ) -> tuple[list[str], int, int]:
    """Every plan (its planning time left out) of 20 minutes of six active intents alike
    (``bench/scale.py``'s scenario: the same latency objective, so their solves join), the
    plans made again after an earlier plan reserved room, and the joined solves (rounds in
    which two or more calls of one kind were solved together)."""
    if one_by_one:
        def in_order(items: Sequence[Any], view: Any, plan: Callable[[Any, Any], None],
                     take: Callable[[Any, Any], Any], *_: Any, **__: Any) -> Any:
            for item in items:
                plan(item, view)
                view = take(item, view)
            return view
        monkeypatch.setattr(plan_rounds, "in_order", in_order)
    counts = {"plans": 0, "intents": 0, "joined": 0}
    run, solve_round = joined.run, joined._solve_round

    def counted(tasks: Sequence[Callable[[], Any]]) -> list[joined.Outcome[Any]]:
        counts["plans"] += len(tasks)
        return run(tasks)

    def watched(calls: Sequence[Any]) -> Any:
        kinds = Counter(call.kind for call in calls)
        counts["joined"] += sum(n > 1 for n in kinds.values())
        return solve_round(calls)

    monkeypatch.setattr(joined, "run", counted)
    monkeypatch.setattr(joined, "_solve_round", watched)
    sim = ScenarioRun(parse_scenario(scale.scenario(6, 20, 10), "six"), "grid", 1)
    plans: list[str] = []

    def on_cycle(_sim: object, outcomes: Sequence[IntentOutcome]) -> None:
        counts["intents"] += sum(o.plan is not None for o in outcomes)
        plans.extend(repr(replace(o.plan, planning_ms=0.0)) for o in outcomes
                     if o.plan is not None)

    sim.run(duration=1200.0, on_cycle=on_cycle)
    monkeypatch.undo()
    return plans, counts["plans"] - counts["intents"], counts["joined"]


def test_the_controller_plans_in_batches_exactly_as_one_by_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    batched, again, joins = _plans_of_a_run(monkeypatch, one_by_one=False)
    alone, _, _ = _plans_of_a_run(monkeypatch, one_by_one=True)
    assert again > 0        # some plans reserved room, and the intents after them were re-planned
    assert joins > 0        # and solves of several intents were joined
    assert len(batched) > 400 and batched == alone


def test_items_of_one_workload_are_never_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[list[str]] = []
    run = joined.run

    def counted(tasks: Sequence[Callable[[], Any]]) -> list[joined.Outcome[Any]]:
        batches.append([])
        return run(tasks)

    monkeypatch.setattr(joined, "run", counted)
    workloads = ["a", "b", "c", "a", "d", "b", "e"]
    items = list(range(len(workloads)))

    def plan(item: int, view: int) -> None:
        batches[-1].append(workloads[item])

    plan_rounds.in_order(items, 0, plan, lambda item, view: view, lambda item: False,
                         apart=lambda item: workloads[item])
    assert batches == [["a", "b", "c"], ["a", "d", "b", "e"]]
