"""PrometheusKPISource against the real Prometheus server scraping a local exporter.

The Prometheus-backed tests share one module-scoped server (1 s scrape interval) and use a 5 s
rate window so they need only a few seconds of data. Failure modes (down, timeout, bad answers)
use local sockets and a fake HTTP server and need no Prometheus binary.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.kpi.prometheus import PrometheusKPISource, extract
from planner.kpi.templates import TemplateSettings
from tests.support.http import recording_server
from tests.support.prometheus import (
    CART,
    CHECKOUT,
    Exporter,
    PrometheusServer,
    free_port,
    require_prometheus,
    silent_tcp_server,
)

WINDOW = "5s"
SETTINGS = TemplateSettings(window=WINDOW)


def intent(workload: str, namespace: str = "shop") -> Intent:
    return Intent.model_validate(
        {
            "metadata": {"name": f"{workload}-slo", "namespace": namespace},
            "spec": {
                "targetRef": {"name": workload},
                "objectives": [{"name": "o", "value": 1, "measuredBy": "p"}],
            },
        }
    )


def profile(kpi: str, name: str | None = None, **spec: Any) -> KPIProfile:
    return KPIProfile.model_validate(
        {"metadata": {"name": name or kpi, "namespace": "shop"}, "spec": {"type": kpi, **spec}}
    )


# -- the real Prometheus ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    binary = require_prometheus()
    exporter = Exporter().start()
    server = PrometheusServer(binary, [exporter.target], scrape_interval="1s")
    try:
        server.start()
        server.wait_for('up{job="exporter"} == 1', timeout=15)
        # Prometheus 2.x applies new targets ~5 s after start-up; then wait for 5 samples (4 s
        # of data at 1 s), enough that rate() over the 5 s window extrapolates to its start
        server.wait_for(
            'count_over_time(http_requests_total{service="cart",code="200"}[10s]) >= 5',
            timeout=20,
        )
        yield server
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture
def source(prom: PrometheusServer) -> Iterator[PrometheusKPISource]:
    with PrometheusKPISource(prom.url, timeout=5.0, settings=SETTINGS) as src:
        yield src


def test_healthy(source: PrometheusKPISource) -> None:
    assert source.healthy()


def test_p95_latency_ms_from_buckets(source: PrometheusKPISource) -> None:
    it, p = intent("cart"), profile("latency", percentile=95)
    value = source.measure(it, p)
    assert value == pytest.approx(CART.quantile_ms(0.95), rel=0.01)
    assert value == pytest.approx(375.0, rel=0.01)
    assert source.last_error(it, p) is None


def test_latency_other_percentile_and_workload(source: PrometheusKPISource) -> None:
    assert source.measure(intent("cart"), profile("latency", percentile=70)) == pytest.approx(
        75.0, rel=0.01
    )
    # the selector picks the workload: checkout is all in the first bucket
    assert source.measure(intent("checkout"), profile("latency")) == pytest.approx(
        CHECKOUT.quantile_ms(0.95), rel=0.01
    )


def test_request_rate(source: PrometheusKPISource) -> None:
    assert source.measure(intent("cart"), profile("throughput")) == pytest.approx(
        CART.rate, rel=0.1
    )
    assert source.measure(intent("checkout"), profile("throughput")) == pytest.approx(
        CHECKOUT.rate, rel=0.1
    )


def test_availability_from_error_ratio(source: PrometheusKPISource) -> None:
    assert source.measure(intent("cart"), profile("availability")) == pytest.approx(0.85, abs=0.005)
    # no 5xx series at all: 1.0, not "no data"
    assert source.measure(intent("checkout"), profile("availability")) == pytest.approx(1.0)


def test_custom_query_with_placeholders(source: PrometheusKPISource) -> None:
    q = (
        "histogram_quantile({quantile}, sum by (le) (rate(http_request_duration_seconds_bucket"
        '{namespace="{namespace}",service="{workload}"}[{window}]))) * 1000'
    )
    p = profile("latency", name="custom", percentile=70, query=q)
    assert source.measure(intent("cart"), p) == pytest.approx(75.0, rel=0.01)


def test_multi_series_aggregation(source: PrometheusKPISource, prom: PrometheusServer) -> None:
    per_code = 'rate(http_requests_total{namespace="{namespace}",service="{workload}"}[{window}])'
    total = source.measure(intent("cart"), profile("throughput", query=per_code))
    assert total == pytest.approx(CART.rate, rel=0.1)  # sum over the 4 code series
    # availability of a multi-series answer is the worst series: cart 0.85, checkout 1.0
    total_by_service = (
        'sum by (service) (rate(http_requests_total{namespace="{namespace}"}[{window}]))'
    )
    errors_by_service = (
        "sum by (service) (rate(http_requests_total"
        '{namespace="{namespace}",code=~"5.."}[{window}]))'
    )
    per_service = f"1 - (({errors_by_service} or {total_by_service} * 0) / {total_by_service})"
    rendered = per_service.replace("{namespace}", "shop").replace("{window}", WINDOW)
    assert len(prom.query(rendered)) == 2
    worst = source.measure(intent("any"), profile("availability", query=per_service))
    assert worst == pytest.approx(0.85, abs=0.005)
    # latency of several series is the slowest one
    per_service_p95 = (
        "histogram_quantile(0.95, sum by (le, service) (rate("
        'http_request_duration_seconds_bucket{namespace="{namespace}"}[{window}]))) * 1000'
    )
    slowest = source.measure(intent("any"), profile("latency", query=per_service_p95))
    assert slowest == pytest.approx(375.0, rel=0.01)


def test_scalar_result(source: PrometheusKPISource) -> None:
    assert source.measure(intent("cart"), profile("power", query="42")) == 42.0


def test_empty_result_is_unknown(source: PrometheusKPISource) -> None:
    it = intent("ghost")
    for kpi in ("latency", "throughput", "availability"):
        p = profile(kpi)
        assert source.measure(it, p) is None
        assert "empty result" in (source.last_error(it, p) or "")


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("0 / 0", "NaN"),
        ("vector(1) / 0", "infinite"),
        ("sum(rate(http_requests_total[", "bad_data"),
        ("up[1m]", "range vector"),
    ],
)
def test_bad_values_are_unknown(source: PrometheusKPISource, query: str, reason: str) -> None:
    it, p = intent("cart"), profile("throughput", query=query)
    assert source.measure(it, p) is None
    assert reason in (source.last_error(it, p) or "")


def test_unresolvable_profile_is_unknown(source: PrometheusKPISource) -> None:
    it, p = intent("cart"), profile("power")
    assert source.measure(it, p) is None
    assert "not resolvable" in (source.last_error(it, p) or "")


def test_error_cleared_after_success(source: PrometheusKPISource) -> None:
    it = intent("cart")
    p = profile("throughput", name="flip", query="0/0")
    assert source.measure(it, p) is None and source.last_error(it, p)
    ok = profile("throughput", name="flip")
    assert source.measure(it, ok) is not None
    assert source.last_error(it, ok) is None


def test_profile_endpoint_overrides_base_url(prom: PrometheusServer) -> None:
    wrong = f"http://127.0.0.1:{free_port()}"
    p = profile("throughput", endpoint=prom.url + "/api/v1/query")
    with PrometheusKPISource(wrong, timeout=2.0, settings=SETTINGS,
                             allowed_endpoints=[prom.url]) as src:
        assert src.measure(intent("cart"), p) == pytest.approx(CART.rate, rel=0.1)
        assert src.measure(intent("cart"), profile("throughput")) is None
    with PrometheusKPISource(wrong, timeout=2.0, settings=SETTINGS) as src:  # not allowed
        assert src.measure(intent("cart"), p) is None
        assert "spec.endpoint refused" in (src.last_error(intent("cart"), p) or "")


def test_measure_all_beside_a_hanging_endpoint(source: PrometheusKPISource,
                                               prom: PrometheusServer) -> None:
    """The real Prometheus answers within the cycle's deadline although an allowed endpoint
    accepts connections and never answers (one after another that was 5 s per query)."""
    with silent_tcp_server() as port:
        hanging = f"http://127.0.0.1:{port}"
        with PrometheusKPISource(prom.url, timeout=5.0, settings=SETTINGS, deadline=1.0,
                                 allowed_endpoints=[hanging]) as src:
            stuck = profile("latency", name="stuck", endpoint=hanging)
            asked = [(intent("cart"), stuck), (intent("cart"), profile("throughput")),
                     (intent("checkout"), stuck), (intent("cart"), profile("latency"))]
            t0 = time.monotonic()
            values = src.measure_all(asked)
            elapsed = time.monotonic() - t0
            assert "deadline" in (src.last_error(intent("cart"), stuck) or "")
    assert elapsed < 3.0
    assert values[0] is None and values[2] is None
    assert values[1] == pytest.approx(CART.rate, rel=0.1)
    assert values[3] == pytest.approx(375.0, rel=0.01)


def test_stopped_prometheus_is_unknown(caplog: pytest.LogCaptureFixture) -> None:
    binary = require_prometheus()
    server = PrometheusServer(binary).start()
    try:
        with PrometheusKPISource(server.url, timeout=2.0) as src:
            assert src.healthy()
            assert src.measure(intent("cart"), profile("power", query="vector(7)")) == 7.0
            server.stop()
            it, p = intent("cart"), profile("throughput")
            with caplog.at_level(logging.WARNING, logger="planner.kpi.prometheus"):
                assert src.measure(it, p) is None
            assert not src.healthy()
            assert "cannot reach" in (src.last_error(it, p) or "")
            assert "cannot reach" in caplog.text
    finally:
        server.stop()


# -- failure modes without Prometheus -------------------------------------------------------------


def test_wrong_port_is_unknown_not_zero() -> None:
    with PrometheusKPISource(f"http://127.0.0.1:{free_port()}", timeout=2.0) as src:
        it = intent("cart")
        for kpi in ("latency", "throughput", "availability"):
            p = profile(kpi)
            assert src.measure(it, p) is None
            assert "cannot reach" in (src.last_error(it, p) or "")
        assert not src.healthy()


def test_timeout_is_honoured() -> None:
    with (
        silent_tcp_server() as port,
        PrometheusKPISource(f"http://127.0.0.1:{port}", timeout=0.3) as src,
    ):
        it, p = intent("cart"), profile("latency")
        t0 = time.monotonic()
        assert src.measure(it, p) is None
        assert time.monotonic() - t0 < 2.0
        assert "timeout after 0.3s" in (src.last_error(it, p) or "")
        t0 = time.monotonic()
        assert not src.healthy()
        assert time.monotonic() - t0 < 2.0


@pytest.fixture
def fake() -> Iterator[Any]:
    server = recording_server()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _vector(*values: str) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"i": str(i)}, "value": [1.0, v]} for i, v in enumerate(values)],
        },
    }


def test_bearer_token_and_query_params(fake: Any) -> None:
    fake.reply = (200, _vector("12.5"))
    url = f"http://127.0.0.1:{fake.server_address[1]}"
    with PrometheusKPISource(url, token="s3cret", timeout=2.0) as src:
        assert src.measure(intent("cart"), profile("throughput")) == 12.5
    path, headers = fake.seen[-1]
    assert path.startswith("/api/v1/query?")
    assert "timeout=2000ms" in path
    assert headers.get("Authorization") == "Bearer s3cret"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ((503, {"status": "error", "errorType": "unavailable", "error": "busy"}), "HTTP 503"),
        ((502, "<html>bad gateway</html>"), "HTTP 502"),
        ((200, "not json"), "not JSON"),
        ((200, {"status": "error", "errorType": "timeout", "error": "slow"}), "timeout"),
        ((200, {"status": "success", "data": {"resultType": "vector", "result": []}}), "empty"),
        ((200, _vector("NaN")), "NaN"),
        ((200, _vector("+Inf")), "infinite"),
        (
            (200, {"status": "success", "data": {"resultType": "string", "result": [1, "x"]}}),
            "unsupported",
        ),
        ((200, [1, 2]), "not a JSON object"),
    ],
)
def test_bad_answers_are_unknown(fake: Any, reply: Any, reason: str) -> None:
    fake.reply = reply
    url = f"http://127.0.0.1:{fake.server_address[1]}"
    with PrometheusKPISource(url, timeout=2.0) as src:
        it, p = intent("cart"), profile("latency")
        assert src.measure(it, p) is None
        assert reason in (src.last_error(it, p) or "")


@pytest.mark.parametrize(
    ("kpi", "expected"),
    [
        (KPIType.LATENCY, 30.0),
        (KPIType.THROUGHPUT, 60.0),
        (KPIType.AVAILABILITY, 10.0),
        (KPIType.POWER, 60.0),
        (KPIType.COST, 60.0),
    ],
)
def test_aggregation_by_type(kpi: KPIType, expected: float) -> None:
    # NaN series (no traffic) are ignored while another series has a value
    assert extract(_vector("10", "20", "30", "NaN"), kpi) == expected


def test_measure_never_raises_for_unexpected_errors(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(PrometheusKPISource):
        def query(self, promql: str, kpi: KPIType, base_url: str | None = None) -> float:
            raise RuntimeError("boom")

    with Broken(timeout=1.0) as src:
        it, p = intent("cart"), profile("latency")
        assert src.measure(it, p) is None
        # the status names the failure; its text (which may quote anything) is logged only
        assert "unexpected RuntimeError" in (src.last_error(it, p) or "")
        assert "boom" in caplog.text


def test_non_http_endpoint_is_unknown() -> None:
    with PrometheusKPISource(timeout=1.0) as src:
        it, p = intent("cart"), profile("latency", endpoint="prometheus:9090")
        assert src.measure(it, p) is None
        assert "not an http(s) URL" in (src.last_error(it, p) or "")
