"""The shared watch cache against kmock's KubernetesEmulator over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration
from prometheus_client import generate_latest

from bench.harness.apiserver import Kube, RunningApiserver, node, pod, wait_until
from planner.domain.errors import TemporaryError
from planner.k8s.resources import NODES, PODS
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import RESYNC, CacheSettings, NotReady, WatchCache

FAST = CacheSettings(page_size=3, watch_timeout_s=30, backoff_initial_s=0.05,
                     backoff_max_s=0.2)




@pytest.fixture
def cache(api: RunningApiserver) -> Iterator[WatchCache]:
    cfg = Configuration(host=api.url)
    cfg.connection_pool_maxsize = 16
    client = ApiClient(cfg)
    c = WatchCache(ApiClientTransport(client), settings=FAST)
    yield c
    c.stop()
    client.close()


def names(objs: list[dict[str, object]]) -> set[str]:
    return {o["metadata"]["name"] for o in objs}  # type: ignore[index]


def test_one_upstream_list_and_watch_for_many_consumers(api: RunningApiserver, kube: Kube,
                                                        cache: WatchCache) -> None:
    for i in range(7):
        kube.create(pod("shop", "web", "node-1", name=f"web-{i}"))
    kube.create(node("node-1", "pool-a"))
    consumers = 16
    results: list[int] = []

    def consume() -> None:
        sub = cache.subscribe(PODS)
        results.append(len(cache.list(PODS, wait=10)))
        results.append(len(cache.list(NODES, wait=10)))
        sub.close()

    threads = [threading.Thread(target=consume) for _ in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(results) == [1] * consumers + [7] * consumers
    kube.create(pod("shop", "web", "node-1", name="web-7"))
    wait_until(lambda: len(cache.list(PODS)) == 8)

    # 7 pods in pages of 3: one list is 3 page requests, and there is one watch.
    pods = [c for c in api.server.list_calls("pods")]
    assert [c.params.get("continue") is not None for c in pods] == [False, True, True]
    assert len(api.server.watch_calls("pods")) == 1
    assert len(api.server.list_calls("nodes")) == 1
    assert len(api.server.watch_calls("nodes")) == 1
    stats = cache.stats(PODS)
    assert stats.list_requests == 3 and stats.watch_requests == 1
    assert stats.relists == {"initial": 1}
    assert stats.upstream_objects == 8
    assert stats.served_objects >= consumers * 7 * 2  # a replay and a snapshot each
    assert stats.served_bytes > stats.upstream_bytes


def test_resume_after_dropped_watch_uses_last_resource_version(api: RunningApiserver,
                                                               kube: Kube,
                                                               cache: WatchCache) -> None:
    for i in range(3):
        kube.create(pod("shop", "web", "node-1", name=f"web-{i}"))
    assert cache.wait_ready([PODS], timeout=10)
    sub = cache.subscribe(PODS, replay=False)
    kube.patch("Pod", "shop", "web-0", {"metadata": {"labels": {"tier": "gold"}}})
    wait_until(lambda: cache.stats(PODS).resource_version == str(api.server.resource_version))
    seen = cache.stats(PODS).resource_version

    api.drop_watches()
    kube.create(pod("shop", "web", "node-1", name="web-3"))  # while reconnecting
    wait_until(lambda: "web-3" in names(cache.list(PODS)))

    watches = api.server.watch_calls("pods")
    assert len(watches) >= 2
    assert watches[1].params["resourceVersion"] == seen
    assert len(api.server.list_calls("pods")) == 1, "resumed, not relisted"
    stats = cache.stats(PODS)
    assert stats.resumes >= 1 and stats.relists == {"initial": 1}
    events = [(e.type, e.object["metadata"]["name"]) for e in sub.drain()]
    assert events == [("MODIFIED", "web-0"), ("ADDED", "web-3")]


def test_relist_on_410_gone(api: RunningApiserver, kube: Kube, cache: WatchCache) -> None:
    for i in range(4):
        kube.create(pod("shop", "web", "node-1", name=f"web-{i}"))
    assert cache.wait_ready([PODS], timeout=10)
    sub = cache.subscribe(PODS, replay=False)

    api.server.watch_outage = True  # the API server restarts ...
    api.drop_watches()
    kube.delete("Pod", "shop", "web-1")  # ... changes happen meanwhile ...
    kube.create(pod("shop", "web", "node-1", name="web-9"))
    api.compact()  # ... and the history is compacted: the old version is gone
    wait_until(lambda: cache.stats(PODS).errors >= 1)
    api.server.watch_outage = False

    wait_until(lambda: names(cache.list(PODS)) == {"web-0", "web-2", "web-3", "web-9"})
    stats = cache.stats(PODS)
    assert stats.relists.get("gone") == 1
    gone = [c for c in api.server.watch_calls("pods") if c.params.get("resourceVersion")]
    assert any(int(c.params["resourceVersion"]) < api.server.resource_version for c in gone)
    events = {(e.type, e.object["metadata"]["name"]) for e in sub.drain()}
    assert events == {("DELETED", "web-1"), ("ADDED", "web-9")}


def test_readiness_gating(api: RunningApiserver, kube: Kube, cache: WatchCache) -> None:
    kube.create(pod("shop", "web", "node-1", name="web-0"))
    api.server.watch_outage = True  # lists fail with 503 until the server is back
    with pytest.raises(NotReady) as exc:
        cache.list(PODS)
    assert isinstance(exc.value, TemporaryError)
    assert not cache.ready(PODS)
    assert cache.not_ready() == ["pods"]
    assert not cache.wait_ready(timeout=0.3)
    with pytest.raises(NotReady, match="503"):
        cache.list(PODS, wait=0.3)

    api.server.watch_outage = False
    assert names(cache.list(PODS, wait=10)) == {"web-0"}  # blocks until the list is in
    assert cache.ready(PODS) and cache.not_ready() == []
    assert cache.stats(PODS).errors >= 1


def test_metrics_and_counters(api: RunningApiserver, kube: Kube, cache: WatchCache) -> None:
    for i in range(5):
        kube.create(pod("shop", "web", "node-1", name=f"web-{i}"))
    subs = [cache.subscribe(PODS) for _ in range(4)]
    assert cache.wait_ready(timeout=10)
    kube.patch("Pod", "shop", "web-0", {"metadata": {"labels": {"tier": "gold"}}})
    wait_until(lambda: cache.stats(PODS).upstream_objects == 6)
    for s in subs:
        s.drain()
    wait_until(lambda: cache.stats(PODS).served_objects == 4 * 6)
    snapshot = cache.list(PODS)
    stats = cache.stats(PODS)
    assert stats.served_objects == 4 * 6 + len(snapshot)
    assert stats.subscribers == 4 and stats.objects == 5 and stats.ready

    text = generate_latest(cache.registry).decode()
    line = 'intent_planner_watch_{}{{resource="pods"{}}} {}'
    assert line.format("upstream_requests_total", ',verb="list"', "2.0") in text
    assert line.format("upstream_requests_total", ',verb="watch"', "1.0") in text
    assert line.format("upstream_bytes_total", "", f"{float(stats.upstream_bytes)}") in text
    assert line.format("served_objects_total", "", f"{float(stats.served_objects)}") in text
    assert line.format("served_bytes_total", "", f"{float(stats.served_bytes)}") in text
    assert 'intent_planner_watch_relists_total{reason="initial",resource="pods"} 1.0' in text
    assert line.format("subscribers", "", "4.0") in text
    assert line.format("ready", "", "1.0") in text
    for s in subs:
        s.close()
    assert cache.stats(PODS).subscribers == 0


def test_failed_list_is_retried(api: RunningApiserver, kube: Kube, cache: WatchCache) -> None:
    kube.create(pod("shop", "web", "node-1", name="web-0"))
    api.server.fail("GET", r"^/api/v1/pods$", 500, "etcd timeout", times=2)
    assert names(cache.list(PODS, wait=10)) == {"web-0"}
    stats = cache.stats(PODS)
    assert stats.errors == 2 and "etcd timeout" in str(stats.last_error)


def test_slow_subscriber_gets_resync(api: RunningApiserver, kube: Kube,
                                     cache: WatchCache) -> None:
    assert cache.wait_ready([PODS], timeout=10)
    sub = cache.subscribe(PODS, maxsize=2)
    for i in range(4):
        kube.create(pod("shop", "web", "node-1", name=f"web-{i}"))
    wait_until(lambda: len(cache.list(PODS)) == 4)
    events = sub.drain()
    assert sub.overflowed and events[0].type == RESYNC


def test_projection_keeps_what_the_planner_needs(api: RunningApiserver, kube: Kube,
                                                 cache: WatchCache) -> None:
    kube.create(pod("shop", "web", "node-1", name="web-0", restarts=2))
    kube.create(pod("shop", "web", "node-1", name="web-1"))
    a, b = sorted(cache.list(PODS, wait=10), key=lambda o: o["metadata"]["name"])
    assert a["spec"]["containers"] == [{"name": "app", "resources": {
        "requests": {"cpu": "500m"}, "limits": {"cpu": "2"}}}]
    assert a["status"]["containerStatuses"] == [{"name": "app", "restartCount": 2}]
    assert a["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert "annotations" not in a["metadata"] and "env" not in a["spec"]["containers"][0]
    assert a["metadata"]["labels"] is b["metadata"]["labels"], "label maps are shared"
