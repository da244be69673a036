"""In-place CPU resize in the simulator (:mod:`simulator.resize`): no restart, a delay, the
room it takes; deferral on a node without room, the fallback (an eviction, as the Kubernetes
backend does) past the limit or when the node could never hold it; decreases always in place;
off, a resize is the rolling update it was."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner.domain.errors import SpecError
from simulator import queueing
from simulator.accounting import Accountant
from simulator.cluster import SimulatedCluster, SimWorkload
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
KEY = "shop/checkout"


def scenario(pools: list[dict[str, Any]], replicas: int = 4, cpu: float = 1.0,
             in_place: bool = True, extra: list[dict[str, Any]] | None = None,
             **cluster: Any) -> Any:
    """diurnal-shop's workload on ``pools`` at a constant, noise-free load, without failures
    (``extra``: more workloads, placed first)."""
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml")
                                         .read_text())
    doc["duration"] = "20m"
    doc["cluster"] = {"pools": pools, "in_place_resize": in_place, **cluster}
    w = doc["workloads"][0]
    w.update(replicas=replicas, cpu=cpu)
    w["service"]["failure_rate_per_hour"] = 0.0
    w["trace"] = {"kind": "constant", "rate": 200}
    doc["workloads"] = [*(extra or []), w]
    return parse_scenario(doc, "t", ROOT / "examples/scenarios")


def pool(name: str = "general", nodes: int = 4, cpu: float = 16) -> dict[str, Any]:
    return {"name": name, "nodes": nodes, "cpu": cpu}


def filler(pool_name: str, cpu: float) -> dict[str, Any]:
    """A workload without an intent, pinned to ``pool_name``: one pod of ``cpu`` cores."""
    return {"name": "batch", "namespace": "shop", "replicas": 1, "cpu": cpu,
            "pool": pool_name, "service": {"rate_per_core": 10},
            "trace": {"kind": "constant", "rate": 0}}


def workload(sim: SimulatedCluster) -> SimWorkload:
    return sim.workloads[KEY]


def names(sim: SimulatedCluster) -> set[str]:
    return {p.name for p in workload(sim).pods}


def allocated(sim: SimulatedCluster) -> float:
    return sum(n.cpu_allocated for n in sim.nodes)


def test_a_resize_in_place_keeps_the_pods_and_lands_after_the_delay() -> None:
    sim = SimulatedCluster(scenario([pool()], resize_delay_s=12), start_time=0.0)
    before = names(sim)
    assert sim.observe().in_place_resize
    sim.step(5)
    util_before = [p.utilization for p in workload(sim).pods]
    sim.resize(KEY, 2.0)
    for _ in range(3):                  # admitted at t=5; lands at t=17, the 4th reconcile
        sim.step(5)
        snap = sim.observe().workloads[KEY]
        assert all(p.cpu == 1.0 and p.ready for p in snap.pods)
        # The increase holds its room from admission on (the scheduler counts a resizing
        # pod at its desired size), though the pods still run at the old size.
        assert allocated(sim) == pytest.approx(4 * 2.0)
    sim.step(5)
    snap = sim.observe().workloads[KEY]
    assert names(sim) == before                                  # the same pods,
    assert all(p.cpu == 2.0 and p.ready for p in snap.pods)      # ready, at the new size
    assert all(p.restarts == 0 for p in snap.pods)
    assert allocated(sim) == pytest.approx(4 * 2.0)
    counts = workload(sim).disruption
    assert (counts.in_place, counts.restarts, counts.deferrals, counts.fallbacks) == (4, 0, 0, 0)
    # They serve at the new size: each pod's share of the load over its new service rate.
    svc = workload(sim).spec.service
    mu = queueing.service_rate(svc.rate_per_core, 2.0, svc.cpu_exponent, svc.gpu_speedup, "cpu")
    util_after = [p.utilization for p in workload(sim).pods]
    assert util_after == pytest.approx([200 / 4 / mu] * 4)
    assert max(util_after) < min(util_before)


def test_a_decrease_is_in_place_and_gives_its_room_back_when_it_lands() -> None:
    """A node with no room left: a decrease needs none."""
    sim = SimulatedCluster(scenario([pool(nodes=1, cpu=8)], cpu=2.0), start_time=0.0)
    assert allocated(sim) == 8.0
    sim.resize(KEY, 1.0)
    sim.step(5)                                 # admitted, lands after 3 s: at the next step
    assert allocated(sim) == 8.0 and all(p.cpu == 2.0 for p in workload(sim).pods)
    sim.step(5)
    assert all(p.cpu == 1.0 and p.ready(sim.time) for p in workload(sim).pods)
    assert allocated(sim) == 4.0
    counts = workload(sim).disruption
    assert (counts.in_place, counts.deferrals, counts.restarts) == (4, 0, 0)


def test_an_increase_without_room_is_deferred_and_retried_each_step() -> None:
    """One free core on the node: one pod grows, three wait at their old size (ready), and
    they are admitted as soon as a scale-in frees room (whichever pod it removes)."""
    sim = SimulatedCluster(scenario([pool(nodes=1, cpu=5)]), start_time=0.0)
    sim.resize(KEY, 2.0)
    for _ in range(4):
        sim.step(5)
    pods = workload(sim).pods
    assert sorted(p.cpu for p in pods) == [1.0, 1.0, 1.0, 2.0]
    assert all(p.ready(sim.time) for p in pods)
    counts = workload(sim).disruption
    assert (counts.in_place, counts.deferrals, counts.fallbacks, counts.restarts) == (1, 3, 0, 0)
    assert allocated(sim) == 5.0
    sim.scale(KEY, 3)
    for _ in range(3):           # the pod leaves; the room it frees is taken; the resizes land
        sim.step(5)
    pods = workload(sim).pods
    assert len(pods) == 3 and counts.in_place >= 2
    assert counts.deferrals == 3 and counts.fallbacks == 0     # the same waits, not new ones
    assert allocated(sim) == sum(p.cpu + p.reserved for p in pods) <= 5.0


def test_a_resize_deferred_past_the_limit_evicts_the_pod() -> None:
    """Two nodes: the one the pod runs on is full, the other has room. The pod serves at its
    old size while it waits; past the limit it is evicted, and a pod of the new size starts
    on the other node in its place (that pod alone restarts)."""
    sim = SimulatedCluster(scenario([pool(nodes=2, cpu=8)], replicas=2, cpu=2.0,
                                    resize_deferred_limit_s=20), start_time=0.0)
    full = workload(sim).pods[0].node
    assert full is not None and full is not workload(sim).pods[1].node
    full.cpu_allocated = full.pool.cpu               # another tenant's pods take the rest
    sim.node_index.changed(full)
    stuck = workload(sim).pods[0]
    sim.resize(KEY, 4.0)
    sim.step(5)
    counts = workload(sim).disruption
    assert (counts.in_place, counts.deferrals, counts.fallbacks) == (0, 1, 0)
    for _ in range(3):                                # deferred at t=0, given up at t=20
        sim.step(5)
        assert stuck in workload(sim).pods and stuck.cpu == 2.0 and stuck.ready(sim.time)
    sim.step(5)
    assert counts.fallbacks == 1 and counts.restarts == 1 and counts.in_place == 1
    pods = workload(sim).pods
    assert len(pods) == 2 and stuck not in pods
    assert full.cpu_allocated == full.pool.cpu - 2.0  # the evicted pod's room is free
    new = next(p for p in pods if p.created_at > 0)
    assert new.cpu == 4.0 and new.node is not None and new.node is not full
    assert not new.ready(sim.time)
    for _ in range(4):                                # its start-up (20 s)
        sim.step(5)
    assert all(p.cpu == 4.0 and p.ready(sim.time) for p in workload(sim).pods)


def test_a_resize_no_node_of_its_pool_could_hold_is_replaced_at_once() -> None:
    """Infeasible: more cores than the pod's node has at all. No wait for the limit: the pod
    is evicted and one of the new size starts where one fits (a bigger node, freed
    meanwhile)."""
    sc = scenario([pool("small", nodes=1, cpu=2), pool("big", nodes=1, cpu=8)], replicas=1,
                  extra=[filler("big", 7.0)])
    sim = SimulatedCluster(sc, start_time=0.0)
    pod = workload(sim).pods[0]
    assert pod.node is not None and pod.node.pool.name == "small"
    sim.scale("shop/batch", 0)
    sim.resize(KEY, 4.0)
    sim.step(5)
    counts = workload(sim).disruption
    assert (counts.deferrals, counts.fallbacks, counts.restarts, counts.in_place) == (1, 1, 1, 0)
    assert pod not in workload(sim).pods and pod.node is None
    (new,) = workload(sim).pods
    assert new.cpu == 4.0 and new.node is not None and new.node.pool.name == "big"


def test_a_device_change_is_a_rollout_even_with_in_place_resize() -> None:
    sc = scenario([pool("gpu", nodes=2, cpu=16) | {"gpus": 4}])
    sim = SimulatedCluster(sc, start_time=0.0)
    before = names(sim)
    sim.set_device(KEY, "gpu")
    sim.step(5)
    assert names(sim) > before                     # new pods start beside the old ones
    assert workload(sim).disruption.restarts == 4 and workload(sim).disruption.in_place == 0


@pytest.mark.parametrize("in_place", [False, True])
def test_off_a_resize_is_a_rolling_update_and_counts_its_restarts(in_place: bool) -> None:
    sim = SimulatedCluster(scenario([pool()], in_place=in_place), start_time=0.0)
    before = names(sim)
    sim.resize(KEY, 2.0)
    for _ in range(7):
        sim.step(5)
    pods = workload(sim).pods
    assert len(pods) == 4 and all(p.cpu == 2.0 and p.ready(sim.time) for p in pods)
    counts = workload(sim).disruption
    assert sim.observe().in_place_resize is in_place
    if in_place:
        assert names(sim) == before and (counts.restarts, counts.in_place) == (0, 4)
    else:
        assert not names(sim) & before and (counts.restarts, counts.in_place) == (4, 0)


def test_default_is_off_and_settings_are_validated() -> None:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples/scenarios/diurnal-shop.yaml")
                                         .read_text())
    sc = parse_scenario(copy.deepcopy(doc), "t", ROOT / "examples/scenarios")
    assert sc.spec.cluster.in_place_resize is False
    assert SimulatedCluster(sc, start_time=0.0).in_place is None
    doc["cluster"].update(in_place_resize=True, resize_delay_s="2s",
                          resize_deferred_limit_s="2m")
    spec = parse_scenario(copy.deepcopy(doc), "t", ROOT / "examples/scenarios").spec.cluster
    assert (spec.resize_delay_s, spec.resize_deferred_limit_s) == (2.0, 120.0)
    doc["cluster"]["resize_delay_s"] = -1
    with pytest.raises(SpecError, match="resize_delay_s"):
        parse_scenario(doc, "t", ROOT / "examples/scenarios")


def test_the_accounting_reports_the_counts() -> None:
    sc = scenario([pool(nodes=1, cpu=5)])
    sim = SimulatedCluster(sc, start_time=0.0)
    acc = Accountant(sim, sc.intents, {p.key: p for p in sc.profiles})
    sim.resize(KEY, 2.0)
    sim.step(5)
    sim.step(5)
    row = acc.tallies[sc.intents[0].key].as_dict()
    assert (row["in_place_resizes"], row["resize_deferrals"], row["resize_fallbacks"],
            row["restarts"]) == (1, 3, 0, 0)


def test_the_cpu_actions_reason_says_whether_pods_restart() -> None:
    from dataclasses import replace

    from actuators.cpu import CpuActuator
    from planner.domain.admin import AdminConfig
    from planner.domain.state import ClusterSnapshot, WorkloadConfig

    act = CpuActuator(AdminConfig())
    cur = WorkloadConfig(replicas=3, cpu=1.0)
    [restart] = act.steps("ns/w", cur, cur.with_(cpu=2.0), now=0.0, memory={})
    assert restart.reason.endswith("restarts 3 pod(s)")
    act.observe_cluster(replace(ClusterSnapshot(0.0, (), {}), in_place_resize=True))
    [in_place] = act.steps("ns/w", cur, cur.with_(cpu=2.0), now=0.0, memory={})
    assert in_place.reason.endswith("in place on 3 running pod(s)")
    assert in_place.params == restart.params == {"cpu": 2.0, "from": 1.0}
