"""Planning tasks whose mixture solves are joined per round (planner.models.joined)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from planner.models import joined, sojourn

FloatArray = NDArray[np.float64]
Arrays = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def _inputs(rng: np.random.Generator, n: int, k: int) -> Arrays:
    """``n`` rows of ``k`` classes as the latency model passes them: loads below and above
    saturation, a server count per row broadcast over the classes, some absent classes."""
    mu = rng.uniform(5.0, 50.0, (n, k))
    lam = mu * rng.uniform(0.05, 1.05, (n, k))
    c = np.broadcast_to(rng.integers(1, 5, (n, 1)).astype(float), (n, k))
    weight = rng.uniform(0.0, 1.0, (n, k)) * (rng.uniform(size=(n, k)) > 0.3)
    weight[weight.sum(axis=1) == 0, 0] = 1.0
    weight /= weight.sum(axis=1, keepdims=True)
    return lam, mu, c, weight


Call = tuple[float, Arrays, int]


@st.composite
def _programs(draw: st.DrawFn) -> list[list[Call]]:
    """Per task, the solves it makes in turn: different row counts, classes, quantiles and
    iteration counts, so a round holds several kinds of solve."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(draw(st.integers(1, 6))):
        calls = []
        for _ in range(draw(st.integers(0, 4))):
            k = draw(st.sampled_from([1, 2, 3]))
            q = draw(st.sampled_from([0.5, 0.95, 0.99]))
            calls.append((q, _inputs(rng, draw(st.integers(1, 40)), k),
                          draw(st.sampled_from([7, 8]))))
        tasks.append(calls)
    return tasks


@given(_programs())
@settings(max_examples=60, deadline=None)
def test_joined_solves_give_every_task_its_own_answers_bit_for_bit(
        program: list[list[Call]]) -> None:
    def task(calls: list[Call]) -> Callable[[], list[FloatArray]]:
        def body() -> list[FloatArray]:
            return [joined.mixture_sojourn_quantile(q, *arrays, iterations)
                    for q, arrays, iterations in calls]
        return body

    outcomes = joined.run([task(calls) for calls in program])
    assert [o.error for o in outcomes] == [None] * len(program)
    for calls, outcome in zip(program, outcomes, strict=True):
        want = [sojourn.mixture_sojourn_quantile(q, *arrays, iterations)
                for q, arrays, iterations in calls]
        assert outcome.value is not None and len(outcome.value) == len(want)
        for got, expected in zip(outcome.value, want, strict=True):
            assert got.tobytes() == expected.tobytes()


def test_tasks_park_at_each_solve_and_run_in_their_order_each_round() -> None:
    rng = np.random.default_rng(3)
    lam, mu, c, weight = _inputs(rng, 4, 2)
    trace: list[str] = []

    def task(name: str, solves: int) -> Callable[[], str]:
        def body() -> str:
            for i in range(solves):
                trace.append(f"{name}{i}")
                joined.mixture_sojourn_quantile(0.95, lam, mu, c, weight)
            trace.append(f"{name}.")
            return name
        return body

    outcomes = joined.run([task("a", 2), task("b", 1), task("c", 0)])
    assert [o.value for o in outcomes] == ["a", "b", "c"]
    assert trace == ["a0", "b0", "c.", "a1", "b.", "a."]


def test_a_call_that_fails_fails_in_its_own_task_only() -> None:
    rng = np.random.default_rng(5)
    good = _inputs(rng, 6, 2)
    lam, mu, c, weight = _inputs(rng, 3, 2)
    bad = (lam, mu[:, :1].repeat(3, axis=1), c, weight)   # 3 classes of rate for 2 of load
    with pytest.raises(ValueError):
        sojourn.mixture_sojourn_quantile(0.95, *bad)

    def calling(arrays: Arrays) -> Callable[[], FloatArray]:
        return lambda: joined.mixture_sojourn_quantile(0.95, *arrays)

    outcomes = joined.run([calling(good), calling(bad), calling(good)])
    assert isinstance(outcomes[1].error, ValueError)
    want = sojourn.mixture_sojourn_quantile(0.95, *good)
    for o in (outcomes[0], outcomes[2]):
        assert o.error is None and o.value is not None
        assert o.value.tobytes() == want.tobytes()


