"""Planning a cycle's intents in order, in batches whose model solves are joined (issue 13).

The controller plans intents one after the other: each on the cluster as the earlier active
plans leave it (their added pods reserved). Planned one by one, each intent's model solves
are calls of a few dozen rows, most of whose time is a call's fixed cost. :func:`in_order`
plans a *batch* of consecutive intents together, as tasks of :func:`planner.models.joined.run`
(their solves joined per round), all on the view the batch starts from. It then takes the
plans in order; a plan that reserves room (the view changes) ends the batch, and the intents
after it are planned again, on the new view, in the next batch. So every intent is planned
on the view it would have been planned on one by one. Its plan is the same, but for what
depends on time: a planner's time box (grid's optuna study, only when it runs out) counts
the task's own time, in which its share of a joined solve is less than the solve alone.

A batch that ends early wastes the plans after the reserving one, and a wasted plan costs
far more than joining saves (joined, a plan costs about an eighth less). So batches are
small (:data:`BATCH`), a batch ends at an intent expected to reserve (*hints*: one that
reserved in the last cycle, or whose wasted plan adds pods), and once two plans have
reserved room this cycle a batch ends where
the next reservation is expected (the last one plus the mean gap between them). Over
patterns of reservations (``tests/test_plan_rounds.py``), a thousand intents take at most
1.2 plans each; where whether a plan adds pods does not depend on the view it was made on
(the hints are right), no intent is planned more than twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from planner.models import joined

Item = TypeVar("Item")
View = TypeVar("View")

BATCH = 16
"""Most intents in a batch: joined over 16 intents, a solve's fixed cost is a sixteenth per
intent (most of what joining can save); a batch whose first plan reserves wastes 15 plans at
most; and each parked task holds its planning's frames and arrays until its round ends
(about 140 KiB each, measured at 1,000 intents with batches of up to 512)."""


def in_order(items: Sequence[Item], view: View, plan: Callable[[Item, View], None],
             take: Callable[[Item, View], View], adds: Callable[[Item], bool],
             likely: Callable[[Item], bool] | None = None,
             apart: Callable[[Item], Hashable] | None = None, batch_size: int = BATCH) -> View:
    """Plan every item of ``items`` in order: ``plan(item, view)`` plans it on ``view`` (its
    result replaced by planning again), then ``take(item, view)`` accepts its plan and returns
    the view the next item is planned on (the same object when the plan reserves nothing).
    ``adds(item)``: whether the item's last plan would reserve room if taken (a hint: a
    wrong answer costs plans, never a wrong view); ``likely(item)``, before any plan: whether
    its plan is likely to reserve room (the same kind of hint; e.g. it reserved last cycle).
    Items with the same ``apart(item)`` are never in one batch (planning one must not see
    the other's half-made state: actuators note why they held a workload back, per
    workload). Returns the last view. ``plan`` must not raise (it records its own errors)."""
    at, size = 0, max(1, batch_size)
    hinted = set() if likely is None else {i for i, item in enumerate(items) if likely(item)}
    reserved: list[int] = []
    while at < len(items):
        end = min(at + size, len(items))
        end = min((i + 1 for i in hinted if at <= i < end), default=end)
        if apart is not None:
            keys: set[Hashable] = set()
            for i in range(at, end):
                k = apart(items[i])
                if k in keys:
                    end = i
                    break
                keys.add(k)
        batch = items[at:end]
        outcomes = joined.run([functools.partial(plan, item, view) for item in batch])
        for outcome in outcomes:
            if outcome.error is not None:
                raise outcome.error
        kept = 0
        for item in batch:
            kept += 1
            after = take(item, view)
            if after is not view:
                view = after
                reserved.append(at + kept - 1)
                break
        hinted.difference_update(range(at, at + kept))
        for i in range(at + kept, end):    # planned on a view that is gone: hints kept
            if adds(items[i]):
                hinted.add(i)
            else:
                hinted.discard(i)
        at += kept
        if len(reserved) >= 2:
            expected = reserved[-1] + (reserved[-1] - reserved[0]) / (len(reserved) - 1)
            size = min(max(1, batch_size), max(1, round(expected - at + 1)))
    return view
