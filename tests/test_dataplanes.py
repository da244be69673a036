"""Data-plane writers: Envoy EDS and ConfigMap rendering; HAProxy runtime API for real."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actuators import dataplanes
from actuators.dataplanes import configmap, envoy
from actuators.dataplanes import haproxy as hw
from bench.harness import backends as sb
from bench.harness import haproxy as sh

needs_haproxy = pytest.mark.skipif(sh.find_binary() is None, reason=sh.SKIP_REASON)

WEIGHTS = {"10.0.0.1:8080": 10, "10.0.0.2:8080": 200, "[fd00::3]:9000": 0}


# -- Envoy EDS -------------------------------------------------------------------------------


def test_eds_renders_cluster_load_assignment() -> None:
    writer = envoy.EnvoyEdsWriter("shop", "/nonexistent/eds.json")
    document, skipped = writer.render(WEIGHTS)
    assert skipped == {}
    (resource,) = document["resources"]
    assert resource["@type"] == envoy.CLA_TYPE
    assert resource["cluster_name"] == "shop"
    lb = resource["endpoints"][0]["lb_endpoints"]
    by_host = {e["endpoint"]["address"]["socket_address"]["address"]: e for e in lb}
    assert by_host["10.0.0.2"]["load_balancing_weight"] == 200
    assert by_host["10.0.0.2"]["endpoint"]["address"]["socket_address"]["port_value"] == 8080
    assert by_host["10.0.0.2"]["health_status"] == "HEALTHY"
    # Envoy needs weight >= 1: weight 0 becomes DRAINING (no new requests)
    assert by_host["fd00::3"]["load_balancing_weight"] == 1
    assert by_host["fd00::3"]["health_status"] == "DRAINING"


def test_eds_version_is_content_hash() -> None:
    writer = envoy.EnvoyEdsWriter("shop", "/nonexistent/eds.json")
    v1 = writer.render(WEIGHTS)[0]["version_info"]
    assert writer.render(dict(WEIGHTS))[0]["version_info"] == v1
    assert writer.render({**WEIGHTS, "10.0.0.1:8080": 11})[0]["version_info"] != v1


def test_eds_write_is_atomic_and_reports_missing_addresses(tmp_path: Path) -> None:
    path = tmp_path / "eds.json"
    writer = envoy.EnvoyEdsWriter("shop", str(path), addresses={"pod-a": ("10.1.0.1", 80)})
    result = writer.write({"pod-a": 5, "pod-b": 7})
    assert not result.ok
    assert result.written == ("pod-a",)
    assert "pod-b" in result.failed
    document = json.loads(path.read_text())
    lb = document["resources"][0]["endpoints"][0]["lb_endpoints"]
    assert [e["load_balancing_weight"] for e in lb] == [5]
    assert sorted(os.listdir(tmp_path)) == ["eds.json"]  # no temporary file left behind
    assert writer.write({"pod-a": 6}).ok
    assert "6" in path.read_text()


def test_eds_unwritable_directory_fails_without_raising(tmp_path: Path) -> None:
    sleeps: list[float] = []
    writer = envoy.EnvoyEdsWriter(
        "shop", str(tmp_path / "missing" / "eds.json"), max_attempts=3, sleep=sleeps.append
    )
    result = writer.write({"10.0.0.1:80": 3})
    assert not result.ok and result.attempts == 3
    assert sleeps == [0.05, 0.1]


def test_writers_reject_out_of_range_weights() -> None:
    with pytest.raises(ValueError, match="must be an int"):
        envoy.EnvoyEdsWriter("c", "/tmp/x").write({"10.0.0.1:1": -1})
    with pytest.raises(ValueError, match="must be an int"):
        hw.HAProxyWriter("be", ("127.0.0.1", 1)).write({"s": 257})


# -- ConfigMap -------------------------------------------------------------------------------


def test_configmap_manifest() -> None:
    manifest = configmap.render_configmap(
        {"b": 2, "a": 1}, name="shop-weights", namespace="prod", labels={"app": "shop"}
    )
    assert manifest["apiVersion"] == "v1" and manifest["kind"] == "ConfigMap"
    assert manifest["metadata"]["name"] == "shop-weights"
    assert manifest["metadata"]["namespace"] == "prod"
    assert manifest["metadata"]["labels"]["app"] == "shop"
    assert manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "intent-planner"
    assert manifest["data"] == {"weights.json": '{"a": 1, "b": 2}'}
    with pytest.raises(ValueError):
        configmap.render_configmap({}, name="Bad_Name", namespace="prod")


def test_configmap_writer_retries_temporary_errors() -> None:
    applied: list[dict[str, Any]] = []
    failures = [ConnectionError("api down"), ConnectionError("api down")]

    def apply(manifest: dict[str, Any]) -> None:
        if failures:
            raise failures.pop(0)
        applied.append(manifest)

    sleeps: list[float] = []
    writer = configmap.ConfigMapWriter("w", "ns", apply, max_attempts=3, sleep=sleeps.append)
    result = writer.write({"a": 3})
    assert result.ok and result.attempts == 3 and result.written == ("a",)
    assert sleeps == [0.1, 0.2]
    assert json.loads(applied[0]["data"]["weights.json"]) == {"a": 3}


def test_configmap_permanent_error_is_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    def apply(manifest: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        raise PermissionError("forbidden")

    writer = configmap.ConfigMapWriter(
        "w", "ns", apply, is_temporary=lambda exc: not isinstance(exc, PermissionError)
    )
    with caplog.at_level(logging.WARNING):
        result = writer.write({"a": 3})
    assert not result.ok and calls == 1
    assert "forbidden" in result.message and "permanent" in caplog.text


def test_write_all_renders_one_weight_set_everywhere(tmp_path: Path) -> None:
    applied: list[dict[str, Any]] = []
    writers: list[dataplanes.DataPlaneWriter] = [
        envoy.EnvoyEdsWriter("c", str(tmp_path / "eds.json")),
        configmap.ConfigMapWriter("w", "ns", applied.append),
    ]
    results = dataplanes.write_all(writers, {"10.0.0.1:80": 4})
    assert [r.target for r in results] == ["envoy-eds", "configmap"]
    assert all(r.ok for r in results)


# -- HAProxy runtime API (real HAProxy) --------------------------------------------------------


@pytest.fixture
def proxy() -> Iterator[sh.HAProxyProcess]:
    # the servers need not be up: there are no health checks, we only talk to the runtime API
    servers = [sh.ServerSpec(f"s{i}", "127.0.0.1", sh.free_port()) for i in range(3)]
    with sh.HAProxyProcess(servers, balance="roundrobin") as running:
        yield running


@needs_haproxy
def test_haproxy_weights_change_in_show_stat(proxy: sh.HAProxyProcess) -> None:
    writer = hw.HAProxyWriter(proxy.backend, proxy.api_address)
    assert writer.read_weights() == {"s0": 1, "s1": 1, "s2": 1}
    result = writer.write({"s0": 7, "s1": 256, "s2": 0})
    assert result.ok and set(result.written) == {"s0", "s1", "s2"} and result.attempts == 1
    assert writer.read_weights() == {"s0": 7, "s1": 256, "s2": 0}
    # independent check with a raw runtime-API call
    stat = [line.split(",") for line in proxy.command("show stat").splitlines()]
    header = [stat[0][0].lstrip("# "), *stat[0][1:]]
    col = header.index("weight")
    rows = {row[1]: row[col] for row in stat[1:] if len(row) > col and row[0] == proxy.backend}
    assert rows["s0"] == "7" and rows["s1"] == "256"


@needs_haproxy
def test_haproxy_server_names_mapping_and_refusals(
    proxy: sh.HAProxyProcess, caplog: pytest.LogCaptureFixture
) -> None:
    writer = hw.HAProxyWriter(
        proxy.backend, proxy.api_address, server_names={"pod-a": "s0", "pod-b": "s1"}
    )
    with caplog.at_level(logging.WARNING):
        result = writer.write({"pod-a": 12, "pod-b": 13, "ghost": 5, "bad name;x": 1})
    assert not result.ok
    assert set(result.written) == {"pod-a", "pod-b"}
    assert "No such server" in result.failed["ghost"]
    assert result.failed["bad name;x"] == "invalid server name"
    assert result.attempts == 1  # refusals are permanent: no retry
    assert writer.read_weights()["s0"] == 12 and writer.read_weights()["s1"] == 13


@needs_haproxy
def test_haproxy_many_servers_in_batches() -> None:
    servers = [sh.ServerSpec(f"s{i}", "127.0.0.1", 1) for i in range(120)]
    with sh.HAProxyProcess(servers) as running:
        writer = hw.HAProxyWriter(running.backend, running.api_address, batch_size=50)
        result = writer.write({f"s{i}": 1 + i for i in range(120)})
        assert result.ok and len(result.written) == 120
        assert writer.read_weights() == {f"s{i}": 1 + i for i in range(120)}


@needs_haproxy
def test_haproxy_weights_steer_real_traffic() -> None:
    specs = [sb.BackendSpec(f"b{i}", workers=4) for i in range(3)]
    with sb.BackendFleet(specs, in_process=True) as fleet:
        servers = [sh.ServerSpec(s.name, *fleet.address(s.name)) for s in specs]
        with sh.HAProxyProcess(servers, balance="roundrobin") as running:
            writer = hw.HAProxyWriter(running.backend, running.api_address)
            assert writer.write({"b0": 0, "b1": 1, "b2": 3}).ok
            served: dict[str, int] = {}
            with httpx.Client(base_url=running.url, timeout=5) as client:
                for _ in range(40):
                    name = client.get("/work?ms=0").text.strip()
                    served[name] = served.get(name, 0) + 1
    assert "b0" not in served
    assert served["b2"] == 3 * served["b1"]


def test_haproxy_unreachable_is_logged_retried_and_never_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sleeps: list[float] = []
    writer = hw.HAProxyWriter(
        "be_app",
        ("127.0.0.1", sh.free_port()),  # nothing listens there
        max_attempts=4,
        backoff_s=0.05,
        max_backoff_s=0.15,
        sleep=sleeps.append,
    )
    with caplog.at_level(logging.WARNING):
        result = writer.write({"s0": 3, "s1": 4})
    assert not result.ok
    assert result.attempts == 4
    assert sleeps == [0.05, 0.1, 0.15]  # exponential, capped
    assert set(result.failed) == {"s0", "s1"} and result.written == ()
    assert "unreachable" in result.message
    assert caplog.text.count("runtime API unreachable") == 4


def test_haproxy_unix_socket_missing_is_a_failed_result(tmp_path: Path) -> None:
    writer = hw.HAProxyWriter(
        "be_app", str(tmp_path / "nope.sock"), max_attempts=2, sleep=lambda s: None
    )
    result = writer.write({"s0": 1})
    assert not result.ok and result.attempts == 2


@needs_haproxy
def test_haproxy_gone_then_back() -> None:
    servers = [sh.ServerSpec("s0", "127.0.0.1", 1)]
    with sh.HAProxyProcess(servers) as running:
        address = running.api_address
        backend = running.backend
    # HAProxy gone: failed result; a later write to a fresh instance succeeds
    writer = hw.HAProxyWriter(backend, address, max_attempts=2, sleep=lambda s: None)
    assert not writer.write({"s0": 9}).ok
    with sh.HAProxyProcess(servers) as running:
        writer = hw.HAProxyWriter(running.backend, running.api_address)
        assert writer.write({"s0": 9}).ok
        assert writer.read_weights() == {"s0": 9}
