"""The ``weights`` actuator: engine input from the snapshot, guards seen through the actuator,
data planes (HAProxy down and back, Envoy EDS, ConfigMap), events, the simulator's dispatch,
and the end-to-end effect on a cluster with pods of different speeds."""

from __future__ import annotations

import json
import logging
import math
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from actuators import registry
from actuators import weights as aw
from actuators.dataplanes import haproxy as hw
from actuators.dispatch.memory import WeightsMemory
from bench.harness import haproxy as sh
from knowledge.connect import open_knowledge_base
from planner.domain import events
from planner.domain.admin import AdminConfig, parse_admin
from planner.domain.errors import SpecError, TemporaryError
from planner.domain.intents import KPIProfile, parse_profile
from planner.domain.memory import EMPTY, Memory
from planner.domain.plan import Action, Plan
from planner.domain.ports import ClusterBackend, UnsupportedOperation
from planner.domain.state import (
    CanaryState,
    ClusterSnapshot,
    PodState,
    WorkloadConfig,
    WorkloadState,
)
from simulator import cluster as sim_cluster
from simulator.cluster import SimulatedCluster, StepRecord, kpi_value
from simulator.runner import ScenarioRun
from simulator.scenario import Scenario, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
HETEROGENEOUS = ROOT / "examples/scenarios/heterogeneous.yaml"
KEY = "video/analytics"
CFG = WorkloadConfig(3, 2.0)
REF = 64


# -- helpers ---------------------------------------------------------------------------------


class RecordingBackend(ClusterBackend):
    """Records the weights it is given; ``supported=False``: a backend without weights."""

    name = "recording"

    def __init__(self, supported: bool = True) -> None:
        self.supported = supported
        self.weights: dict[str, dict[str, int]] = {}

    def now(self) -> float:
        return 0.0

    def observe(self) -> ClusterSnapshot:
        raise NotImplementedError

    def scale(self, workload: str, replicas: int) -> None:
        raise NotImplementedError

    def set_weights(self, workload: str, weights: dict[str, int]) -> None:
        if not self.supported:
            super().set_weights(workload, weights)
        self.weights[workload] = dict(weights)


def pod(name: str, util: float | None = 0.5, ready: bool = True) -> PodState:
    return PodState(name, "node-1" if ready else None, 2.0, ready=ready, cpu_utilization=util)


def snapshot(t: float, pods: Sequence[PodState], rate: float | None = 90.0) -> ClusterSnapshot:
    ws = WorkloadState("video", "analytics", CFG.with_(replicas=len(pods)), tuple(pods),
                       request_rate=rate)
    return ClusterSnapshot(t, (), {KEY: ws})


def admin(**dispatch: Any) -> AdminConfig:
    return parse_admin({"actuators": ["replicas", "weights"], "dispatch": dispatch})


class Driver:
    """What the controller does for this actuator, cycle after cycle: observe, steps, apply,
    applied, threading the actuator's memory of the intent."""

    def __init__(self, act: aw.WeightsActuator, memory: Memory = EMPTY) -> None:
        self.act = act
        self.memory = memory

    @property
    def mem(self) -> WeightsMemory:
        return WeightsMemory.of(self.memory, KEY)

    def __call__(self, backend: ClusterBackend, snap: ClusterSnapshot) -> Action | None:
        act = self.act
        act.observe_cluster(snap)
        self.memory = act.observe(KEY, snap.time, self.memory)
        actions = act.steps(KEY, CFG, CFG, snap.time, self.memory)
        assert len(actions) <= 1
        for a in actions:
            act.apply(a, backend)
            self.memory = act.applied(a, snap.time, self.memory)
        return actions[0] if actions else None


def weights_memory(run: ScenarioRun) -> WeightsMemory:
    """The weights actuator's memory of the scenario's intent, as the controller keeps it."""
    return WeightsMemory.of(run.controller.memory(KEY).for_actuator("weights"), KEY)


def with_admin(scenario: Scenario, **changes: Any) -> Scenario:
    spec = scenario.spec.model_copy(update={"admin": scenario.spec.admin.model_copy(
        update=changes)})
    return Scenario(spec, scenario.intents, scenario.profiles, scenario.base_dir)


def latency_profile(percentile: int) -> KPIProfile:
    return parse_profile({"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
                          "metadata": {"name": f"p{percentile}", "namespace": "video"},
                          "spec": {"type": "latency", "percentile": percentile}})


def run_scenario(scenario: Scenario, duration: float, planner: str | None = None
                 ) -> tuple[dict[str, Any], list[StepRecord]]:
    """Run and keep every step's record (the cluster keeps only a sliding window)."""
    run = ScenarioRun(scenario, planner)
    records: list[StepRecord] = []
    while run.elapsed + 1e-9 < duration:
        run.advance()
        records.extend(run.sim.window(KEY, seconds=run.step_s + 1e-9)[-1:])
    return run.report(0.0).as_dict(), records


# -- registry, config ------------------------------------------------------------------------


