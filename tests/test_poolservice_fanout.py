"""The PoolService fan-out over the Kubernetes emulator (issue 14, docs/poolservice.md).

Most tests call :meth:`PoolServiceFanout.reconcile` directly once the watch cache has caught
up with the API server (:func:`settle`); one drives it through :class:`FanoutLoop` (cache
events) and one through the kopf operator.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any, cast

import kopf
import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import Kube, RunningApiserver, wait_until
from knowledge.connect import open_knowledge_base
from planner.domain.admin import AdminConfig
from planner.domain.errors import TemporaryError
from planner.domain.ports import KPISource
from planner.k8s.k8sevents import EventPoster
from planner.k8s.openyurt import (
    FINALIZER,
    HAPROXY_LB_CLASS,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_NAME_LABEL,
    POOL_SELECTOR_ANNOTATION,
    SERVICE_NAME_LABEL,
)
from planner.k8s.operator import OperatorConfig, OperatorRuntime, configure, register_handlers
from planner.k8s.poolservice_desired import FanoutWrites
from planner.k8s.poolservice_fanout import PoolServiceFanout
from planner.k8s.poolservice_loop import FanoutLoop
from planner.k8s.resources import NODEPOOLS, POOLSERVICES, SERVICES
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"


def api_client(url: str) -> ApiClient:
    cfg = Configuration(host=url)
    cfg.connection_pool_maxsize = 8
    return ApiClient(cfg)


def nodepool(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "apps.openyurt.io/v1beta1", "kind": "NodePool",
            "metadata": {"name": name, "labels": dict(labels)}, "spec": {"type": "Edge"}}


def service(name: str, selector: str | None = "region=eu", lb_class: str | None =
            HAPROXY_LB_CLASS, svc_type: str = "LoadBalancer",
            annotations: Mapping[str, str] | None = None,
            labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    ann = dict(annotations or {})
    if selector is not None:
        ann[POOL_SELECTOR_ANNOTATION] = selector
    spec: dict[str, Any] = {"type": svc_type, "selector": {"app": name},
                            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}
    if lb_class is not None:
        spec["loadBalancerClass"] = lb_class
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": NS, "annotations": ann,
                         "labels": dict(labels or {})}, "spec": spec}


class Fan:
    """A watch cache and the fan-out over the emulator."""

    def __init__(self, api: RunningApiserver, kube: Kube) -> None:
        self.api, self.kube = api, kube
        self.client = api_client(api.url)
        self.cache = WatchCache(ApiClientTransport(self.client),
                                settings=CacheSettings(watch_timeout_s=30))
        self.events = EventPoster(self.client)
        self.fanout = PoolServiceFanout(self.cache, self.client, self.events, backoff_s=0.01)
        self.fanout.start()

    def close(self) -> None:
        self.cache.stop()
        close: Any = self.client.close
        close()

    def caught_up(self) -> bool:
        """The cache holds exactly the API server's objects, at their versions."""
        for rtype in (SERVICES, NODEPOOLS, POOLSERVICES):
            items = self.kube.http.get(rtype.path()).json()["items"]
            want = {(o["metadata"].get("namespace"), o["metadata"]["name"],
                     o["metadata"]["resourceVersion"]) for o in items}
            if not self.cache.ready(rtype):
                return False
            have = {(o["metadata"].get("namespace"), o["metadata"]["name"],
                     o["metadata"].get("resourceVersion")) for o in self.cache.list(rtype)}
            if want != have:
                return False
        return True

    def reconcile(self, name: str) -> FanoutWrites | None:
        wait_until(self.caught_up, timeout=10)
        return self.fanout.reconcile(NS, name)

    def settle(self, name: str, rounds: int = 6) -> list[FanoutWrites | None]:
        """Reconcile until a round writes nothing (what the loop does on each event)."""
        out = []
        for _ in range(rounds):
            w = self.reconcile(name)
            out.append(w)
            if not w:
                return out
        raise AssertionError(f"not settled after {rounds} rounds: {out}")


@pytest.fixture
def fan(api: RunningApiserver, kube: Kube) -> Iterator[Fan]:
    f = Fan(api, kube)
    yield f
    f.close()


def poolservices(kube: Kube) -> dict[str, dict[str, Any]]:
    items = kube.http.get(POOLSERVICES.path(NS)).json()["items"]
    return {o["metadata"]["name"]: o for o in items}


def events(kube: Kube, reason: str | None = None) -> list[dict[str, Any]]:
    items = kube.http.get(f"/api/v1/namespaces/{NS}/events").json()["items"]
    return [e for e in items if reason is None or e["reason"] == reason]


def three_pools(kube: Kube) -> dict[str, str]:
    """eu-a and eu-b in region eu, us-a in region us; their uids."""
    out = {}
    for name, region in (("eu-a", "eu"), ("eu-b", "eu"), ("us-a", "us")):
        out[name] = kube.create(nodepool(name, region=region))["metadata"]["uid"]
    return out


