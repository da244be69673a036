"""The incremental observe (snapshot_builder + changefeed) equals the full one, and does no
work for what did not change. The watch cache is fed directly (bench.harness.feed, no HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import deployment, node, pod
from bench.harness.feed import FeedTransport
from planner.domain.state import ClusterSnapshot, WorkloadConfig
from planner.k8s.backend import KubernetesBackend
from planner.k8s.canary import CANARY_LABEL, desired
from planner.k8s.resources import DEPLOYMENTS, NODES, PODS, STATEFULSETS, ResourceType
from planner.k8s.watchcache import CacheSettings, WatchCache

OBSERVED = (NODES, PODS, DEPLOYMENTS, STATEFULSETS)
CANARY = {CANARY_LABEL: "true"}
Obj = dict[str, Any]


class Cluster:
    """A watch cache fed in memory and a backend observing it (fixed clock)."""

    def __init__(self, queue_size: int = 10_000, seed: dict[ResourceType, list[Obj]] | None = None
                 ) -> None:
        self.feed = FeedTransport()
        for rtype, objs in (seed or {}).items():
            self.feed.seed(rtype, objs.copy)
        self.cache = WatchCache(self.feed, settings=CacheSettings(page_size=7,
                                                                  queue_size=queue_size))
        self.client = ApiClient(Configuration(host="http://127.0.0.1:9"))
        self.backend = KubernetesBackend(self.cache, self.client, clock=lambda: 100.0,
                                         ready_wait_s=10)

    def push(self, rtype: ResourceType, kind: str, obj: Obj) -> None:
        self.feed.push(rtype, kind, obj)

    def sync(self) -> None:
        self.feed.wait_synced(self.cache, OBSERVED)

    def close(self) -> None:
        self.backend.close()
        self.cache.stop()
        self.client.close()


def same(incremental: ClusterSnapshot, full: ClusterSnapshot) -> None:
    assert incremental.nodes == full.nodes
    assert list(incremental.workloads) == list(full.workloads)
    for key, w in full.workloads.items():
        assert incremental.workloads[key] == w, key
    assert incremental == full


# ---------------------------------------------------------------------- generated changes
NAMESPACES = ("shop", "shop", "search")
APPS = ("web", "api", "db")
NODE_NAMES = ("n0", "n1", "n2", "n3")


@st.composite
def a_pod(draw: st.DrawFn) -> Obj:
    ns = draw(st.sampled_from(NAMESPACES))
    extra = draw(st.sampled_from([{}, {"tier": "front"}, {"tier": "back"}, CANARY, CANARY]))
    p = pod(ns, draw(st.sampled_from(APPS)), draw(st.sampled_from((None, *NODE_NAMES))),
            cpu=draw(st.sampled_from(["100m", "500m", "1", "0.1"])),
            ready=draw(st.booleans()), restarts=draw(st.integers(0, 2)),
            name=f"p{draw(st.integers(0, 7))}", extra_labels=extra)
    p["status"]["phase"] = draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded"]))
    if draw(st.booleans()):
        p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    if draw(st.integers(0, 5)) == 0:
        p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:09Z"
    return p


@st.composite
def a_node(draw: st.DrawFn) -> Obj:
    n = node(draw(st.sampled_from(NODE_NAMES)), draw(st.sampled_from(["pa", "pb"])),
             cpu=draw(st.sampled_from(["4", "8"])))
    if draw(st.booleans()):
        del n["metadata"]["labels"]["intent-planner.io/pool"]  # pool from the zone label
    if draw(st.integers(0, 3)) == 0:
        n["spec"]["unschedulable"] = True
    return n


SELECTORS: list[dict[str, Any]] = [
    {"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "api"}},
    {"matchLabels": {"tier": "front"}}, {"matchLabels": {"app": "web", "tier": "back"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "api"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {},
]


@st.composite
def a_workload(draw: st.DrawFn) -> tuple[ResourceType, Obj]:
    """A Deployment or StatefulSet; sometimes labelled a canary, its selector then asking for
    the canary label too: named ``<app>-canary`` and selecting the app's pods (as
    ``set_canary`` makes it), or named otherwise (then it belongs to no workload)."""
    kind = draw(st.sampled_from(["Deployment", "Deployment", "StatefulSet"]))
    canary = draw(st.sampled_from(["no", "no", "named", "named", "misnamed"]))
    app = draw(st.sampled_from(APPS))
    w = deployment(draw(st.sampled_from(NAMESPACES)),
                   f"{app}-canary" if canary == "named" else app,
                   draw(st.integers(0, 4)), cpu=draw(st.sampled_from(["250m", "1"])),
                   kind=kind)
    selector = ({"matchLabels": {"app": app}} if canary == "named"
                else draw(st.sampled_from(SELECTORS)))
    if canary != "no":
        w["metadata"]["labels"] = {**w["metadata"]["labels"], **CANARY}
        selector = {**selector, "matchLabels": {**selector.get("matchLabels", {}), **CANARY}}
    w["spec"]["selector"] = selector
    if draw(st.booleans()):
        w["spec"]["template"]["spec"]["nodeSelector"] = {"intent-planner.io/pool": "pa"}
    return (DEPLOYMENTS if kind == "Deployment" else STATEFULSETS), w


change = st.one_of(
    st.tuples(st.just(PODS), st.sampled_from(["MODIFIED", "DELETED"]), a_pod()),
    st.tuples(st.just(NODES), st.sampled_from(["MODIFIED", "MODIFIED", "DELETED"]), a_node()),
    a_workload().flatmap(lambda rw: st.tuples(
        st.just(rw[0]), st.sampled_from(["MODIFIED", "MODIFIED", "DELETED"]), st.just(rw[1]))),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.lists(st.one_of(a_pod(), a_node(), a_workload().map(lambda rw: rw[1])),
                    max_size=16),
       cycles=st.lists(st.lists(change, max_size=8), min_size=1, max_size=6),
       queue_size=st.sampled_from([2, 10_000]))
def test_incremental_observe_equals_the_full_one(
        seed: list[Obj], cycles: list[list[tuple[ResourceType, str, Obj]]],
        queue_size: int) -> None:
    pods = {o["metadata"]["name"]: o for o in seed if o["kind"] == "Pod"}
    nodes = {o["metadata"]["name"]: o for o in seed if o["kind"] == "Node"}
    workloads = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o
                 for o in seed if o["kind"] in ("Deployment", "StatefulSet")}
    cluster = Cluster(queue_size, {
        PODS: list(pods.values()), NODES: list(nodes.values()),
        DEPLOYMENTS: [w for (kind, _, _), w in workloads.items() if kind == "Deployment"],
        STATEFULSETS: [w for (kind, _, _), w in workloads.items() if kind == "StatefulSet"]})
    try:
        same(cluster.backend.observe(), cluster.backend.observe_full())
        for changes in cycles:
            for rtype, kind, obj in changes:
                cluster.push(rtype, kind, obj)
            cluster.sync()
            same(cluster.backend.observe(), cluster.backend.observe_full())
    finally:
        cluster.close()


# ---------------------------------------------------------------------- no work when unchanged
@pytest.fixture
def cluster() -> Iterator[Cluster]:
    seed: dict[ResourceType, list[Obj]] = {
        NODES: [node(f"n{i}", "pa" if i % 2 else "pb") for i in range(4)],
        DEPLOYMENTS: [deployment("shop", app, 10) for app in APPS],
        PODS: [pod("shop", app, f"n{i % 4}", name=f"{app}-{i}") for app in APPS
               for i in range(10)],
    }
    c = Cluster(seed=seed)
    yield c
    c.close()


def test_a_cycle_without_changes_converts_nothing(cluster: Cluster) -> None:
    b = cluster.backend
    first = b.observe()
    assert b.builder.counts.pods_converted == 30
    second = b.observe()
    assert b.builder.counts.pods_converted == 0
    assert b.builder.counts.nodes_converted == 0
    assert b.builder.counts.workloads_rebuilt == 0
    assert second.nodes is first.nodes
    assert all(second.workloads[k] is w for k, w in first.workloads.items())
    same(second, b.observe_full())


def test_one_changed_pod_converts_one_pod_and_rebuilds_its_workload(cluster: Cluster) -> None:
    b = cluster.backend
    first = b.observe()
    moved = pod("shop", "api", "n3", name="api-2", ready=False)
    cluster.push(PODS, "MODIFIED", moved)
    cluster.sync()
    snap = b.observe()
    assert b.builder.counts.pods_converted == 1
    assert b.builder.counts.workloads_rebuilt == 1
    assert b.builder.counts.selector_checks == 0
    assert snap.workloads["shop/web"] is first.workloads["shop/web"]
    assert snap.workloads["shop/api"] is not first.workloads["shop/api"]
    assert {p.name: p.ready for p in snap.workloads["shop/api"].pods}["api-2"] is False
    same(snap, b.observe_full())


def test_a_node_changing_pool_repools_its_pods(cluster: Cluster) -> None:
    b = cluster.backend
    b.observe()
    cluster.push(NODES, "MODIFIED", node("n0", "pz"))
    cluster.sync()
    snap = b.observe()
    assert b.builder.counts.pods_converted == 0
    on_n0 = [p for w in snap.workloads.values() for p in w.pods if p.node == "n0"]
    assert on_n0 and all(p.pool == "pz" for p in on_n0)
    same(snap, b.observe_full())


def test_a_canary_is_observed_with_its_workload_and_rebuilds_only_it(cluster: Cluster) -> None:
    b = cluster.backend
    first = b.observe()
    cluster.push(DEPLOYMENTS, "ADDED",
                 desired(deployment("shop", "web", 10), WorkloadConfig(2, 1.0), {}))
    for i in range(2):
        cluster.push(PODS, "ADDED", pod("shop", "web", "n1", cpu="1", name=f"web-canary-{i}",
                                        extra_labels=CANARY))
    cluster.sync()
    snap = b.observe()
    web = snap.workloads["shop/web"]
    assert "shop/web-canary" not in snap.workloads
    assert web.pods == first.workloads["shop/web"].pods
    assert web.canary is not None and web.canary.config == WorkloadConfig(2, 1.0, "cpu", None)
    assert [p.name for p in web.canary.pods] == ["web-canary-0", "web-canary-1"]
    assert snap.workloads["shop/api"] is first.workloads["shop/api"]
    same(snap, b.observe_full())

    cluster.push(PODS, "MODIFIED", pod("shop", "web", "n1", cpu="1", name="web-canary-1",
                                       ready=False, extra_labels=CANARY))
    cluster.sync()
    snap = b.observe()
    assert b.builder.counts.workloads_rebuilt == 1
    assert snap.workloads["shop/web"].canary is not None
    assert [p.ready for p in snap.workloads["shop/web"].canary.pods] == [True, False]
    same(snap, b.observe_full())

    # The canary Deployment goes first; its pods, until collected, are nobody's.
    cluster.push(DEPLOYMENTS, "DELETED", desired(deployment("shop", "web", 10),
                                                 WorkloadConfig(2, 1.0), {}))
    cluster.sync()
    snap = b.observe()
    assert snap.workloads["shop/web"].canary is None
    assert snap.workloads["shop/web"].pods == first.workloads["shop/web"].pods
    same(snap, b.observe_full())
