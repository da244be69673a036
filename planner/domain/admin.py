"""Guardrails a cluster admin sets: which planner and actuators run, and within what bounds."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from planner.domain.validation import validate_strict

MAX_REPLICAS = 10_000
"""Most replicas of one workload a planner may choose (it searches every count up to
``replicas.max``)."""


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              allow_inf_nan=False)


class ReplicaBounds(_Cfg):
    min: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    max: int = Field(default=100, ge=1, le=MAX_REPLICAS)
    max_step: int = Field(default=10, ge=1, le=MAX_REPLICAS, alias="maxStep")
    """Most replicas added or removed in one cycle."""
    cooldown_s: float = Field(default=60.0, ge=0, alias="cooldownSeconds")
    """After a change, no change in the opposite direction for this long (anti-flapping)."""

    @model_validator(mode="after")
    def _ordered(self) -> ReplicaBounds:
        if self.min > self.max:
            raise ValueError("replicas.min must be <= replicas.max")
        return self


class CpuBounds(_Cfg):
    sizes: tuple[float, ...] = Field(default=(0.25, 0.5, 1.0, 2.0, 4.0), max_length=64)
    """CPU sizes (cores per pod) the planner may choose."""
    cooldown_s: float = Field(default=300.0, ge=0, alias="cooldownSeconds")

    @model_validator(mode="after")
    def _positive(self) -> CpuBounds:
        if not self.sizes or any(not 0 < s <= 1024 for s in self.sizes):
            raise ValueError("cpu.sizes must be a non-empty list of core counts in (0, 1024]")
        return self


class UtilityWeights(_Cfg):
    """Multi-attribute utility: how much each unit of an attribute is worth to the admin."""

    cost: float = Field(default=1.0, ge=0)
    slo_risk: float = Field(default=1.0, ge=0, alias="sloRisk")
    disruption: float = Field(default=0.02, ge=0)


#: Fields a dispatch template may use: ``{namespace}``, ``{name}`` (of the workload), ``{pod}``.
#: The data planes render them (:func:`actuators.dataplanes.render_template`).
TEMPLATE_FIELDS = ("namespace", "name", "pod")
HAPROXY_MAX_WEIGHT = 256
"""HAProxy's largest server weight."""


def _check_template(value: str, what: str, needs: tuple[str, ...] = ()) -> str:
    try:
        rendered = value.format(namespace="ns", name="web", pod="web-0")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{what}: bad template {value!r} ({exc}); the fields are "
                         f"{', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}") from None
    if not rendered:
        raise ValueError(f"{what} must not be empty")
    for field in needs:
        if "{" + field + "}" not in value:
            raise ValueError(f"{what} must contain {{{field}}} (one entry per {field})")
    return value


class HAProxyDispatch(_Cfg):
    """Write weights through HAProxy's runtime API (``stats socket ... level admin``)."""

    address: str = Field(min_length=1)
    """``host:port`` of a TCP stats socket, or the path of a unix one (starts with ``/``)."""
    backend: str = "{name}"
    """HAProxy backend of a workload (template)."""
    server: str = "{pod}"
    """HAProxy server name of a pod (template)."""
    timeout_s: float = Field(default=1.0, gt=0, le=30, alias="timeoutSeconds")
    max_attempts: int = Field(default=2, ge=1, le=10, alias="maxAttempts")
    """Tries per write within one cycle; a write that still fails is retried next cycle."""

    @model_validator(mode="after")
    def _valid(self) -> HAProxyDispatch:
        self.parsed_address()
        _check_template(self.backend, "haproxy.backend")
        _check_template(self.server, "haproxy.server", needs=("pod",))
        return self

    def parsed_address(self) -> tuple[str, int] | str:
        if self.address.startswith("/"):
            return self.address
        host, sep, port = self.address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"haproxy.address {self.address!r}: give host:port or an absolute "
                             "unix socket path")
        return host.strip("[]"), int(port)


class EnvoyDispatch(_Cfg):
    """Write weights to a file-based EDS ``ClusterLoadAssignment`` per workload."""

    path: str = Field(min_length=1)
    """File Envoy watches (template, e.g. ``/etc/envoy/eds/{namespace}-{name}.json``)."""
    cluster: str = "{name}"
    """Envoy cluster name (template)."""
    host: str = "{pod}"
    """Address of a pod's endpoint (template)."""
    port: int = Field(default=8080, gt=0, lt=65536)
    max_attempts: int = Field(default=2, ge=1, le=10, alias="maxAttempts")

    @model_validator(mode="after")
    def _valid(self) -> EnvoyDispatch:
        _check_template(self.path, "envoy.path")
        _check_template(self.cluster, "envoy.cluster")
        _check_template(self.host, "envoy.host", needs=("pod",))
        return self


class ConfigMapDispatch(_Cfg):
    """Write weights as a ConfigMap (``data[key]`` = JSON pod -> weight) per workload."""

    name: str = "{name}-dispatch-weights"
    namespace: str = "{namespace}"
    key: str = Field(default="weights.json", min_length=1)

    @model_validator(mode="after")
    def _valid(self) -> ConfigMapDispatch:
        _check_template(self.name, "configmap.name")
        _check_template(self.namespace, "configmap.namespace")
        return self


