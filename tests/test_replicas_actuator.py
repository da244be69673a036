from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actuators import registry
from actuators.replicas import ReplicasActuator
from planner.domain.admin import AdminConfig, ReplicaBounds
from planner.domain.errors import SpecError
from planner.domain.memory import Memory
from planner.domain.state import WorkloadConfig, WorkloadState


def actuator(**bounds: float) -> ReplicasActuator:
    admin = AdminConfig(replicas=ReplicaBounds(**bounds))  # type: ignore[arg-type]
    return ReplicasActuator(admin)


def test_step_is_limited_and_says_why() -> None:
    m: Memory = {}
    act = actuator(min=1, max=50, max_step=3)
    [a] = act.steps("ns/w", WorkloadConfig(2), WorkloadConfig(10), now=0, memory=m)
    assert a.params == {"replicas": 5, "from": 2}
    assert "max step 3" in a.reason


def test_bounds_clip_target() -> None:
    m: Memory = {}
    act = actuator(min=2, max=6, max_step=100)
    [a] = act.steps("ns/w", WorkloadConfig(4), WorkloadConfig(99), now=0, memory=m)
    assert a.params["replicas"] == 6
    [b] = act.steps("ns/w", WorkloadConfig(4), WorkloadConfig(0), now=0, memory=m)
    assert b.params["replicas"] == 2
    assert act.steps("ns/w", WorkloadConfig(6), WorkloadConfig(99), now=0, memory=m) == []


def test_cooldown_holds_scale_down_after_scale_up() -> None:
    m: Memory = {}
    act = actuator(max_step=10, cooldown_s=120)
    [up] = act.steps("ns/w", WorkloadConfig(2), WorkloadConfig(5), now=100, memory=m)
    m = act.applied(up, now=100, memory=m)
    assert act.steps("ns/w", WorkloadConfig(5), WorkloadConfig(3), now=150, memory=m) == []
    assert "cooldown" in act.held["ns/w"]
    # scale-up is never held back
    assert act.steps("ns/w", WorkloadConfig(5), WorkloadConfig(8), now=150, memory=m)
    [down] = act.steps("ns/w", WorkloadConfig(5), WorkloadConfig(3), now=221, memory=m)
    assert down.params["replicas"] == 3


def test_candidates_within_bounds() -> None:
    act = actuator(min=1, max=5, max_step=4)
    wl = WorkloadState("ns", "w", WorkloadConfig(4))
    cands = act.candidates(wl, WorkloadConfig(4))
    assert cands and all(1 <= c.replicas <= 5 and c.replicas != 4 for c in cands)


@given(st.integers(0, 40), st.integers(0, 80), st.integers(1, 10), st.integers(1, 20),
       st.integers(20, 60))
def test_steps_always_respect_bounds(cur: int, want: int, step: int, lo: int, hi: int) -> None:
    m: Memory = {}
    act = actuator(min=lo, max=hi, max_step=step, cooldown_s=0)
    for a in act.steps("ns/w", WorkloadConfig(cur), WorkloadConfig(want), now=0, memory=m):
        new = a.params["replicas"]
        assert abs(new - cur) <= step
        if lo <= cur <= hi:
            assert lo <= new <= hi


def test_registry_rejects_unknown_actuator() -> None:
    try:
        registry.create(["replicas", "teleport"], AdminConfig())
    except SpecError as exc:
        assert exc.field == "actuators" and "replicas" in exc.fix
    else:
        raise AssertionError("unknown actuator accepted")


def test_a_finished_rollout_is_applied_by_the_actuator_that_made_it() -> None:
    # remove-pod is a drop-in for replicas: its finish action must name remove-pod, the
    # actuator the controller has enabled, not replicas.
    admin = AdminConfig(actuators=("remove-pod",), replicas=ReplicaBounds(max=50, max_step=2))
    acts = registry.create(admin.actuators, admin)
    [act] = [a for a in acts.values() if isinstance(a, ReplicasActuator)]
    a = act.finish_rollout("ns/w", WorkloadConfig(30), 24)
    assert a.actuator == "remove-pod" and a.actuator in acts
    assert a.params == {"replicas": 24, "from": 30}          # no max step: a rollout ending
