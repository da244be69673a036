"""Planning a cycle's intents in order, in batches whose model solves are joined (issue 13).

The controller plans intents one after the other: each on the cluster as the earlier active
plans leave it (their added pods reserved). Planned one by one, each intent's model solves
are calls of a few dozen rows, most of whose time is a call's fixed cost. :func:`in_order`
plans a *batch* of consecutive intents together, as tasks of :func:`planner.models.joined.run`
(their solves joined per round), all on the view the batch starts from. It then takes the
plans in order; a plan that reserves room (the view changes) ends the batch, and the intents
after it are planned again, on the new view, in the next batch. So every intent is planned
on exactly the view it would have been planned on one by one, and its plan is the same.

A batch that ends early wastes the plans after the reserving one. Batches start at
:data:`FIRST_BATCH` intents, double while no plan reserves (up to :data:`MAX_BATCH`), and
restart from the number of plans the last batch kept when one does: in a steady cycle (no plan
adds pods) a thousand intents take ten batches; when every plan adds pods, at most one plan
in three is wasted after the first batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from planner.models import joined

Item = TypeVar("Item")
View = TypeVar("View")

FIRST_BATCH = 32
"""Intents in the first batch of a cycle (solves joined over 32 intents are already most of
the saving; a larger first batch wastes more when its first plan reserves)."""


MAX_BATCH = 128
"""Most intents in a batch: each parked task holds its planning's frames and arrays until the
round ends (about 140 KiB each measured at 1,000 intents: peak RSS +72 MiB with batches up to
512), and joined solves over 128 intents already save most of what joining can."""


def in_order(items: Sequence[Item], view: View, plan: Callable[[Item, View], None],
             take: Callable[[Item, View], View], first: int = FIRST_BATCH) -> View:
    """Plan every item of ``items`` in order: ``plan(item, view)`` plans it on ``view`` (its
    result replaced by planning again), then ``take(item, view)`` accepts its plan and returns
    the view the next item is planned on (the same object when the plan reserves nothing).
    Returns the last view. ``plan`` must not raise (it records its own errors)."""
    at, size = 0, max(1, first)
    while at < len(items):
        batch = items[at:at + size]
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
                break
        at += kept
        size = min(2 * size, MAX_BATCH) if kept == len(batch) else kept
    return view