class EngineSettings(_Cfg):
    """Guards of the weight engine (:class:`actuators.dispatch.EngineConfig`)."""

    blackout_s: float = Field(default=10.0, ge=0, alias="blackoutSeconds")
    expiry_s: float = Field(default=180.0, gt=0, alias="expirySeconds")
    min_share: float = Field(default=0.01, ge=0, lt=1, alias="minShare")
    max_relative_change: float = Field(default=0.5, gt=0, alias="maxRelativeChange")
    change_threshold: float = Field(default=0.05, ge=0, alias="changeThreshold")
    reference_weight: int = Field(default=64, ge=1, alias="referenceWeight")
    min_weight: int = Field(default=1, ge=1, alias="minWeight")
    max_weight: int = Field(default=256, ge=1, alias="maxWeight")

    @model_validator(mode="after")
    def _ordered(self) -> EngineSettings:
        if not self.min_weight <= self.reference_weight <= self.max_weight:
            raise ValueError("need minWeight <= referenceWeight <= maxWeight")
        return self


class DispatchConfig(_Cfg):
    """How the ``weights`` actuator computes dispatch weights and where it writes them.

    With no data plane configured the weights go to the backend only
    (:meth:`planner.domain.ports.ClusterBackend.set_weights`; the simulator dispatches by them).
    """

    policy: str = "slo"
    """A registered weight policy: ``slo`` (ours), ``orca``, ``lvs``, or a third party's
    (checked with its ``policyParams`` when the ``weights`` actuator is created)."""
    policy_params: dict[str, Any] = Field(default_factory=dict, alias="policyParams")
    """Keyword arguments of the policy, e.g. ``{headroom: 0.3}`` for ``slo``."""
    engine: EngineSettings = EngineSettings()
    workloads: tuple[str, ...] | None = None
    """``namespace/name`` of the workloads to weight; ``None``: every planned workload."""
    haproxy: HAProxyDispatch | None = None
    envoy: EnvoyDispatch | None = None
    configmap: ConfigMapDispatch | None = None

    @model_validator(mode="after")
    def _valid(self) -> DispatchConfig:
        if self.haproxy is not None and self.engine.max_weight > HAPROXY_MAX_WEIGHT:
            raise ValueError(f"engine.maxWeight must be <= {HAPROXY_MAX_WEIGHT} with haproxy")
        for key in self.workloads or ():
            ns, sep, name = key.partition("/")
            if not sep or not ns or not name or "/" in name:
                raise ValueError(f"dispatch.workloads: {key!r} is not namespace/name")
        return self

    def applies_to(self, workload: str) -> bool:
        return self.workloads is None or workload in self.workloads


UNLIMITED = "unlimited"
DEFAULT_TRAINING_CPU_S_PER_HOUR = 3600.0
"""One core's worth of model fitting per hour (about 500 latency fits of 7 CPU seconds)."""


class CanarySettings(_Cfg):
    """Bounded trials of configuration shapes no model has observed (another CPU size, device
    or node pool): a canary of a few pods beside the workload (:mod:`planner.planners.canary`).
    Enabled with the ``cpu``, ``device`` or ``placement`` actuator; off here turns them off
    (the planner then tries another CPU size by resizing every pod)."""

    enabled: bool = True
    fraction: float = Field(default=0.1, gt=0, le=0.5)
    """The canary's pods as a fraction of the workload's replicas (rounded up), and no more
    pods than it takes to reach this fraction of the workload's cost per hour (at least one)."""
    analysis_s: float = Field(default=120.0, gt=0, alias="analysisSeconds")
    """How long every canary pod serves before its speed is judged."""
    timeout_s: float = Field(default=600.0, gt=0, alias="timeoutSeconds")
    """A canary whose pods are not all ready and judged by then is abandoned (e.g. it cannot
    be scheduled)."""


class ExposureSettings(_Cfg):
    """Which node pools expose an intent's Service (the ``exposure`` actuator and
    :mod:`planner.planners.exposure`; docs/regions.md)."""

    max_pools: int | None = Field(default=None, ge=1, le=100, alias="maxPools")
    """Most pools that may expose one Service (``None``: no cap)."""
    cooldown_s: float = Field(default=300.0, ge=0, alias="cooldownSeconds")
    """After an exposure change, no other for this long (a new pool's load balancer and pods
    take time to come up; flapping pays for both)."""
    network_share: float = Field(default=0.5, gt=0, lt=1, alias="networkShare")
    """The part of a latency objective the round trip to the serving pool may take: the rest
    is the service's. A client region whose round trip is above it is served too far."""
    tail_share: float = Field(default=0.0, ge=0, le=1, alias="tailShare")
    """The part of a latency objective's tail (5 % of the requests for p95) that demand served
    too far may take before another pool is exposed; a pool is given up only when what it
    serves would take at most half of that. 0 (the default): no demand served too far (expose
    wherever clients are, give a pool up only when its clients are gone), because the
    per-workload planner provisions the service for the whole tail: demand served too far
    takes tail the service then misses (docs/regions.md, the measurement)."""


