"""KubernetesBackend: observe from the watch cache, act through the API (kmock emulator)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import (
    Kube,
    RunningApiserver,
    deployment,
    node,
    pod,
    wait_until,
)
from planner.domain.errors import PermanentError, TemporaryError
from planner.domain.ports import UnsupportedOperation
from planner.k8s.apierrors import NotFound
from planner.k8s.backend import KubernetesBackend
from planner.k8s.projections import DELETION_COST
from planner.k8s.resources import DEPLOYMENTS
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"


@pytest.fixture
def kube(api: RunningApiserver) -> Iterator[Kube]:
    k = Kube(api.url)
    k.create(node("node-a1", "pool-a", cpu="4"))
    k.create(node("node-b1", "pool-b", region="eu-2", cpu="8",
                  labels={"intent-planner.io/cost-per-core-hour": "0.1"}))
    zoned = node("node-z1", "unused")
    del zoned["metadata"]["labels"]["intent-planner.io/pool"]
    zoned["metadata"]["labels"]["topology.kubernetes.io/zone"] = "eu-1c"
    k.create(zoned)
    k.create(deployment(NS, "web", 3, cpu="500m"))
    k.create(pod(NS, "web", "node-a1", name="web-0"))
    k.create(pod(NS, "web", "node-a1", name="web-1", restarts=2))
    k.create(pod(NS, "web", "node-b1", name="web-2", ready=False))
    k.create(pod(NS, "other", "node-b1", name="other-0", cpu="2"))
    yield k
    k.close()


@pytest.fixture
def backend(api: RunningApiserver, kube: Kube) -> Iterator[KubernetesBackend]:
    cfg = Configuration(host=api.url)
    client = ApiClient(cfg)
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    b = KubernetesBackend(cache, client, ready_wait_s=10, request_timeout_s=5)
    yield b
    cache.stop()
    client.close()


def replicas(kube: Kube) -> int:
    value: int = kube.get("Deployment", NS, "web")["spec"]["replicas"]
    return value


def cached(backend: KubernetesBackend, check: Any) -> None:
    """Wait until the cache has seen our own write."""
    wait_until(lambda: check(backend.cache.get(DEPLOYMENTS, NS, "web")))


def test_observe(backend: KubernetesBackend) -> None:
    snap = backend.observe()
    nodes = {n.name: n for n in snap.nodes}
    assert nodes["node-a1"].pool == "pool-a" and nodes["node-a1"].region == "eu-1"
    assert nodes["node-a1"].cpu_capacity == 4.0 and nodes["node-a1"].cpu_allocated == 1.0
    assert nodes["node-b1"].cpu_allocated == 2.5 and nodes["node-b1"].cost_per_core_hour == 0.1
    assert nodes["node-z1"].pool == "eu-1c", "zone label when there is no pool label"
    web = snap.workload(f"{NS}/web")
    assert web is not None and web.kind == "Deployment"
    assert web.config.replicas == 3 and web.config.cpu == 0.5 and web.config.pool is None
    assert [p.name for p in web.pods] == ["web-0", "web-1", "web-2"]
    assert [p.ready for p in web.pods] == [True, True, False]
    assert web.pods[1].restarts == 2 and web.pods[0].started_at > 0
    assert web.request_rate is None and web.cpu_utilization is None


def test_scale_through_the_scale_subresource(api: RunningApiserver, kube: Kube,
                                             backend: KubernetesBackend) -> None:
    backend.scale(f"{NS}/web", 5)
    assert replicas(kube) == 5
    assert [c.subresource for c in api.server.writes("deployments") if c.verb == "update"] == [
        "scale"]
    cached(backend, lambda d: d["spec"]["replicas"] == 5)
    backend.scale(f"{NS}/web", 5)  # idempotent: no request
    assert len([c for c in api.server.writes("deployments") if c.verb == "update"]) == 1


def test_resize_patches_container_requests(kube: Kube, backend: KubernetesBackend) -> None:
    backend.resize(f"{NS}/web", 1.0)
    c = kube.get("Deployment", NS, "web")["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "256Mi"}
    assert c["image"] == "registry.example/app:1", "the rest of the container is kept"
    cached(backend, lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"][
        "requests"]["cpu"] == "1")
    assert backend.observe().workloads[f"{NS}/web"].config.cpu == 1.0


def test_place_sets_and_clears_the_node_selector(kube: Kube,
                                                 backend: KubernetesBackend) -> None:
    backend.place(f"{NS}/web", "pool-b")
    tmpl = kube.get("Deployment", NS, "web")["spec"]["template"]["spec"]
    assert tmpl["nodeSelector"] == {"intent-planner.io/pool": "pool-b"}
    cached(backend, lambda d: d["spec"]["template"]["spec"].get("nodeSelector"))
    assert backend.observe().workloads[f"{NS}/web"].config.pool == "pool-b"
    backend.place(f"{NS}/web", "eu-1c")
    tmpl = kube.get("Deployment", NS, "web")["spec"]["template"]["spec"]
    assert tmpl["nodeSelector"]["topology.kubernetes.io/zone"] == "eu-1c"
    cached(backend, lambda d: len(d["spec"]["template"]["spec"]["nodeSelector"]) == 2)
    backend.place(f"{NS}/web", None)
    assert not kube.get("Deployment", NS, "web")["spec"]["template"]["spec"].get("nodeSelector")
    with pytest.raises(PermanentError, match="no node pool 'pool-x'"):
        backend.place(f"{NS}/web", "pool-x")


def test_remove_pod_uses_deletion_cost(api: RunningApiserver, kube: Kube,
                                       backend: KubernetesBackend) -> None:
    backend.observe()
    backend.remove_pod(f"{NS}/web", "web-2")
    assert replicas(kube) == 2
    deleted = [c for c in api.server.writes("pods") if c.verb == "delete"]
    assert [c.name for c in deleted] == ["web-2"]
    marked = [c for c in api.server.writes("pods") if c.verb == "update"]
    assert [c.name for c in marked] == ["web-2"]
    assert api.server.objects["v1/pods", NS, "web-2"].history[-1] is None  # deleted
    last = api.server.objects["v1/pods", NS, "web-2"].history[-2]
    assert last is not None and last["metadata"]["annotations"][DELETION_COST] == "-2147483648"


def test_removing_two_pods_in_a_row_scales_down_by_two(kube: Kube, backend: KubernetesBackend,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    backend.observe()
    start = replicas(kube)
    # A watch that lags: the cached Deployment still shows the count before any removal.
    stale = backend._find(f"{NS}/web")
    monkeypatch.setattr(backend, "_find", lambda workload: stale)
    backend.remove_pod(f"{NS}/web", "web-2")
    backend.remove_pod(f"{NS}/web", "web-1")
    assert replicas(kube) == start - 2


def test_api_errors_are_temporary_or_permanent(api: RunningApiserver,
                                               backend: KubernetesBackend) -> None:
    backend.observe()
    api.server.fail("PATCH", "/scale$", 503, "etcd is slow", reason="ServiceUnavailable")
    with pytest.raises(TemporaryError, match="etcd is slow"):
        backend.scale(f"{NS}/web", 4)
    api.server.fail("PATCH", "/scale$", 429, "slow down", reason="TooManyRequests")
    with pytest.raises(TemporaryError):
        backend.scale(f"{NS}/web", 4)
    api.server.fail("PATCH", "/scale$", 403, 'deployments.apps "web" is forbidden: User '
                    'cannot patch resource "deployments/scale"', reason="Forbidden")
    with pytest.raises(PermanentError, match="forbidden: User cannot patch"):
        backend.scale(f"{NS}/web", 4)
    api.server.fail("PATCH", "/scale$", 422, "spec.replicas: Invalid value: -1",
                    reason="Invalid")
    with pytest.raises(PermanentError, match="Invalid value"):
        backend.scale(f"{NS}/web", 4)
    with pytest.raises(NotFound):
        backend.scale(f"{NS}/nope", 4)
    with pytest.raises(UnsupportedOperation, match="unknown device 'tpu'"):
        backend.set_device(f"{NS}/web", "tpu")


def test_unreachable_api_server_is_temporary(kube: Kube) -> None:
    cfg = Configuration(host="http://127.0.0.1:9")
    cfg.retries = False
    client = ApiClient(cfg)
    backend = KubernetesBackend(WatchCache(ApiClientTransport(client)), client,
                                request_timeout_s=1)
    try:
        with pytest.raises(TemporaryError, match="initial list"):
            backend.observe()
        with pytest.raises(TemporaryError):
            backend._patch_scale("Deployment", NS, "web", 2)
    finally:
        backend.cache.stop()
        client.close()


def test_dispatch_weights_configmap_is_created_then_updated(api: RunningApiserver,
                                                            kube: Kube) -> None:
    from actuators.dataplanes.configmap import ConfigMapWriter
    from planner.k8s.configmaps import configmap_applier

    client = ApiClient(Configuration(host=api.url))
    try:
        writer = ConfigMapWriter("checkout-dispatch-weights", NS, configmap_applier(client))
        assert writer.write({"checkout-0": 64, "checkout-1": 32}).ok
        first = kube.get("ConfigMap", NS, "checkout-dispatch-weights")
        assert writer.write({"checkout-0": 80, "checkout-1": 20}).ok
        second = kube.get("ConfigMap", NS, "checkout-dispatch-weights")
    finally:
        client.close()
    assert first["data"] != second["data"]
    assert "80" in json.dumps(second["data"])
