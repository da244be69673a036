"""The planner widening a Service's exposure from one pool to two and back, on Kubernetes.

Issue 14's must-show, end to end over the Kubernetes emulator (bench/harness/apiserver.py) and
a real Prometheus on 127.0.0.1 scraping a tiny exporter whose requests per client region the
test sets: NodePools ``eu`` (region eu-west) and ``us`` (us-east), a Deployment and its
``LoadBalancer`` Service of class ``intent-planner.io/haproxy`` annotated with its home pool,
an Intent with a p95 latency objective of 60 ms (network budget 30 ms; eu-west <-> us-east is
90 ms). The controller runs cycles (``IntentController.cycle``) with the ``exposure`` actuator
over the Kubernetes backend, whose snapshot reports the exposure, the geography and the client
demand (:mod:`planner.k8s.exposure_observer`); the PoolService fan-out reconciles on the same
watch cache; the PoolServices' status is written as the reference load balancer writes it.

Other pieces are tested in their own files (the fan-out's rules: test_poolservice_fanout.py;
the load balancer with real HAProxy: test_poolservice_lb.py; the decision: test_regions.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry, Counter, start_http_server

from actuators import registry
from actuators.exposure import ExposureActuator
from bench.harness.apiserver import (
    Kube,
    RunningApiserver,
    deployment,
    intent,
    node,
    pod,
    profile,
    wait_until,
)
from knowledge.connect import open_knowledge_base
from planner.control.controller import IntentController
from planner.domain.admin import AdminConfig
from planner.domain.intents import Intent, KPIProfile
from planner.domain.ports import KPISource
from planner.domain.state import WorkloadState
from planner.k8s import openyurt
from planner.k8s.backend import KubernetesBackend
from planner.k8s.client_demand import PrometheusClientDemand
from planner.k8s.k8sevents import EventPoster
from planner.k8s.loadmetrics import Load
from planner.k8s.poolservice_fanout import PoolServiceFanout
from planner.k8s.poolservice_lb import BACKENDS_ANNOTATION
from planner.k8s.resources import INTENTS, KPIPROFILES, NODEPOOLS, POOLSERVICES, SERVICES
from planner.k8s.settings import parse_settings
from planner.k8s.source import CacheStore, KubernetesIntentSource
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache
from tests.support.prometheus import PrometheusServer, require_prometheus

if "exposure" not in registry.REGISTRY.names():
    # Declared in pyproject.toml; an install that predates the entry point lacks it.
    registry.REGISTRY.register("exposure")(ExposureActuator)

NS = "shop"
SVC = "web"
KEY = f"{NS}/{SVC}"
TICK = 0.1
SETTINGS = {"exposure": {
    "latencyMs": {"eu-west": {"eu-west": 4, "us-east": 90},
                  "us-east": {"eu-west": 90, "us-east": 4}},
    "lbCostPerHour": 0.05, "window": "4s", "timeoutSeconds": 2}}
ANNOTATION = openyurt.POOL_SELECTOR_ANNOTATION
AGGREGATED = openyurt.AGGREGATED_PREFIX + BACKENDS_ANNOTATION


class RegionTraffic:
    """``http_requests_total{namespace, service, client_region}`` growing at the rates per
    region the test sets (:attr:`rates`, requests per second), on 127.0.0.1."""

    def __init__(self, rates: Mapping[str, float]) -> None:
        self.rates = dict(rates)
        self.registry = CollectorRegistry()
        self.requests = Counter("http_requests_total", "Requests by client region.",
                                ["namespace", "service", "client_region"],
                                registry=self.registry)
        for region in self.rates:   # every series exists from the first scrape
            self.requests.labels(NS, SVC, region)
        self._stop = threading.Event()
        self._server: Any = None
        self._thread = threading.Thread(target=self._run, name="region-traffic", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            for region, rate in list(self.rates.items()):
                if rate > 0:
                    self.requests.labels(NS, SVC, region).inc(rate * TICK)

    def start(self) -> str:
        self._server, _ = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self._thread.start()
        return f"127.0.0.1:{self._server.server_port}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class StubKPIs(KPISource):
    """The p95 at the client, met throughout (the exposure decision reads the objective and
    the demand, not the value)."""

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        return 40.0

    def last_error(self, intent: Intent, profile: KPIProfile) -> str | None:
        return None


def _steady_load(workloads: Mapping[str, WorkloadState]) -> Mapping[str, Load]:
    return {k: Load(request_rate=50.0, cpu_utilization=0.5) for k in workloads if k == KEY}


def seed(kube: Kube) -> None:
    for name, pool, region in (("node-eu", "eu", "eu-west"), ("node-us", "us", "us-east")):
        # node-us has no region label: its pool's region comes from its NodePool
        kube.create(node(name, pool, region=region if pool == "eu" else "",
                         labels={openyurt.NODE_POOL_LABEL: pool}))
        # NodePools are the admin's: they carry the label with their own name that the
        # planner's selector selects on (docs/regions.md, "On Kubernetes").
        kube.create({"apiVersion": f"{openyurt.NODEPOOL_GROUP}/{openyurt.NODEPOOL_VERSION}",
                     "kind": "NodePool",
                     "metadata": {"name": pool, "labels": {
                         openyurt.NODEPOOL_NAME_LABEL: pool,
                         "topology.kubernetes.io/region": region}},
                     "spec": {"type": "Cloud"}})
    kube.create(deployment(NS, SVC, 2))
    for _ in range(2):
        kube.create(pod(NS, SVC, "node-eu"))
    kube.create({"apiVersion": "v1", "kind": "Service",
                 "metadata": {"name": SVC, "namespace": NS,
                              "annotations": {ANNOTATION: openyurt.pool_selector(["eu"])}},
                 "spec": {"type": "LoadBalancer",
                          "loadBalancerClass": openyurt.HAPROXY_LB_CLASS,
                          "selector": {"app": SVC},
                          "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}})
    kube.create(profile(NS, "latency", "latency", percentile=95))
    kube.create(intent(NS, "web-slo", SVC,
                       [{"name": "p95", "value": 60, "measuredBy": "latency"}]))


class World:
    """The controller, the backend and the fan-out on one watch cache over the emulator."""

    def __init__(self, api: RunningApiserver, kube: Kube, prometheus_url: str) -> None:
        self.kube = kube
        cfg = Configuration(host=api.url)
        cfg.connection_pool_maxsize = 16
        self.client = ApiClient(cfg)
        self.cache = WatchCache(ApiClientTransport(self.client),
                                settings=CacheSettings(watch_timeout_s=30))
        self.fanout = PoolServiceFanout(self.cache, self.client, EventPoster(self.client),
                                        backoff_s=0.01)
        self.fanout.start()
        settings = parse_settings(SETTINGS)
        self.demand = PrometheusClientDemand(prometheus_url, settings.exposure)
        self.now = 1_700_000_000.0
        self.backend = KubernetesBackend(self.cache, self.client, load=_steady_load,
                                         ready_wait_s=10, request_timeout_s=5,
                                         clock=lambda: self.now, settings=settings,
                                         client_demand=self.demand)
        source = KubernetesIntentSource(self.client, CacheStore(self.cache, INTENTS, 10),
                                        CacheStore(self.cache, KPIPROFILES, 10))
        self.kb = open_knowledge_base(None)
        admin = AdminConfig(actuators=("replicas", "exposure"))
        self.controller = IntentController(self.backend, StubKPIs(), source, self.kb, admin)

    def close(self) -> None:
        self.demand.close()
        self.backend.close()
        self.cache.stop()
        close: Any = self.client.close
        close()

    def caught_up(self) -> bool:
        """The cache holds exactly the API server's Services, NodePools and PoolServices."""
        for rtype in (SERVICES, NODEPOOLS, POOLSERVICES):
            items = self.kube.http.get(rtype.path()).json()["items"]
            want = {(o["metadata"].get("namespace"), o["metadata"]["name"],
                     o["metadata"]["resourceVersion"]) for o in items}
            have = {(o["metadata"].get("namespace"), o["metadata"]["name"],
                     o["metadata"].get("resourceVersion")) for o in self.cache.list(rtype)}
            if not self.cache.ready(rtype) or want != have:
                return False
        return True

    def settle(self) -> None:
        """Reconcile the Service until a round writes nothing (what the fan-out loop does on
        each event)."""
        for _ in range(6):
            wait_until(self.caught_up, timeout=10)
            if not self.fanout.reconcile(NS, SVC):
                return
        raise AssertionError("the fan-out did not settle")

    def cycle(self, step_s: float = 30.0) -> Any:
        """One planning cycle ``step_s`` later, on a cache that has caught up."""
        self.now += step_s
        wait_until(self.caught_up, timeout=10)
        [out] = self.controller.cycle()
        assert not out.errors, out.errors
        return out

    def demand_now(self) -> dict[str, float]:
        return dict(self.demand(NS, SVC))

    def poolservices(self) -> dict[str, dict[str, Any]]:
        items = self.kube.http.get(POOLSERVICES.path(NS)).json()["items"]
        return {o["metadata"]["name"]: o for o in items}

    def service(self) -> dict[str, Any]:
        return self.kube.get("Service", NS, SVC)


