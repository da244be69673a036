"""The cpu, device, placement and remove-pod actuators: bounds, cooldowns, candidates, and
their effect on the simulated cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actuators import registry
from actuators.cpu import CpuActuator
from actuators.device import DeviceActuator
from actuators.placement import PlacementActuator
from actuators.remove_pod import RemovePodActuator
from actuators.topology import Topology, observe_all
from planner.domain.admin import AdminConfig, CpuBounds, ReplicaBounds
from planner.domain.errors import SpecError
from planner.domain.memory import Memory
from planner.domain.state import WorkloadConfig, WorkloadState
from simulator.cluster import SimulatedCluster
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
MULTI = ROOT / "examples/scenarios/multi-tenant.yaml"
SHOP = ROOT / "examples/scenarios/diurnal-shop.yaml"
INFERENCE = "ml/inference"   # 6 replicas x 2 cpu, unpinned; pool us-gpu has 4 nodes x 4 GPUs


def sim(path: Path = MULTI) -> SimulatedCluster:
    return SimulatedCluster(load_scenario(path), start_time=0.0)


def settle(cluster: SimulatedCluster, seconds: float = 180.0) -> None:
    t = 0.0
    while t < seconds:
        cluster.step(5.0)
        t += 5.0


def ws(config: WorkloadConfig) -> WorkloadState:
    return WorkloadState("ns", "w", config)


# ---------------------------------------------------------------------------- registry
def test_new_actuators_are_registered() -> None:
    assert {"replicas", "cpu", "device", "placement", "remove-pod"} <= set(registry.available())
    acts = registry.create(["replicas", "cpu", "device", "placement"], AdminConfig())
    assert [a.knobs for a in acts.values()] == [("replicas",), ("cpu",), ("device",), ("pool",)]


def test_remove_pod_and_replicas_are_mutually_exclusive() -> None:
    with pytest.raises(SpecError) as err:
        registry.create(["replicas", "remove-pod"], AdminConfig())
    assert err.value.field == "actuators" and "replicas" in err.value.problem
    assert "remove-pod" in registry.create(["remove-pod", "cpu"], AdminConfig())


# ---------------------------------------------------------------------------- cpu
def cpu_act(cooldown: float = 300.0) -> CpuActuator:
    return CpuActuator(AdminConfig(cpu=CpuBounds(sizes=(0.5, 1.0, 2.0, 4.0),
                                                 cooldownSeconds=cooldown)))


def test_cpu_clip_and_candidates_are_neighbouring_sizes() -> None:
    act = cpu_act()
    assert act.clip(WorkloadConfig(3, cpu=3.1)).cpu == 4.0
    assert act.clip(WorkloadConfig(3, cpu=0.1)).cpu == 0.5
    assert act.clip(WorkloadConfig(3, cpu=1.5)).cpu == 2.0     # tie: the larger size
    assert {c.cpu for c in act.candidates(ws(WorkloadConfig(3)), WorkloadConfig(3))} == {0.5, 2.0}
    assert [c.cpu for c in act.candidates(ws(WorkloadConfig(3, cpu=4.0)),
                                          WorkloadConfig(3, cpu=4.0))] == [2.0]
    off_grid = act.candidates(ws(WorkloadConfig(3, cpu=3.0)), WorkloadConfig(3, cpu=3.0))
    assert {c.cpu for c in off_grid} == {2.0, 4.0}
    assert all(c.replicas == 3 for c in off_grid)


def test_cpu_one_size_per_cycle_and_cooldown_after_any_change() -> None:
    m: Memory = {}
    act = cpu_act(cooldown=300)
    [a] = act.steps("ns/w", WorkloadConfig(3, cpu=0.5), WorkloadConfig(3, cpu=4.0), now=0, memory=m)
    assert a.params == {"cpu": 1.0, "from": 0.5}
    assert a.reason.startswith("resize 0.5 -> 1 cpu (towards 4, one size per cycle):")
    m = act.applied(a, now=0, memory=m)
    # held in both directions: a resize restarts every pod
    assert act.steps("ns/w", WorkloadConfig(3, cpu=1.0), WorkloadConfig(3, cpu=4.0), now=100,
                     memory=m) == []
    assert "cooldown 300s" in act.held["ns/w"]
    assert act.steps("ns/w", WorkloadConfig(3, cpu=1.0), WorkloadConfig(3, cpu=0.5), now=299,
                     memory=m) == []
    [b] = act.steps("ns/w", WorkloadConfig(3, cpu=1.0), WorkloadConfig(3, cpu=0.5), now=300,
                    memory=m)
    assert b.params["cpu"] == 0.5 and "ns/w" not in act.held
    # another intent (its own memory) is not held by this one's change
    assert act.steps("ns/x", WorkloadConfig(3), WorkloadConfig(3, cpu=2.0), now=1, memory={})
    # a target off the grid goes to the nearest size; the same size: nothing to do
    assert act.steps("ns/y", WorkloadConfig(3, cpu=2.0), WorkloadConfig(3, cpu=2.2), now=0,
                     memory=m) == []


@given(st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0, 3.0]), st.floats(0.01, 16.0))
def test_cpu_steps_stay_on_the_grid(cur: float, want: float) -> None:
    m: Memory = {}
    act = cpu_act(cooldown=0)
    sizes = act.sizes
    for a in act.steps("ns/w", WorkloadConfig(2, cpu=cur), WorkloadConfig(2, cpu=want), now=0,
                       memory=m):
        new = a.params["cpu"]
        assert new in sizes
        between = [s for s in sizes if min(cur, new) < s < max(cur, new)]
        assert not between                                   # one size at a time


def test_cpu_resize_changes_pods_on_the_simulator() -> None:
    m: Memory = {}
    cluster = sim()
    admin = AdminConfig(actuators=("replicas", "cpu"))
    act = registry.create(admin.actuators, admin)["cpu"]
    cur = cluster.observe().workloads[INFERENCE].config
    assert cur.cpu == 2.0
    [a] = act.steps(INFERENCE, cur, cur.with_(cpu=4.0), now=cluster.now(), memory=m)
    act.apply(a, cluster)
    act.apply(a, cluster)                                   # idempotent
    settle(cluster)
    pods = cluster.observe().workloads[INFERENCE].pods
    assert len(pods) == 6 and {p.cpu for p in pods} == {4.0} and all(p.ready for p in pods)


# ---------------------------------------------------------------------------- device
def test_device_candidates_need_gpu_nodes() -> None:
    admin = AdminConfig()
    blind = DeviceActuator(admin)                           # no topology: no GPU proposed
    cfg = WorkloadConfig(6, cpu=2.0)
    assert blind.candidates(ws(cfg), cfg) == []
    multi = DeviceActuator(admin, sim().observe())
    assert [c.device for c in multi.candidates(ws(cfg), cfg)] == ["gpu"]
    assert multi.candidates(ws(cfg), cfg.with_(pool="eu-general")) == []   # no GPUs there
    assert multi.candidates(ws(cfg), cfg.with_(replicas=17)) == []         # 16 GPUs in all
    shop = DeviceActuator(admin, sim(SHOP).observe())
    assert shop.candidates(ws(cfg), cfg) == []
    on_gpu = cfg.with_(device="gpu")
    assert [c.device for c in shop.candidates(ws(on_gpu), on_gpu)] == ["cpu"]
    cpu_only = DeviceActuator(AdminConfig(devices=("cpu",)), sim().observe())
    assert cpu_only.candidates(ws(cfg), cfg) == []
    assert cpu_only.clip(on_gpu).device == "cpu"


def test_device_steps_hold_without_gpus_and_cool_down() -> None:
    m: Memory = {}
    shop = DeviceActuator(AdminConfig(), sim(SHOP).observe())
    cfg = WorkloadConfig(4)
    assert shop.steps("ns/w", cfg, cfg.with_(device="gpu"), now=0, memory=m) == []
    assert "no GPU nodes" in shop.held["ns/w"]
    act = DeviceActuator(AdminConfig(cpu=CpuBounds(cooldownSeconds=120)), sim().observe())
    [a] = act.steps("ns/w", cfg, cfg.with_(device="gpu"), now=0, memory=m)
    assert a.params == {"device": "gpu", "from": "cpu"}
    assert a.reason.startswith("switch device cpu -> gpu:")
    m = act.applied(a, now=0, memory=m)
    back = cfg.with_(device="gpu")
    assert act.steps("ns/w", back, cfg, now=60, memory=m) == []
    assert "cooldown 120s" in act.held["ns/w"]
    assert act.steps("ns/w", back, cfg, now=121, memory=m)


# ---------------------------------------------------------------------------- placement
def test_placement_bounds_and_candidates() -> None:
    snap = sim().observe()
    act = PlacementActuator(AdminConfig(), snap)
    cfg = WorkloadConfig(6, cpu=2.0)
    # every pool of the cluster, cheapest first; None (anywhere) is the current value
    assert [c.pool for c in act.candidates(ws(cfg), cfg)] == ["eu-general", "us-gpu"]
    pinned = cfg.with_(pool="us-gpu")
    assert [c.pool for c in act.candidates(ws(pinned), pinned)] == ["eu-general", None]
    on_gpu = cfg.with_(device="gpu")
    assert [c.pool for c in act.candidates(ws(on_gpu), on_gpu)] == ["us-gpu"]
    assert act.candidates(ws(cfg), cfg, limit=1) == [cfg.with_(pool="eu-general")]
    assert act.clip(cfg.with_(pool="mars")).pool is None            # unknown pool
    assert act.clip(pinned) == pinned
    only = PlacementActuator(AdminConfig(pools=("us-gpu",)), snap)
    assert only.clip(cfg).pool == "us-gpu"                         # outside the admin's pools
    assert only.candidates(ws(pinned), pinned) == []
    blind = PlacementActuator(AdminConfig())                        # no topology, no pools
    assert blind.candidates(ws(cfg), cfg) == []


def test_placement_steps_and_cooldown() -> None:
    m: Memory = {}
    act = PlacementActuator(AdminConfig(cpu=CpuBounds(cooldownSeconds=200)), sim().observe())
    cfg = WorkloadConfig(6, cpu=2.0)
    [a] = act.steps("ns/w", cfg, cfg.with_(pool="us-gpu"), now=0, memory=m)
    assert a.params == {"pool": "us-gpu", "from": None}
    assert a.reason.startswith("move from anywhere to pool us-gpu (region us-east):")
    m = act.applied(a, now=0, memory=m)
    moved = cfg.with_(pool="us-gpu")
    assert act.steps("ns/w", moved, cfg.with_(pool="eu-general"), now=100, memory=m) == []
    assert "cooldown 200s" in act.held["ns/w"]
    assert act.steps("ns/w", moved, cfg.with_(pool="eu-general"), now=200, memory=m)
    # a GPU workload cannot be pinned where there are no GPUs
    gpu = cfg.with_(device="gpu")
    assert act.steps("ns/x", gpu, gpu.with_(pool="eu-general"), now=0, memory=m) == []
    assert "GPUs" in act.held["ns/x"]


@pytest.mark.parametrize("knob,change", [("device", {"device": "gpu"}),
                                         ("placement", {"pool": "us-gpu"})])
def test_shape_change_moves_pods_to_gpu_nodes_on_the_simulator(knob: str,
                                                               change: dict[str, str]) -> None:
    m: Memory = {}
    cluster = sim()
    admin = AdminConfig(actuators=("replicas", knob))
    act = registry.create(admin.actuators, admin)[knob]
    observe_all([act], cluster.observe())
    cur = cluster.observe().workloads[INFERENCE].config
    [a] = act.steps(INFERENCE, cur, cur.with_(**change), now=cluster.now(), memory=m)  # type: ignore[arg-type]
    act.apply(a, cluster)
    settle(cluster)
    snap = cluster.observe()
    pools = {n.name: n.pool for n in snap.nodes}
    pods = snap.workloads[INFERENCE].pods
    assert len(pods) == 6 and all(p.ready for p in pods)
    assert {pools[p.node] for p in pods if p.node} == {"us-gpu"}
    if knob == "device":
        assert all(p.device == "gpu" for p in pods)
        assert sum(n.gpus_allocated for n in snap.nodes) == 6
    else:
        assert snap.workloads[INFERENCE].config.pool == "us-gpu"


# ---------------------------------------------------------------------------- remove-pod
def test_remove_pod_candidates_one_pod_fewer_and_scale_out() -> None:
    act = RemovePodActuator(AdminConfig(replicas=ReplicaBounds(min=2, max=20, maxStep=4)))
    cfg = WorkloadConfig(5)
    cands = [c.replicas for c in act.candidates(ws(cfg), cfg)]
    assert cands[0] == 4 and set(cands[1:]) == {6, 7, 9}
    assert all(c.replicas > 2 for c in act.candidates(ws(WorkloadConfig(2)), WorkloadConfig(2)))


def test_remove_pod_removes_the_worst_pod_on_the_simulator() -> None:
    m: Memory = {}
    cluster = sim()
    settle(cluster, 30)
    cluster.workloads[INFERENCE].pods[2].restarts = 7
    worst = cluster.workloads[INFERENCE].pods[2].name
    admin = AdminConfig(actuators=("remove-pod",), replicas=ReplicaBounds(min=1, max=20))
    act = registry.create(admin.actuators, admin)["remove-pod"]
    observe_all([act], cluster.observe())
    cur = cluster.observe().workloads[INFERENCE].config
    [a] = act.steps(INFERENCE, cur, cur.with_(replicas=5), now=cluster.now(), memory=m)
    assert a.actuator == "remove-pod"
    assert a.params == {"pods": [worst], "replicas": 5, "from": 6}
    assert a.reason.startswith(f"remove pod {worst} (7 restart(s)")
    assert a.reason.endswith("6 -> 5 replicas")
    act.apply(a, cluster)
    act.apply(a, cluster)                                   # idempotent: the pod is gone
    settle(cluster, 60)
    w = cluster.observe().workloads[INFERENCE]
    assert w.config.replicas == 5 and len(w.pods) == 5
    assert worst not in {p.name for p in w.pods}


def test_remove_pod_removes_idle_pods_first() -> None:
    """Pods a squeeze dispatch leaves idle go before busy ones on loaded nodes; with equal
    shares (or a pod's rate unknown) no pod counts as idle."""
    from dataclasses import replace as dc_replace

    from actuators.remove_pod import idle_pods
    from planner.domain.state import PodState

    pods = [PodState(f"p{i}", f"n{i}", 1.0, request_rate=r, started_at=float(i))
            for i, r in enumerate([30.0, 31.0, 0.4, 29.0, 0.2])]
    assert idle_pods(pods) == {"p2", "p4"}
    assert idle_pods([dc_replace(p, request_rate=10.0) for p in pods]) == set()
    assert idle_pods([*pods[:4], PodState("p4", "n4", 1.0)]) == set()
    cluster = sim()
    settle(cluster, 30)
    snap = cluster.observe()
    w = snap.workloads[INFERENCE]
    quiet = w.pods[0].name                        # the oldest: removed last by age alone
    pods_now = tuple(dc_replace(p, request_rate=0.1 if p.name == quiet else 5.0)
                     for p in w.pods)
    snap = dc_replace(snap, workloads={**snap.workloads,
                                       INFERENCE: dc_replace(w, pods=pods_now)})
    admin = AdminConfig(actuators=("remove-pod",), replicas=ReplicaBounds(min=1, max=20))
    act = registry.create(admin.actuators, admin)["remove-pod"]
    observe_all([act], snap)
    [victim] = act.victims(INFERENCE, 1)
    assert victim.name == quiet
    [a] = act.steps(INFERENCE, w.config, w.config.with_(replicas=w.config.replicas - 1),
                    now=snap.time, memory={})
    assert a.params["pods"] == [quiet] and "idle: 0.1 req/s" in a.reason


def test_remove_pod_scale_out_and_blind_scale_in() -> None:
    m: Memory = {}
    cluster = sim()
    admin = AdminConfig(actuators=("remove-pod",), replicas=ReplicaBounds(min=1, max=20))
    act = RemovePodActuator(admin)                          # never observed a snapshot
    cur = cluster.observe().workloads[INFERENCE].config
    [down] = act.steps(INFERENCE, cur, cur.with_(replicas=4), now=0, memory=m)
    assert down.actuator == "remove-pod" and "no pod data" in down.reason
    act.apply(down, cluster)
    assert cluster.observe().workloads[INFERENCE].config.replicas == 4
    [up] = act.steps(INFERENCE, cur.with_(replicas=4), cur.with_(replicas=8), now=10, memory=m)
    assert up.actuator == "remove-pod" and up.reason.startswith("scale out 4 -> 8")
    act.apply(up, cluster)
    m = act.applied(up, now=10, memory=m)
    assert cluster.observe().workloads[INFERENCE].config.replicas == 8
    # the replicas actuator's anti-flapping rule applies
    assert act.steps(INFERENCE, cur.with_(replicas=8), cur.with_(replicas=4), now=20,
                     memory=m) == []


def test_topology_summarises_pools() -> None:
    topo = Topology.of(sim().observe())
    assert list(topo.pools) == ["eu-general", "us-gpu"]
    assert topo.gpus(None) == 16 and topo.gpus("eu-general") == 0 and topo.gpus("nowhere") == 0
    assert topo.pools["us-gpu"].region == "us-east" and topo.pools["eu-general"].nodes == 12
