"""KubernetesBackend.set_canary: the canary Deployment beside a workload's, and observing it
(kmock emulator over HTTP; the emulator runs no controllers, so the tests create the canary's
pods themselves, labelled as its ReplicaSet would label them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import Kube, RunningApiserver, deployment, node, pod, wait_until
from planner.domain.errors import PermanentError
from planner.domain.ports import UnsupportedOperation
from planner.domain.state import WorkloadConfig
from planner.k8s.backend import KubernetesBackend
from planner.k8s.canary import CANARY_LABEL
from planner.k8s.loadmetrics import Load
from planner.k8s.resources import DEPLOYMENTS
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"
WEB = f"{NS}/web"
CANARY = {CANARY_LABEL: "true"}


@pytest.fixture
def kube(api: RunningApiserver) -> Iterator[Kube]:
    k = Kube(api.url)
    k.create(node("node-a1", "pool-a", cpu="4"))
    k.create(node("node-b1", "pool-b", cpu="8"))
    web = deployment(NS, "web", 2, cpu="500m")
    web["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1"}
    web["spec"]["template"]["spec"]["nodeSelector"] = {"intent-planner.io/pool": "pool-a",
                                                       "disk": "ssd"}
    k.create(web)
    k.create(pod(NS, "web", "node-a1", name="web-0"))
    k.create(pod(NS, "web", "node-a1", name="web-1"))
    yield k
    k.close()


@pytest.fixture
def backend(api: RunningApiserver, kube: Kube) -> Iterator[KubernetesBackend]:
    client = ApiClient(Configuration(host=api.url))
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    b = KubernetesBackend(cache, client, clock=lambda: 100.0, ready_wait_s=10,
                          request_timeout_s=5)
    yield b
    cache.stop()
    client.close()


def canary_pod(name: str, node_name: str = "node-b1", cpu: str = "1") -> dict[str, Any]:
    return pod(NS, "web", node_name, cpu=cpu, name=name, extra_labels=CANARY)


def canary_pods(backend: KubernetesBackend) -> list[str] | None:
    """The names of the observed canary's pods (``None``: no canary)."""
    canary = backend.observe().workloads[WEB].canary
    return None if canary is None else [p.name for p in canary.pods]


def canary_cached(backend: KubernetesBackend, check: Any = bool) -> None:
    wait_until(lambda: check(backend.cache.get(DEPLOYMENTS, NS, "web-canary")))


@pytest.fixture
def writes(api: RunningApiserver, backend: KubernetesBackend
           ) -> Callable[[], list[tuple[str, str | None]]]:
    """The Deployment writes since the set-up: (verb, name; ``None`` for a create)."""
    start = len(api.server.calls)

    def since() -> list[tuple[str, str | None]]:
        return [(c.verb, c.name) for c in api.server.calls[start:]
                if c.resource == "deployments" and c.verb in ("create", "update", "delete")]
    return since


Writes = Callable[[], list[tuple[str, str | None]]]


def absent(kube: Kube, name: str) -> bool:
    try:
        kube.get("Deployment", NS, name)
    except httpx.HTTPStatusError as exc:
        return exc.response.status_code == 404
    return False


def test_set_canary_creates_a_second_deployment(writes: Writes, kube: Kube,
                                                backend: KubernetesBackend) -> None:
    backend.set_canary(WEB, WorkloadConfig(2, cpu=1.0, pool="pool-b"))
    assert writes() == [("create", None)], "only the canary is written, not web"
    web = kube.get("Deployment", NS, "web")
    c = kube.get("Deployment", NS, "web-canary")
    assert c["metadata"]["labels"] == {"app": "web", CANARY_LABEL: "true"}
    assert c["metadata"]["ownerReferences"] == [{
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
        "uid": web["metadata"]["uid"]}]
    assert c["spec"]["replicas"] == 2
    assert c["spec"]["selector"] == {"matchLabels": {"app": "web", CANARY_LABEL: "true"}}
    tmpl = c["spec"]["template"]
    assert tmpl["metadata"]["labels"] == {"app": "web", CANARY_LABEL: "true"}
    container = tmpl["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "256Mi"},
                                      "limits": {"cpu": "2"}}, "limit keeps its ratio"
    assert container["image"] == "registry.example/app:1"
    assert tmpl["spec"]["nodeSelector"] == {"intent-planner.io/pool": "pool-b", "disk": "ssd"}


