"""The PromQL template catalogue and profile resolution (pure, no Prometheus)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.domain.intents import Intent, KPIProfile
from planner.kpi import templates
from planner.kpi.templates import Resolution, TemplateSettings, resolve


def intent(workload: str = "cart", namespace: str = "shop") -> Intent:
    return Intent.model_validate(
        {
            "metadata": {"name": "slo", "namespace": namespace},
            "spec": {
                "targetRef": {"name": workload},
                "objectives": [{"name": "o", "value": 1, "measuredBy": "p"}],
            },
        }
    )


def profile(kpi: str, **spec: Any) -> KPIProfile:
    return KPIProfile.model_validate(
        {"metadata": {"name": "p", "namespace": "shop"}, "spec": {"type": kpi, **spec}}
    )


SEL = 'namespace="shop",service="cart"'


def test_default_latency_template_p95_in_ms() -> None:
    res = resolve(profile("latency"), intent())
    assert res == Resolution(
        True,
        "histogram_quantile(0.95, sum by (le) "
        f"(rate(http_request_duration_seconds_bucket{{{SEL}}}[1m]))) * 1000",
        res.reason,
    )
    assert "p95" in res.reason and "shop/cart" in res.reason


def test_latency_percentile_and_millisecond_histogram() -> None:
    settings = TemplateSettings(
        latency_metric="rpc_latency_ms", latency_unit="milliseconds", window="30s"
    )
    res = resolve(profile("latency", percentile=99.9), intent(), settings)
    assert res.query == (
        f"histogram_quantile(0.999, sum by (le) (rate(rpc_latency_ms_bucket{{{SEL}}}[30s])))"
    )


def test_default_throughput_template() -> None:
    res = resolve(profile("throughput"), intent())
    assert res.resolved
    assert res.query == f"sum(rate(http_requests_total{{{SEL}}}[1m]))"


def test_default_availability_template() -> None:
    res = resolve(profile("availability"), intent())
    assert res.resolved
    assert res.query == (
        f'1 - ((sum(rate(http_requests_total{{{SEL},code=~"5.."}}[1m])) or vector(0)) '
        f"/ sum(rate(http_requests_total{{{SEL}}}[1m])))"
    )


def test_label_and_metric_names_are_settings() -> None:
    settings = TemplateSettings(
        requests_metric="requests_total",
        code_label="status",
        error_code_regex="5..|429",
        namespace_label="kubernetes_namespace",
        workload_label="app",
        extra_matchers=('job="api"',),
    )
    q = resolve(profile("availability"), intent(), settings).query
    assert q is not None
    sel = 'kubernetes_namespace="shop",app="cart",job="api"'
    assert f'requests_total{{{sel},status=~"5..|429"}}' in q
    assert f"requests_total{{{sel}}}" in q


@pytest.mark.parametrize("kpi", ["power", "cost"])
def test_power_and_cost_need_a_query(kpi: str) -> None:
    res = resolve(profile(kpi), intent())
    assert not res.resolved and res.query is None
    assert "spec.query" in res.reason and kpi in res.reason
    with_query = resolve(
        profile(kpi, query='sum(node_power_watts{namespace="{namespace}"})'), intent()
    )
    assert with_query == Resolution(
        True, 'sum(node_power_watts{namespace="shop"})', "custom spec.query"
    )


def test_custom_query_placeholders() -> None:
    q = (
        "histogram_quantile({quantile}, sum by (le) (rate(lat_bucket"
        '{ns="{namespace}",deployment="{workload}",code=~"2[0-9]{2}"}[{window}])))'
    )
    res = resolve(
        profile("latency", percentile=90, query=q), intent(), TemplateSettings(window="2m")
    )
    assert res.resolved
    assert res.query == (
        'histogram_quantile(0.9, sum by (le) (rate(lat_bucket{ns="shop",deployment="cart",'
        'code=~"2[0-9]{2}"}[2m])))'
    )


def test_unknown_placeholder_is_not_resolvable() -> None:
    res = resolve(profile("throughput", query="sum(rate(x{job={job}}[{window}]))"), intent())
    assert not res.resolved and res.query is None
    assert "{job}" in res.reason and "{namespace}" in res.reason


def test_label_values_are_escaped() -> None:
    # A namespace is a DNS label once validated; the escaping still guards a document that
    # was not (built in code, or stored before the check).
    plain = intent()
    it = plain.model_copy(update={"metadata": plain.metadata.model_copy(
        update={"namespace": 'we"ird\\ns'})})
    q = resolve(profile("throughput"), it).query
    assert q is not None and 'namespace="we\\"ird\\\\ns"' in q


@pytest.mark.parametrize(
    "kwargs",
    [
        {"latency_metric": "bad-name"},
        {"requests_metric": "1abc"},
        {"code_label": "a:b"},
        {"workload_label": ""},
        {"window": "1 minute"},
        {"window": "5"},
        {"latency_unit": "hours"},
    ],
)
def test_settings_are_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        TemplateSettings(**kwargs)


def test_settings_accept_compound_durations() -> None:
    assert TemplateSettings(window="1m30s").window == "1m30s"


@given(st.text().filter(lambda s: templates._TOKEN.search(s) is None))
def test_queries_without_placeholders_are_used_verbatim(query: str) -> None:
    rendered, _ = templates.render_custom(query, {"namespace": "n"})
    assert rendered == query


@given(
    st.sampled_from(templates.PLACEHOLDERS),
    st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=20),
    st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=20),
)
def test_every_placeholder_is_substituted(name: str, before: str, after: str) -> None:
    values = {p: f"<{p}>" for p in templates.PLACEHOLDERS}
    rendered, _ = templates.render_custom(f"{before}{{{name}}}{after}", values)
    assert rendered == f"{before}<{name}>{after}"


@given(st.floats(min_value=0.01, max_value=99.99))
def test_quantile_is_percentile_over_100(pct: float) -> None:
    q = float(templates.quantile_of(profile("latency", percentile=pct)))
    assert q == pytest.approx(pct / 100.0, rel=1e-9)
