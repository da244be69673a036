"""Requests per second of one Service from each client region, from Prometheus.

The exposure decision (:mod:`planner.planners.exposure`) needs where a Service's clients are.
Kubernetes does not know; the application's (or the ingress's, or the global load balancer's)
request metrics do, when they carry the client's region as a label.
:class:`PrometheusClientDemand` runs the admin's query
(:attr:`planner.k8s.settings.ExposureSettings.client_demand_query`) for one Service at a time:
its placeholders ``{namespace}`` and ``{service}`` get the Service's namespace and name, escaped
for a PromQL double-quoted string (:func:`planner.kpi.templates.promql_string`), after checking
they are Kubernetes names (DNS labels: no quote, brace, backslash or regex character), so a
tenant's object name cannot change what is queried; ``{window}`` gets the settings' window.
The settings checked at start that the query names both placeholders, so it selects one
Service and never another's.

A failure raises :class:`DemandUnavailable` with the reason (Prometheus down, an error answer,
a result without the region label): the backend then reports no client demand and the reason,
and the exposure decision does not run for that Service this cycle.
"""

from __future__ import annotations

import math
import re
from typing import Any

import httpx

from planner.k8s.settings import ExposureSettings
from planner.kpi import templates

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class DemandUnavailable(Exception):
    """The client demand of a Service could not be measured; the message says why."""


def render(settings: ExposureSettings, namespace: str, service: str) -> str:
    """The settings' query for the Service ``namespace/service``; :class:`DemandUnavailable`
    for a name that is not a Kubernetes DNS label (which the API server would not have let
    through; checked anyway, the value goes into a query)."""
    for what, value in (("namespace", namespace), ("service", service)):
        if not _DNS_LABEL.match(value) or len(value) > 63:
            raise DemandUnavailable(f"{what} {value!r} is not a Kubernetes name (a DNS label)")
    values = {"namespace": templates.promql_string(namespace)[1:-1],
              "service": templates.promql_string(service)[1:-1],
              "window": settings.window}
    query, reason = templates.render_custom(settings.client_demand_query, values,
                                            "exposure.clientDemandQuery")
    if query is None:  # the settings were checked at start: only a changed template gets here
        raise DemandUnavailable(reason)
    return query


class PrometheusClientDemand:
    """``demand(namespace, service)``: requests per second by client region (see the module
    docstring)."""

    def __init__(self, base_url: str, settings: ExposureSettings,
                 client: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=settings.timeout_s)

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __call__(self, namespace: str, service: str) -> dict[str, float]:
        query = render(self.settings, namespace, service)
        label = self.settings.region_label
        try:
            resp = self._client.get(f"{self.base_url}/api/v1/query", params={"query": query},
                                    timeout=self.settings.timeout_s)
            resp.raise_for_status()
            body: Any = resp.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise DemandUnavailable(f"Prometheus at {self.base_url}: {exc}") from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise DemandUnavailable(f"Prometheus at {self.base_url} refused the client-demand "
                                    f"query: {error or 'no success status'}")
        data = body.get("data") or {}
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise DemandUnavailable(f"the client-demand query gives a {kind}, not an instant "
                                    "vector; fix: exposure.clientDemandQuery")
        result = data.get("result") or []
        if not isinstance(result, list) or not all(
                isinstance(s, dict) and isinstance(s.get("metric") or {}, dict) for s in result):
            raise DemandUnavailable(f"Prometheus at {self.base_url} answered the client-demand "
                                    "query with a malformed vector (series without a metric "
                                    "object)")
        out: dict[str, float] = {}
        for series in result:
            region = (series.get("metric") or {}).get(label)
            try:
                value = float(series["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if not region:
                raise DemandUnavailable(
                    f"a series of the client-demand query has no {label!r} label; fix: "
                    f"aggregate by it (sum by ({label}) (...)) or set exposure.regionLabel")
            if math.isfinite(value):
                out[str(region)] = out.get(str(region), 0.0) + max(0.0, value)
        return out
