"""Several planning tasks' model solves joined into one call per round (issue 13).

A prediction's mixture solve (:func:`planner.models.sojourn.mixture_sojourn_quantile`) works
row by row, and most of a small call's time is the fixed cost of its array operations. When
the controller plans many intents, :func:`run` runs each intent's planning as a task (a
greenlet) that *parks* at each solve (:func:`mixture_sojourn_quantile` here). Once every task
is parked or done, the parked solves are concatenated, one call per kind of solve (quantile,
classes, iterations), and each task resumes with its own rows (the DataLoader pattern: the
loads issued in one tick are fetched together).

The answers are the same bit for bit as call by call: a row's value does not depend on the
rows solved beside it (see :func:`~planner.models.sojourn.mixture_sojourn_quantile`); a
call is joined only with calls made under the same numpy error state, and solved under it.
Tasks switch only at a solve, so what a task does between two solves is not interleaved with
any other task; and they run one after the other, in their order, each round. The contract
for code that runs in a task: it holds no shared mutable state across a prediction that
another task could change meanwhile (what an actuator notes per workload, for instance: the
controller never puts two intents of one workload in one batch).

:func:`clock` is ``time.perf_counter`` as a task sees it: it stops while the task is parked
and the others run, and adds the task's share (by rows) of each joined solve, so a plan's
latency and a planner's time budget are the task's own.
"""

from __future__ import annotations

import contextvars
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter
from typing import Generic, TypeVar

import numpy as np
from greenlet import GreenletExit, getcurrent, greenlet
from numpy.typing import NDArray

from planner.models import sojourn

FloatArray = NDArray[np.float64]
T = TypeVar("T")


@dataclass
class _Solve:
    """One parked call of :func:`mixture_sojourn_quantile`."""

    q: float
    lam: FloatArray
    mu: FloatArray
    c: FloatArray
    weight: FloatArray
    iterations: int
    errors: tuple[tuple[str, str], ...]
    """numpy's error state where the call was made (the task's own context)."""

    @property
    def kind(self) -> tuple[float, int, int, tuple[tuple[str, str], ...]]:
        return self.q, self.lam.shape[1], self.iterations, self.errors

    def alone(self) -> FloatArray:
        with np.errstate(**dict(self.errors)):  # type: ignore[arg-type]
            return sojourn.mixture_sojourn_quantile(self.q, self.lam, self.mu, self.c,
                                                    self.weight, self.iterations)


class _Task(greenlet):  # type: ignore[misc]
    """A task of :func:`run`: the greenlet and the time it spent away from its own work."""

    def __init__(self, fn: Callable[[], object]) -> None:
        super().__init__(fn)
        self.away_s = 0.0
        self.parked_at = 0.0


def clock() -> float:
    """Seconds on ``time.perf_counter``'s scale as the calling task sees them (see the module
    doc); ``perf_counter()`` outside a task."""
    now = perf_counter()
    task = getcurrent()
    return now - task.away_s if isinstance(task, _Task) else now


def mixture_sojourn_quantile(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray,
                             weight: FloatArray, iterations: int = 8) -> FloatArray:
    """:func:`planner.models.sojourn.mixture_sojourn_quantile`; inside a task of :func:`run`
    the call parks until the round's solves are joined."""
    task = getcurrent()
    if not isinstance(task, _Task):
        return sojourn.mixture_sojourn_quantile(q, lam, mu, c, weight, iterations)
    errors = tuple((k, str(v)) for k, v in sorted(np.geterr().items()))
    call = _Solve(q, lam, mu, c, weight, iterations, errors)
    task.parked_at = perf_counter()
    answer: FloatArray = task.parent.switch(call)
    return answer


@dataclass
class _Answers:
    """A round's answers, in the order of its calls: an array, or the error the call alone
    raises."""

    values: list[FloatArray | BaseException] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def _solve_round(calls: Sequence[_Solve]) -> _Answers:
    """Every call of a round: one concatenated solve per kind, each call's rows sliced back;
    its share of the solve's time by rows. A kind whose joined solve raises is solved call by
    call, so each call gets what it would have got alone."""
    kinds: dict[tuple[float, int, int, tuple[tuple[str, str], ...]], list[int]] = \
        defaultdict(list)
    for i, call in enumerate(calls):
        kinds[call.kind].append(i)
    out = _Answers([np.empty(0)] * len(calls), [0.0] * len(calls))
    for (q, _, iterations, errors), idx in kinds.items():
        t0 = perf_counter()
        rows = [calls[i].lam.shape[0] for i in idx]
        try:
            if len(idx) == 1:
                parts = [calls[idx[0]].alone()]
            else:
                lam, mu, c, weight = (np.concatenate([getattr(calls[i], name) for i in idx])
                                      for name in ("lam", "mu", "c", "weight"))
                with np.errstate(**dict(errors)):  # type: ignore[arg-type]
                    joined = sojourn.mixture_sojourn_quantile(q, lam, mu, c, weight,
                                                              iterations)
                parts = np.split(joined, np.cumsum(rows)[:-1])
        except Exception:
            parts = None
        total, seconds = max(sum(rows), 1), perf_counter() - t0
        for j, i in enumerate(idx):
            if parts is None:  # each alone, as it would have been: its own time, its own error
                t1 = perf_counter()
                try:
                    out.values[i] = calls[i].alone()
                except Exception as exc:
                    out.values[i] = exc
                out.seconds[i] = perf_counter() - t1
            else:
                out.values[i] = parts[j]
                out.seconds[i] = seconds * rows[j] / total
    return out


@dataclass
class Outcome(Generic[T]):
    """A task's result, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None


def run(tasks: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
    """Run ``tasks`` (each without arguments) to completion, their solves joined per round
    (see the module doc); their outcomes in order. Each task starts in a copy of the caller's
    context variables (numpy's error state is one)."""
    outcomes: list[Outcome[T]] = [Outcome() for _ in tasks]
    parked: list[tuple[int, _Task, _Solve]] = []

    def step(i: int, task: _Task, arg: object) -> None:
        """Start ``task`` (``arg`` None) or resume it with its answer (an array, or the
        error its call raises); record its outcome, or its next solve."""
        try:
            if isinstance(arg, BaseException):
                got = task.throw(arg)
            else:
                got = task.switch() if arg is None else task.switch(arg)
        except Exception as exc:
            outcomes[i].error = exc
            return
        if task.dead:
            outcomes[i].value = got
        else:
            parked.append((i, task, got))

    try:
        for i, fn in enumerate(tasks):
            task = _Task(fn)
            task.gr_context = contextvars.copy_context()
            step(i, task, None)
        while parked:
            round_ = parked[:]
            parked.clear()
            answers = _solve_round([call for _, _, call in round_])
            for (i, task, _), value, share in zip(round_, answers.values, answers.seconds,
                                                  strict=True):
                task.away_s += perf_counter() - task.parked_at - share
                step(i, task, value)
    finally:  # interrupted (KeyboardInterrupt, SystemExit): unwind the parked tasks now
        for _, task, _ in parked:
            task.throw(GreenletExit)
    return outcomes
