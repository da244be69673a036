"""A :class:`~planner.domain.ports.KPISource` over the Prometheus HTTP API (instant queries).

Each :meth:`PrometheusKPISource.measure` resolves the profile
(:func:`planner.kpi.templates.resolve`) and runs one instant query against
``<base>/api/v1/query``. Anything that prevents a trustworthy number - connection refused,
timeout, a non-200 answer, ``status: error``, an empty result, NaN or +-Inf, an unresolvable
profile - gives ``None`` (unknown), never zero. The reason is logged (at WARNING when it
changes, DEBUG while it repeats) and kept per (intent, profile), so the controller can report
``ObjectivesMet=Unknown`` with :meth:`PrometheusKPISource.last_error`.

Multi-series results are aggregated by KPI type, conservatively for the SLO: the **max** for
latency (the slowest series decides), the **sum** for throughput, power and cost (series are
parts of one workload), the **min** for availability (the worst series decides). Series whose
value is NaN (typically a series without traffic in the window) are ignored as long as another
series has a value; any +-Inf (a division by zero, say) makes the whole result unknown.
(``histogram_quantile`` itself reports a quantile in the ``+Inf`` bucket as the largest finite
bucket bound: choose buckets that cover the objective.)
Default templates already aggregate to one series; custom queries should too.

``profile.spec.endpoint``, when set, overrides the base URL for that profile (an IDO-style
endpoint ending in ``/api/v1/query`` is accepted too).
"""

from __future__ import annotations

import logging
import math
import ssl
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.domain.ports import KPISource
from planner.kpi.templates import DEFAULT_SETTINGS, Resolution, TemplateSettings, resolve

log = logging.getLogger(__name__)

QUERY_PATH = "/api/v1/query"
READY_PATH = "/-/ready"

_AGGREGATE: dict[KPIType, str] = {
    KPIType.LATENCY: "max",
    KPIType.THROUGHPUT: "sum",
    KPIType.AVAILABILITY: "min",
    KPIType.POWER: "sum",
    KPIType.COST: "sum",
}


class QueryFailed(Exception):
    """One query did not produce a usable number; ``str()`` is the reason."""


def _base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith(QUERY_PATH):
        url = url[: -len(QUERY_PATH)]
    return url