def test_annotated_service_gets_one_poolservice_per_matching_pool(fan: Fan, kube: Kube) -> None:
    uids = three_pools(kube)
    svc = kube.create(service("web"))
    kube.create(service("plain", selector=None))            # no selector: not selected
    kube.create(service("classless", lb_class=None))         # no class: not selected
    kube.create(service("internal", svc_type="ClusterIP"))   # not a LoadBalancer
    fan.settle("web")
    for name in ("plain", "classless", "internal"):
        assert not fan.reconcile(name)

    pss = poolservices(kube)
    assert sorted(pss) == ["web-eu-a", "web-eu-b"]
    for pool in ("eu-a", "eu-b"):
        ps = pss[f"web-{pool}"]
        assert ps["metadata"]["labels"] == {SERVICE_NAME_LABEL: "web", POOL_NAME_LABEL: pool,
                                            MANAGED_BY_LABEL: MANAGED_BY}
        owners = ps["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [
            ("Service", "web", svc["metadata"]["uid"]), ("NodePool", pool, uids[pool])]
        assert owners[0]["controller"] is True and "controller" not in owners[1]
        assert ps["spec"] == {"loadBalancerClass": HAPROXY_LB_CLASS}
    assert kube.get("Service", NS, "web")["metadata"]["finalizers"] == [FINALIZER]
    for name in ("plain", "classless", "internal"):
        assert not kube.get("Service", NS, name)["metadata"].get("finalizers")


