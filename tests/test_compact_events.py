"""Compact events (issue 13): pods summarised per pool, device, size and readiness; every pod
only when the pods changed, sampled; training reads the summary as it read the pods."""

from __future__ import annotations

from dataclasses import replace

import bson
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.control.event_detail import PodDetailSampler
from planner.domain.events import build_event, records, table
from planner.domain.intents import Intent
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.observations import dataset
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

INTENT = Intent.model_validate({
    "apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
    "metadata": {"name": "w", "namespace": "big"},
    "spec": {"targetRef": {"kind": "Deployment", "name": "w"},
             "objectives": [{"name": "p95", "value": 60, "measuredBy": "p95"}]}})

pods_st = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["cpu", "gpu"]),
                             st.sampled_from([0.5, 1.0, 2.0]), st.booleans(), st.booleans(),
                             st.integers(0, 3)), max_size=60)


def _cluster(spec: list[tuple[str | None, str, float, bool, bool, int]]
             ) -> tuple[WorkloadState, ClusterSnapshot]:
    nodes = tuple(NodeState(f"{pool}-{i}", pool, "r1", 32.0, cpu_allocated=float(i),
                            gpus=i % 2) for pool in ("a", "b") for i in range(5))
    pods = tuple(PodState(f"w-{i}", f"{pool}-{i % 5}" if sched and pool else None, cpu, device,
                          ready, restarts, pool=pool)
                 for i, (pool, device, cpu, ready, sched, restarts) in enumerate(spec))
    w = WorkloadState("big", "w", WorkloadConfig(len(pods), 1.0), pods)
    return w, ClusterSnapshot(100.0, nodes, {w.key: w})


@given(pods_st)
@settings(max_examples=60, deadline=None)
def test_groups_and_pools_account_for_every_pod_and_node(
        spec: list[tuple[str | None, str, float, bool, bool, int]]) -> None:
    w, snap = _cluster(spec)
    ev = build_event(INTENT, w, snap, {"p95": 20.0}, None, False)
    groups = records(ev["pod_groups"])
    assert sum(g["count"] for g in groups) == len(w.pods)
    assert sum(g["restarts"] for g in groups) == sum(p.restarts for p in w.pods)
    assert sum(g["count"] for g in groups if g["ready"]) == w.ready_replicas
    for g in groups:  # one group per distinct (pool, device, cpu, ready, scheduled)
        members = [p for p in w.pods if (p.pool, p.device, p.cpu, p.ready, p.node is not None)
                   == (g["pool"], g["device"], g["cpu"], g["ready"], g["scheduled"])]
        assert len(members) == g["count"]
    hosting = {p.node for p in w.pods if p.node}
    pools = records(ev["node_pools"])
    assert sum(v["nodes"] for v in pools) == len(hosting)
    assert sum(v["cpu_allocated"] for v in pools) == sum(
        n.cpu_allocated for n in snap.nodes if n.name in hosting)
    assert len({v["pool"] for v in pools}) == len(pools)
    assert {n["name"] for n in records(ev["nodes"])} == hosting
    assert records(ev["pods"]) == [p.as_dict() for p in w.pods]


rows_st = st.lists(st.fixed_dictionaries({"pool": st.sampled_from(["a", "b", None]),
                                          "count": st.integers(0, 5), "ready": st.booleans()}),
                   max_size=8)


@given(rows_st)
def test_a_table_gives_back_its_rows(rows: list[dict[str, object]]) -> None:
    cols = ("pool", "count", "ready")
    assert records(table(rows, cols)) == rows
    assert records(rows) == rows                           # a list of rows, as before tables
    by_name = {f"n{i}": {"count": r["count"]} for i, r in enumerate(rows)}
    assert records(by_name, key="pool") == [{"pool": k, **v} for k, v in by_name.items()]


def test_a_damaged_table_gives_no_rows() -> None:
    assert records({"pool": ["a", "b"], "count": [1]}) == []   # unequal columns
    assert records({"pool": ["a"], "count": 1}) == []           # not a column
    assert records(None) == [] and records("pods") == []


def test_an_event_stays_small_however_many_pods() -> None:
    spec = [("a" if i % 3 else "b", "cpu", 1.0, i % 10 != 0, True, i % 2) for i in range(5000)]
    w, snap = _cluster(spec)
    compact = build_event(INTENT, w, snap, {"p95": 20.0}, None, False, pod_detail=False)
    detailed = build_event(INTENT, w, snap, {"p95": 20.0}, None, False)
    assert len(bson.encode(compact)) <= 4096 < len(bson.encode(detailed))
    assert "pods" not in compact and "nodes" not in compact


