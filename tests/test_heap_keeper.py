"""The garbage-collector keeper (:mod:`planner.control.heap`): survivors frozen after each cycle,
garbage cycles still found, a full collection every ``full_every`` cycles."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from bench import scale
from knowledge.connect import open_knowledge_base
from planner.control import wiring
from planner.control.heap import HeapKeeper
from simulator.runner import ScenarioRun
from simulator.scenario import parse_scenario


class Node:
    def __init__(self) -> None:
        self.other: Any = None


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def cycle_pair() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_cycle_freezes_the_survivors_and_collects_the_cycles_garbage() -> None:
    keeper = HeapKeeper(full_every=10)
    garbage = cycle_pair()                  # unreachable, found only by the collector
    kept = Node()
    assert garbage() is not None
    keeper(None, [])
    assert garbage() is None
    assert gc.get_freeze_count() > 0
    assert all(o is not kept for o in gc.get_objects())   # frozen: no longer tracked as young
    assert keeper.collections == 1 and keeper.full_collections == 0


def test_garbage_reaching_a_frozen_object_waits_for_the_full_collection() -> None:
    keeper = HeapKeeper(full_every=3)
    old = Node()
    keeper(None, [])                        # cycle 1: `old` frozen
    young = Node()
    old.other, young.other = young, old
    gone = weakref.ref(old)
    del old, young
    keeper(None, [])                        # cycle 2: the pair reaches a frozen object
    assert gone() is not None
    keeper(None, [])                        # cycle 3: unfrozen and collected in full
    assert gone() is None
    assert keeper.full_collections == 1


def test_close_gives_the_frozen_objects_and_the_thresholds_back() -> None:
    before = gc.get_threshold()
    keeper = HeapKeeper()
    assert gc.get_threshold() == before          # nothing changes until the first cycle
    keeper(None, [])
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 1000
    keeper.close()
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
    with pytest.raises(ValueError, match="full_every"):
        HeapKeeper(full_every=0)


@pytest.mark.parametrize("keep", [False, True])
def test_only_a_process_that_runs_the_controller_installs_it(keep: bool) -> None:
    run = ScenarioRun(parse_scenario(scale.scenario(2, 10, 2), "tiny"), "grid", 1,
                      open_knowledge_base(None), keep_heap=keep)
    hooks = [h for h in run.controller.hooks if isinstance(h, HeapKeeper)]
    assert (run.heap is not None) is keep and hooks == ([run.heap] if keep else [])
    run.run(60.0)
    assert (gc.get_freeze_count() > 0) is keep
    # one call per 15 s cycle; a collection on the first, later ones spaced while they find
    # nothing
    assert run.heap is None or (run.heap.cycles == 4 and 1 <= run.heap.collections <= 4)
    wiring.Assembly(run.controller, None, run.heap).close()
    assert gc.get_freeze_count() == 0


def test_collections_are_spaced_out_while_they_find_nothing_and_every_cycle_again_after_garbage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    found = iter([0, 0, 0, 5, 0, 0])          # what each of the keeper's collections finds
    calls: list[int] = []

    def collect() -> int:
        calls.append(len(calls))
        return next(found)

    monkeypatch.setattr(gc, "collect", collect)
    keeper = HeapKeeper(full_every=1000, max_spacing=4)
    collected = []
    for _ in range(15):
        keeper(None, [])
        collected.append(keeper.collections)
    # after 1, 2 and 4 cycles while nothing is found (4 is the most); after the one that
    # found garbage (the 4th collection, cycle 11), on the next cycle again
    assert collected == [1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 5, 5, 6, 6]
    assert keeper.spacing == 4
    with pytest.raises(ValueError, match="max_spacing"):
        HeapKeeper(max_spacing=0)
