""":class:`planner.domain.state.PodState` is a frozen dataclass with a hand-written
``__init__`` (one write of its attributes instead of one ``object.__setattr__`` per field):
it must take exactly the fields, with their defaults, and behave as the generated one would."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.domain.state import PodState

_Generated = dataclasses.make_dataclass(
    "_Generated",
    [(f.name, f.type) if f.default is dataclasses.MISSING
     else (f.name, f.type, dataclasses.field(default=f.default))
     for f in dataclasses.fields(PodState)],
    frozen=True)
"""PodState's fields with the ``__init__`` dataclasses generates: the reference."""


def test_the_constructor_takes_every_field_in_order_with_its_default() -> None:
    params = list(inspect.signature(PodState.__init__).parameters.values())[1:]
    fields = dataclasses.fields(PodState)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        for f in fields]


values = st.tuples(st.text(max_size=5), st.none() | st.text(max_size=5),
                   st.floats(0.1, 8.0), st.sampled_from(("cpu", "gpu")), st.booleans(),
                   st.integers(0, 9), st.floats(0, 1e6), st.none() | st.floats(0, 1),
                   st.none() | st.text(max_size=3), st.none() | st.floats(0, 1e3))


@given(values, st.integers(3, 10))
def test_a_pod_state_behaves_as_the_generated_dataclass(args: tuple[Any, ...],
                                                        given_n: int) -> None:
    pod, ref = PodState(*args[:given_n]), _Generated(*args[:given_n])
    assert dataclasses.astuple(pod) == dataclasses.astuple(ref)
    assert repr(pod) == repr(ref).replace("_Generated", "PodState")
    assert pod == PodState(*args[:given_n]) and hash(pod) == hash(PodState(*args[:given_n]))
    assert pod.as_dict() == dataclasses.asdict(ref)
    assert pickle.loads(pickle.dumps(pod)) == pod and copy.deepcopy(pod) == pod
    moved = dataclasses.replace(pod, node="elsewhere", ready=not pod.ready)
    assert (moved.node, moved.ready, moved.name) == ("elsewhere", not pod.ready, pod.name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.cpu = 2.0  # type: ignore[misc]