def test_an_event_over_ten_pools_stays_within_4_kib() -> None:
    """Issue 13's bar: a workload of 400 pods over ten node pools, some not ready, others
    restarted, with a plan of two steps: the event stays within 4 KiB (3,205 bytes; 4,239 as
    rows, before tables)."""
    nodes = tuple(NodeState(f"p{k}-{i}", f"p{k}", "eu-west-1", 64.0, cpu_allocated=48.0)
                  for k in range(10) for i in range(8))
    pods = tuple(PodState(f"w-{i}", f"p{i % 10}-{i % 8}", 1.0, "cpu", i % 7 != 0, i % 3,
                          pool=f"p{i % 10}") for i in range(400))
    w = WorkloadState("big", "w", WorkloadConfig(400, 1.0), pods)
    snap = ClusterSnapshot(100.0, nodes, {w.key: w})
    cfg = w.config.as_dict()
    plan = {"intent": "big/w", "planner": "grid", "current": cfg, "target": cfg, "actions": [],
            "reason": "r" * 240, "steps": [{"config": cfg, "predicted": {"p95": {
                "mean": 79.88905, "bound": 87.87796}}, "cost_per_hour": 8.463}] * 2}
    ev = build_event(INTENT, w, snap, {"p95": 20.0}, None, False, pod_detail=False)
    ev["plan"] = plan
    assert len(records(ev["pod_groups"])) == 20 and len(records(ev["node_pools"])) == 10
    assert len(bson.encode(ev)) <= 4096


def test_every_pod_when_they_changed_at_most_every_interval() -> None:
    sampler = PodDetailSampler(min_interval_s=300.0)
    w, _ = _cluster([("a", "cpu", 1.0, True, True, 0)] * 3)
    moved, _ = _cluster([("b", "cpu", 1.0, True, True, 0)] * 3)
    due = 300.0 + sampler.phase("big/w")             # the first interval, spread by name
    assert 300.0 <= due < 600.0
    assert sampler.wants("big/w", w, 0.0)            # first event: every pod
    assert not sampler.wants("big/w", w, 15.0)       # unchanged
    assert not sampler.wants("big/w", moved, min(30.0, due - 1.0))  # changed, detailed lately
    assert not sampler.wants("big/w", moved, due - 0.5)
    assert sampler.wants("big/w", moved, due)        # changed since the last detail
    assert not sampler.wants("big/w", moved, due + 600.0)  # unchanged since
    sampler.forget(set())
    assert sampler.wants("big/w", moved, due + 615.0)  # deleted and created again


class _CountedPods(tuple):  # type: ignore[type-arg]
    reads = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        _CountedPods.reads += 1
        return super().__iter__()


def test_within_the_interval_the_pods_are_not_read() -> None:
    """At 1,000 intents of 200 pods the fingerprint is a pass over 200,000 pods a cycle; within
    an intent's interval its answer is no whatever the pods, so they are not read."""
    sampler = PodDetailSampler(min_interval_s=300.0)
    w, _ = _cluster([("a", "cpu", 1.0, True, True, 0)] * 3)
    counted = replace(w, pods=_CountedPods(w.pods))
    assert sampler.wants("big/w", counted, 0.0)
    before = _CountedPods.reads
    assert not sampler.wants("big/w", counted, 15.0)
    assert _CountedPods.reads == before
    assert not sampler.wants("big/w", counted, 300.0 + sampler.phase("big/w"))  # unchanged
    assert _CountedPods.reads == before + 1


def test_intents_started_together_carry_their_pods_in_different_cycles() -> None:
    """Pods that change every cycle, 200 intents started together: after the first cycle each
    cycle holds about its share of the detailed events (not all of them every 20 cycles),
    and each intent still has at most one per interval."""
    sampler = PodDetailSampler(min_interval_s=300.0)
    states = [_cluster([(pool, "cpu", 1.0, True, True, 0)] * 2)[0] for pool in ("a", "b")]
    per_cycle: list[int] = []
    last: dict[str, float] = {}
    count: dict[str, int] = {}
    for cycle in range(80):
        now = cycle * 15.0
        n = 0
        for i in range(200):
            name = f"big/w{i}"
            if sampler.wants(name, states[cycle % 2], now):
                assert name not in last or now - last[name] >= 300.0
                last[name] = now
                count[name] = count.get(name, 0) + 1
                n += 1
        per_cycle.append(n)
    assert per_cycle[0] == 200
    assert max(per_cycle[1:]) <= 30 < 200       # an even share is 10 per cycle
    # Still every intent once per interval once started: by 600 s and by 900 s (of 1,185).
    assert min(count.values()) >= 3


class EveryPod(PodDetailSampler):
    def wants(self, intent: str, workload: WorkloadState, now: float) -> bool:
        return True


def test_training_reads_the_summary_as_it_read_the_pods() -> None:
    """The same events with and without their pod lists give the same training rows (the
    heterogeneous scenario: pods on several node classes, rollouts between sizes)."""
    run = ScenarioRun(load_scenario("examples/scenarios/heterogeneous.yaml"), seed=1)
    run.controller.pod_detail = EveryPod()
    run.run(duration=900)
    for intent in {o.intent.key for o in run.last}:
        stripped = run.knowledge.events(intent)
        details = {d["time"]: d for d in run.knowledge.pod_details(intent)}
        assert len(stripped) > 5 and all(e["pod_detail"] and e["time"] in details
                                         for e in stripped)
        without_groups = [{**{k: v for k, v in e.items() if k != "pod_groups"},
                           "pods": details[e["time"]]["pods"]} for e in stripped]
        as_rows = [{**e, "pods": records(e["pods"])} for e in without_groups]  # before tables
        for objective in stripped[0]["current"]:
            b = dataset(stripped, objective)
            for a in (dataset(without_groups, objective), dataset(as_rows, objective)):
                assert len(a) > 0 and a.classes == b.classes and a.pools == b.pools
                np.testing.assert_array_equal(a.X, b.X)
                np.testing.assert_array_equal(a.y, b.y)
