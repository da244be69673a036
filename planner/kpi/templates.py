"""Default PromQL templates per KPI type, and the resolution of a KPIProfile to one query.

A :class:`~planner.domain.intents.KPIProfile` either names its own PromQL (``spec.query``) or
relies on
the catalogue below, rendered for the intent's workload (``metadata.namespace`` and
``spec.targetRef.name``). :func:`resolve` returns a :class:`Resolution` whose ``resolved`` and
``reason`` fill the profile's ``status.resolved`` / ``status.reason``.

Default templates (``<sel>`` is ``namespace="<ns>",service="<workload>"`` plus any
``extra_matchers``; metric and label names come from :class:`TemplateSettings`):

* **latency** (ms) - the profile's percentile (default p95) from the classic histogram::

      histogram_quantile(0.95, sum by (le) (rate(http_request_duration_seconds_bucket{<sel>}[1m])))
        * 1000

  (``* 1000`` only for a seconds-based histogram, see ``latency_unit``).
* **throughput** (requests/s)::

      sum(rate(http_requests_total{<sel>}[1m]))

* **availability** (ratio in [0, 1]) - one minus the share of 5xx responses::

      1 - ((sum(rate(http_requests_total{<sel>,code=~"5.."}[1m])) or vector(0))
           / sum(rate(http_requests_total{<sel>}[1m])))

  ``or vector(0)`` keeps a service with no 5xx series at all at 1.0; a service with no
  requests in the window gives NaN (0/0) and so an *unknown* value, never a made-up 1.0.
  (:mod:`planner.kpi.availability` computes availability from pod restarts instead, for
  clusters without request metrics.)
* **power**, **cost** - no default: without ``spec.query`` the profile is not resolvable.

Placeholders in a custom ``spec.query`` (the query is otherwise used verbatim):

=================  ==========================================================================
``{namespace}``    the intent's namespace (``metadata.namespace``)
``{workload}``     the target workload's name (``spec.targetRef.name``)
``{window}``       the rate window, ``TemplateSettings.window`` (default ``1m``)
``{quantile}``     the profile's percentile as a quantile: ``percentile / 100`` (default 0.95)
=================  ==========================================================================

Only these exact tokens are replaced, so PromQL label matchers (``{job="x"}``) are untouched and
no brace escaping is needed. Any other ``{word}`` token (which is never valid PromQL) makes the
profile unresolvable with a reason naming it. Substituted values are inserted as-is: quote them
in the query where PromQL needs a string (``namespace="{namespace}"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from planner.domain.intents import Intent, KPIProfile, KPIType

PLACEHOLDERS: tuple[str, ...] = ("namespace", "workload", "window", "quantile")
"""Tokens substituted in a custom ``spec.query`` (written ``{namespace}`` etc.)."""

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_TOKEN = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class TemplateSettings:
    """Metric and label names the default templates use; change them to match your exporters.

    ``latency_unit`` is the unit of ``latency_metric`` (``seconds``: the result is multiplied
    by 1000 to give milliseconds). ``extra_matchers`` are appended verbatim to every selector of
    the default templates (e.g. ``('job="api"',)``).
    """

    latency_metric: str = "http_request_duration_seconds"
    latency_unit: Literal["seconds", "milliseconds"] = "seconds"
    requests_metric: str = "http_requests_total"
    code_label: str = "code"
    error_code_regex: str = "5.."
    namespace_label: str = "namespace"
    workload_label: str = "service"
    window: str = "1m"
    extra_matchers: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name in ("latency_metric", "requests_metric"):
            value = getattr(self, name)
            if not _METRIC_NAME.match(value):
                raise ValueError(f"{name}: {value!r} is not a Prometheus metric name")
        for name in ("code_label", "namespace_label", "workload_label"):
            value = getattr(self, name)
            if not _LABEL_NAME.match(value):
                raise ValueError(f"{name}: {value!r} is not a Prometheus label name")
        if not _DURATION.match(self.window):
            raise ValueError(f"window: {self.window!r} is not a PromQL duration such as 1m or 30s")
        if self.latency_unit not in ("seconds", "milliseconds"):
            raise ValueError("latency_unit: use 'seconds' or 'milliseconds'")


DEFAULT_SETTINGS = TemplateSettings()


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving a profile for an intent: the query, or why there is none."""

    resolved: bool
    query: str | None
    reason: str


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def quantile_of(profile: KPIProfile) -> str:
    """The profile's percentile as a PromQL quantile literal (95 -> ``0.95``)."""
    return f"{profile.spec.latency_percentile / 100.0:.10g}"