def test_observe_reports_the_canary_apart_from_the_workload(
        kube: Kube, backend: KubernetesBackend) -> None:
    assert backend.observe().workloads[WEB].canary is None
    backend.set_canary(WEB, WorkloadConfig(2, cpu=1.0, pool="pool-b"))
    kube.create(canary_pod("web-canary-x1"))
    wait_until(lambda: canary_pods(backend) == ["web-canary-x1"])
    snap = backend.observe()
    assert list(snap.workloads) == [WEB], "the canary Deployment is no workload of its own"
    web = snap.workloads[WEB]
    assert [p.name for p in web.pods] == ["web-0", "web-1"]
    assert web.config == WorkloadConfig(2, 0.5, "cpu", "pool-a")
    assert web.canary is not None
    assert web.canary.config == WorkloadConfig(2, 1.0, "cpu", "pool-b")
    assert [(p.name, p.cpu, p.pool) for p in web.canary.pods] == [("web-canary-x1", 1.0,
                                                                   "pool-b")]
    assert snap == backend.observe_full()
    # Per-pod utilisation from the load source reaches the canary's pods too.
    backend.load = lambda workloads: {WEB: Load(10.0, 0.4, {"web-0": 0.4,
                                                            "web-canary-x1": 0.2})}
    measured = backend.observe().workloads[WEB]
    assert measured.canary is not None
    assert [p.cpu_utilization for p in measured.canary.pods] == [0.2]
    assert [p.cpu_utilization for p in measured.pods] == [0.4, None]
    backend.load = None
    # Incremental: a second canary pod, one of web's going, then the canary going.
    kube.create(canary_pod("web-canary-x2", "node-a1"))
    kube.delete("Pod", NS, "web-1")
    wait_until(lambda: canary_pods(backend) == ["web-canary-x1", "web-canary-x2"]
               and [p.name for p in backend.observe().workloads[WEB].pods] == ["web-0"])
    snap = backend.observe()
    assert snap == backend.observe_full()
    backend.set_canary(WEB, None)
    wait_until(lambda: canary_pods(backend) is None)
    assert backend.observe() == backend.observe_full()


def test_a_second_identical_call_changes_nothing(writes: Writes, kube: Kube,
                                                 backend: KubernetesBackend) -> None:
    backend.set_canary(WEB, WorkloadConfig(1, cpu=0.25, pool="pool-b"))
    first = kube.get("Deployment", NS, "web-canary")
    backend.set_canary(WEB, WorkloadConfig(1, cpu=0.25, pool="pool-b"))
    assert writes() == [("create", None)]
    assert kube.get("Deployment", NS, "web-canary") == first
    # Another shape patches it: three pods anywhere (the pool key goes, the rest stays).
    backend.set_canary(WEB, WorkloadConfig(3, cpu=0.25))
    assert writes() == [("create", None), ("update", "web-canary")]
    c = kube.get("Deployment", NS, "web-canary")
    assert c["spec"]["replicas"] == 3
    assert c["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"}
    canary_cached(backend, lambda d: d and d["spec"]["replicas"] == 3)
    canary = backend.observe().workloads[WEB].canary
    assert canary is not None and canary.config == WorkloadConfig(3, 0.25, "cpu", None)


def test_none_deletes_the_canary_and_absent_is_fine(writes: Writes, kube: Kube,
                                                     backend: KubernetesBackend) -> None:
    backend.set_canary(WEB, None)
    backend.set_canary(WEB, WorkloadConfig(0, cpu=1.0))
    assert writes() == [], "no canary: nothing to delete"
    backend.set_canary(WEB, WorkloadConfig(1, cpu=1.0))
    backend.set_canary(WEB, None)
    assert writes() == [("create", None), ("delete", "web-canary")]
    assert absent(kube, "web-canary")
    backend.set_canary(WEB, None)
    assert len(writes()) == 2
    assert kube.get("Deployment", NS, "web")["spec"]["replicas"] == 2


def test_what_set_canary_refuses(writes: Writes, kube: Kube,
                                 backend: KubernetesBackend) -> None:
    with pytest.raises(UnsupportedOperation, match="unknown device 'tpu'"):
        backend.set_canary(WEB, WorkloadConfig(1, cpu=1.0, device="tpu"))
    with pytest.raises(PermanentError, match="no node pool 'pool-x'"):
        backend.set_canary(WEB, WorkloadConfig(1, cpu=1.0, pool="pool-x"))
    kube.create(deployment(NS, "db", 1, kind="StatefulSet"))
    wait_until(lambda: backend.observe().workload(f"{NS}/db"))
    with pytest.raises(UnsupportedOperation, match="beside a Deployment"):
        backend.set_canary(f"{NS}/db", WorkloadConfig(1, cpu=1.0))
    # A Deployment that happens to be called like the canary is not the planner's to touch.
    kube.create(deployment(NS, "web-canary", 1))
    with pytest.raises(PermanentError, match="not an intent-planner canary"):
        backend.set_canary(WEB, WorkloadConfig(1, cpu=1.0))
    with pytest.raises(PermanentError, match="not an intent-planner canary"):
        backend.set_canary(WEB, None)
    assert writes() == [("create", None)], "the test's own web-canary, nothing else"
