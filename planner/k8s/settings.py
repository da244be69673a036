"""What the Kubernetes backend is told about GPUs, in-place resize and GPU metrics.

One document (YAML or JSON, camelCase keys), checked strictly by :func:`parse_settings`: an
unknown key, a wrong type or a bad value raises :class:`planner.domain.errors.SpecError`
naming the field and the fix. Every field has a default, so ``{}`` is a working set-up::

    gpu:
      resource: nvidia.com/gpu        # the extended resource a GPU pod asks for
      count: 1                        # GPUs per pod
      containers: []                  # containers that get the GPU ([]: the first one)
      nodeSelector: {pool: gpu}       # merged into the pod template's nodeSelector
      tolerations:                    # appended to the pod template's tolerations
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      cpuPerPod: 2                    # CPU request of a GPU pod (cores); null: keep it
    inPlaceResize:
      mode: auto                      # auto: Kubernetes >= 1.33; on; off
      deferredSeconds: 300            # a pod deferred this long is replaced
      inProgressSeconds: 3600         # a resize in progress this long: the pod is replaced
      settleSeconds: 5                # how long one call waits for a controller to catch up
    gpuMetrics:                       # DCGM exporter metric and label names
      utilization: DCGM_FI_DEV_GPU_UTIL
      memoryUsed: DCGM_FI_DEV_FB_USED
      memoryFree: DCGM_FI_DEV_FB_FREE
      namespaceLabel: namespace
      podLabel: pod
    exposure:                         # multi-region exposure (docs/regions.md); off while
      latencyMs:                      # latencyMs is empty. Round trips, client -> pool region
        eu-west: {eu-west: 4, us-east: 90}
        us-east: {eu-west: 90, us-east: 4}
      lbCostPerHour: 0.05             # per exposed pool
      clientDemandQuery: >-           # requests/s per client region of one Service
        sum by (client_region) (rate(http_requests_total{namespace="{namespace}",
        service="{service}"}[{window}]))
      regionLabel: client_region
      window: 1m
      timeoutSeconds: 5
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from planner.domain.validation import validate_strict
from planner.kpi import templates

_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
"""A label key or an extended resource name: an optional DNS prefix and ``/``, then a name."""
_METRIC = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              allow_inf_nan=False)


class Toleration(_Cfg):
    """One ``spec.tolerations`` entry as the pod API takes it."""

    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, ge=0, alias="tolerationSeconds")

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise PydanticCustomError(
                "toleration", "operator Exists takes no value",
                {"fix": "remove value, or use operator: Equal"})
        if self.key is None and self.operator != "Exists":
            raise PydanticCustomError(
                "toleration", "a toleration without a key must use operator Exists",
                {"fix": "give a key (e.g. nvidia.com/gpu) or operator: Exists"})
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise PydanticCustomError(
                "toleration", "tolerationSeconds only applies to effect NoExecute",
                {"fix": "remove tolerationSeconds, or use effect: NoExecute"})
        return self

    def as_api(self) -> dict[str, Any]:
        """The entry as the pod spec holds it (absent fields left out)."""
        out: dict[str, Any] = {}
        if self.key is not None:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def _qualified(value: str, what: str, example: str) -> str:
    if not _QUALIFIED.match(value) or len(value) > 316:
        raise PydanticCustomError(
            "qualified_name", "{what} '{value}' is not a qualified name",
            {"what": what, "value": value,
             "fix": f"give prefix/name or name, e.g. {example}"})
    return value


class GpuSettings(_Cfg):
    """How :meth:`planner.k8s.backend.KubernetesBackend.set_device` makes a pod a GPU pod."""

    resource: str = "nvidia.com/gpu"
    """The extended resource a GPU pod requests (``amd.com/gpu``, ``gpu.intel.com/i915``...)."""
    count: int = Field(default=1, ge=1, le=64)
    """GPUs per pod, set as both request and limit (Kubernetes requires them equal)."""
    containers: tuple[str, ...] = ()
    """Names of the containers that get the GPUs; empty: the first container of the pod
    template (the application's, not a sidecar's; init containers never)."""
    node_selector: dict[str, str] = Field(default_factory=dict, alias="nodeSelector")
    """Labels of the GPU nodes, merged into the pod template's ``nodeSelector``."""
    tolerations: tuple[Toleration, ...] = (
        Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)
    """Taints of the GPU nodes to tolerate, appended to the pod template's tolerations (the
    default tolerates the taint GPU node pools commonly carry)."""
    cpu_per_pod: float | None = Field(default=None, gt=0, le=1024, alias="cpuPerPod")
    """The CPU request (cores, over the GPU containers' requests as ``resize`` spreads it) of
    a GPU pod; ``None``: the CPU request is kept."""

    @field_validator("resource")
    @classmethod
    def _resource(cls, v: str) -> str:
        if "/" not in v:
            raise PydanticCustomError(
                "gpu_resource", "'{value}' is not an extended resource name",
                {"value": v, "fix": "give vendor-domain/name, e.g. nvidia.com/gpu"})
        return _qualified(v, "gpu.resource", "nvidia.com/gpu")

    @field_validator("node_selector")
    @classmethod
    def _selector(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            _qualified(key, "nodeSelector key", "nvidia.com/gpu.present")
        return v

    @field_validator("containers")
    @classmethod
    def _containers(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v) or any(not c for c in v):
            raise PydanticCustomError(
                "gpu_containers", "container names must be non-empty and distinct",
                {"fix": "list each container name once, or give [] for the first container"})
        return v


class InPlaceResizeSettings(_Cfg):
    """When :meth:`~planner.k8s.backend.KubernetesBackend.resize` changes running pods through
    the Pod ``resize`` subresource, and when it gives up on a pod and replaces it."""

    mode: Literal["auto", "on", "off"] = "auto"
    """``auto``: when the API server's ``/version`` is 1.33 or later (the feature is on by
    default from 1.33); ``on`` / ``off``: regardless of the version."""
    deferred_s: float = Field(default=300.0, ge=0, le=86400, alias="deferredSeconds")
    """A pod whose resize the node has deferred (``PodResizePending``, reason ``Deferred``)
    this long is replaced (VPA's ``InPlaceOrRecreate`` waits 5 minutes)."""
    in_progress_s: float = Field(default=3600.0, ge=0, le=86400, alias="inProgressSeconds")
    """A pod whose resize has been in progress (``PodResizeInProgress``) this long is replaced
    (VPA: 1 hour)."""
    settle_s: float = Field(default=5.0, ge=0, le=60, alias="settleSeconds")
    """How long one ``resize`` call waits for the Deployment or ReplicaSet controller to see a
    step before it returns and leaves the next step to the next call."""


class GpuMetricSettings(_Cfg):
    """Names of the DCGM exporter's metrics and labels (its Kubernetes mode labels each GPU's
    series with the pod using it)."""

    utilization: str = "DCGM_FI_DEV_GPU_UTIL"
    """GPU utilisation in percent."""
    memory_used: str = Field(default="DCGM_FI_DEV_FB_USED", alias="memoryUsed")
    """Frame buffer memory used, MiB."""
    memory_free: str = Field(default="DCGM_FI_DEV_FB_FREE", alias="memoryFree")
    """Frame buffer memory free, MiB."""
    namespace_label: str = Field(default="namespace", alias="namespaceLabel")
    pod_label: str = Field(default="pod", alias="podLabel")
    """Label names of the pod (``exported_pod`` where Prometheus renamed the exporter's)."""
    enabled: bool = True
    """Query GPU metrics (only in a cycle where some observed pod is a GPU pod)."""

    @field_validator("utilization", "memory_used", "memory_free")
    @classmethod
    def _metric(cls, v: str) -> str:
        return _promql_name(v, _METRIC, "metric")

    @field_validator("namespace_label", "pod_label")
    @classmethod
    def _label(cls, v: str) -> str:
        return _promql_name(v, _LABEL, "label")


def _promql_name(value: str, pattern: re.Pattern[str], kind: str) -> str:
    if not pattern.match(value):
        raise PydanticCustomError(
            "promql_name", "'{value}' is not a Prometheus {kind} name",
            {"value": value, "kind": kind,
             "fix": f"give a {kind} name matching {pattern.pattern}"})
    return value


DEMAND_PLACEHOLDERS: tuple[str, ...] = ("namespace", "service", "window")
"""Tokens substituted in :attr:`ExposureSettings.client_demand_query`."""
DEFAULT_DEMAND_QUERY = ('sum by (client_region) (rate(http_requests_total{namespace="{namespace}",'
                        'service="{service}"}[{window}]))')


class ExposureSettings(_Cfg):
    """What the backend reports for the exposure decision (:mod:`planner.k8s.exposure_observer`,
    docs/regions.md "On Kubernetes"): the round trips between regions, which Kubernetes has no
    object for, what a pool's load balancer costs, and the PromQL giving a Service's requests
    per client region. Off (nothing reported, as before) while ``latencyMs`` is empty."""

    latency_ms: dict[str, dict[str, float]] = Field(default_factory=dict, alias="latencyMs")
    """Round trip in ms, client region -> pool region (the nodes' region label); a pair not
    given is unreachable (a client region is then served too far by a pool in that region)."""
    lb_cost_per_hour: float = Field(default=0.0, ge=0, le=1e6, alias="lbCostPerHour")
    """What one exposed pool's load balancer costs per hour."""
    client_demand_query: str = Field(default=DEFAULT_DEMAND_QUERY, min_length=1,
                                     max_length=4096, alias="clientDemandQuery")
    """PromQL giving a Service's request rate (per second) per client region, one series per
    region labelled :attr:`region_label`. Placeholders, replaced by values escaped for a
    PromQL string: ``{namespace}``, ``{service}`` (both required, so that a query cannot read
    another Service's demand), ``{window}``."""
    region_label: str = Field(default="client_region", alias="regionLabel")
    """The label of :attr:`client_demand_query`'s result naming the client region."""
    window: str = "1m"
    """The rate window, ``{window}``."""
    timeout_s: float = Field(default=5.0, gt=0, le=60, alias="timeoutSeconds")
    """How long one client-demand query may take."""

    @property
    def enabled(self) -> bool:
        return bool(self.latency_ms)

    @field_validator("latency_ms")
    @classmethod
    def _latency(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for client, row in v.items():
            for region, ms in row.items():
                if not client or not region or not 0 <= ms <= 1e6:
                    raise PydanticCustomError(
                        "round_trip", "latencyMs.{client}.{region}: {ms} is not a round trip",
                        {"client": client, "region": region, "ms": ms,
                         "fix": "give milliseconds between 0 and 1e6 for named regions"})
        return v

    @field_validator("region_label")
    @classmethod
    def _label(cls, v: str) -> str:
        return _promql_name(v, _LABEL, "label")

    @field_validator("window")
    @classmethod
    def _window(cls, v: str) -> str:
        if not _DURATION.match(v):
            raise PydanticCustomError(
                "duration", "'{value}' is not a PromQL duration",
                {"value": v, "fix": "give a duration such as 1m or 30s"})
        return v

    @field_validator("client_demand_query")
    @classmethod
    def _query(cls, v: str) -> str:
        used = templates.placeholders_in(v)
        unknown = sorted(used - set(DEMAND_PLACEHOLDERS))
        missing = [p for p in ("namespace", "service") if p not in used]
        if unknown or missing:
            what = (f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}"
                    if unknown else
                    f"no {', '.join('{' + m + '}' for m in missing)} placeholder")
            raise PydanticCustomError(
                "demand_query", "clientDemandQuery has {what}",
                {"what": what, "fix": "select the Service with "
                 'namespace="{namespace}",service="{service}" (placeholders: '
                 + ", ".join("{" + p + "}" for p in DEMAND_PLACEHOLDERS) + ")"})
        return v


class KubernetesSettings(_Cfg):
    """Everything above; see the module docstring."""

    gpu: GpuSettings = GpuSettings()
    in_place_resize: InPlaceResizeSettings = Field(default=InPlaceResizeSettings(),
                                                   alias="inPlaceResize")
    gpu_metrics: GpuMetricSettings = Field(default=GpuMetricSettings(), alias="gpuMetrics")
    exposure: ExposureSettings = ExposureSettings()


DEFAULT = KubernetesSettings()


def parse_settings(doc: Any, source: str = "", prefix: str = "kubernetes"
                   ) -> KubernetesSettings:
    """The settings of a document (``None`` or empty: the defaults); strict, as the admin
    config is (:func:`planner.domain.validation.validate_strict`)."""
    if not doc:
        return DEFAULT
    return validate_strict(KubernetesSettings, doc, source, prefix)
