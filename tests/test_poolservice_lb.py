"""The reference load balancer for PoolServices of class ``intent-planner.io/haproxy``.

End to end over the Kubernetes emulator and two real HAProxy processes (one per pool, on
127.0.0.1 and 127.0.0.2, the same frontend port: the Service's), with real HTTP backends on
127.0.0.x: the PoolService of each pool gets its HAProxy's frontend as ingress and a Ready
condition, each HAProxy holds exactly its pool's ready endpoints with the weights the engine
published through the weights actuator's ConfigMap data plane, requests through it reach only
its pool's pods; a pod turning not-ready leaves its pool's HAProxy; an HAProxy that is down
gives Ready=False without an exception; another class's PoolService is left alone; and a
second reconcile writes nothing, to HAProxy or to the API.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kmock import ResourceInfo
from kubernetes.client import ApiClient, Configuration

from actuators import dispatch as pw
from actuators.dataplanes import configmap as configmap_plane
from actuators.dataplanes import haproxy, haproxy_servers
from bench.harness import haproxy as sh
from bench.harness.apiserver import Kube, RunningApiserver, node, path_of, wait_until
from planner.domain.errors import SpecError
from planner.k8s import openyurt
from planner.k8s import poolservice_backends as backends
from planner.k8s.configmaps import configmap_applier
from planner.k8s.poolservice_lb import BACKENDS_ANNOTATION, ConfigMapWeights, HAProxyPoolLB
from planner.k8s.poolservice_lb_kopf import ApiReader, configmap_lister, status_patcher
from planner.k8s.poolservice_lb_settings import HAProxyLBSettings, parse_lb_settings
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"
PS_API = f"{openyurt.POOLSERVICE_GROUP}/{openyurt.POOLSERVICE_VERSION}"
PODS = {"web-a1": ("127.0.0.11", "node-a1", "pool-a"), "web-a2": ("127.0.0.12", "node-a2",
                                                                   "pool-a"),
        "web-a3": ("127.0.0.13", "node-a1", "pool-a"), "web-b1": ("127.0.0.21", "node-b1",
                                                                  "pool-b")}
NOT_READY = {"web-a3"}


# ---------------------------------------------------------------------- pure parts
def test_server_commands_only_the_differences() -> None:
    s = haproxy_servers.Server
    current = {"a": s("a", "10.0.0.1", 80, 10), "b": s("b", "10.0.0.2", 80, 5),
               "c": s("c", "10.0.0.3", 80, 5, enabled=False), "d": s("d", "10.0.0.4", 80, 7)}
    desired = {"a": s("a", "10.0.0.1", 80, 10), "b": s("b", "10.0.0.9", 81, 6),
               "c": s("c", "10.0.0.3", 80, 5), "e": s("e", "10.0.0.5", 80, 3)}
    assert haproxy_servers.server_commands("be", current, desired) == [
        "disable server be/d", "del server be/d",
        "set server be/b addr 10.0.0.9 port 81", "set server be/b weight 6",
        "enable server be/c",
        "add server be/e 10.0.0.5:80 weight 3", "enable server be/e"]
    assert haproxy_servers.server_commands("be", desired, desired) == []
    with pytest.raises(ValueError, match="not an IP"):
        s("x", "web.example", 80, 1)


def test_pool_weights_follow_the_engine_rules() -> None:
    ep = [backends.Endpoint(n, "10.0.0.1", 80, "n1") for n in ("a", "b", "c")]
    # a new pod (c) gets the mean of the pool's known positive weights
    assert backends.pool_weights(ep, {"a": 90, "b": 30}) == {"a": 90, "b": 30, "c": 60}
    # nothing known: the engine's reference weight
    assert backends.pool_weights(ep, {}, reference=50) == dict.fromkeys("abc", 50)
    # every pod of the pool pinned away (0): equal weights, or nobody would be served
    assert backends.pool_weights(ep, dict.fromkeys("abc", 0), 64) == dict.fromkeys("abc", 64)
    # one pinned away among others: kept at 0
    assert backends.pool_weights(ep, {"a": 0, "b": 40, "c": 20})["a"] == 0


def test_ready_endpoints_by_pool() -> None:
    slices = [_slice({"web-a1": True, "web-a3": False}, 8080, "web-1"),
              _slice({"web-a1": True, "web-b1": None}, 8080, "web-2"),
              {**_slice({"web-a2": True}, 8080, "other"),
               "metadata": {"name": "x", "labels": {backends.SERVICE_NAME: "other"}}}]
    eps = backends.ready_endpoints(slices, "web", "http")
    assert [e.name for e in eps] == ["web-a1", "web-b1"]  # ready None counts as ready
    nodes = [node("node-a1", "x", labels={openyurt.NODE_POOL_LABEL: "pool-a"}),
             node("node-b1", "x", labels={openyurt.NODE_POOL_LABEL: "pool-b"})]
    assert [e.name for e in backends.in_pool(eps, backends.pool_nodes(nodes, "pool-a"))] == [
        "web-a1"]


def test_settings_errors_name_the_field() -> None:
    with pytest.raises(SpecError, match=r"pools\.pool-a\.runtimeAPI.*fix"):
        parse_lb_settings({"pools": {"pool-a": {"runtimeAPI": "nohost", "address": "1.2.3.4"}}})
    with pytest.raises(SpecError, match="backend"):
        parse_lb_settings({"backend": "{namespace}/{service}", "pools": {}})
    with pytest.raises(SpecError, match="resync"):
        parse_lb_settings({"resyncSeconds": 0})
    assert not parse_lb_settings(None).enabled
    ok = parse_lb_settings({"pools": {"p": {"runtimeAPI": "/run/h.sock", "address": "lb.x"}}})
    assert ok.pools["p"].ingress([]) == {"hostname": "lb.x"}


def test_operator_command_rejects_bad_lb_settings(tmp_path: Any) -> None:
    import typer
    from typer.testing import CliRunner

    from planner.k8s import command

    app = typer.Typer()
    app.command()(command.operator)
    bad = tmp_path / "lb.yaml"
    bad.write_text("pools:\n  pool-a: {runtimeAPI: '10.0.0.1:99999', address: 10.0.0.2}\n")
    result = CliRunner().invoke(app, ["--haproxy-lb", str(bad)])
    assert result.exit_code == 2
    assert "pools.pool-a.runtimeAPI" in result.output and "fix:" in result.output


# ---------------------------------------------------------------------- end to end
class _Named(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.name.encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def http_backends(port: int) -> Iterator[None]:
    servers = []
    for name, (ip, _, _) in PODS.items():
        srv = http.server.ThreadingHTTPServer((ip, port), _Named)
        srv.name = name  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    try:
        yield
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()


def _slice(ready: dict[str, bool | None], port: int, name: str) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {backends.SERVICE_NAME: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [PODS[p][0]], "conditions": {"ready": r},
                           "nodeName": PODS[p][1], "targetRef": {"kind": "Pod", "name": p}}
                          for p, r in ready.items()]}


def poolservice(pool: str, lb_class: str = openyurt.HAPROXY_LB_CLASS,
                service: str = "web") -> dict[str, Any]:
    return {"apiVersion": PS_API, "kind": openyurt.POOLSERVICE_KIND,
            "metadata": {"name": openyurt.poolservice_name(service, pool), "namespace": NS,
                         "labels": {openyurt.SERVICE_NAME_LABEL: service,
                                    openyurt.POOL_NAME_LABEL: pool,
                                    openyurt.MANAGED_BY_LABEL: openyurt.MANAGED_BY}},
            "spec": {"loadBalancerClass": lb_class}}


class Cluster:
    """The emulator with PoolServices, a Service of two pools, and our load balancer."""

    def __init__(self, api: RunningApiserver, lbs: dict[str, sh.HAProxyProcess],
                 frontend_port: int, backend_port: int) -> None:
        key = f"{PS_API}/{openyurt.POOLSERVICE_PLURAL}"
        api.server.resources[key] = ResourceInfo(  # (a plain setdefault does not set it)
            kind=openyurt.POOLSERVICE_KIND, namespaced=True, subresources={"status"},
            verbs={"get", "list", "watch", "create", "patch", "delete"})
        self.api = api
        self.kube = Kube(api.url)
        self.client = ApiClient(Configuration(host=api.url))
        self.lbs = lbs
        self.backend_port = backend_port
        for name, pool in (("node-a1", "pool-a"), ("node-a2", "pool-a"), ("node-b1", "pool-b")):
            self.kube.create(node(name, "x", labels={openyurt.NODE_POOL_LABEL: pool}))
        self.kube.create({"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": "web", "namespace": NS},
                          "spec": {"type": "LoadBalancer",
                                   "loadBalancerClass": openyurt.HAPROXY_LB_CLASS,
                                   "selector": {"app": "web"},
                                   "ports": [{"name": "http", "port": frontend_port,
                                              "targetPort": backend_port,
                                              "protocol": "TCP"}]}})
        self.kube.create(_slice({p: p not in NOT_READY for p in PODS}, backend_port, "web-x1"))
        for pool in ("pool-a", "pool-b"):
            self.create_ps(poolservice(pool))
        self.settings = HAProxyLBSettings.model_validate({
            "backend": "{namespace}-{name}",
            "pools": {pool: {"runtimeAPI": f"{p.host}:{p.api_port}", "address": p.host}
                      for pool, p in lbs.items()}})
        self.engine_weights = self.publish_weights()
        self.lb = self.make_lb(ApiReader(ApiClientTransport(self.client)))

    def make_lb(self, reader: Any) -> HAProxyPoolLB:
        return HAProxyPoolLB(self.settings, reader, status_patcher(self.client),
                             ConfigMapWeights(configmap_lister(self.client)))

    def publish_weights(self) -> dict[str, int]:
        """What the weights actuator does: the engine's weights, written by the ConfigMap
        data plane (``admin.dispatch.configmap``) through the API."""
        engine = pw.WeightEngine(pw.ManualPolicy(weights={"web-a1": 3, "web-a2": 1,
                                                          "web-b1": 2}))
        update = engine.update([pw.EndpointMetrics(p, 100.0, ready=p not in NOT_READY,
                                                   pool=PODS[p][2]) for p in PODS], now=100.0)
        writer = configmap_plane.ConfigMapWriter("web-dispatch-weights", NS,
                                                 configmap_applier(self.client))
        assert writer.write(update.weights).ok
        return dict(update.weights)

    def create_ps(self, obj: dict[str, Any]) -> None:
        self.kube.http.post(path_of(PS_API, openyurt.POOLSERVICE_PLURAL, NS),
                            json=obj).raise_for_status()

    def ps(self, name: str) -> dict[str, Any]:
        r = self.kube.http.get(path_of(PS_API, openyurt.POOLSERVICE_PLURAL, NS, name))
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def servers(self, pool: str) -> dict[str, haproxy_servers.Server]:
        p = self.lbs[pool]
        return haproxy_servers.read_servers(haproxy.RuntimeAPI(p.api_address), "shop-web")

    def status_writes(self, name: str | None = None) -> int:
        return len([c for c in self.api.server.writes(openyurt.POOLSERVICE_PLURAL, "status")
                    if name is None or c.name == name])

    def close(self) -> None:
        self.kube.close()
        close: Any = self.client.close
        close()


@pytest.fixture
def cluster(api: RunningApiserver) -> Iterator[Cluster]:
    if sh.find_binary() is None:
        pytest.skip(sh.SKIP_REASON)
    frontend_port, backend_port = sh.free_port("127.0.0.1"), sh.free_port("127.0.0.11")
    with contextlib.ExitStack() as stack:
        lbs = {pool: stack.enter_context(sh.HAProxyProcess([], backend="shop-web", host=host,
                                                           frontend_port=frontend_port))
               for pool, host in (("pool-a", "127.0.0.1"), ("pool-b", "127.0.0.2"))}
        stack.enter_context(http_backends(backend_port))
        c = Cluster(api, lbs, frontend_port, backend_port)
        stack.callback(c.close)
        yield c


def ready_condition(ps: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in ps["status"]["conditions"] if c["type"] == "Ready")


def served_by(url: str, n: int) -> dict[str, int]:
    seen: dict[str, int] = {}
    for _ in range(n):
        with urllib.request.urlopen(url, timeout=5) as resp:
            name = resp.read().decode()
        seen[name] = seen.get(name, 0) + 1
    return seen


@pytest.mark.timeout(60)
def test_each_pool_gets_its_haproxy_with_its_ready_endpoints(cluster: Cluster) -> None:
    c = cluster
    other = poolservice("pool-a", lb_class="vendor.example/elb", service="api")
    c.create_ps(other)
    outcomes = {o.name: o for o in c.lb.reconcile_all()}
    assert set(outcomes) == {"web-pool-a", "web-pool-b"}  # the other class is not ours
    assert "api-pool-a" not in outcomes and "status" not in c.ps("api-pool-a")
    assert c.status_writes("api-pool-a") == 0

    weights = c.engine_weights
    assert weights["web-a1"] > weights["web-a2"] > 0 and weights["web-a3"] == 0
    for pool, pods in (("pool-a", ("web-a1", "web-a2")), ("pool-b", ("web-b1",))):
        # HAProxy of the pool: exactly the pool's ready endpoints, with the engine's weights
        assert c.servers(pool) == {p: haproxy_servers.Server(p, PODS[p][0], c.backend_port,
                                                              weights[p]) for p in pods}
        ps = c.ps(f"web-{pool}")
        lb = c.lbs[pool]
        assert ps["status"]["loadBalancer"]["ingress"] == [
            {"ip": lb.host, "ports": [{"port": lb.frontend_port, "protocol": "TCP"}]}]
        cond = ready_condition(ps)
        assert (cond["status"], cond["reason"]) == ("True", "BackendsSynced")
        assert cond["observedGeneration"] == ps["metadata"]["generation"]
        assert ps["status"]["aggregateToAnnotations"] == {
            BACKENDS_ANNOTATION: f"{pool}={len(pods)}"}
        # a request through the pool's HAProxy reaches only that pool's pods
        seen = served_by(lb.url, 24)
        assert set(seen) == set(pods), seen
    seen_a = served_by(c.lbs["pool-a"].url, 40)
    assert seen_a["web-a1"] > seen_a["web-a2"]  # the weights steer the traffic

    # idempotent: a second reconcile sends nothing to HAProxy and writes no status
    writes = c.status_writes()
    again = c.lb.reconcile_all()
    assert all(o.commands == () and not o.status_written for o in again)
    assert c.status_writes() == writes


@pytest.mark.timeout(60)
def test_not_ready_endpoint_leaves_and_unreachable_haproxy_is_a_condition(
        cluster: Cluster) -> None:
    c = cluster
    c.lb.reconcile_all()
    before = ready_condition(c.ps("web-pool-a"))
    c.kube.patch("EndpointSlice", NS, "web-x1", {"endpoints": _slice(
        {p: p not in NOT_READY | {"web-a2"} for p in PODS}, c.backend_port,
        "web-x1")["endpoints"]})
    out = c.lb.reconcile(NS, "web-pool-a")
    assert out.commands == ("disable server shop-web/web-a2", "del server shop-web/web-a2")
    assert set(c.servers("pool-a")) == {"web-a1"}
    assert set(served_by(c.lbs["pool-a"].url, 10)) == {"web-a1"}
    ps = c.ps("web-pool-a")
    after = ready_condition(ps)
    assert after["status"] == "True" and after["message"] != before["message"]
    assert after["lastTransitionTime"] == before["lastTransitionTime"]  # no flip
    assert ps["status"]["aggregateToAnnotations"][BACKENDS_ANNOTATION] == "pool-a=1"

    # HAProxy of pool B down: Ready False with the reason, no exception, ingress kept
    ingress = c.ps("web-pool-b")["status"]["loadBalancer"]
    c.lbs["pool-b"].stop()
    out = c.lb.reconcile(NS, "web-pool-b")
    assert out.retry and not out.ready and out.reason == "HAProxyUnreachable"
    ps = c.ps("web-pool-b")
    cond = ready_condition(ps)
    assert (cond["status"], cond["reason"]) == ("False", "HAProxyUnreachable")
    assert str(c.lbs["pool-b"].api_port) in cond["message"]
    assert ps["status"]["loadBalancer"] == ingress
    # retried while down: nothing new to write
    writes = c.status_writes("web-pool-b")
    assert c.lb.reconcile(NS, "web-pool-b").retry
    assert c.status_writes("web-pool-b") == writes


@pytest.mark.timeout(60)
def test_pool_without_haproxy_and_reads_through_the_watch_cache(cluster: Cluster) -> None:
    c = cluster
    c.create_ps(poolservice("pool-c"))
    cache = WatchCache(ApiClientTransport(c.client), settings=CacheSettings(watch_timeout_s=30))
    try:
        reader: Any = _WaitingCache(cache)
        lb = c.make_lb(reader)
        outcomes = {o.name: o for o in lb.reconcile_all()}
    finally:
        cache.stop()
    assert outcomes["web-pool-a"].ready and outcomes["web-pool-b"].ready
    assert set(c.servers("pool-a")) == {"web-a1", "web-a2"}
    cond = ready_condition(c.ps("web-pool-c"))
    assert (cond["status"], cond["reason"]) == ("False", "PoolNotConfigured")
    assert "pools.pool-c" in cond["message"]
    # a backend the pool's HAProxy configuration lacks: named, with the fix
    wrong = c.settings.model_copy(update={"backend": "{name}-{pool}"})
    lb = HAProxyPoolLB(wrong, ApiReader(ApiClientTransport(c.client)), status_patcher(c.client),
                       ConfigMapWeights(configmap_lister(c.client)))
    out = lb.reconcile(NS, "web-pool-a")
    assert out.retry and out.reason == "HAProxyBackendMissing"
    assert "backend web-pool-a" in ready_condition(c.ps("web-pool-a"))["message"]


class _WaitingCache:
    """The watch cache as the reader, waiting for the initial lists (the operator retries)."""

    def __init__(self, cache: WatchCache) -> None:
        self.cache = cache

    def list(self, rtype: Any, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.cache.list(rtype, namespace, wait=10)

    def get(self, rtype: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.cache.get(rtype, namespace, name, wait=10)


@pytest.mark.timeout(90)
def test_operator_serves_the_class_with_kopf(cluster: Cluster) -> None:
    """``--haproxy-lb`` in the operator: kopf's handlers reconcile a new PoolService at once
    and follow endpoint changes at each resync, reading the shared watch cache."""
    import asyncio

    import kopf

    from knowledge.connect import open_knowledge_base
    from planner.domain.admin import AdminConfig
    from planner.k8s.operator import OperatorConfig, OperatorRuntime, configure, register_handlers

    c = cluster
    settings = c.settings.model_copy(update={"resync_s": 0.5})
    cache = WatchCache(ApiClientTransport(c.client), settings=CacheSettings(watch_timeout_s=30))
    # The PoolServices are written by the test, as OpenYurt's own fan-out would (ours is off:
    # with no NodePool and no selector it would delete them).
    config = OperatorConfig(standalone=True, admin=AdminConfig(cycleSeconds=60),
                            haproxy_lb=settings, poolservice_fanout=False)
    stub: Any = object()
    runtime = OperatorRuntime(config, c.client, cache, open_knowledge_base(None), kpis=stub,
                              load=stub)
    assert runtime.haproxy_lb is not None
    registry = kopf.OperatorRegistry()
    register_handlers(registry, runtime,
                      login=lambda **_: kopf.ConnectionInfo(server=c.api.url, insecure=True))
    kopf_settings = configure(kopf.OperatorSettings())
    kopf_settings.watching.server_timeout = 10
    kopf_settings.queueing.idle_timeout = 0.5
    kopf_settings.queueing.exit_timeout = 0.5
    stop, started = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(kopf.operator(
        registry=registry, settings=kopf_settings, standalone=True, clusterwide=True,
        stop_flag=stop, ready_flag=started)), name="kopf", daemon=True)
    thread.start()
    try:
        assert started.wait(10), "kopf did not start"
        wait_until(lambda: (c.ps("web-pool-a").get("status") or {}).get("conditions"),
                   timeout=15)
        assert ready_condition(c.ps("web-pool-a"))["status"] == "True"
        assert set(c.servers("pool-a")) == {"web-a1", "web-a2"}
        c.kube.patch("EndpointSlice", NS, "web-x1", {"endpoints": _slice(
            {p: p not in NOT_READY | {"web-a1"} for p in PODS}, c.backend_port,
            "web-x1")["endpoints"]})
        wait_until(lambda: set(c.servers("pool-a")) == {"web-a2"}, timeout=15)
        # HAProxy is synced before the status is written: wait for the write too.
        wait_until(lambda: (c.ps("web-pool-a")["status"].get("aggregateToAnnotations") or {})
                   .get(BACKENDS_ANNOTATION) == "pool-a=1", timeout=15)
        # deleted (the pool no longer exposes the Service): its HAProxy backend is emptied,
        # then kopf lets the deletion through
        assert set(c.servers("pool-b")) == {"web-b1"}
        c.kube.http.delete(path_of(PS_API, openyurt.POOLSERVICE_PLURAL, NS, "web-pool-b")
                           ).raise_for_status()
        wait_until(lambda: c.kube.http.get(path_of(
            PS_API, openyurt.POOLSERVICE_PLURAL, NS, "web-pool-b")).status_code == 404,
            timeout=15)
        assert c.servers("pool-b") == {}
    finally:
        stop.set()
        thread.join(15)
        runtime.close()
        cache.stop()
    assert not thread.is_alive()
