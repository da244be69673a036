"""The Kubernetes backend's exposure: the Service's OpenYurt pool selector (issue 14)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import Kube, RunningApiserver
from planner.domain.errors import PermanentError
from planner.k8s import openyurt
from planner.k8s.backend import KubernetesBackend
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"


@pytest.fixture
def backend(api: RunningApiserver) -> Iterator[tuple[KubernetesBackend, Kube]]:
    kube = Kube(api.url)
    kube.create({"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "web", "namespace": NS},
                 "spec": {"type": "LoadBalancer", "loadBalancerClass": openyurt.HAPROXY_LB_CLASS,
                          "selector": {"app": "web"}, "ports": [{"port": 80}]}})
    client = ApiClient(Configuration(host=api.url))
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    yield KubernetesBackend(cache, client, ready_wait_s=10, request_timeout_s=5), kube
    cache.stop()
    client.close()
    kube.close()


def test_expose_writes_the_pool_selector(backend: tuple[KubernetesBackend, Kube]) -> None:
    b, kube = backend
    b.expose(f"{NS}/web", ("us", "eu"))
    ann = kube.get("Service", NS, "web")["metadata"]["annotations"]
    assert ann[openyurt.POOL_SELECTOR_ANNOTATION] == "openyurt.io/pool-name in (eu,us)"
    version = kube.get("Service", NS, "web")["metadata"]["resourceVersion"]
    b.expose(f"{NS}/web", ("eu", "us"))                # level-based: no write
    assert kube.get("Service", NS, "web")["metadata"]["resourceVersion"] == version
    b.expose(f"{NS}/web", ("eu",))
    ann = kube.get("Service", NS, "web")["metadata"]["annotations"]
    assert ann[openyurt.POOL_SELECTOR_ANNOTATION] == "openyurt.io/pool-name in (eu)"


def test_expose_without_a_service_is_permanent(backend: tuple[KubernetesBackend, Kube]) -> None:
    b, _ = backend
    with pytest.raises(PermanentError):
        b.expose(f"{NS}/nothing", ("eu",))
    with pytest.raises(PermanentError, match="at least one pool"):
        b.expose(f"{NS}/web", ())