def _fmt_duration(seconds: float) -> str:
    return f"{max(int(seconds * 1000), 1)}ms"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_value(raw: Any) -> float:
    """A Prometheus sample ``[timestamp, "value"]`` as a float (may be NaN or +-Inf)."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise QueryFailed(f"malformed sample {_short(repr(raw))}")
    try:
        return float(raw[1])
    except (TypeError, ValueError):
        raise QueryFailed(f"malformed sample value {_short(repr(raw[1]))}") from None


def aggregate(values: list[float], kpi: KPIType) -> float:
    """One number from the values of several series (see the module docstring)."""
    if not values:
        raise QueryFailed("empty result: no series matched")
    if any(math.isinf(v) for v in values):
        raise QueryFailed("result is infinite (e.g. a division by zero)")
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        raise QueryFailed(
            "result is NaN (no samples in the window, e.g. no requests, or a division by zero)"
        )
    how = _AGGREGATE[kpi]
    if how == "max":
        return max(finite)
    if how == "min":
        return min(finite)
    return math.fsum(finite)


def extract(body: Any, kpi: KPIType) -> float:
    """The KPI value from a decoded ``/api/v1/query`` answer; :class:`QueryFailed` otherwise."""
    if not isinstance(body, Mapping):
        raise QueryFailed("answer is not a JSON object")
    status = body.get("status")
    if status != "success":
        kind = body.get("errorType", "unknown")
        raise QueryFailed(f"query error ({kind}): {_short(str(body.get('error', status)))}")
    data = body.get("data")
    if not isinstance(data, Mapping):
        raise QueryFailed("answer has no data")
    rtype = data.get("resultType")
    result = data.get("result")
    if rtype == "scalar":
        values = [parse_value(result)]
    elif rtype == "vector":
        if not isinstance(result, list):
            raise QueryFailed("malformed vector result")
        values = []
        for series in result:
            if not isinstance(series, Mapping) or "value" not in series:
                raise QueryFailed("malformed vector result (a series has no value)")
            values.append(parse_value(series["value"]))
    elif rtype == "matrix":
        raise QueryFailed("query returns a range vector; use an instant expression (e.g. rate())")
    else:
        raise QueryFailed(f"unsupported result type {rtype!r}")
    return aggregate(values, kpi)


class PrometheusKPISource(KPISource):
    """Measure KPIs with instant PromQL queries against one Prometheus (or compatible) server.

    ``base_url`` is the server root (``http://prometheus.monitoring:9090``, a path prefix is
    kept); ``timeout`` bounds each request in seconds (connect, read, write; also sent to
    Prometheus as the query ``timeout``); ``token`` is sent as ``Authorization: Bearer``.
    ``client`` lets tests or callers share an :class:`httpx.Client` (it is then not closed by
    :meth:`close`). Thread-safe.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:9090",
        *,
        timeout: float = 5.0,
        token: str | None = None,
        settings: TemplateSettings = DEFAULT_SETTINGS,
        verify: bool | ssl.SSLContext = True,
        client: httpx.Client | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base_url = _base_url(base_url)
        self.timeout = timeout
        self.settings = settings
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._headers = headers
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(timeout), verify=verify)
        self._lock = threading.Lock()
        self._errors: dict[tuple[str, str], str] = {}

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> PrometheusKPISource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- queries ----------------------------------------------------------------------------
    def resolve(self, intent: Intent, profile: KPIProfile) -> Resolution:
        """The query this source would run (fills ``KPIProfile.status``)."""
        return resolve(profile, intent, self.settings)

    def query(self, promql: str, kpi: KPIType, base_url: str | None = None) -> float:
        """Run one instant query and aggregate it for ``kpi``; :class:`QueryFailed` on failure."""
        url = _base_url(base_url or self.base_url) + QUERY_PATH
        params = {"query": promql, "timeout": _fmt_duration(self.timeout)}
        try:
            resp = self._client.get(
                url, params=params, headers=self._headers, timeout=httpx.Timeout(self.timeout)
            )
        except httpx.TimeoutException as exc:
            raise QueryFailed(
                f"timeout after {self.timeout:g}s querying {url} ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise QueryFailed(
                f"cannot reach {url}: {_short(str(exc)) or type(exc).__name__}"
            ) from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if resp.status_code != 200:
            detail = ""
            if isinstance(body, Mapping) and body.get("error"):
                detail = f" ({body.get('errorType', 'error')}): {_short(str(body['error']))}"
            elif resp.text:
                detail = f": {_short(resp.text)}"
            raise QueryFailed(f"HTTP {resp.status_code} from {url}{detail}")
        if body is None:
            raise QueryFailed(f"answer from {url} is not JSON")
        return extract(body, kpi)

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        key = (intent.key, profile.key)
        res = self.resolve(intent, profile)
        try:
            if not res.resolved or res.query is None:
                raise QueryFailed(f"not resolvable: {res.reason}")
            endpoint = profile.spec.endpoint
            if endpoint is not None and not endpoint.startswith(("http://", "https://")):
                raise QueryFailed(f"spec.endpoint {endpoint!r} is not an http(s) URL")
            value = self.query(res.query, profile.spec.type, endpoint)
        except QueryFailed as exc:
            self._record(key, str(exc), intent, profile)
            return None
        except Exception as exc:  # never raise for a failing dependency
            self._record(
                key, f"unexpected {type(exc).__name__}: {_short(str(exc))}", intent, profile
            )
            return None
        with self._lock:
            self._errors.pop(key, None)
        return value

    def _record(
        self, key: tuple[str, str], reason: str, intent: Intent, profile: KPIProfile
    ) -> None:
        with self._lock:
            changed = self._errors.get(key) != reason
            self._errors[key] = reason
        level = logging.WARNING if changed else logging.DEBUG
        log.log(level, "KPI %s for intent %s unknown: %s", profile.key, intent.key, reason)

    def last_error(self, intent: Intent, profile: KPIProfile) -> str | None:
        """Why the last :meth:`measure` of this pair gave ``None``; ``None`` after a success."""
        with self._lock:
            return self._errors.get((intent.key, profile.key))

    def healthy(self) -> bool:
        """Whether Prometheus answers ``/-/ready`` with 200 within the timeout."""
        try:
            resp = self._client.get(
                self.base_url + READY_PATH,
                headers=self._headers,
                timeout=httpx.Timeout(self.timeout),
            )
        except httpx.HTTPError as exc:
            log.debug("Prometheus at %s not ready: %s", self.base_url, exc)
            return False
        return resp.status_code == 200