def test_a_tasks_clock_leaves_out_the_other_tasks_and_the_others_share_of_a_solve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("planner.models.joined.perf_counter", lambda: now[0])
    rng = np.random.default_rng(7)
    lam, mu, c, weight = _inputs(rng, 10, 2)
    real = sojourn.mixture_sojourn_quantile

    def slow_solve(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray,
                   weight: FloatArray, iterations: int = 8) -> FloatArray:
        now[0] += 4.0                                      # the joined solve: 4 s, 20 rows
        return real(q, lam, mu, c, weight, iterations)

    monkeypatch.setattr(sojourn, "mixture_sojourn_quantile", slow_solve)
    seen: dict[str, float] = {}

    def task(name: str, work_s: float) -> Callable[[], None]:
        def body() -> None:
            start = joined.clock()
            now[0] += work_s                               # its own work before the solve
            joined.mixture_sojourn_quantile(0.95, lam, mu, c, weight)
            now[0] += work_s                               # and after
            seen[name] = joined.clock() - start
        return body

    joined.run([task("a", 1.0), task("b", 10.0)])
    assert seen["a"] == pytest.approx(2.0 + 2.0)           # its work, half the solve
    assert seen["b"] == pytest.approx(20.0 + 2.0)
    assert joined.clock() == now[0]                        # outside a task: the real clock


def test_a_task_runs_in_the_callers_context() -> None:
    def divide() -> float:
        return float(np.float64(1.0) / np.float64(0.0))

    with np.errstate(divide="raise"):
        outcome = joined.run([divide])[0]
    assert isinstance(outcome.error, FloatingPointError)
    with np.errstate(divide="ignore"):
        assert joined.run([divide])[0].value == float("inf")


def test_outside_a_task_a_solve_is_the_solve() -> None:
    rng = np.random.default_rng(11)
    arrays = _inputs(rng, 5, 3)
    got = joined.mixture_sojourn_quantile(0.9, *arrays)
    assert got.tobytes() == sojourn.mixture_sojourn_quantile(0.9, *arrays).tobytes()


def test_calls_under_another_error_state_are_solved_under_their_own() -> None:
    rng = np.random.default_rng(13)
    arrays = _inputs(rng, 6, 2)
    states: list[dict[str, str]] = []
    real = sojourn.mixture_sojourn_quantile

    def solve(q: float, lam: FloatArray, mu: FloatArray, c: FloatArray, weight: FloatArray,
              iterations: int = 8) -> FloatArray:
        states.append({k: str(v) for k, v in np.geterr().items()})
        return real(q, lam, mu, c, weight, iterations)

    def strict() -> FloatArray:
        with np.errstate(over="raise"):
            return joined.mixture_sojourn_quantile(0.95, *arrays)

    def lenient() -> FloatArray:
        return joined.mixture_sojourn_quantile(0.95, *arrays)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sojourn, "mixture_sojourn_quantile", solve)
        with np.errstate(over="ignore"):
            outcomes = joined.run([strict, lenient, strict])
    assert [o.error for o in outcomes] == [None] * 3
    assert sorted(s["over"] for s in states) == ["ignore", "raise"]   # two solves, one each


def test_an_interrupted_run_unwinds_its_parked_tasks() -> None:
    rng = np.random.default_rng(17)
    arrays = _inputs(rng, 3, 2)
    unwound: list[str] = []

    def parked(name: str) -> Callable[[], None]:
        def body() -> None:
            try:
                joined.mixture_sojourn_quantile(0.95, *arrays)
            finally:
                unwound.append(name)
        return body

    def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        joined.run([parked("a"), parked("b"), interrupt])
    assert unwound == ["a", "b"]
