"""Small pure pieces of planner.k8s: the cycle runner, merge patches, quantities, selectors."""

from __future__ import annotations

import pytest

from planner.k8s.quantities import cpu_quantity, parse_quantity, parse_time, selector_matches
from planner.k8s.runner import CycleRunner
from planner.k8s.source import keep_transitions, merge_patch


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_runner_coalesces_ticks_and_changes() -> None:
    clock, ran = Clock(), []
    runner = CycleRunner(lambda: ran.append(clock.t), interval_s=15, clock=clock)
    assert runner.run() and not runner.run()  # a second tick in the same interval: no cycle
    clock.t = 14.5
    assert runner.run()  # due at 95 % of the interval (timers drift)
    tickets = [runner.request() for _ in range(1000)]  # 1000 intents resumed together
    assert sum(runner.run(t) for t in tickets) == 1
    late = runner.request()
    assert runner.run(late) and runner.cycles == 4 and len(ran) == 4


def test_runner_survives_failures_and_waits_for_readiness() -> None:
    ready = [False]

    def boom() -> None:
        raise RuntimeError("bug")

    runner = CycleRunner(boom, interval_s=1, ready=lambda: ready[0])
    assert not runner.due() and not runner.run()
    ready[0] = True
    assert runner.due() and not runner.run()
    assert runner.failures == 1 and runner.last_error == "RuntimeError: bug"


def test_merge_patch() -> None:
    old = {"a": 1, "b": {"x": 1, "y": 2}, "c": [1], "gone": True}
    new = {"a": 1, "b": {"x": 1, "y": 3, "z": 0}, "c": [1, 2]}
    assert merge_patch(old, new) == {"b": {"y": 3, "z": 0}, "c": [1, 2], "gone": None}
    assert merge_patch(new, new) == {}


def test_keep_transitions_keeps_the_server_time_when_status_did_not_flip() -> None:
    server = {"conditions": [{"type": "A", "status": "True", "lastTransitionTime": "old"},
                             {"type": "B", "status": "False", "lastTransitionTime": "old"}]}
    new = {"conditions": [{"type": "A", "status": "True", "lastTransitionTime": "now"},
                          {"type": "B", "status": "True", "lastTransitionTime": "now"}]}
    got = keep_transitions(new, server)["conditions"]
    assert [c["lastTransitionTime"] for c in got] == ["old", "now"]


@pytest.mark.parametrize(("text", "value"), [("500m", 0.5), ("2", 2.0), ("0.25", 0.25),
                                             ("1Gi", 2.0**30), ("100u", 1e-4), (3, 3.0)])
def test_parse_quantity(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_quantity_helpers() -> None:
    assert [cpu_quantity(c) for c in (0.5, 1.0, 2.25)] == ["500m", "1", "2250m"]
    with pytest.raises(ValueError):
        parse_quantity("lots")
    assert parse_time("1970-01-01T00:01:00Z") == 60.0 and parse_time("never") is None


def test_selector_matches() -> None:
    labels = {"app": "web", "tier": "gold"}
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "api"}}, labels)
    assert selector_matches({"matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
        {"key": "canary", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches({"matchExpressions": [
        {"key": "tier", "operator": "NotIn", "values": ["gold"]}]}, labels)
    assert not selector_matches({}, labels), "an empty selector owns nothing"


def test_load_metrics_per_pod_utilisation_and_unbiased_mean() -> None:
    """Per-pod CPU utilisation reaches the pods (dispatch weights need it), and the workload
    mean divides usage by the requests of the same pods (a starting pod does not dilute it)."""
    from planner.domain.state import PodState, WorkloadConfig, WorkloadState
    from planner.k8s.loadmetrics import PrometheusLoadMetrics

    lm = PrometheusLoadMetrics("http://127.0.0.1:1")
    answers = iter([
        [({"namespace": "shop", "service": "w"}, 120.0)],
        [({"namespace": "shop", "pod": "a"}, 0.5), ({"namespace": "shop", "pod": "b"}, 1.5)],
    ])
    lm._vector = lambda promql: next(answers)  # type: ignore[method-assign]
    pods = (PodState("a", "n", 1.0), PodState("b", "n", 2.0), PodState("c", "n", 2.0))
    wl = WorkloadState("shop", "w", WorkloadConfig(3, 1.0), pods)
    load = lm({"shop/w": wl})["shop/w"]
    assert load.pod_utilization == {"a": 0.5, "b": 0.75}
    assert load.cpu_utilization == pytest.approx(2.0 / 3.0)


def test_load_metrics_measure_canary_pods_apart() -> None:
    """A canary's pods get their own utilisation; the workload's mean is over its own pods."""
    from planner.domain.state import CanaryState, PodState, WorkloadConfig, WorkloadState
    from planner.k8s.loadmetrics import PrometheusLoadMetrics

    lm = PrometheusLoadMetrics("http://127.0.0.1:1")
    answers = iter([
        [({"namespace": "shop", "service": "w"}, 120.0)],
        [({"namespace": "shop", "pod": "a"}, 0.5), ({"namespace": "shop", "pod": "w-c"}, 0.1)],
    ])
    lm._vector = lambda promql: next(answers)  # type: ignore[method-assign]
    canary = CanaryState(WorkloadConfig(1, 0.5), (PodState("w-c", "n", 0.5),))
    wl = WorkloadState("shop", "w", WorkloadConfig(1, 1.0), (PodState("a", "n", 1.0),),
                       canary=canary)
    load = lm({"shop/w": wl})["shop/w"]
    assert load.pod_utilization == {"a": 0.5, "w-c": pytest.approx(0.2)}
    assert load.cpu_utilization == pytest.approx(0.5)


def _pod(spec_cpu: list[str], running: list[str | None]) -> dict[str, object]:
    names = [f"c{i}" for i in range(len(spec_cpu))]
    statuses = []
    for n, cpu in zip(names, running, strict=True):
        st: dict[str, object] = {"name": n, "restartCount": 0}
        if cpu is not None:
            st["resources"] = {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}
        statuses.append(st)
    return {"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "containers": [
                {"name": n, "resources": {"requests": {"cpu": c}}}
                for n, c in zip(names, spec_cpu, strict=True)]},
            "status": {"phase": "Running", "containerStatuses": statuses,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


@pytest.mark.parametrize(("spec_cpu", "running", "cpu"), [
    (["2", "500m"], ["1", "500m"], 1.5),       # a resize to 2.5 not landed yet: 1.5 runs
    (["2", "500m"], ["2", "500m"], 2.5),       # landed
    (["2", "500m"], ["1", None], 2.5),         # not reported for every container: the spec
    (["2"], [None], 2.0),                      # before Kubernetes 1.33: the spec
])
def test_a_pods_cpu_is_what_it_runs_with(spec_cpu: list[str], running: list[str | None],
                                         cpu: float) -> None:
    """Read through the watch cache's projection, as the backend reads it: while an in-place
    resize is pending the pod counts at the size it runs with (the planner waits on it)."""
    from planner.k8s.convert import pod_state
    from planner.k8s.projections import Interner, project_pod

    raw = _pod(spec_cpu, running)
    assert pod_state(raw).cpu == pytest.approx(cpu)
    assert pod_state(project_pod(raw, Interner())).cpu == pytest.approx(cpu)
