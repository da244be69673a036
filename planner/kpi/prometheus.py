"""A :class:`~planner.domain.ports.KPISource` over the Prometheus HTTP API (instant queries).

Each :meth:`PrometheusKPISource.measure` resolves the profile
(:func:`planner.kpi.templates.resolve`) and runs one instant query against
``<base>/api/v1/query``. Anything that prevents a trustworthy number - connection refused,
timeout, a non-200 answer, ``status: error``, an empty result, NaN or +-Inf, an unresolvable
profile - gives ``None`` (unknown), never zero. The reason is logged (at WARNING when it
changes, DEBUG while it repeats) and kept per (intent, profile), so the controller can report
``ObjectivesMet=Unknown`` with :meth:`PrometheusKPISource.last_error`.

The kept reason ends up in the Intent's status, which its tenant reads: it never quotes the
answer's body (only the HTTP status, Prometheus' ``errorType`` and this module's own words);
the body excerpt goes to the log only.

Multi-series results are aggregated by KPI type, conservatively for the SLO: the **max** for
latency (the slowest series decides), the **sum** for throughput, power and cost (series are
parts of one workload), the **min** for availability (the worst series decides). Series whose
value is NaN (typically a series without traffic in the window) are ignored as long as another
series has a value; any +-Inf (a division by zero, say) makes the whole result unknown.
(``histogram_quantile`` itself reports a quantile in the ``+Inf`` bucket as the largest finite
bucket bound: choose buckets that cover the objective.)
Default templates already aggregate to one series; custom queries should too.

``profile.spec.endpoint``, when set, must be this source's own server or one on the admin's
allow-list (:class:`planner.kpi.endpoints.EndpointPolicy`); any other is refused before
anything is sent (an IDO-style endpoint ending in ``/api/v1/query`` is accepted too).

:meth:`PrometheusKPISource.measure_all` runs one cycle's queries concurrently (at most
``per_endpoint`` at a time per server) and gives up on those still running at the cycle's
``deadline``: a slow or hanging server costs every tenant at most the deadline, once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.domain.ports import KPISource
from planner.kpi.endpoints import QUERY_PATH, EndpointPolicy, EndpointRefused
from planner.kpi.templates import DEFAULT_SETTINGS, Resolution, TemplateSettings, resolve

log = logging.getLogger(__name__)

READY_PATH = "/-/ready"

_AGGREGATE: dict[KPIType, str] = {
    KPIType.LATENCY: "max",
    KPIType.THROUGHPUT: "sum",
    KPIType.AVAILABILITY: "min",
    KPIType.POWER: "sum",
    KPIType.COST: "sum",
}


class QueryFailed(Exception):
    """One query did not produce a usable number.

    ``str()`` is the reason, safe to show a tenant (it never quotes the answer's body);
    ``detail`` is what the log adds (an excerpt of the body, for the admin)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.detail = detail


DEFAULT_DEADLINE_S = 10.0
DEFAULT_PER_ENDPOINT = 8
_ERROR_TYPES = frozenset({"timeout", "canceled", "execution", "bad_data", "internal",
                          "unavailable", "not_found", "not_acceptable"})
"""Prometheus' own ``errorType`` values: the only part of an error answer a reason quotes."""
_RESULT_TYPES = frozenset({"scalar", "vector", "matrix", "string"})


def _fmt_duration(seconds: float) -> str:
    return f"{max(int(seconds * 1000), 1)}ms"


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error_type(body: Any) -> str:
    """Prometheus' ``errorType`` if it is one of its own, else ``error``."""
    kind = body.get("errorType") if isinstance(body, Mapping) else None
    return kind if isinstance(kind, str) and kind in _ERROR_TYPES else "error"


def parse_value(raw: Any) -> float:
    """A Prometheus sample ``[timestamp, "value"]`` as a float (may be NaN or +-Inf)."""
    if not isinstance(raw, list | tuple) or len(raw) != 2:
        raise QueryFailed("malformed sample", _short(repr(raw)))
    try:
        return float(raw[1])
    except (TypeError, ValueError):
        raise QueryFailed("malformed sample value", _short(repr(raw[1]))) from None


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
        raise QueryFailed(f"query error ({_error_type(body)})",
                          _short(str(body.get("error", status))))
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
        shown = repr(rtype) if rtype in _RESULT_TYPES else "(not a Prometheus result type)"
        raise QueryFailed(f"unsupported result type {shown}", _short(repr(rtype)))
    return aggregate(values, kpi)


def interpret(status_code: int, content: bytes, url: str, kpi: KPIType) -> float:
    """The KPI value from one HTTP answer of ``url``; :class:`QueryFailed` otherwise."""
    text = content.decode("utf-8", errors="replace")
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        body = None
    if status_code != 200:
        kind = f" ({_error_type(body)})" if isinstance(body, Mapping) else ""
        raise QueryFailed(f"HTTP {status_code} from {url}{kind}", _short(text))
    if body is None:
        raise QueryFailed(f"answer from {url} is not JSON", _short(text))
    return extract(body, kpi)


@dataclass(frozen=True)
class _Job:
    index: int
    key: tuple[str, str]
    intent: Intent
    profile: KPIProfile
    url: str
    promql: str


class PrometheusKPISource(KPISource):
    """Measure KPIs with instant PromQL queries against one Prometheus (or compatible) server.

    ``base_url`` is the server root (``http://prometheus.monitoring:9090``, a path prefix is
    kept); ``allowed_endpoints`` the other servers a KPIProfile's ``spec.endpoint`` may name
    (the admin's allow-list; any other is refused, nothing is sent to it). ``timeout`` bounds
    each request in seconds (connect, read, write; also sent to Prometheus as the query
    ``timeout``); ``deadline`` bounds a whole :meth:`measure_all` (one cycle's queries), which
    runs at most ``per_endpoint`` queries at a time per server. ``token`` is sent as
    ``Authorization: Bearer``. ``client`` lets tests or callers share an :class:`httpx.Client`
    for :meth:`measure` (it is then not closed by :meth:`close`). Thread-safe.
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
        allowed_endpoints: Iterable[str] = (),
        deadline: float = DEFAULT_DEADLINE_S,
        per_endpoint: int = DEFAULT_PER_ENDPOINT,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if deadline <= 0:
            raise ValueError("deadline must be positive")
        if per_endpoint < 1:
            raise ValueError("per_endpoint must be >= 1")
        self.policy = EndpointPolicy.of(base_url, allowed_endpoints)
        self.base_url = self.policy.default
        self.timeout = timeout
        self.deadline = deadline
        self.per_endpoint = per_endpoint
        self.settings = settings
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._headers = headers
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None  # built once, on the first measure_all
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
        """Run one instant query and aggregate it for ``kpi``; :class:`QueryFailed` on failure.

        ``base_url`` must be allowed by :attr:`policy` (see :meth:`endpoint`)."""
        url = self.policy.default if base_url is None else _allowed_url(self.policy, base_url)
        url += QUERY_PATH
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
        return interpret(resp.status_code, resp.content, url, kpi)

    def _prepare(self, intent: Intent, profile: KPIProfile) -> tuple[str, str]:
        """The allowed base URL and the PromQL of a measurement; :class:`QueryFailed` if there
        is nothing to send."""
        res = self.resolve(intent, profile)
        if not res.resolved or res.query is None:
            raise QueryFailed(f"not resolvable: {res.reason}")
        return self.endpoint(profile), res.query

    def endpoint(self, profile: KPIProfile) -> str:
        """The base URL a profile is measured at; :class:`QueryFailed` when its
        ``spec.endpoint`` is not allowed."""
        return _allowed_url(self.policy, profile.spec.endpoint)

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        key = (intent.key, profile.key)
        try:
            url, promql = self._prepare(intent, profile)
            value = self.query(promql, profile.spec.type, url)
        except QueryFailed as exc:
            self._record(key, exc, intent, profile)
            return None
        except Exception as exc:  # never raise for a failing dependency
            self._record(key, QueryFailed(f"unexpected {type(exc).__name__}", _short(str(exc))),
                         intent, profile)
            return None
        self._succeeded(key)
        return value

    def measure_all(self, requests: Sequence[tuple[Intent, KPIProfile]]) -> list[float | None]:
        """One cycle's measurements, run concurrently; those without an answer within
        :attr:`deadline` are unknown ("no answer within the KPI deadline")."""
        results: list[float | None] = [None] * len(requests)
        jobs: list[_Job] = []
        for i, (intent, profile) in enumerate(requests):
            key = (intent.key, profile.key)
            try:
                url, promql = self._prepare(intent, profile)
            except QueryFailed as exc:
                self._record(key, exc, intent, profile)
                continue
            jobs.append(_Job(i, key, intent, profile, url, promql))
        if not jobs:
            return results
        try:
            outcomes = _run_coroutine(self._query_all(jobs))
        except Exception as exc:  # never raise for a failing dependency
            outcomes = [QueryFailed(f"unexpected {type(exc).__name__}", _short(str(exc)))] * \
                len(jobs)
        for job, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, QueryFailed):
                self._record(job.key, outcome, job.intent, job.profile)
            else:
                results[job.index] = outcome
                self._succeeded(job.key)
        return results

    async def _query_all(self, jobs: list[_Job]) -> list[float | QueryFailed]:
        timeout = min(self.timeout, self.deadline)
        gates = {url: asyncio.Semaphore(self.per_endpoint) for url in {j.url for j in jobs}}
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=self.per_endpoint)
        if self._ssl is None:  # costs ~0.1 s of CPU: not once per cycle
            self._ssl = httpx.create_ssl_context(verify=self._verify)
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout), verify=self._ssl,
                                     headers=self._headers, limits=limits) as client:

            async def one(job: _Job) -> float:
                async with gates[job.url]:
                    return await self._aquery(client, job, timeout)

            tasks = [asyncio.ensure_future(one(job)) for job in jobs]
            _, pending = await asyncio.wait(tasks, timeout=self.deadline)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        out: list[float | QueryFailed] = []
        for job, task in zip(jobs, tasks, strict=True):
            if task in pending:
                out.append(QueryFailed(f"no answer from {job.url}{QUERY_PATH} within the KPI "
                                       f"deadline of {self.deadline:g}s"))
                continue
            exc = task.exception()
            if exc is None:
                out.append(task.result())
            elif isinstance(exc, QueryFailed):
                out.append(exc)
            else:
                out.append(QueryFailed(f"unexpected {type(exc).__name__}", _short(str(exc))))
        return out

    async def _aquery(self, client: httpx.AsyncClient, job: _Job, timeout: float) -> float:
        url = job.url + QUERY_PATH
        params = {"query": job.promql, "timeout": _fmt_duration(timeout)}
        try:
            resp = await client.get(url, params=params)
        except httpx.TimeoutException as exc:
            raise QueryFailed(
                f"timeout after {timeout:g}s querying {url} ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise QueryFailed(
                f"cannot reach {url}: {_short(str(exc)) or type(exc).__name__}"
            ) from None
        return interpret(resp.status_code, resp.content, url, job.profile.spec.type)

    def _succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._errors.pop(key, None)

    def _record(
        self, key: tuple[str, str], exc: QueryFailed, intent: Intent, profile: KPIProfile
    ) -> None:
        reason = str(exc)
        with self._lock:
            changed = self._errors.get(key) != reason
            self._errors[key] = reason
        level = logging.WARNING if changed else logging.DEBUG
        detail = f" (answer: {exc.detail})" if exc.detail else ""
        log.log(level, "KPI %s for intent %s unknown: %s%s", profile.key, intent.key, reason,
                detail)

    def last_error(self, intent: Intent, profile: KPIProfile) -> str | None:
        """Why the last :meth:`measure` of this pair gave ``None``; ``None`` after a success.
        Safe to show the intent's tenant: it never quotes an answer's body."""
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


def _allowed_url(policy: EndpointPolicy, endpoint: str | None) -> str:
    try:
        return policy.resolve(endpoint)
    except EndpointRefused as exc:
        raise QueryFailed(f"spec.endpoint refused: {exc}") from None


def _run_coroutine(coro: Any) -> Any:
    """``asyncio.run(coro)``, in a helper thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="kpi-queries", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]

