"""KPIs in a cluster: Prometheus, and availability from pod restarts when no query is given.

A KPIProfile of type ``availability`` without ``spec.query`` is measured from the restarts of
the workload's pods (:func:`planner.kpi.availability.workload_availability`, IDO-style
``MTBF / (MTBF + MTTR)``), read from the cluster snapshot; every other profile goes to
:class:`planner.kpi.prometheus.PrometheusKPISource`. :func:`resolution` says which, for a
KPIProfile's ``status`` (``resolved``, ``reason``, ``query``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from planner.domain.errors import TemporaryError
from planner.domain.intents import Intent, KPIProfile, KPIType
from planner.domain.ports import KPISource
from planner.domain.state import WorkloadState
from planner.kpi import availability, templates
from planner.kpi.templates import DEFAULT_SETTINGS, Resolution, TemplateSettings

RESTARTS_REASON = ("availability from pod restarts: MTBF / (MTBF + MTTR) over ready pods "
                   "(no spec.query)")


def uses_restarts(profile: KPIProfile) -> bool:
    """Whether the profile is measured from pod restarts rather than a PromQL query."""
    return profile.spec.type is KPIType.AVAILABILITY and profile.spec.query is None


def resolution(profile: KPIProfile, intent: Intent,
               settings: TemplateSettings = DEFAULT_SETTINGS) -> Resolution:
    """How ``profile`` is measured for ``intent``: restarts, or the query it resolves to."""
    if uses_restarts(profile):
        return Resolution(True, None, RESTARTS_REASON)
    return templates.resolve(profile, intent, settings)


class KubernetesKPISource(KPISource):
    """Prometheus for queries, pod restarts for availability without a query.

    ``workloads`` looks a workload up by ``namespace/name`` (e.g.
    :meth:`planner.k8s.backend.KubernetesBackend.workload`, which answers from the snapshot the
    controller just took). Never raises; :meth:`last_error` says why a value is unknown.
    """

    def __init__(self, prometheus: KPISource, workloads: Callable[[str], WorkloadState | None],
                 *, clock: Callable[[], float] = time.time,
                 mttr: float = availability.DEFAULT_MTTR) -> None:
        self.prometheus = prometheus
        self.workloads = workloads
        self.clock = clock
        self.mttr = mttr
        self._lock = threading.Lock()
        self._errors: dict[tuple[str, str], str] = {}

    def measure(self, intent: Intent, profile: KPIProfile) -> float | None:
        if not uses_restarts(profile):
            return self.prometheus.measure(intent, profile)
        key = (intent.key, profile.key)
        try:
            workload = self.workloads(intent.workload_key)
        except TemporaryError as exc:
            self._unknown(key, f"cluster state unavailable: {exc}")
            return None
        if workload is None:
            self._unknown(key, f"workload {intent.workload_key} not found")
            return None
        value = availability.workload_availability(workload.pods, self.clock(), self.mttr)
        with self._lock:
            self._errors.pop(key, None)
        return value

    def measure_all(self, requests: Sequence[tuple[Intent, KPIProfile]]) -> list[float | None]:
        """Restart-based availability here, every query in one concurrent batch of the
        Prometheus source (bounded by its deadline)."""
        queries = [i for i, (_, profile) in enumerate(requests) if not uses_restarts(profile)]
        values = self.prometheus.measure_all([requests[i] for i in queries])
        out: list[float | None] = [None] * len(requests)
        for i, value in zip(queries, values, strict=True):
            out[i] = value
        for i, (intent, profile) in enumerate(requests):
            if uses_restarts(profile):
                out[i] = self.measure(intent, profile)
        return out

    def _unknown(self, key: tuple[str, str], reason: str) -> None:
        with self._lock:
            self._errors[key] = reason

    def last_error(self, intent: Intent, profile: KPIProfile) -> str | None:
        """Why the last measurement of this pair was unknown; ``None`` after a success."""
        if uses_restarts(profile):
            with self._lock:
                return self._errors.get((intent.key, profile.key))
        why = getattr(self.prometheus, "last_error", None)
        result = why(intent, profile) if callable(why) else None
        return str(result) if result is not None else None
