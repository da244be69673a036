"""The grid's rows without the grid, and the judgement's capping without ``np.nan_to_num``:
the same values as what they replace (the windowed search and every judgement use them)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.planners.grid import _capped
from planner.planners.search_space import SearchSpace

POOLS = (None, "a", "b", "gen1")


@st.composite
def spaces(draw: Any) -> SearchSpace:
    lo = draw(st.integers(1, 5))
    replicas = tuple(range(lo, lo + draw(st.integers(1, 90))))
    cpus = tuple(draw(st.lists(st.sampled_from((0.25, 0.5, 1.0, 2, 4.0)), min_size=1,
                               max_size=4)))
    devices = tuple(draw(st.lists(st.sampled_from(("cpu", "gpu")), min_size=1, max_size=3)))
    pools = tuple(draw(st.lists(st.sampled_from(POOLS), min_size=1, max_size=5)))
    return SearchSpace(replicas, cpus, devices, pools)


@settings(max_examples=300, deadline=None)
@given(spaces(), st.data())
def test_rows_are_the_grids_rows(space: SearchSpace, data: Any) -> None:
    """Duplicate CPU sizes, devices and pools included (a space built from an admin's lists)."""
    grid = space.grid()
    idx = np.asarray(sorted(data.draw(st.sets(st.integers(0, space.size - 1), max_size=60))),
                     dtype=np.int64)
    want, got = grid.take(idx), space.rows(idx)
    for col in ("replicas", "cpu", "gpu"):
        a, b = getattr(want, col), getattr(got, col)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert want.pool == got.pool


ODD = (0.0, -0.0, 1.0, -1.0, 1e9, 2e9, -1e308, 1e308, 5e-324, np.inf, -np.inf, np.nan)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(ODD)),
                max_size=40))
def test_capped_is_nan_to_num(values: list[float]) -> None:
    a = np.asarray(values, dtype=float)
    want = np.nan_to_num(a, nan=1e9, posinf=1e9)
    got = _capped(a)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
