"""The Kubernetes backend's exposure: the Service's OpenYurt pool selector (issue 14)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import Kube, RunningApiserver, deployment, node
from planner.domain.errors import PermanentError, SpecError
from planner.domain.state import ClusterSnapshot
from planner.k8s import client_demand, openyurt
from planner.k8s.backend import KubernetesBackend
from planner.k8s.exposure_observer import ExposureObserver, current_exposure
from planner.k8s.resources import NODEPOOLS, SERVICES
from planner.k8s.settings import ExposureSettings, parse_settings
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, NotReady, WatchCache

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


# ----------------------------------------------------------------- what the backend observes
def _settings(**exposure: Any) -> ExposureSettings:
    doc = {"latencyMs": {"eu-west": {"eu-west": 4, "us-east": 90},
                         "us-east": {"eu-west": 90, "us-east": 4}}, **exposure}
    return parse_settings({"exposure": doc}).exposure


@pytest.mark.parametrize(("exposure", "match"), [
    ({"clientDemandQuery": "sum(rate(x[1m]))"}, r"clientDemandQuery.*no \{namespace\}"),
    ({"clientDemandQuery": 'x{service="{service}"}'}, r"no \{namespace\} placeholder"),
    ({"clientDemandQuery": 'x{namespace="{namespace}",service="{service}",p="{pod}"}'},
     r"unknown placeholder\(s\) \{pod\}.*fix"),
    ({"latencyMs": {"eu": {"us": -1}}}, r"latencyMs.*eu\.us.*fix"),
    ({"latencyMs": {"eu": {"us": "90"}}}, r"latencyMs"),
    ({"window": "1 m"}, r"exposure\.window.*fix"),
    ({"regionLabel": "client-region"}, r"regionLabel.*fix"),
    ({"lbCostPerHour": -1}, r"lbCostPerHour"),
    ({"latencyMS": {}}, r"latencyMS"),
])
def test_exposure_settings_errors_name_the_field(exposure: dict[str, Any], match: str) -> None:
    with pytest.raises(SpecError, match=match):
        parse_settings({"exposure": exposure})


def test_exposure_is_off_by_default() -> None:
    assert not parse_settings({}).exposure.enabled
    assert _settings().enabled


def test_demand_query_values_are_escaped_and_checked() -> None:
    s = _settings(clientDemandQuery='sum by (client_region) (rate(r{namespace="{namespace}",'
                                    'service=~"{service}"}[{window}]))', window="30s")
    assert client_demand.render(s, "shop", "web") == \
        'sum by (client_region) (rate(r{namespace="shop",service=~"web"}[30s]))'
    for ns, name in (('sh"op', "web"), ("shop", 'web"} or up{x="'), ("shop", ".*"),
                     ("shop", "Web"), ("shop", "a\\b"), ("shop", "")):
        with pytest.raises(client_demand.DemandUnavailable, match="not a Kubernetes name"):
            client_demand.render(s, ns, name)


def _pool(name: str, deleting: bool = False, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {openyurt.NODEPOOL_NAME_LABEL: name,
                                                     **labels}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def _svc(selector: str) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": NS,
                         "annotations": {openyurt.POOL_SELECTOR_ANNOTATION: selector}},
            "spec": {"type": "LoadBalancer", "loadBalancerClass": openyurt.HAPROXY_LB_CLASS}}


def test_current_exposure_from_nodepools_or_from_the_selector() -> None:
    pools = [_pool("eu-a", region="eu"), _pool("eu-b", region="eu"),
             _pool("eu-c", deleting=True, region="eu"), _pool("us", region="us")]
    assert current_exposure(_svc("region=eu"), pools) == (("eu-a", "eu-b"), None)
    assert current_exposure(_svc(openyurt.pool_selector(["us", "eu-a"])), pools) == (
        ("eu-a", "us"), None)
    assert current_exposure(_svc("region=mars"), pools) == ((), None)
    # NodePools not watched: the planner's own form is read, another is unknown
    assert current_exposure(_svc(openyurt.pool_selector(["us", "eu"])), None) == (
        ("eu", "us"), None)
    pools_of, note = current_exposure(_svc("region=eu"), None)
    assert pools_of is None and note is not None and "NodePools are not watched" in note
    pools_of, note = current_exposure(_svc("region in (eu"), pools)
    assert pools_of is None and note is not None and "nodepool-labelselector" in note


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_snapshot_reports_exposure_and_why_demand_is_unknown(api: RunningApiserver) -> None:
    """Over the emulator, Prometheus down: the exposure is read from the selector (NodePools
    not watched), the geography is the settings', the demand unknown with the reason; a
    workload whose Service is not exposed per pool is left as before."""
    kube = Kube(api.url)
    kube.create(node("node-eu", "eu", region="eu-west"))
    for name in ("web", "api"):
        kube.create(deployment(NS, name, 1))
    kube.create({**_svc(openyurt.pool_selector(["eu"])), "apiVersion": "v1", "kind": "Service"})
    kube.create({"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": "api", "namespace": NS},
                 "spec": {"type": "ClusterIP", "selector": {"app": "api"}}})
    settings = parse_settings({"exposure": {"latencyMs": {"eu-west": {"eu-west": 4}},
                                            "lbCostPerHour": 0.05, "timeoutSeconds": 1}})
    client = ApiClient(Configuration(host=api.url))
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    demand = client_demand.PrometheusClientDemand(f"http://127.0.0.1:{_closed_port()}",
                                                  settings.exposure)
    try:
        b = KubernetesBackend(cache, client, ready_wait_s=10, settings=settings,
                              client_demand=demand)
        snap = b.observe()
        web, other = snap.workloads[f"{NS}/web"], snap.workloads[f"{NS}/api"]
        assert web.exposure == ("eu",) and web.client_demand is None
        assert web.exposure_note is not None
        assert web.exposure_note.startswith("client demand per region unknown: Prometheus at")
        assert other.exposure is None and other.exposure_note is None
        assert snap.geography is not None and snap.geography.lb_cost_per_hour == 0.05
        assert snap.geography.rtt("eu-west", "eu-west") == 4.0
        assert cache.ready(SERVICES) and not cache.ready(NODEPOOLS), "NodePools not started"
        # without the exposure settings nothing is added
        plain = KubernetesBackend(cache, client, ready_wait_s=10).observe()
        assert plain.geography is None and plain.workloads[f"{NS}/web"].exposure is None
    finally:
        demand.close()
        cache.stop()
        close: Any = client.close
        close()
        kube.close()


def test_services_not_listed_yet_leave_the_snapshot_as_it_is() -> None:
    class NotListed:
        def get(self, *args: Any, **kw: Any) -> None:
            raise NotReady("services.v1: initial list not received yet")

    snap = ClusterSnapshot(0.0, (), {})
    observer = ExposureObserver(cast(WatchCache, NotListed()), _settings(), None)
    assert observer.apply(snap) is snap


def test_expose_refuses_a_selector_that_would_drop_a_pool(
        backend: tuple[KubernetesBackend, Kube]) -> None:
    """Where the NodePools are watched (the fan-out runs), a selection whose selector would
    not select every pool asked for (a NodePool without the label carrying its name, or
    none of that name) is refused with the fix: written, it would withdraw the Service from
    those pools (from all of them, if none is labelled) instead of exposing it there."""
    b, kube = backend
    api_version = f"{openyurt.NODEPOOL_GROUP}/{openyurt.NODEPOOL_VERSION}"
    kube.create({"apiVersion": api_version, "kind": "NodePool",
                 "metadata": {"name": "eu", "labels": {openyurt.NODEPOOL_NAME_LABEL: "eu"}},
                 "spec": {"type": "Cloud"}})
    kube.create({"apiVersion": api_version, "kind": "NodePool",
                 "metadata": {"name": "us", "labels": {"region": "us"}}, "spec": {"type": "Cloud"}})
    b.cache.start(NODEPOOLS)
    b.cache.list(NODEPOOLS, wait=10)
    with pytest.raises(PermanentError, match=r"us.*kubectl label nodepool us"):
        b.expose(f"{NS}/web", ("eu", "us"))
    with pytest.raises(PermanentError, match="asia"):
        b.expose(f"{NS}/web", ("asia",))
    ann = kube.get("Service", NS, "web")["metadata"].get("annotations") or {}
    assert openyurt.POOL_SELECTOR_ANNOTATION not in ann, "nothing written"
    b.expose(f"{NS}/web", ("eu",))
    ann = kube.get("Service", NS, "web")["metadata"]["annotations"]
    assert ann[openyurt.POOL_SELECTOR_ANNOTATION] == "openyurt.io/pool-name in (eu)"
