"""Planning the intents that compete for capacity together.

The controller plans intents one after another, highest priority first, each on the room the
earlier ones left (:mod:`planner.planners.capacity`). That fails where the first intent's
cheapest shape takes the only room another intent can use while a shape elsewhere would have
served both: the second is then capped and violates. When a cycle's plans were capped by
capacity, the controller asks every competing intent's planner for its options (per shape,
the fewest replicas predicted to meet every objective:
:meth:`planner.planners.base.Planner.shape_options`) and :func:`assign` picks one option (or
none) per intent:

* the sum of the priorities of the intents served (their option placed in full) is as large
  as possible: priority decides who gets scarce capacity, and two intents of 0.4 outweigh one
  of 0.7 (objectives outrank money, as in the single-intent planners where they are
  constraints);
* among assignments that serve as much, the cheapest by the admin's utility weights: cost per
  hour plus ``disruption`` x cost for each restarting knob (CPU size, device, pool) changed
  (not the CPU size alone where the cluster resizes in place: :mod:`planner.planners.disruption`).

An assignment *fits* when the chosen options, placed in priority order as the scheduler
would, each fit the room the others left (:func:`fits`). Up to :data:`EXACT_LIMIT`
combinations are ranked and checked best first (exact); beyond, a seeded, time-boxed optuna
TPE study searches the joint space with "fits" as its constraint. The controller then plans
each served intent within its assigned shape (``PlanningContext.placement``); an intent left
unserved is planned on what is left, as before.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import optuna

from planner.domain.admin import UtilityWeights
from planner.domain.state import ClusterSnapshot, WorkloadState
from planner.planners import capacity, disruption
from planner.planners.base import ShapeOption

EXACT_LIMIT = 4_096
"""Joint combinations ranked and checked exactly; a larger joint space goes to optuna."""
CHECK_LIMIT = 2_048
"""Fit checks of the exact search before it gives up (answering: keep the sequential plans)."""


@dataclass(frozen=True)
class Contender:
    """An intent in the joint plan: its workload as observed, its priority, its options."""

    key: str
    workload: WorkloadState
    priority: float
    options: tuple[ShapeOption, ...]


@dataclass(frozen=True)
class Assignment:
    """One option (``None``: not served) per contender, with what the assignment is worth."""

    chosen: tuple[ShapeOption | None, ...]
    served: float
    """Sum of the priorities of the contenders served."""
    cost: float
    """Utility cost per hour of the options chosen (cost plus disruption)."""
    how: str
    """How it was found (``exact, N combinations`` or ``optuna TPE, N trials``)."""


def option_cost(c: Contender, o: ShapeOption, utility: UtilityWeights,
                in_place: bool = False) -> float:
    """The utility cost of serving ``c`` by ``o`` (as the grid planner scores it, without
    the risk term: every option is predicted to meet the objectives). ``in_place``: the
    cluster resizes running pods in place (:attr:`ClusterSnapshot.in_place_resize`)."""
    return o.cost_per_hour * (utility.cost + utility.disruption * disruption.restarts(
        c.workload.config, o.config, in_place))


def fits(snapshot: ClusterSnapshot, contenders: Sequence[Contender],
         chosen: Sequence[ShapeOption | None]) -> int:
    """Replicas of the chosen options the cluster cannot schedule (0: the assignment fits):
    options placed in priority order, each on the room the earlier ones left."""
    view, short = snapshot, 0
    order = sorted(range(len(contenders)), key=lambda i: -contenders[i].priority)
    for i in order:
        o = chosen[i]
        if o is None:
            continue
        room = capacity.schedulable_replicas(contenders[i].workload, view, o.config)
        short += max(0, o.config.replicas - room)
        view = capacity.reserve_config(view, contenders[i].workload, o.config)
    return short


def _value(contenders: Sequence[Contender], chosen: Sequence[ShapeOption | None],
           utility: UtilityWeights, in_place: bool) -> tuple[float, float]:
    served = sum(c.priority for c, o in zip(contenders, chosen, strict=True) if o is not None)
    cost = sum(option_cost(c, o, utility, in_place)
               for c, o in zip(contenders, chosen, strict=True) if o is not None)
    return served, cost


def assign(snapshot: ClusterSnapshot, contenders: Sequence[Contender],
           utility: UtilityWeights, seed: int = 0, n_trials: int = 300,
           timeout_s: float = 0.2, exact_limit: int = EXACT_LIMIT) -> Assignment | None:
    """The best assignment that fits (see the module's docstring); ``None`` when the exact
    search ran out of checks or the study found nothing that fits."""
    menus = [(*c.options, None) for c in contenders]
    size = math.prod(len(m) for m in menus)
    if size <= exact_limit:
        return _exact(snapshot, contenders, menus, utility)
    return _study(snapshot, contenders, menus, utility, seed, n_trials, timeout_s)


def _exact(snapshot: ClusterSnapshot, contenders: Sequence[Contender],
           menus: Sequence[tuple[ShapeOption | None, ...]],
           utility: UtilityWeights) -> Assignment | None:
    valued = [(_value(contenders, combo, utility, snapshot.in_place_resize), combo)
              for combo in itertools.product(*menus)]
    valued.sort(key=lambda v: (-round(v[0][0], 9), v[0][1]))
    for checks, ((served, cost), combo) in enumerate(valued):
        if checks >= CHECK_LIMIT:
            return None
        if fits(snapshot, contenders, combo) == 0:
            return Assignment(tuple(combo), served, cost,
                              f"exact, {checks + 1} of {len(valued)} combinations checked")
    return None


def _study(snapshot: ClusterSnapshot, contenders: Sequence[Contender],
           menus: Sequence[tuple[ShapeOption | None, ...]], utility: UtilityWeights,
           seed: int, n_trials: int, timeout_s: float) -> Assignment | None:
    """A constrained TPE study over one categorical per contender (an index into its menu).
    Served priority outranks cost: the objective is ``cost - scale * served`` with ``scale``
    above any cost an assignment can have."""
    scale = 1.0 + sum(max((option_cost(c, o, utility) for o in c.options), default=0.0)
                      for c in contenders)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    # Start from every intent's cheapest option (what planning them alone asks for).
    study.enqueue_trial({f"c{i}": 0 for i in range(len(contenders))})
    best: tuple[float, tuple[ShapeOption | None, ...]] | None = None
    started = time.perf_counter()
    for _ in range(n_trials):
        trial = study.ask()
        combo = tuple(menus[i][trial.suggest_categorical(f"c{i}", list(range(len(menus[i]))))]
                      for i in range(len(contenders)))
        short = fits(snapshot, contenders, combo)
        served, cost = _value(contenders, combo, utility, snapshot.in_place_resize)
        score = cost - scale * served
        trial.set_constraint("fits", float(short))     # <= 0: every option placed
        study.tell(trial, score)
        if short == 0 and (best is None or score < best[0]):
            best = (score, combo)
        if time.perf_counter() - started > timeout_s:
            break
    if best is None:
        return None
    served, cost = _value(contenders, best[1], utility, snapshot.in_place_resize)
    return Assignment(best[1], served, cost, f"optuna TPE, {len(study.trials)} trials")