def test_enabling_weights_needs_no_other_config() -> None:
    cfg = AdminConfig(actuators=("replicas", "weights"))
    acts = registry.create(cfg.actuators, cfg)
    act = acts["weights"]
    assert isinstance(act, aw.WeightsActuator)
    assert act.knobs == ("weights",)
    assert act.candidates(snapshot(0, [pod("a")]).workloads[KEY], CFG) == []
    assert act.engine().policy.name == "slo"
    assert act.writers(KEY) == []


@pytest.mark.parametrize("dispatch, field", [
    ({"engine": {"minShare": 1.5}}, "admin.dispatch.engine.minShare"),
    ({"haproxy": {"address": "no-port"}}, "admin.dispatch.haproxy"),
    ({"haproxy": {"address": "/run/haproxy.sock", "server": "static"}},
     "admin.dispatch.haproxy"),
    ({"haproxy": {"address": "127.0.0.1:1"}, "engine": {"maxWeight": 1000}}, "admin.dispatch"),
    ({"envoy": {"path": "/x/{cluster}.json"}}, "admin.dispatch.envoy"),
    ({"workloads": ["no-namespace"]}, "admin.dispatch"),
    ({"bogus": 1}, "admin.dispatch.bogus"),
])
def test_dispatch_config_is_validated(dispatch: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        admin(**dispatch)
    assert err.value.field == field


@pytest.mark.parametrize("dispatch, field", [
    ({"policy": "nope"}, "dispatch.policy"),
    ({"policyParams": {"smoothing": 7}}, "dispatch.policyParams"),
])
def test_dispatch_policy_is_checked_when_the_actuator_is_created(dispatch: dict[str, Any],
                                                                 field: str) -> None:
    cfg = admin(**dispatch)            # the admin's own schema cannot know installed policies
    with pytest.raises(SpecError) as err:
        registry.create(("replicas", "weights"), cfg)
    assert err.value.field == field


# -- guards through the actuator -------------------------------------------------------------


_util = st.one_of(st.none(), st.floats(0.0, 1.0), st.sampled_from(
    [math.nan, math.inf, -0.5, 3.0]))
_pod = st.tuples(st.booleans(), _util)
_cycle = st.tuples(st.lists(_pod, min_size=1, max_size=6),
                   st.one_of(st.none(), st.floats(0.0, 500.0), st.just(math.nan)))


@settings(max_examples=60, deadline=None)
@given(st.lists(_cycle, min_size=1, max_size=12), st.sampled_from(["slo", "orca", "lvs"]))
def test_no_ready_pod_ever_gets_weight_zero(cycles: list[Any], policy: str) -> None:
    cycle = Driver(aw.WeightsActuator(admin(policy=policy, engine={"blackoutSeconds": 0})))
    backend = RecordingBackend()
    for i, (pods, rate) in enumerate(cycles):
        snap = snapshot(15.0 * i, [pod(f"p{j}", u, r) for j, (r, u) in enumerate(pods)], rate)
        action = cycle(backend, snap)
        if action is not None:
            for p in snap.workloads[KEY].pods:
                w = action.params["weights"][p.name]
                assert (w > 0) if p.ready else (w == 0), (p, w)
        held = backend.weights.get(KEY, {})
        for p in snap.workloads[KEY].pods:  # what the load balancer holds after the cycle
            if p.ready:
                assert held.get(p.name, 0) > 0


def test_missing_or_malformed_metric_keeps_the_last_weight() -> None:
    cycle = Driver(aw.WeightsActuator(admin(policy="orca")))
    backend = RecordingBackend()
    t = 0.0
    busy = {"a": 0.9, "b": 0.3, "c": 0.3}
    for _ in range(8):  # past the blackout: weights follow qps / utilisation
        cycle(backend, snapshot(t, [pod(n, u) for n, u in busy.items()]))
        t += 15.0
    before = dict(backend.weights[KEY])
    assert before["a"] < before["b"]
    for bad in (math.nan, None, -1.0):
        # c's metric is malformed or missing while a and b change: c keeps its weight
        busy = {"a": busy["b"], "b": busy["a"]}
        action = cycle(backend, snapshot(t, [pod("a", busy["a"]), pod("b", busy["b"]),
                                             pod("c", bad)]))
        t += 15.0
        assert action is not None
        assert backend.weights[KEY]["c"] == before["c"]
        c = cycle.mem.engine["endpoints"]["c"]  # held: the problem is remembered, the weight kept
        assert c["problem"] and c["weight"] == before["c"]
        assert "c" not in cycle.mem.decisions  # only changed weights carry their decision
        assert not any(c["pod"] == "c" for c in action.params["changes"])
    # no valid data for longer than the expiry: c falls back to the mean weight
    changes = []
    for _ in range(14):
        action = cycle(backend, snapshot(t, [pod("a", 0.5), pod("b", 0.5), pod("c", None)]))
        changes += [c for c in (action.params["changes"] if action else []) if c["pod"] == "c"]
        t += 15.0
    assert changes[-1]["status"] == "expired" and "stale" in changes[-1]["reason"]
    assert backend.weights[KEY]["c"] == REF


@pytest.mark.parametrize("policy", ["slo", "orca", "lvs"])
def test_action_reason_names_the_policy_and_each_change(policy: str) -> None:
    cycle = Driver(aw.WeightsActuator(admin(policy=policy, engine={"blackoutSeconds": 0})))
    backend = RecordingBackend()
    actions = []
    for i in range(6):
        a = cycle(backend, snapshot(15.0 * i, [pod("fast", 0.2), pod("slow", 0.8)]))
        if a is not None:
            actions.append(a)
    computed = [a for a in actions if any(c["status"] == "computed" for c in a.params["changes"])]
    assert computed, "the weights never moved"
    for a in actions:
        assert a.actuator == "weights" and a.workload == KEY
        assert f"policy {policy}" in a.reason
        assert a.params["policy"] == policy
        for c in a.params["changes"]:
            assert c["reason"] and c["to"] == a.params["weights"][c["pod"]]
    last = computed[-1].params["changes"]
    assert any(c["reason"].startswith(f"{policy}:") for c in last)
    assert backend.weights[KEY]["fast"] > backend.weights[KEY]["slow"]


def test_observing_twice_at_one_time_changes_nothing_and_steps_are_pure() -> None:
    """Planners may ask for the steps more than once in a cycle (the grid planner does): the
    samples are taken in once, by observe, and steps only reads the memory."""
    act = aw.WeightsActuator(admin(engine={"blackoutSeconds": 0}))
    act.observe_cluster(snapshot(0.0, [pod("a"), pod("b")]))
    memory = act.observe(KEY, 0.0, EMPTY)
    assert act.observe(KEY, 0.0, memory) is memory
    first = act.steps(KEY, CFG, CFG, 0.0, memory)
    again = act.steps(KEY, CFG, CFG, 0.0, memory)
    assert first and first == again
    assert act.steps(KEY, CFG, CFG, 0.0, EMPTY) == first  # steps observes if nobody did


def test_pods_that_leave_are_forgotten() -> None:
    act = aw.WeightsActuator(admin())
    cycle = Driver(act)
    backend = RecordingBackend()
    cycle(backend, snapshot(0.0, [pod("a"), pod("b")]))
    assert set(cycle.mem.delivered[aw.BACKEND]) == {"a", "b"}
    action = cycle(backend, snapshot(15.0, [pod("a")]))
    assert set(act.engine(cycle.memory).weights) == {"a"}
    assert action is None or set(action.params["weights"]) == {"a"}
    assert set(cycle.mem.delivered[aw.BACKEND]) == {"a"}


def test_the_memory_is_all_the_actuator_keeps() -> None:
    """A new actuator given the memory makes the very actions the one that wrote it would;
    the memory is JSON-safe, and a few numbers per pod."""
    live = Driver(aw.WeightsActuator(admin(engine={"blackoutSeconds": 0})))
    backend = RecordingBackend()
    pods = [pod(f"p{i}", 0.2 + 0.1 * i) for i in range(6)]
    for i in range(5):
        live(backend, snapshot(15.0 * i, pods))
    stored = json.loads(json.dumps(live.memory, allow_nan=False))
    assert stored == live.memory
    assert len(json.dumps(stored)) < 400 * len(pods)  # no sample history
    restarted = Driver(aw.WeightsActuator(admin(engine={"blackoutSeconds": 0})), stored)
    other = RecordingBackend()
    for i in range(5, 12):
        pods = [pod(f"p{j}", 0.9 - 0.1 * j if i % 2 else 0.2 + 0.1 * j) for j in range(6)]
        snap = snapshot(15.0 * i, pods, rate=90.0 + 10 * i)
        assert restarted(other, snap) == live(backend, snap)
        assert restarted.memory == live.memory


def test_memory_of_another_workload_or_malformed_starts_afresh(
        caplog: pytest.LogCaptureFixture) -> None:
    act = aw.WeightsActuator(admin())
    act.observe_cluster(snapshot(0.0, [pod("a")]))
    fresh = act.observe(KEY, 0.0, EMPTY)
    assert act.observe(KEY, 0.0, {"workload": "other/one", "at": 0.0}) == fresh
    with caplog.at_level(logging.ERROR):
        assert act.observe(KEY, 0.0, {"workload": KEY, "delivered": {"backend": 3}}) == fresh
        broken = {"workload": KEY, "at": -1.0, "engine": {"endpoints": {"a": {"ready": 1}}}}
        assert act.observe(KEY, 0.0, broken) == fresh
    assert "malformed" in caplog.text and "not restored" in caplog.text


# -- data planes -----------------------------------------------------------------------------


class FakeRuntimeAPI:
    """A port that refuses connections until :meth:`start`, then answers like HAProxy's
    runtime API to ``set server`` (an empty answer)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        self.port = int(self.sock.getsockname()[1])
        self.commands: list[str] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(2.0)
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                self.commands.extend(c.strip() for c in data.decode().split(";"))
                conn.sendall(b"\n")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def runtime_api() -> Iterator[FakeRuntimeAPI]:
    api = FakeRuntimeAPI()
    yield api
    api.close()


def test_haproxy_unreachable_is_logged_and_retried_and_the_cycle_completes(
        runtime_api: FakeRuntimeAPI, caplog: pytest.LogCaptureFixture) -> None:
    sc = load_scenario(HETEROGENEOUS)
    sc = with_admin(sc, actuators=("replicas", "weights"), dispatch=admin(
        haproxy={"address": f"127.0.0.1:{runtime_api.port}", "backend": "be_{name}",
                 "server": "srv-{pod}"}).dispatch)
    run = ScenarioRun(sc)
    act = run.controller.actuators["weights"]
    assert isinstance(act, aw.WeightsActuator)
    with caplog.at_level(logging.WARNING):
        while run.controller.cycles < 3:  # HAProxy down: every cycle completes regardless
            run.advance()
    assert "runtime API unreachable" in caplog.text
    outcome = run.last[0]
    assert not outcome.errors
    assert "haproxy" in weights_memory(run).failures
    assert run.sim.workloads[KEY].weights  # the simulator got the weights all the same
    retry = [a for a in outcome.plan.actions if a.actuator == "weights"] if outcome.plan else []
    assert retry and "retrying haproxy" in retry[0].reason
    runtime_api.start()  # HAProxy is back: the next cycle delivers
    while run.controller.cycles < 4:
        run.advance()
    assert "haproxy" not in weights_memory(run).failures
    holding = weights_memory(run).delivered["haproxy"]
    for pod_name, weight in holding.items():
        assert f"set server be_analytics/srv-{pod_name} weight {weight}" in runtime_api.commands


@pytest.mark.skipif(sh.find_binary() is None, reason=sh.SKIP_REASON)
def test_weights_reach_a_real_haproxy_and_survive_it_going_away(
        caplog: pytest.LogCaptureFixture) -> None:
    sc = load_scenario(HETEROGENEOUS)
    replicas = sc.spec.admin.replicas.model_copy(update={"min": 6, "max": 6})
    servers = [sh.ServerSpec(f"analytics-{i}", "127.0.0.1", 9) for i in range(6)]
    with sh.HAProxyProcess(servers, backend="be_video") as proxy:
        host, port = proxy.api_address
        sc = with_admin(sc, actuators=("replicas", "weights"), replicas=replicas,
                        dispatch=admin(haproxy={"address": f"{host}:{port}",
                                                "backend": "be_{namespace}"}).dispatch)
        run = ScenarioRun(sc)
        act = run.controller.actuators["weights"]
        assert isinstance(act, aw.WeightsActuator)
        run.run(duration=240)
        writer = act.writers(KEY)[0]
        assert isinstance(writer, hw.HAProxyWriter)
        in_haproxy = writer.read_weights()
        assert in_haproxy == weights_memory(run).delivered["haproxy"] \
            == run.sim.workloads[KEY].weights
        assert len(set(in_haproxy.values())) > 1, "heterogeneous pods, equal weights"
    with caplog.at_level(logging.WARNING):  # HAProxy stopped: logged, no exception
        while "haproxy" not in weights_memory(run).failures and run.elapsed < 1800:
            run.advance()  # until the weights move and have to be written
    assert "unreachable" in caplog.text and "haproxy" in weights_memory(run).failures
    assert run.last and not run.last[0].errors
    assert run.sim.workloads[KEY].weights == weights_memory(run).delivered["backend"]


def test_envoy_eds_file_and_backend_without_weights(tmp_path: Path) -> None:
    path = tmp_path / "{namespace}-{name}.json"
    act = aw.WeightsActuator(admin(engine={"blackoutSeconds": 0},
                                   envoy={"path": str(path), "host": "{pod}.{name}.svc",
                                          "port": 8443}))
    backend = RecordingBackend(supported=False)
    cycle = Driver(act)
    action = cycle(backend, snapshot(0.0, [pod("a"), pod("b", ready=False)]))
    assert action is not None
    doc = json.loads((tmp_path / "video-analytics.json").read_text())
    (cla,) = doc["resources"]
    assert cla["cluster_name"] == "analytics"
    eps = {e["endpoint"]["address"]["socket_address"]["address"]: e
           for e in cla["endpoints"][0]["lb_endpoints"]}
    assert eps["a.analytics.svc"]["load_balancing_weight"] == REF
    assert eps["a.analytics.svc"]["endpoint"]["address"]["socket_address"]["port_value"] == 8443
    assert eps["b.analytics.svc"]["health_status"] == "DRAINING"
    assert cycle.mem.failures == {} and cycle.mem.no_backend
    assert set(cycle.mem.delivered) == {"envoy-eds"}
    # nothing changed: nothing to do (the unsupported backend is not retried)
    assert cycle(backend, snapshot(15.0, [pod("a"), pod("b", ready=False)])) is None


def eds_admin(path: Path) -> AdminConfig:
    return admin(engine={"blackoutSeconds": 0},
                 envoy={"path": str(path), "host": "{pod}.{name}.svc", "port": 8443})


def test_a_failing_data_plane_is_remembered_and_retried_with_its_failure_named(
        tmp_path: Path) -> None:
    """apply does not raise for a data plane: it hands the outcome to applied, which records
    the failure in the memory; the next action re-sends to that sink only and names it."""
    target = tmp_path / "not-yet" / "eds.json"
    cycle = Driver(aw.WeightsActuator(eds_admin(target), sleep=lambda _: None))
    backend = RecordingBackend()
    pods = [pod("a"), pod("b")]
    first = cycle(backend, snapshot(0.0, pods))
    assert first is not None and first.params["sinks"] == [aw.BACKEND, "envoy-eds"]
    assert backend.weights[KEY] == {"a": REF, "b": REF}
    assert cycle.mem.delivered[aw.BACKEND] == {"a": REF, "b": REF}
    assert not cycle.mem.delivered.get("envoy-eds")
    failure = cycle.mem.failures["envoy-eds"]
    assert "cannot write" in failure
    retry = cycle(backend, snapshot(15.0, pods))
    assert retry is not None and retry.params["sinks"] == ["envoy-eds"]
    assert retry.params["retry"] == {"envoy-eds": failure}
    assert f"retrying envoy-eds ({failure})" in retry.reason
    target.parent.mkdir()  # the data plane is back
    again = cycle(backend, snapshot(30.0, pods))
    assert again is not None and again.params["sinks"] == ["envoy-eds"]
    assert cycle.mem.failures == {}
    assert cycle.mem.delivered["envoy-eds"] == {"a": REF, "b": REF}
    assert json.loads(target.read_text())["resources"][0]["cluster_name"] == "analytics"
    assert cycle(backend, snapshot(45.0, pods)) is None


class FlakyBackend(RecordingBackend):
    def __init__(self) -> None:
        super().__init__()
        self.down = True

    def set_weights(self, workload: str, weights: dict[str, int]) -> None:
        if self.down:
            raise TemporaryError("API server timeout")
        super().set_weights(workload, weights)


def test_a_failing_backend_raises_after_the_data_planes_and_everything_is_sent_again(
        tmp_path: Path) -> None:
    target = tmp_path / "eds.json"
    act = aw.WeightsActuator(eds_admin(target))
    snap = snapshot(0.0, [pod("a"), pod("b")])
    act.observe_cluster(snap)
    memory = act.observe(KEY, 0.0, EMPTY)
    (action,) = act.steps(KEY, CFG, CFG, 0.0, memory)
    backend = FlakyBackend()
    with pytest.raises(TemporaryError, match="API server timeout"):
        act.apply(action, backend)
    assert target.exists()  # the data planes were written before the backend's error
    # the controller does not call applied: the memory still lags, the next cycle re-sends
    backend.down = False
    cycle = Driver(act, memory)
    again = cycle(backend, snapshot(15.0, [pod("a"), pod("b")]))
    assert again is not None and again.params["sinks"] == [aw.BACKEND, "envoy-eds"]
    assert backend.weights[KEY] == cycle.mem.delivered[aw.BACKEND] == {"a": REF, "b": REF}


def test_applied_without_the_outcome_of_apply_records_every_sink_of_the_action(
        tmp_path: Path) -> None:
    act = aw.WeightsActuator(eds_admin(tmp_path / "eds.json"))
    act.observe_cluster(snapshot(0.0, [pod("a")]))
    memory = act.observe(KEY, 0.0, EMPTY)
    (action,) = act.steps(KEY, CFG, CFG, 0.0, memory)
    after = WeightsMemory.of(act.applied(action, 0.0, memory), KEY)
    assert after.delivered == {aw.BACKEND: {"a": REF}, "envoy-eds": {"a": REF}}
    assert act.steps(KEY, CFG, CFG, 0.0, after.as_memory()) == []


def test_backend_without_weights_and_no_data_plane_is_a_permanent_error() -> None:
    act = aw.WeightsActuator(admin())
    act.observe_cluster(snapshot(0.0, [pod("a")]))
    (action,) = act.steps(KEY, CFG, CFG, 0.0, EMPTY)
    with pytest.raises(UnsupportedOperation, match="configure a data plane"):
        act.apply(action, RecordingBackend(supported=False))


def test_configmap_output_through_an_attached_apply_function() -> None:
    applied: list[dict[str, Any]] = []
    act = aw.WeightsActuator(admin(configmap={}))
    assert act.writers(KEY) == []  # no apply function: disabled, with a warning
    act.attach_configmap(applied.append)
    Driver(act)(RecordingBackend(), snapshot(0.0, [pod("a"), pod("b")]))
    (manifest,) = applied
    assert manifest["metadata"] == {"name": "analytics-dispatch-weights", "namespace": "video",
                                    "labels": {"app.kubernetes.io/managed-by": "intent-planner"}}
    assert json.loads(manifest["data"]["weights.json"]) == {"a": REF, "b": REF}


# -- events ----------------------------------------------------------------------------------


def test_every_weight_change_is_an_event_with_its_reasons() -> None:
    kb = open_knowledge_base(None)
    run = ScenarioRun(load_scenario(HETEROGENEOUS), knowledge=kb)
    run.run(duration=240)
    recorded = [d for e in kb.events(KEY) for d in e["dispatch"]]
    assert recorded
    for d in recorded:
        assert d["workload"] == KEY and d["policy"] == "slo" and d["applied"] is True
        assert "policy slo" in d["reason"]
        assert all(c["reason"] and c["pod"] in d["weights"] for c in d["changes"])
    assert any(c["status"] == "computed" and c["reason"].startswith("slo: capacity")
               for d in recorded for c in d["changes"])
    # applied exactly per action when the controller passes the actions it carried out
    a = Action("weights", KEY, {"weights": {"x": 1}, "changes": [], "policy": "slo"}, "r")
    b = Action("replicas", KEY, {"replicas": 3, "from": 2}, "scale")
    plan = Plan(KEY, "grid", CFG, CFG, (b, a))
    assert events.dispatch_record(plan, True, [b]) == [
        {"workload": KEY, "policy": "slo", "weights": {"x": 1}, "changes": [], "retry": {},
         "reason": "r", "applied": False}]
    assert events.dispatch_record(plan, True)[0]["applied"] is True
    assert events.dispatch_record(None, False) == []


# -- the simulator dispatches by the weights ---------------------------------------------------


def two_speed_cluster(replicas: int = 3) -> SimulatedCluster:
    doc = {
        "name": "two-speeds", "duration": "10m",
        "cluster": {"pools": [{"name": "slow", "nodes": 1, "cpu": 8, "speed": 1.0},
                              {"name": "fast", "nodes": 1, "cpu": 8, "speed": 2.0}]},
        "workloads": [{"name": "analytics", "namespace": "video", "replicas": replicas,
                       "cpu": 2, "service": {"rate_per_core": 10, "cpu_exponent": 1.0,
                                             "startup_s": "30s"},
                       "trace": {"kind": "constant", "rate": 30}}],
        "manifests": [
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
             "metadata": {"name": "p95", "namespace": "video"},
             "spec": {"type": "latency", "percentile": 95}},
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
             "metadata": {"name": "analytics", "namespace": "video"},
             "spec": {"targetRef": {"kind": "Deployment", "name": "analytics"},
                      "objectives": [{"name": "p95", "value": 500, "measuredBy": "p95"}]}}],
    }
    return SimulatedCluster(parse_scenario(doc), seed=1, measurement_noise=0.0, start_time=0.0)


def test_simulated_traffic_follows_the_weights() -> None:
    sim = two_speed_cluster()
    pods = sim.workloads[KEY].pods
    assert [p.node.pool.name for p in pods if p.node] == ["slow", "fast", "slow"]
    sim.step(5.0)
    equal = {p.name: p.utilization for p in pods}  # round robin: 10 req/s each
    assert equal[pods[0].name] == pytest.approx(10 / 20)  # 2 cores x 10 req/s x speed 1
    assert equal[pods[1].name] == pytest.approx(10 / 40)  # speed 2
    sim.set_weights(KEY, {pods[0].name: 10, pods[1].name: 40, pods[2].name: 10})
    assert sim.traffic_shares(KEY) == pytest.approx(
        {pods[0].name: 1 / 6, pods[1].name: 4 / 6, pods[2].name: 1 / 6})
    sim.step(5.0)
    assert pods[0].utilization == pytest.approx(30 / 6 / 20)
    assert pods[1].utilization == pytest.approx(30 * 4 / 6 / 40)
    # the windowed utilisation the snapshot reports (metrics window: 15 s)
    by_name = {p.name: p for p in sim.observe().workloads[KEY].pods}
    assert by_name[pods[1].name].cpu_utilization == pytest.approx((0.25 + 0.5) / 2)


def test_new_pod_gets_the_mean_weight_and_a_not_ready_pod_gets_nothing() -> None:
    sim = two_speed_cluster()
    names = [p.name for p in sim.workloads[KEY].pods]
    sim.set_weights(KEY, {names[0]: 20, names[1]: 60, names[2]: 0})  # 0: written while not ready
    # a ready pod at 0 counts as new: the mean of the positive weights, (20 + 60) / 2
    assert sim.traffic_shares(KEY) == pytest.approx({names[0]: 20 / 120, names[1]: 60 / 120,
                                                     names[2]: 40 / 120})
    sim.scale(KEY, 4)
    sim.step(5.0)  # the new pod starts (30 s): no traffic while not ready
    new = sim.workloads[KEY].pods[-1]
    assert new.name not in sim.traffic_shares(KEY) and new.utilization == 0.0
    sim.step(30.0)
    shares = sim.traffic_shares(KEY)
    assert shares[new.name] == shares[names[2]] == pytest.approx(40 / (20 + 60 + 40 + 40))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text("abcdef", min_size=1, max_size=3), unique=True, max_size=6),
       st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.integers(0, 256)))
def test_actuator_and_simulator_agree_on_the_dispatch_rule(
        ready: list[str], weights: dict[str, int]) -> None:
    mine = aw.traffic_shares(ready, weights)
    theirs = sim_cluster.dispatch_shares(ready, weights)
    assert list(mine) == ready
    np.testing.assert_allclose(list(mine.values()), theirs)
    if ready:
        assert sum(mine.values()) == pytest.approx(1.0)


# -- a canary's share ------------------------------------------------------------------------


def with_a_canary(weights: list[int], canary_pods: int, util: float | None = 0.001,
                  ready: int | None = None) -> WorkloadState:
    """A workload of ``len(weights)`` ready pods and a GPU canary of ``canary_pods`` pods at
    utilisation ``util``, the first ``ready`` of them ready (default all)."""
    pods = tuple(pod(f"w{i}") for i in range(len(weights)))
    up = canary_pods if ready is None else ready
    trial = CanaryState(WorkloadConfig(canary_pods, 1.0, "gpu"),
                        tuple(pod(f"c{i}", util, ready=i < up) for i in range(canary_pods)))
    return WorkloadState("video", "analytics", CFG.with_(replicas=len(pods)), pods,
                         request_rate=90.0, canary=trial)


def canary_share(ws: WorkloadState, weights: Mapping[str, int]) -> float:
    assert ws.canary is not None
    ready = [p.name for p in (*ws.pods, *ws.canary.pods) if p.ready]
    shares = aw.traffic_shares(ready, weights)
    return sum(shares.get(p.name, 0.0) for p in ws.canary.pods)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 256), min_size=1, max_size=300), st.integers(1, 4),
       st.sampled_from([0.05, 0.1, 0.25, 0.5]), st.sampled_from([None, 0.001, 0.2]),
       st.lists(st.sampled_from([0, 1, 2, 4, 8]), min_size=4, max_size=4),
       st.integers(1, 64))
def test_a_canary_grows_while_idle_never_past_the_fraction_and_every_pod_has_a_weight(
        own: list[int], canary_pods: int, fraction: float, util: float | None,
        multiples: list[int], held_mean: int) -> None:
    """``multiples``: what the data plane holds for each canary pod, in multiples of the
    workload's held weight ``held_mean`` (0: none)."""
    ws = with_a_canary(own, canary_pods, util)
    held_canary = [m * held_mean for m in multiples]
    mine = {f"w{i}": w for i, w in enumerate(own)}
    before = {**{k: held_mean for k in mine},                         # what the data plane has
              **{f"c{i}": held_canary[i] for i in range(canary_pods)}}
    out = aw.with_canary(ws, mine, fraction, 256, before)
    assert all(0 <= w <= 256 for w in out.values())
    assert all(out[k] > 0 for k, w in mine.items() if w > 0)
    if not any(own):
        # Nothing to scale from (every pod a new endpoint): the canary is left out too, and
        # every ready pod gets an equal share.
        assert not any(f"c{i}" in out for i in range(canary_pods))
        return
    n, k = len(own), canary_pods
    assert all(out[f"c{i}"] >= 1 for i in range(k))          # written, not left out
    target = max(1, math.ceil(fraction * n)) / (n + max(1, math.ceil(fraction * n)))
    natural = k / (n + k)                      # every canary pod at the mean: a new endpoint's
    # What the data plane holds, every canary pod at its siblings' largest (a pod that becomes
    # ready is given it).
    top = max(held_canary[:k])
    share = canary_share(ws, out)
    had = canary_share(ws, {**before, **{f"c{i}": top for i in range(k)}})
    slack = (n + k) * 0.5 / sum(out.values()) + 1e-9           # rounding: half a weight each
    assert share <= max(target, natural) + slack
    assert share >= natural - slack
    if util != 0.001:                         # busy, or no utilisation: not loaded further
        assert share <= max(had, natural) + slack
    elif had < target - 2 * slack and 2 * max(top, held_mean) <= 256:
        event("an idle canary below the fraction's share")
        assert share > had                    # an idle one grows


def test_an_idle_canary_doubles_its_share_each_cycle_within_the_weights_resolution() -> None:
    act = aw.WeightsActuator(admin())
    drive = Driver(act)
    backend = RecordingBackend()
    ws = with_a_canary([REF] * 200, 1)
    multiples = []
    for t in range(6):
        action = drive(backend, ClusterSnapshot(15.0 * t, (), {KEY: ws}))
        if t == 0:
            assert action is not None and any(
                c["pod"] == "c0" and c["status"] == "canary" for c in action.params["changes"])
        held = backend.weights[KEY]
        multiples.append(held["c0"] / (sum(held[f"w{i}"] for i in range(200)) / 200))
    # 2, 4, 8 times a pod's share; then the workload's weights stop at 20 (a change of 5 %,
    # the engine's threshold, is a weight of 1 there) and the canary at 256: 12.8, held.
    assert multiples == pytest.approx([2, 4, 8, 12.8, 12.8, 12.8])
    assert min(backend.weights[KEY].values()) == 20
    # Busy enough to be measured: held where it is, mid-ramp too.
    drive2, backend2 = Driver(aw.WeightsActuator(admin())), RecordingBackend()
    for t in range(2):
        drive2(backend2, ClusterSnapshot(15.0 * t, (), {KEY: ws}))
    busy = with_a_canary([REF] * 200, 1, util=0.2)
    for t in range(2, 4):
        drive2(backend2, ClusterSnapshot(15.0 * t, (), {KEY: busy}))
    assert backend2.weights[KEY]["c0"] == 4 * REF
    # Gone with the canary: the workload's pods alone, at the engine's weights again.
    plain = WorkloadState("video", "analytics", ws.config, ws.pods, request_rate=90.0)
    drive(backend, ClusterSnapshot(200.0, (), {KEY: plain}))
    assert "c0" not in backend.weights[KEY] and set(backend.weights[KEY].values()) == {REF}


def test_a_new_canary_pod_gets_its_siblings_weight_and_a_pod_not_ready_gets_nothing() -> None:
    drive, backend = Driver(aw.WeightsActuator(admin())), RecordingBackend()
    one = with_a_canary([REF] * 80, 2, ready=1)
    for t in range(2):
        drive(backend, ClusterSnapshot(15.0 * t, (), {KEY: one}))
    assert backend.weights[KEY]["c0"] == 4 * REF and backend.weights[KEY]["c1"] == 0
    both = with_a_canary([REF] * 80, 2)
    drive(backend, ClusterSnapshot(30.0, (), {KEY: both}))
    # The ramp goes on from the weight c0 holds (4x), not from a new endpoint's 1x (which
    # would give both 2x); the fraction's share, ceil(0.1 x 80) = 8 pods', is 4x each over two.
    held = backend.weights[KEY]
    assert held["c0"] == held["c1"] == 4 * REF


def test_a_canary_as_many_pods_as_the_fraction_gets_the_mean_written_after_a_scale_in() -> None:
    drive, backend = Driver(aw.WeightsActuator(admin())), RecordingBackend()
    big = with_a_canary([REF] * 40, 1)
    for t in range(2):
        drive(backend, ClusterSnapshot(15.0 * t, (), {KEY: big}))
    assert backend.weights[KEY]["c0"] == 4 * REF
    small = with_a_canary([REF] * 8, 1)      # ceil(0.1 x 8) = 1: its one pod is the fraction
    drive(backend, ClusterSnapshot(30.0, (), {KEY: small}))
    assert backend.weights[KEY]["c0"] == REF
    assert canary_share(small, backend.weights[KEY]) == pytest.approx(1 / 9)


def test_a_canary_busy_from_the_start_gets_a_new_endpoints_share() -> None:
    drive, backend = Driver(aw.WeightsActuator(admin())), RecordingBackend()
    busy = with_a_canary([REF] * 40, 1, util=0.3)
    for t in range(3):
        drive(backend, ClusterSnapshot(15.0 * t, (), {KEY: busy}))
    assert backend.weights[KEY]["c0"] == REF
    assert canary_share(busy, backend.weights[KEY]) == pytest.approx(1 / 41)


def test_the_services_rate_is_split_over_the_canarys_pods_too() -> None:
    drive, backend = Driver(aw.WeightsActuator(admin())), RecordingBackend()
    ws = with_a_canary([REF] * 20, 1)
    for t in range(3):
        drive(backend, ClusterSnapshot(15.0 * t, (), {KEY: ws}))
    share = canary_share(ws, backend.weights[KEY])
    assert share > 1 / 21                       # grown past a new endpoint's
    sample = drive.mem.engine["endpoints"]["w0"]["sample"]
    # 90 req/s, the canary's share taken out, over 20 pods at equal weights.
    assert sample["request_rate"] == pytest.approx(90.0 * (1 - share) / 20)


# -- end to end: pods of two speeds ----------------------------------------------------------


@pytest.mark.slow
def test_weights_lower_tail_latency_on_heterogeneous_pods() -> None:
    """The controller with [replicas, weights] against [replicas] alone, same trace and seed:
    the weighted run has lower p95 and p99 over the run, and uses no more cores."""
    sc = load_scenario(HETEROGENEOUS)
    duration = 1800.0  # the diurnal trace's rise to its peak
    p95, p99 = latency_profile(95), latency_profile(99)
    rr_report, rr = run_scenario(with_admin(sc, actuators=("replicas",)), duration)
    w_report, w = run_scenario(with_admin(sc, actuators=("replicas", "weights")), duration)
    rr95, rr99, w95, w99 = (kpi_value(p, r) for r in (rr, w) for p in (p95, p99))
    assert rr95 is not None and rr99 is not None and w95 is not None and w99 is not None
    assert w95 < 0.95 * rr95
    assert w99 < 0.95 * rr99
    assert w_report["totals"]["core_hours"] <= rr_report["totals"]["core_hours"]


def test_weights_at_a_fixed_replica_count() -> None:
    """Same pods, same cores: only the dispatch differs. Round robin saturates the slow pods
    at the peak; the weights do not."""
    sc = load_scenario(HETEROGENEOUS)
    fixed = sc.spec.admin.replicas.model_copy(update={"min": 12, "max": 12})
    p95 = latency_profile(95)
    # The replica count is pinned, so the planner decides nothing here: the explicit one
    # (no model training) keeps the test about the dispatch alone, and fast.
    rr_report, rr = run_scenario(with_admin(sc, actuators=("replicas",), replicas=fixed), 1800,
                                 "queueing")
    w_report, w = run_scenario(with_admin(sc, actuators=("replicas", "weights"),
                                          replicas=fixed), 1800, "queueing")
    assert w_report["totals"]["core_hours"] == rr_report["totals"]["core_hours"]
    rr95, w95 = kpi_value(p95, rr), kpi_value(p95, w)
    assert rr95 is not None and w95 is not None
    assert w95 < 0.5 * rr95
    assert sum(r.dropped * r.dt for r in w) < sum(r.dropped * r.dt for r in rr)