class TrainingSettings(_Cfg):
    """How the training hook refits effect models (:mod:`planner.control.training`)."""

    cpu_seconds_per_hour: float | str = Field(default=DEFAULT_TRAINING_CPU_S_PER_HOUR,
                                              alias="cpuSecondsPerHour")
    """CPU seconds of fitting per hour, over all intents (3600: one core), or
    ``"unlimited"``. The stalest, worst-fitting models with new data are refitted first."""
    executor: Literal["auto", "inline", "thread", "processes", "dask"] = "auto"
    """Where fits run: ``inline`` (on the cycle's thread: deterministic simulations),
    ``thread`` (one worker thread), ``processes`` (a pool of ``workers`` processes),
    ``dask`` (a Dask cluster at ``daskScheduler``, or a local one of ``workers`` processes);
    ``auto``: inline in simulations, a thread in live runs."""
    workers: int = Field(default=2, ge=1, le=1024)
    """Worker processes (``processes``; ``dask`` without a scheduler address)."""
    dask_scheduler: str | None = Field(default=None, min_length=1, alias="daskScheduler")
    """Address of a Dask scheduler (``tcp://host:8786``); needs ``intent-planner[dask]``."""
    warm_start: bool = Field(default=False, alias="warmStart")
    """Start a latency fit from the previous model's parameters when its node classes match
    (measured: it saves no CPU, see docs/benchmarks.md; off by default)."""
    interval_s: float = Field(default=300.0, gt=0, alias="intervalSeconds")
    """How often each intent's data is looked at for a refit."""
    min_new_observations: int = Field(default=1, ge=1, alias="minNewObservations")
    """Settled observations since the last fit an intent needs to be refitted."""

    @field_validator("cpu_seconds_per_hour", mode="before")
    @classmethod
    def _budget(cls, v: Any) -> float | str:
        if v == UNLIMITED:
            return UNLIMITED
        if (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                and v > 0):
            return float(v)
        raise PydanticCustomError(
            "training_budget", "not a CPU budget per hour",
            {"fix": 'give CPU-seconds per hour as a number > 0 (3600 = one '
                                     'core busy all the time) or the string "unlimited"'})

    @model_validator(mode="after")
    def _dask(self) -> TrainingSettings:
        if self.dask_scheduler is not None and self.executor != "dask":
            raise PydanticCustomError(
                "training_executor", "daskScheduler is set but executor is {executor}",
                {"executor": repr(self.executor),
                 "fix": "set executor: dask, or remove daskScheduler"})
        return self

    @property
    def budget_s(self) -> float | None:
        """CPU seconds per hour; ``None``: unlimited."""
        v = self.cpu_seconds_per_hour
        return None if isinstance(v, str) else float(v)


class AdminConfig(_Cfg):
    planner: str = "grid"
    planners_by_namespace: dict[str, str] = Field(default_factory=dict, alias="plannersByNamespace")
    planner_options: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                       alias="plannerOptions")
    """Options per planner name, e.g. ``{hpa: {targetCPUUtilizationPercentage: 60}}``;
    each planner validates its own (:attr:`planner.planners.base.Planner.options`) when it
    is created."""
    actuators: tuple[str, ...] = ("replicas",)
    replicas: ReplicaBounds = ReplicaBounds()
    cpu: CpuBounds = CpuBounds()
    devices: tuple[str, ...] = ("cpu", "gpu")
    pools: tuple[str, ...] | None = None
    """Node pools the planner may place on; ``None``: any."""
    budget_per_hour: float | None = Field(default=None, gt=0, alias="budgetPerHour")
    max_actions_per_cycle: int = Field(default=5, ge=1, alias="maxActionsPerCycle")
    cycle_s: float = Field(default=15.0, gt=0, alias="cycleSeconds")
    headroom: float = Field(default=0.1, ge=0, le=1)
    """Safety margin on the load the planner provisions for."""
    utility: UtilityWeights = UtilityWeights()
    dispatch: DispatchConfig = DispatchConfig()
    """Dispatch weights (used by the ``weights`` actuator only)."""
    training: TrainingSettings = TrainingSettings()
    """Model training: CPU budget, where fits run, warm start."""
    canary: CanarySettings = CanarySettings()
    """Trials of unobserved shapes through a canary (:class:`CanarySettings`)."""
    exposure: ExposureSettings = ExposureSettings()
    """Per-pool exposure of Services (:class:`ExposureSettings`)."""

    def planner_for(self, namespace: str) -> str:
        return self.planners_by_namespace.get(namespace, self.planner)


def parse_admin(doc: dict[str, Any] | None, source: str = "", prefix: str = "admin") -> AdminConfig:
    """The admin config of a document (strict types; ``None`` or empty: the defaults)."""
    if not doc:
        return AdminConfig()
    return validate_strict(AdminConfig, doc, source, prefix)
