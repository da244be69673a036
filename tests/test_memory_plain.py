"""``planner.domain.memory.plain``: memory written down as JSON-safe data, exact builtin types
taken first, with the same result as the general (isinstance) rules for every value."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.domain.memory import plain


def reference(value: Any) -> Any:
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reference(v) for v in value]
    raise TypeError(f"memory holds a {type(value).__name__}: only JSON-safe data can be kept")


class Mode(enum.StrEnum):
    ON = "on"


leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3),
                   st.builds(np.float64, st.floats()), st.just(Mode.ON), st.just(object()))
trees = st.recursive(leaves, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.tuples(kids),
    st.dictionaries(st.one_of(st.text(max_size=2), st.integers(0, 2)), kids, max_size=3),
    st.dictionaries(st.text(max_size=2), kids, max_size=2).map(MappingProxyType)),
    max_leaves=10)


@given(trees)
def test_the_same_data_or_the_same_error_as_the_general_rules(value: Any) -> None:
    try:
        expected: Any = reference(value)
    except TypeError as exc:
        with pytest.raises(TypeError, match=str(exc)):
            plain(value)
        return
    got = plain(value)
    assert got == expected or (got != got and expected != expected)
    assert repr(got) == repr(expected)      # types too: 1 stays int, True stays bool
