"""Client demand from Prometheus: an answer of an unexpected shape is a DemandUnavailable
naming what was wrong, never an AttributeError out of the snapshot."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from planner.k8s.client_demand import DemandUnavailable, PrometheusClientDemand
from planner.k8s.settings import parse_settings


def demand_of(body: Any) -> dict[str, float]:
    settings = parse_settings({"exposure": {"latencyMs": {"eu": {"eu": 4}}}}).exposure
    client = httpx.Client(transport=httpx.MockTransport(
        lambda request: httpx.Response(200, json=body)))
    return PrometheusClientDemand("http://prom", settings, client)("shop", "web")


def test_a_well_formed_answer() -> None:
    body = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"client_region": "eu"}, "value": [0, "3.5"]},
        {"metric": {"client_region": "us"}, "value": [0, "NaN"]}]}}
    assert demand_of(body) == {"eu": 3.5}


@pytest.mark.parametrize("body", [
    {"status": "success", "data": ["vector"]},
    {"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}},
    {"status": "success", "data": {"resultType": "vector", "result": ["x"]}},
    {"status": "success", "data": {"resultType": "vector",
                                   "result": [{"metric": ["client_region"], "value": [0, "1"]}]}},
])
def test_a_malformed_answer_is_demand_unavailable(body: Any) -> None:
    with pytest.raises(DemandUnavailable, match="client-demand"):
        demand_of(body)