def test_pool_relabelled_deleted_and_added(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web"))
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-a", "web-eu-b"]

    kube.patch("NodePool", None, "eu-b", {"metadata": {"labels": {"region": "us"}}})
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-a"]

    kube.delete("NodePool", None, "eu-a")
    fan.settle("web")
    assert poolservices(kube) == {}
    assert events(kube, "NoMatchNodePool"), "no pool left: an event says so"

    kube.create(nodepool("eu-c", region="eu"))
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-c"]


def test_service_deleted_poolservices_gone_and_finalizer_removed(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web"))
    fan.settle("web")
    kube.delete("Service", NS, "web")
    assert kube.get("Service", NS, "web")["metadata"]["deletionTimestamp"], "held by us"
    fan.settle("web")
    assert poolservices(kube) == {}
    assert kube.http.get(SERVICES.path(NS, "web")).status_code == 404, "finalizer removed"


def test_service_no_longer_selected_is_withdrawn(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web"))
    kube.create(service("api"))
    fan.settle("web")
    fan.settle("api")
    kube.patch("Service", NS, "web", {"metadata": {"annotations": {
        POOL_SELECTOR_ANNOTATION: None}}})
    kube.patch("Service", NS, "api", {"metadata": {"annotations": {
        POOL_SELECTOR_ANNOTATION: "  "}}})
    fan.settle("web")
    fan.settle("api")
    assert poolservices(kube) == {}
    for name in ("web", "api"):
        assert not kube.get("Service", NS, name)["metadata"].get("finalizers")


def test_manual_edit_of_labels_and_owners_reverted_with_a_warning(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web"))
    fan.settle("web")
    before = poolservices(kube)["web-eu-a"]
    kube.patch("PoolService", NS, "web-eu-a", {"metadata": {
        "labels": {POOL_NAME_LABEL: "elsewhere", SERVICE_NAME_LABEL: "other"},
        "ownerReferences": [before["metadata"]["ownerReferences"][1]]}})
    kube.patch("PoolService", NS, "web-eu-b", {"spec": {"loadBalancerClass": "vendor.example/x"}})
    assert poolservices(kube)["web-eu-a"]["metadata"]["labels"][POOL_NAME_LABEL] == "elsewhere"
    fan.settle("web")
    after = poolservices(kube)
    assert after["web-eu-a"]["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["web-eu-a"]["metadata"]["ownerReferences"] == \
        before["metadata"]["ownerReferences"]
    assert after["web-eu-a"]["metadata"]["uid"] == before["metadata"]["uid"], "patched, not new"
    assert after["web-eu-b"]["spec"]["loadBalancerClass"] == HAPROXY_LB_CLASS
    modified = events(kube, "Modified")
    assert {e["involvedObject"]["name"] for e in modified} == {"web-eu-a", "web-eu-b"}
    assert all(e["type"] == "Warning" and e["involvedObject"]["kind"] == "PoolService"
               for e in modified)
    msg = next(e["message"] for e in modified if e["involvedObject"]["name"] == "web-eu-a")
    assert "metadata.labels" in msg and "metadata.ownerReferences" in msg


def test_unmanaged_poolservice_left_alone_with_an_event(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    theirs = kube.create({"apiVersion": "network.openyurt.io/v1alpha1", "kind": "PoolService",
                          "metadata": {"name": "web-eu-a", "namespace": NS,
                                       "labels": {"team": "net"}},
                          "spec": {"loadBalancerClass": "vendor.example/x"}})
    kube.create(service("web"))
    fan.settle("web")
    pss = poolservices(kube)
    assert pss["web-eu-a"]["metadata"]["resourceVersion"] == \
        theirs["metadata"]["resourceVersion"], "not touched"
    assert pss["web-eu-b"]["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
    [conflict] = events(kube, "ManagedConflict")
    assert conflict["type"] == "Warning"
    assert conflict["involvedObject"]["name"] == "web-eu-a"
    assert "left alone" in conflict["message"]
    # Withdrawing the Service deletes only ours.
    kube.delete("Service", NS, "web")
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-a"]


def test_no_matching_pool_gives_an_event(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web", selector="region in (mars, venus)"))
    fan.settle("web")
    assert poolservices(kube) == {}
    [ev] = events(kube, "NoMatchNodePool")
    assert ev["type"] == "Warning" and ev["involvedObject"]["kind"] == "Service"
    assert "region in (mars, venus)" in ev["message"]
    assert kube.get("Service", NS, "web")["metadata"]["finalizers"] == [FINALIZER]


def set_status(kube: Kube, name: str, status: dict[str, Any]) -> None:
    kube.patch("PoolService", NS, name, {"status": status}, sub="status")


def test_ingress_union_and_aggregated_keys(fan: Fan, kube: Kube) -> None:
    three_pools(kube)
    kube.create(service("web", annotations={"aggregated.stale": "x", "keep": "me"},
                        labels={"aggregated.old": "y", "app": "web"}))
    fan.settle("web")
    set_status(kube, "web-eu-a", {
        "loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}]},
        "aggregateToAnnotations": {"lb-id": "lb-b", "zone": "eu-a1"},
        "aggregateToLabels": {"tier": "gold"}})
    set_status(kube, "web-eu-b", {
        "loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "lb.eu-b.example"}]},
        "aggregateToAnnotations": {"lb-id": "lb-a"},
        "aggregateToLabels": {"tier": "gold"}})
    fan.settle("web")
    svc = kube.get("Service", NS, "web")
    assert svc["status"]["loadBalancer"]["ingress"] == [
        {"hostname": "lb.eu-b.example"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]
    ann = svc["metadata"]["annotations"]
    assert ann["aggregated.lb-id"] == "lb-a,lb-b" and ann["aggregated.zone"] == "eu-a1"
    assert "aggregated.stale" not in ann and ann["keep"] == "me"
    assert svc["metadata"]["labels"] == {"app": "web", "aggregated.tier": "gold"}

    # A pool leaves: its ingress and values go with it.
    kube.patch("NodePool", None, "eu-a", {"metadata": {"labels": {"region": "us"}}})
    fan.settle("web")
    svc = kube.get("Service", NS, "web")
    assert svc["status"]["loadBalancer"]["ingress"] == [
        {"hostname": "lb.eu-b.example"}, {"ip": "10.0.0.1"}]
    assert svc["metadata"]["annotations"]["aggregated.lb-id"] == "lb-a"
    assert "aggregated.zone" not in svc["metadata"]["annotations"]


def test_second_reconcile_of_an_unchanged_world_writes_nothing(
        fan: Fan, kube: Kube, api: RunningApiserver) -> None:
    three_pools(kube)
    kube.create(service("web", selector="region=mars"))  # an event too
    kube.create(service("api"))
    fan.settle("web")
    fan.settle("api")
    set_status(kube, "api-eu-a", {"loadBalancer": {"ingress": [{"ip": "10.1.0.1"}]},
                                  "aggregateToAnnotations": {"k": "v"}})
    fan.settle("api")
    writes = len(api.server.writes())
    posted = fan.events.posted
    for name in ("web", "api", "web", "api"):
        w = fan.reconcile(name)
        assert w is not None and not w and w.writes == 0
    assert len(api.server.writes()) == writes, "no create, patch or delete (events included)"
    assert fan.events.posted == posted


def test_conflicts_are_read_again_and_temporary_errors_retried(
        fan: Fan, kube: Kube, api: RunningApiserver) -> None:
    three_pools(kube)
    kube.create(service("web"))
    api.server.fail("PATCH", rf"/namespaces/{NS}/services/web$", 409, reason="Conflict",
                    message="the object has been modified")
    api.server.fail("POST", rf"/namespaces/{NS}/poolservices$", 503, times=1)
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-a", "web-eu-b"]
    # A create answering 409 (someone made it meanwhile): the world is read from the API.
    kube.create(nodepool("eu-c", region="eu"))
    fetches = len([c for c in api.server.calls if c.verb == "fetch" and c.name == "web"])
    api.server.fail("POST", rf"/namespaces/{NS}/poolservices$", 409, reason="AlreadyExists")
    fan.settle("web")
    assert sorted(poolservices(kube)) == ["web-eu-a", "web-eu-b", "web-eu-c"]
    assert len([c for c in api.server.calls if c.verb == "fetch" and c.name == "web"]) \
        > fetches, "re-read from the API server"
    # Always failing: a TemporaryError for the caller to requeue.
    kube.patch("Service", NS, "web", {"metadata": {"finalizers": []}})
    api.server.fail("PATCH", rf"/namespaces/{NS}/services/web$", 503, times=100)
    with pytest.raises(TemporaryError, match="gave up after 4 attempts"):
        fan.reconcile("web")


def test_loop_follows_cache_events(api: RunningApiserver, kube: Kube) -> None:
    """Through :class:`FanoutLoop`: no direct reconcile calls."""
    f = Fan(api, kube)
    loop = FanoutLoop(f.fanout, poll_s=0.02).start()
    try:
        three_pools(kube)
        kube.create(service("web"))
        wait_until(lambda: sorted(poolservices(kube)) == ["web-eu-a", "web-eu-b"])
        kube.patch("NodePool", None, "eu-b", {"metadata": {"labels": {"region": "us"}}})
        wait_until(lambda: sorted(poolservices(kube)) == ["web-eu-a"])
        set_status(kube, "web-eu-a", {"loadBalancer": {"ingress": [{"ip": "10.0.0.9"}]}})
        wait_until(lambda: (kube.get("Service", NS, "web").get("status") or {}).get(
            "loadBalancer", {}).get("ingress") == [{"ip": "10.0.0.9"}])
        kube.delete("Service", NS, "web")
        wait_until(lambda: kube.http.get(SERVICES.path(NS, "web")).status_code == 404)
        assert poolservices(kube) == {}
        assert loop.failures == 0, loop.last_error
    finally:
        loop.stop()
        f.close()


def run_operator(api: RunningApiserver, fanout: bool) -> tuple[OperatorRuntime, Any]:
    client = api_client(api.url)
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    config = OperatorConfig(standalone=True, admin=AdminConfig(cycleSeconds=60),
                            poolservice_fanout=fanout)
    runtime = OperatorRuntime(config, client, cache, open_knowledge_base(None),
                              kpis=cast(KPISource, _NoKPIs()), load=lambda workloads: {})
    registry = kopf.OperatorRegistry()
    register_handlers(registry, runtime,
                      login=lambda **_: kopf.ConnectionInfo(server=api.url, insecure=True))
    settings = configure(kopf.OperatorSettings())
    settings.watching.server_timeout = 10
    settings.queueing.idle_timeout = settings.queueing.exit_timeout = 0.5
    stop, started = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(kopf.operator(
        registry=registry, settings=settings, standalone=True, clusterwide=True,
        stop_flag=stop, ready_flag=started)), name="kopf", daemon=True)
    thread.start()
    assert started.wait(10), "kopf did not start"

    def close() -> None:
        stop.set()
        thread.join(15)
        runtime.close()
        cache.stop()
        close_client: Any = client.close
        close_client()

    return runtime, close


class _NoKPIs:
    def measure(self, intent: Any, profile: Any) -> float | None:
        return None

    def last_error(self, intent: Any, profile: Any) -> str | None:
        return "none"


@pytest.mark.parametrize("fanout", [True, False], ids=["on", "off"])
def test_operator_runs_the_fanout_unless_switched_off(api: RunningApiserver, kube: Kube,
                                                      fanout: bool) -> None:
    runtime, close = run_operator(api, fanout)
    try:
        wait_until(lambda: runtime.started, timeout=10)
        three_pools(kube)
        kube.create(service("web"))
        if fanout:
            wait_until(lambda: sorted(poolservices(kube)) == ["web-eu-a", "web-eu-b"],
                       timeout=15)
            assert runtime.fanout is not None
            assert len(api.server.watch_calls("services")) == 1, "one shared watch"
        else:
            assert runtime.fanout is None
            assert runtime.start_fanout() is not None
            threading.Event().wait(1.0)
            assert poolservices(kube) == {}
            assert not kube.get("Service", NS, "web")["metadata"].get("finalizers")
    finally:
        close()


def test_operator_command_rejects_a_bad_fanout_switch() -> None:
    import typer
    from typer.testing import CliRunner

    from planner.k8s import command

    app = typer.Typer()
    app.command()(command.operator)
    result = CliRunner().invoke(app, ["--poolservice-fanout", "maybe"])
    assert result.exit_code == 2 and "--poolservice-fanout 'maybe': give on or off" \
        in result.output
