"""The forecast's median is ``np.median``'s, bit for bit (signed zeros, infinities, NaN)."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planner.models.forecast import median

ODD = (0.0, -0.0, 1.0, -1.0, 0.5, 5e-324, -5e-324, 1e308, -1e308, np.inf, -np.inf, np.nan)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.floats(allow_nan=True, allow_infinity=True),
                          st.integers(-3, 3).map(float)), min_size=1, max_size=600))
@example([-0.0]).via("np.mean adds from +0.0")
@example([-0.0, -0.0])
@example([-1.0, -0.0, -0.0, 2.0])
@example([1.0, np.nan, 2.0])
def test_median_is_numpys(values: list[float]) -> None:
    a = np.asarray(values, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = float(np.median(a))
        got = median(a)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
