"""The ``manual`` and ``squeeze`` policies' weights rendered to every data plane the weights
actuator writes (its :class:`~actuators.dispatch.sinks.Sinks`): a real HAProxy through the
runtime API (and real requests through it), an Envoy EDS file, a ConfigMap."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from actuators import dispatch as pw
from actuators.dataplanes import haproxy as hw
from actuators.dispatch.sinks import Sinks
from bench.harness import backends as sb
from bench.harness import haproxy as sh
from planner.domain import admin as admin_config
from planner.domain.ports import ClusterBackend

pytestmark = pytest.mark.skipif(sh.find_binary() is None, reason=sh.SKIP_REASON)

WORKLOAD = "shop/web"
PODS = ("web-0", "web-1", "web-2")


class Planes:
    """A real HAProxy (backend ``web``, one server per pod, in front of live backends), the
    Sinks of the weights actuator writing to it, an EDS file and a ConfigMap."""

    def __init__(self, proxy: sh.HAProxyProcess, eds: Path) -> None:
        self.proxy = proxy
        self.eds = eds
        self.applied: list[dict[str, Any]] = []
        host, port = proxy.api_address
        dispatch = admin_config.DispatchConfig.model_validate({
            "haproxy": {"address": f"{host}:{port}"},
            "envoy": {"path": str(eds), "port": 8080},
            "configmap": {}})
        self.sinks = Sinks(dispatch, configmap_apply=self.applied.append)

    def write(self, weights: Mapping[str, int]) -> None:
        # the backend is not among the targets: only the data planes are written
        delivery = self.sinks.write(WORKLOAD, weights, cast(ClusterBackend, None),
                                    self.sinks.names(WORKLOAD, backend=False))
        assert not delivery.failures, delivery.failures
        assert set(delivery.held) == {"haproxy", "envoy-eds", "configmap"}

    def haproxy(self) -> dict[str, int]:
        return hw.RuntimeAPI(self.proxy.api_address).server_weights("web")

    def envoy(self) -> dict[str, tuple[str, int]]:
        document = json.loads(self.eds.read_text())
        endpoints = document["resources"][0]["endpoints"][0]["lb_endpoints"]
        return {e["endpoint"]["address"]["socket_address"]["address"]:
                (e["health_status"], e["load_balancing_weight"]) for e in endpoints}

    def configmap(self) -> dict[str, int]:
        manifest = self.applied[-1]
        assert manifest["metadata"] == {
            "name": "web-dispatch-weights", "namespace": "shop",
            "labels": {"app.kubernetes.io/managed-by": "intent-planner"}}
        return cast(dict[str, int], json.loads(manifest["data"]["weights.json"]))

    def served(self, requests: int) -> dict[str, int]:
        counts = dict.fromkeys(PODS, 0)
        with httpx.Client(base_url=self.proxy.url, timeout=5) as client:
            for _ in range(requests):
                counts[client.get("/work?ms=0").text.strip()] += 1
        return counts


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[Planes]:
    specs = [sb.BackendSpec(p, workers=4) for p in PODS]
    with sb.BackendFleet(specs, in_process=True) as fleet:
        servers = [sh.ServerSpec(s.name, *fleet.address(s.name)) for s in specs]
        with sh.HAProxyProcess(servers, balance="roundrobin", backend="web") as proxy:
            yield Planes(proxy, tmp_path / "eds.json")


def test_a_pinned_away_pod_gets_zero_on_every_data_plane(planes: Planes) -> None:
    engine = pw.WeightEngine(pw.ManualPolicy(weights={"web-0": 3}, pinned_away=["web-2"]))
    weights = engine.update([pw.EndpointMetrics(p, 0.0) for p in PODS], 0.0).weights
    assert weights == {"web-0": 96, "web-1": 32, "web-2": 0}
    planes.write(weights)
    assert planes.haproxy() == weights
    assert planes.envoy() == {"web-0": ("HEALTHY", 96), "web-1": ("HEALTHY", 32),
                              "web-2": ("DRAINING", 1)}  # Envoy's weight is >= 1
    assert planes.configmap() == weights
    served = planes.served(64)
    assert served == {"web-0": 48, "web-1": 16, "web-2": 0}


def test_a_squeeze_weight_set_on_every_data_plane(planes: Planes) -> None:
    engine = pw.WeightEngine(pw.SqueezePolicy(), pw.EngineConfig(blackout_s=0.0))
    # three pods of 10 req/s, 12 req/s of demand: two carry it under the threshold 0.8
    samples = [pw.EndpointMetrics(p, 0.0, cpu_util=0.4, request_rate=4.0) for p in PODS]
    update = engine.update(samples, 0.0)
    weights = update.weights
    assert weights["web-0"] == weights["web-1"] > weights["web-2"] >= 1
    assert "threshold 0.80: 1 would be at 1.20" in update.decisions["web-1"].reason
    assert "not needed" in update.decisions["web-2"].reason
    planes.write(weights)
    assert planes.haproxy() == weights == planes.configmap()
    assert planes.envoy() == {p: ("HEALTHY", w) for p, w in weights.items()}
    served = planes.served(2 * sum(weights.values()))
    assert served == {p: 2 * w for p, w in weights.items()}  # roundrobin: shares are weights
