"""Request rate and CPU utilisation of workloads, from Prometheus (two queries per cycle).

The planners size a workload from its request rate and CPU utilisation
(:class:`planner.domain.state.WorkloadState`); in a cluster both come from Prometheus, not from the
watch cache. :class:`PrometheusLoadMetrics` runs two instant queries per cycle for all
workloads at once:

* request rate: ``sum by (<namespace_label>, <workload_label>) (rate(<requests_metric>[w]))``
  (the metric and label names of :class:`planner.kpi.templates.TemplateSettings`, as in the
  default KPI templates);
* CPU usage: ``sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!=""}
  [w]))`` (cAdvisor, scraped by every standard Prometheus set-up), summed over each workload's
  ready pods and divided by their CPU requests; per pod, the canary's pods included;
* GPU utilisation and memory per pod, only in a cycle where some observed pod is a GPU pod (two
  more queries), from the DCGM exporter (names in
  :class:`planner.k8s.settings.GpuMetricSettings`): ``avg by (namespace, pod)
  (DCGM_FI_DEV_GPU_UTIL{pod!=""}) / 100`` and ``sum by (namespace, pod)
  (DCGM_FI_DEV_FB_USED{pod!=""}) / (that + the same sum of DCGM_FI_DEV_FB_FREE)``: the
  exporter's Kubernetes mode labels each GPU's series with the pod using it.

Any failure leaves the values unknown (``None``); it never raises. The GPU queries fail apart
from the others: without a DCGM exporter, or when it is down, only the GPU values are unknown.
The backend applies the result with :meth:`planner.k8s.backend.KubernetesBackend.observe`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from planner.domain.state import WorkloadState
from planner.k8s.settings import GpuMetricSettings
from planner.kpi.templates import DEFAULT_SETTINGS, TemplateSettings

log = logging.getLogger(__name__)

CPU_METRIC = "container_cpu_usage_seconds_total"


@dataclass(frozen=True)
class Load:
    request_rate: float | None = None
    cpu_utilization: float | None = None
    pod_utilization: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """CPU usage / request per pod name, the canary's pods included (pods without data are
    absent)."""
    pod_gpu_utilization: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """GPU utilisation (0-1, mean over the pod's GPUs) per pod name, where known."""
    pod_gpu_memory: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """GPU memory used / total (0-1) per pod name, where known."""


class LoadMetrics(Protocol):
    """Request rate and CPU utilisation per workload key (``namespace/name``)."""

    def __call__(self, workloads: Mapping[str, WorkloadState]) -> Mapping[str, Load]: ...


class PrometheusLoadMetrics:
    """:class:`LoadMetrics` from a Prometheus server; see the module docstring."""

    def __init__(self, base_url: str, *, settings: TemplateSettings = DEFAULT_SETTINGS,
                 timeout: float = 5.0, client: httpx.Client | None = None,
                 gpu: GpuMetricSettings = GpuMetricSettings()) -> None:  # noqa: B008 - frozen
        self.base_url = base_url.rstrip("/")
        self.settings = settings
        self.gpu = gpu
        self.last_gpu_error: str | None = None
        self.timeout = timeout
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=timeout)
        self.last_error: str | None = None

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def _vector(self, promql: str) -> list[tuple[Mapping[str, str], float]]:
        resp = self._client.get(f"{self.base_url}/api/v1/query", params={"query": promql})
        resp.raise_for_status()
        body: Any = resp.json()
        if body.get("status") != "success":
            raise ValueError(str(body.get("error", "query failed")))
        out = []
        for series in (body.get("data") or {}).get("result") or ():
            value = float(series["value"][1])
            if math.isfinite(value):
                out.append((series.get("metric") or {}, value))
        return out

    def __call__(self, workloads: Mapping[str, WorkloadState]) -> Mapping[str, Load]:
        s = self.settings
        rates: dict[str, float] = {}
        usage: dict[tuple[str, str], float] = {}
        try:
            for metric, v in self._vector(
                    f"sum by ({s.namespace_label}, {s.workload_label}) "
                    f"(rate({s.requests_metric}[{s.window}]))"):
                rates[f"{metric.get(s.namespace_label)}/{metric.get(s.workload_label)}"] = v
            for metric, v in self._vector(
                    f'sum by (namespace, pod) (rate({CPU_METRIC}{{container!=""}}[{s.window}]))'):
                usage[(str(metric.get("namespace")), str(metric.get("pod")))] = v
            self.last_error = None
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError,
                IndexError) as exc:
            if self.last_error != str(exc):
                log.warning("load metrics from %s unavailable: %s", self.base_url, exc)
            self.last_error = str(exc)
            return {}
        gpu_util, gpu_mem = self._gpu(workloads)
        out: dict[str, Load] = {}
        for key, w in workloads.items():
            # Usage and requests over the same pods: ready pods that report usage.
            measured = [p for p in w.pods if p.ready and (w.namespace, p.name) in usage]
            used = sum(usage[(w.namespace, p.name)] for p in measured)
            requested = sum(p.cpu for p in measured)
            util = used / requested if measured and requested > 0 else None
            canary = w.canary.pods if w.canary is not None else ()
            per_pod = {p.name: usage[(w.namespace, p.name)] / p.cpu
                       for p in (*measured, *canary)
                       if p.ready and p.cpu > 0 and (w.namespace, p.name) in usage}
            gpu_pods = [p.name for p in (*w.pods, *canary) if p.device == "gpu"]
            out[key] = Load(rates.get(key), util, per_pod,
                            {p: gpu_util[(w.namespace, p)] for p in gpu_pods
                             if (w.namespace, p) in gpu_util},
                            {p: gpu_mem[(w.namespace, p)] for p in gpu_pods
                             if (w.namespace, p) in gpu_mem})
        return out

    def _gpu(self, workloads: Mapping[str, WorkloadState]
             ) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
        """GPU utilisation and memory use (fractions) by (namespace, pod); empty when no pod
        is a GPU pod, GPU metrics are off, or the queries fail."""
        g = self.gpu
        if not g.enabled or not any(
                p.device == "gpu" for w in workloads.values()
                for p in (*w.pods, *(w.canary.pods if w.canary is not None else ()))):
            return {}, {}
        by = f"{g.namespace_label}, {g.pod_label}"
        has_pod = f'{{{g.pod_label}!=""}}'
        used = f"sum by ({by}) ({g.memory_used}{has_pod})"
        free = f"sum by ({by}) ({g.memory_free}{has_pod})"
        util: dict[tuple[str, str], float] = {}
        mem: dict[tuple[str, str], float] = {}
        try:
            for metric, v in self._vector(f"avg by ({by}) ({g.utilization}{has_pod}) / 100"):
                util[self._pod_key(metric)] = min(1.0, max(0.0, v))
            for metric, v in self._vector(f"{used} / ({used} + {free})"):
                mem[self._pod_key(metric)] = min(1.0, max(0.0, v))
            self.last_gpu_error = None
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError,
                IndexError) as exc:
            if self.last_gpu_error != str(exc):
                log.warning("GPU metrics from %s unavailable: %s", self.base_url, exc)
            self.last_gpu_error = str(exc)
            return {}, {}
        return util, mem

    def _pod_key(self, metric: Mapping[str, str]) -> tuple[str, str]:
        return (str(metric.get(self.gpu.namespace_label)), str(metric.get(self.gpu.pod_label)))