def exposure_actions(out: Any) -> list[Any]:
    return [a for a in (out.plan.actions if out.plan else ()) if a.actuator == "exposure"]


def lb_status(kube: Kube, pool: str, ip: str, servers: int) -> None:
    """What the reference load balancer writes on a pool's PoolService (docs/poolservice-lb.md):
    its frontend as ingress, Ready, and the backends to aggregate."""
    kube.patch("PoolService", NS, openyurt.poolservice_name(SVC, pool), {"status": {
        "loadBalancer": {"ingress": [{"ip": ip, "ports": [{"port": 80, "protocol": "TCP"}]}]},
        "aggregateToAnnotations": {BACKENDS_ANNOTATION: f"{pool}={servers}"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "BackendsSynced",
                        "message": f"{servers} servers", "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, sub="status")


@pytest.fixture
def prometheus() -> Iterator[tuple[RegionTraffic, PrometheusServer]]:
    binary = require_prometheus()
    traffic = RegionTraffic({"eu-west": 50.0, "us-east": 0.0})
    target = traffic.start()
    prom = PrometheusServer(binary, [target]).start()
    try:
        yield traffic, prom
    finally:
        prom.stop()
        traffic.stop()


def test_exposure_widens_to_a_second_region_and_narrows_back(
        api: RunningApiserver, kube: Kube,
        prometheus: tuple[RegionTraffic, PrometheusServer]) -> None:
    traffic, prom = prometheus
    seed(kube)
    world = World(api, kube, prom.url)
    try:
        # Only eu clients: the annotation selects eu, one PoolService web-eu.
        world.settle()
        assert sorted(world.poolservices()) == ["web-eu"]
        wait_until(lambda: world.demand_now().get("eu-west", 0) > 20, timeout=20)
        out = world.cycle()
        wl = world.backend.last_snapshot.workload(KEY)  # type: ignore[union-attr]
        assert wl is not None and wl.exposure == ("eu",)
        assert wl.client_demand is not None and wl.client_demand["eu-west"] > 20
        snap = world.backend.last_snapshot
        assert snap is not None and snap.geography is not None
        assert {n.pool: n.region for n in snap.nodes} == {"eu": "eu-west", "us": "us-east"}
        assert exposure_actions(out) == [] and out.plan is not None
        assert world.service()["metadata"]["annotations"][ANNOTATION] == \
            "openyurt.io/pool-name in (eu)"

        # Demand grows in us-east: the plan widens to eu+us with its reason.
        traffic.rates["us-east"] = 30.0
        wait_until(lambda: world.demand_now().get("us-east", 0) > 10, timeout=20)
        out = world.cycle()
        [widen] = exposure_actions(out)
        assert widen.params == {"pools": ["eu", "us"], "from": ["eu"]}
        assert widen.reason.startswith(f"expose {KEY} in pool us too: clients in us-east")
        assert "network budget 30 ms" in widen.reason and out.applied
        assert world.service()["metadata"]["annotations"][ANNOTATION] == \
            "openyurt.io/pool-name in (eu,us)"
        status = kube.get("Intent", NS, "web-slo")["status"]
        assert status["lastAction"] == widen.reason
        assert any(a["actuator"] == "exposure" for a in status["lastPlan"]["actions"])
        event = max(world.kb.events(f"{NS}/web-slo"), key=lambda e: e["time"])
        assert event["time"] == world.now and event["applied"]
        assert [a["reason"] for a in event["plan"]["actions"]
                if a["actuator"] == "exposure"] == [widen.reason]

        # The fan-out makes web-us; the pools' load balancers' status aggregates to the
        # Service.
        world.settle()
        assert sorted(world.poolservices()) == ["web-eu", "web-us"]
        lb_status(kube, "eu", "127.0.0.1", 2)
        lb_status(kube, "us", "127.0.0.2", 1)
        world.settle()
        svc = world.service()
        assert svc["status"]["loadBalancer"]["ingress"] == [
            {"ip": "127.0.0.1", "ports": [{"port": 80, "protocol": "TCP"}]},
            {"ip": "127.0.0.2", "ports": [{"port": 80, "protocol": "TCP"}]}]
        assert svc["metadata"]["annotations"][AGGREGATED] == "eu=2,us=1"
        out = world.cycle()      # the backend now sees both pools: nothing more to do
        assert world.backend.last_snapshot.workload(KEY).exposure == (  # type: ignore[union-attr]
            "eu", "us")
        assert exposure_actions(out) == []

        # us-east demand goes: held during the cooldown, then narrowed back to eu.
        traffic.rates["us-east"] = 0.0
        wait_until(lambda: world.demand_now().get("us-east", 1.0) < 0.01, timeout=20)
        out = world.cycle(step_s=60)
        assert exposure_actions(out) == [] and out.plan is not None
        assert f"stop exposing {KEY} in pool us" in out.plan.reason
        assert "cooldown" in out.plan.reason
        out = world.cycle(step_s=300)
        [narrow] = exposure_actions(out)
        assert narrow.params == {"pools": ["eu"], "from": ["eu", "us"]}
        assert narrow.reason.startswith(f"stop exposing {KEY} in pool us: pool eu serves "
                                        "100.0% of the demand within 30 ms")
        assert world.service()["metadata"]["annotations"][ANNOTATION] == \
            "openyurt.io/pool-name in (eu)"
        assert kube.get("Intent", NS, "web-slo")["status"]["lastAction"] == narrow.reason
        world.settle()
        assert sorted(world.poolservices()) == ["web-eu"]
        svc = world.service()
        assert svc["status"]["loadBalancer"]["ingress"] == [
            {"ip": "127.0.0.1", "ports": [{"port": 80, "protocol": "TCP"}]}]
        assert svc["metadata"]["annotations"][AGGREGATED] == "eu=2", "stale value removed"

        # Prometheus down: no client demand, no exposure decision, and the plan says why.
        prom.stop()
        out = world.cycle()
        assert exposure_actions(out) == [] and out.plan is not None
        wl = world.backend.last_snapshot.workload(KEY)  # type: ignore[union-attr]
        assert wl is not None and wl.client_demand is None and wl.exposure == ("eu",)
        assert (f"exposure of {KEY} not decided: client demand per region unknown: "
                f"Prometheus at {prom.url}") in out.plan.reason
        planned = {c["type"]: c for c in kube.get("Intent", NS, "web-slo")["status"][
            "conditions"]}["Planned"]
        assert "not decided: client demand per region unknown" in planned["message"]
    finally:
        world.close()
