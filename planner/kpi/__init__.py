"""KPI measurement: PromQL templates, the Prometheus KPI source, restart-based availability.

* :mod:`planner.kpi.templates` - default PromQL per KPI type and :func:`resolve` (fills a
  KPIProfile's ``status.resolved`` / ``status.reason``).
* :mod:`planner.kpi.prometheus` - :class:`PrometheusKPISource`, a ``KPISource`` over the
  Prometheus HTTP API; unknown (``None``) with a kept reason on any failure.
* :mod:`planner.kpi.availability` - availability from pod restarts (MTBF / (MTBF + MTTR)).
"""

from __future__ import annotations

from planner.kpi.availability import DEFAULT_MTTR, pod_availability, workload_availability
from planner.kpi.prometheus import PrometheusKPISource, QueryFailed
from planner.kpi.templates import PLACEHOLDERS, Resolution, TemplateSettings, resolve

__all__ = [
    "DEFAULT_MTTR",
    "PLACEHOLDERS",
    "PrometheusKPISource",
    "QueryFailed",
    "Resolution",
    "TemplateSettings",
    "pod_availability",
    "resolve",
    "workload_availability",
]
