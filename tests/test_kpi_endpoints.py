"""KPI endpoints a tenant writes: only the operator's Prometheus or the admin's allow-list is
ever fetched; a status never quotes an answer's body; one cycle's queries run concurrently
under a deadline, so that a hanging server cannot hold up the other intents.

Local servers only (a recording fake Prometheus, a socket that accepts and never answers): no
Prometheus binary is needed here (tests/test_kpi_prometheus.py has the real one).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.connect import open_knowledge_base
from planner.control import wiring
from planner.domain.intents import Intent, KPIProfile
from planner.domain.ports import StaticIntentSource
from planner.kpi.endpoints import EndpointPolicy, EndpointRefused, normalise
from planner.kpi.prometheus import PrometheusKPISource
from planner.planners import registry as planner_registry
from simulator.cluster import SimulatedCluster
from simulator.scenario import load_scenario
from tests.support.http import recording_server
from tests.support.prometheus import silent_tcp_server

SHOP = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "diurnal-shop.yaml"
SECRET = "SECRET-do-not-leak-7f3a"


def _vector(value: str) -> dict[str, Any]:
    return {"status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, value]}]}}


@pytest.fixture
def servers() -> Iterator[tuple[Any, Any]]:
    """Two recording servers: the operator's Prometheus and a tenant's (an internal service
    whose answer must never reach a status)."""
    made: list[Any] = []
    for reply in ((200, _vector("42")), (200, _vector(SECRET))):
        server = recording_server(reply)
        server.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        made.append(server)
    try:
        yield made[0], made[1]
    finally:
        for server in made:
            server.shutdown()
            server.server_close()


def intent(name: str = "checkout", objectives: int = 1, measured_by: str = "p") -> Intent:
    return Intent.model_validate({
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"targetRef": {"name": "checkout"},
                 "objectives": [{"name": f"o{i}", "value": 1000, "measuredBy": measured_by}
                                for i in range(objectives)]}})


def profile(name: str = "p", **spec: Any) -> KPIProfile:
    return KPIProfile.model_validate({"metadata": {"name": name, "namespace": "shop"},
                                      "spec": {"type": "latency", "query": "vector(1)", **spec}})


# -- the allow-list ------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [
    "{url}", "{url}/", "{url}/api/v1/query", "HTTP://127.0.0.1:{port}",
])
def test_tenant_endpoint_is_never_fetched(servers: tuple[Any, Any], variant: str) -> None:
    operator, tenant = servers
    endpoint = variant.format(url=tenant.url, port=tenant.server_address[1])
    it, p = intent(), profile(endpoint=endpoint)
    with PrometheusKPISource(operator.url, timeout=2.0) as src:
        assert src.measure(it, p) is None
        assert src.measure_all([(it, p)]) == [None]
        reason = src.last_error(it, p) or ""
    assert tenant.seen == []  # nothing was sent to the tenant's server
    assert operator.seen == []
    assert "spec.endpoint refused" in reason and "--allow-kpi-endpoint" in reason
    assert SECRET not in reason


@pytest.mark.parametrize("endpoint", [
    "http://user:pw@127.0.0.1:{port}", "http://127.0.0.1:{port}/?x=1", "file:///etc/passwd",
    "gopher://127.0.0.1:{port}", "http://127.0.0.1:{port}#frag", "http://[::1", "",
])
def test_odd_endpoints_are_refused_even_for_the_operators_server(
        servers: tuple[Any, Any], endpoint: str) -> None:
    operator, _ = servers
    it, p = intent(), profile(endpoint=endpoint.format(port=operator.server_address[1]))
    with PrometheusKPISource(operator.url, timeout=2.0) as src:
        assert src.measure(it, p) is None
        assert "spec.endpoint refused" in (src.last_error(it, p) or "")
    assert operator.seen == []


def test_allow_listed_and_own_endpoints_are_fetched(servers: tuple[Any, Any]) -> None:
    operator, tenant = servers
    tenant.reply = (200, _vector("7"))
    it = intent()
    with PrometheusKPISource(operator.url, timeout=2.0, allowed_endpoints=[tenant.url]) as src:
        assert src.measure(it, profile(endpoint=tenant.url + "/api/v1/query")) == 7.0
        assert src.measure(it, profile(endpoint=operator.url.upper().replace("HTTP", "http")
                                       + "/")) == 42.0
        assert src.measure(it, profile()) == 42.0
    assert len(tenant.seen) == 1 and len(operator.seen) == 2


def test_policy_normalises_and_refuses_bad_allow_lists() -> None:
    assert normalise("HTTP://Prom.Example/") == "http://prom.example:80"
    assert normalise("https://p:443/prefix/api/v1/query") == "https://p:443/prefix"
    policy = EndpointPolicy.of("http://prom:9090", ["http://other:80"])
    assert policy.resolve(None) == "http://prom:9090"
    assert policy.resolve("http://other") == "http://other:80"
    with pytest.raises(EndpointRefused):
        policy.resolve("http://prom:9091")
    with pytest.raises(EndpointRefused):
        policy.resolve("http://prom:9090/other-prefix")
    with pytest.raises(ValueError, match="user information"):
        EndpointPolicy.of("http://prom:9090", ["http://u:p@other"])


# -- no body in a status ----------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    (502, f"<html>{SECRET}</html>"),
    (500, {"status": "error", "errorType": "internal", "error": SECRET}),
    (200, {"status": "error", "errorType": SECRET.lower(), "error": SECRET}),
    (200, f"not json {SECRET}"),
    (200, _vector(SECRET)),
    (200, {"status": "success", "data": {"resultType": SECRET, "result": []}}),
])
def test_a_reason_never_quotes_the_answer(servers: tuple[Any, Any], reply: Any,
                                          caplog: pytest.LogCaptureFixture) -> None:
    operator, _ = servers
    operator.reply = reply
    it, p = intent(), profile()
    with PrometheusKPISource(operator.url, timeout=2.0) as src:
        assert src.measure(it, p) is None
        first = src.last_error(it, p) or ""
        assert src.measure_all([(it, p)]) == [None]
        second = src.last_error(it, p) or ""
    assert first and first == second
    assert SECRET not in first and SECRET.lower() not in first
    assert SECRET in caplog.text or SECRET.lower() in caplog.text  # the admin's log has it


# -- concurrency and the deadline --------------------------------------------------------------


def test_measure_all_is_bounded_by_the_deadline(servers: tuple[Any, Any]) -> None:
    operator, _ = servers
    with silent_tcp_server() as port:
        hanging = f"http://127.0.0.1:{port}"
        slow = [(intent("slow", 1), profile("slow", endpoint=hanging)) for _ in range(6)]
        fast = (intent("fast"), profile("fast"))
        with PrometheusKPISource(operator.url, timeout=5.0, deadline=0.4,
                                 allowed_endpoints=[hanging]) as src:
            t0 = time.monotonic()
            values = src.measure_all([*slow, fast])
            elapsed = time.monotonic() - t0
            reason = src.last_error(*slow[0]) or ""
    assert values == [None] * 6 + [42.0]
    assert elapsed < 1.5  # one after another: 6 x 5 s
    assert "within the KPI deadline of 0.4s" in reason


def test_a_hanging_endpoint_leaves_the_cycle_bounded(servers: tuple[Any, Any]) -> None:
    """A controller cycle over two intents: one's objectives are measured at a server that
    accepts and never answers, the other's at the operator's Prometheus."""
    operator, _ = servers
    scenario = load_scenario(SHOP)
    admin = planner_registry.with_spec(scenario.spec.admin, "queueing")
    with silent_tcp_server() as port:
        hanging = f"http://127.0.0.1:{port}"
        intents = [intent("slow", objectives=3, measured_by="slow"),
                   intent("fast", measured_by="fast")]
        profiles = [profile("slow", endpoint=hanging), profile("fast")]
        source = StaticIntentSource(intents, profiles)
        with PrometheusKPISource(operator.url, timeout=5.0, deadline=0.5,
                                 allowed_endpoints=[hanging]) as kpis:
            built = wiring.build_controller(SimulatedCluster(scenario, 1), kpis, source,
                                            open_knowledge_base(None), admin)
            t0 = time.monotonic()
            outcomes = built.controller.cycle()
            elapsed = time.monotonic() - t0
    by_key = {o.intent.key: o for o in outcomes}
    assert by_key["shop/fast"].current == {"o0": 42.0}
    assert by_key["shop/slow"].current == {"o0": None, "o1": None, "o2": None}
    assert elapsed < 2.0  # was 3 x 5 s, one objective after another
    status = json.dumps(source.statuses["shop/slow"])
    assert "deadline" in status and SECRET not in status