def selector(intent: Intent, settings: TemplateSettings = DEFAULT_SETTINGS, *extra: str) -> str:
    """The label matchers selecting the intent's workload, without braces."""
    matchers = [
        f"{settings.namespace_label}={promql_string(intent.metadata.namespace)}",
        f"{settings.workload_label}={promql_string(intent.spec.target_ref.name)}",
        *settings.extra_matchers,
        *extra,
    ]
    return ",".join(matchers)


def latency_query(
    intent: Intent, profile: KPIProfile, settings: TemplateSettings = DEFAULT_SETTINGS
) -> str:
    sel = selector(intent, settings)
    inner = (
        f"histogram_quantile({quantile_of(profile)}, sum by (le) "
        f"(rate({settings.latency_metric}_bucket{{{sel}}}[{settings.window}])))"
    )
    return f"{inner} * 1000" if settings.latency_unit == "seconds" else inner


def throughput_query(intent: Intent, settings: TemplateSettings = DEFAULT_SETTINGS) -> str:
    sel = selector(intent, settings)
    return f"sum(rate({settings.requests_metric}{{{sel}}}[{settings.window}]))"


def availability_query(intent: Intent, settings: TemplateSettings = DEFAULT_SETTINGS) -> str:
    sel = selector(intent, settings)
    err = selector(
        intent, settings, f"{settings.code_label}=~{promql_string(settings.error_code_regex)}"
    )
    m, w = settings.requests_metric, settings.window
    return f"1 - ((sum(rate({m}{{{err}}}[{w}])) or vector(0)) / sum(rate({m}{{{sel}}}[{w}])))"


def placeholders_in(query: str) -> set[str]:
    """The ``{name}`` placeholder tokens ``query`` uses."""
    return {m.group(1) for m in _TOKEN.finditer(query)}


def render_custom(query: str, values: dict[str, str], field: str = "spec.query"
                  ) -> tuple[str | None, str]:
    """Substitute ``{name}`` placeholders; ``(None, reason)`` on an unknown placeholder (the
    reason names ``field`` and the known placeholders, the keys of ``values``). Values are
    inserted as given: escape them first where a caller's value could break out of a PromQL
    string (:func:`promql_string`)."""
    unknown = sorted(placeholders_in(query) - set(values))
    if unknown:
        known = ", ".join("{" + p + "}" for p in values)
        names = ", ".join("{" + u + "}" for u in unknown)
        return None, f"{field} uses unknown placeholder(s) {names}; known: {known}"
    rendered = _TOKEN.sub(lambda m: values[m.group(1)], query)
    return rendered, "custom spec.query"


def resolve(
    profile: KPIProfile, intent: Intent, settings: TemplateSettings = DEFAULT_SETTINGS
) -> Resolution:
    """The PromQL measuring ``profile`` for ``intent``'s workload, or the reason there is none.

    A custom ``spec.query`` wins (placeholders substituted); otherwise the default template of
    the profile's type; power and cost have no default and are not resolvable without a query.
    """
    spec = profile.spec
    if spec.query is not None:
        values = {
            "namespace": intent.metadata.namespace,
            "workload": intent.spec.target_ref.name,
            "window": settings.window,
            "quantile": quantile_of(profile),
        }
        query, reason = render_custom(spec.query, values)
        if query is None:
            return Resolution(False, None, reason)
        if not query.strip():
            return Resolution(False, None, "spec.query is empty")
        return Resolution(True, query, reason)
    workload = f"{intent.metadata.namespace}/{intent.spec.target_ref.name}"
    if spec.type is KPIType.LATENCY:
        pct = f"{spec.latency_percentile:g}"
        return Resolution(
            True,
            latency_query(intent, profile, settings),
            f"default latency template: p{pct} of {settings.latency_metric} for {workload}, ms",
        )
    if spec.type is KPIType.THROUGHPUT:
        return Resolution(
            True,
            throughput_query(intent, settings),
            f"default throughput template: rate of {settings.requests_metric} for {workload}",
        )
    if spec.type is KPIType.AVAILABILITY:
        return Resolution(
            True,
            availability_query(intent, settings),
            f"default availability template: 1 - share of {settings.code_label}=~"
            f"{settings.error_code_regex!r} in {settings.requests_metric} for {workload}",
        )
    return Resolution(
        False,
        None,
        f"no default query for KPI type {spec.type.value}; set spec.query in KPIProfile "
        f"{profile.key}",
    )
