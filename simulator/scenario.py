"""Scenario files: a cluster, its workloads and their load traces, the intents, admin bounds.

A scenario is one YAML file (see ``examples/scenarios/``), read with the limits of
:mod:`planner.domain.safeload`. Every field is validated with strict types and within bounds
a simulation can run in (nodes, pods, duration, trace sizes; see ``MAX_*`` below and
docs/input-limits.md); an error names the field and the fix
(:class:`planner.domain.errors.SpecError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.domain.admin import MAX_REPLICAS, AdminConfig
from planner.domain.errors import SpecError
from planner.domain.intents import (
    DNS_LABEL,
    Intent,
    KPIProfile,
    check_references,
    parse_intent,
    parse_manifest_documents,
    parse_profile,
)
from planner.domain.safeload import LoadError, load_file
from planner.domain.validation import validate_strict
from simulator.durations import parse_duration
from simulator.traces import (
    BurstyTrace,
    ConstantTrace,
    CsvTrace,
    DiurnalTrace,
    RandomWalkTrace,
    StepTrace,
    Trace,
)

Seconds = Annotated[float, Field(ge=0)]
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

MAX_NODES = 10_000
"""Nodes in a scenario's cluster, all pools together."""
MAX_PODS = 200_000
"""Pods a scenario starts with, all workloads together (each at most
:data:`planner.domain.admin.MAX_REPLICAS`): the design target's cluster (issue 13)."""
MAX_WORKLOADS = 1_000
"""Workloads in a scenario: the design target's 1,000 intents (issue 13)."""
MAX_MANIFESTS = 2 * MAX_WORKLOADS
"""Intents and KPIProfiles together (an intent per workload and their profiles)."""
MAX_DURATION_S = 30 * 86400.0
"""Longest simulated time (30 days)."""
MIN_DURATION_S = 60.0
"""Shortest: objectives are accounted per minute."""
MAX_STEPS = 2_000_000
"""Most simulation steps (``duration / step_s``)."""
MAX_TRACE_BYTES = 16 << 20
"""Largest CSV trace file (16 MiB, about a million rows)."""


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              allow_inf_nan=False)


def _dur(v: Any) -> float:
    try:
        return parse_duration(v)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


class PoolSpec(_S):
    name: str = Field(min_length=1)
    region: str = "default"
    nodes: int = Field(ge=1, le=MAX_NODES)
    cpu: float = Field(gt=0, le=1024, description="cores per node")
    gpus: int = Field(default=0, ge=0, le=64, description="GPUs per node")
    cost_per_core_hour: float = Field(default=0.04, ge=0)
    cost_per_gpu_hour: float = Field(default=2.5, ge=0)
    network_latency_ms: float = Field(default=0.0, ge=0, description="extra latency to clients")
    speed: float = Field(default=1.0, gt=0, le=100, description="service-rate factor of this "
                         "pool's nodes (CPU generation, clock): a pod here serves speed x as fast")


class ServiceModel(_S):
    """How a workload serves requests: the ground truth the planner has to learn."""

    rate_per_core: float = Field(gt=0, description="req/s one pod with one core serves")
    cpu_exponent: float = Field(default=0.9, gt=0, le=1.0)
    gpu_speedup: float = Field(default=1.0, gt=0)
    base_latency_ms: float = Field(default=2.0, ge=0)
    startup_s: Seconds = 20.0
    failure_rate_per_hour: float = Field(default=0.0, ge=0, description="per pod")
    restart_s: Seconds = 20.0
    detection_s: Seconds = 5.0
    timeout_ms: float = Field(default=5000.0, gt=0)

    _parse = field_validator("startup_s", "restart_s", "detection_s", mode="before")(
        classmethod(lambda cls, v: _dur(v))
    )


class ConstantTraceSpec(_S):
    kind: Literal["constant"]
    rate: float = Field(ge=0)
    noise: float = Field(default=0.0, ge=0, le=1)


class StepSpec(_S):
    at: Seconds = Field(le=MAX_DURATION_S)
    rate: float = Field(ge=0)
    _parse = field_validator("at", mode="before")(classmethod(lambda cls, v: _dur(v)))


class StepTraceSpec(_S):
    kind: Literal["step"]
    initial: float = Field(ge=0)
    steps: list[StepSpec] = Field(min_length=1, max_length=10_000)
    noise: float = Field(default=0.0, ge=0, le=1)


class DiurnalTraceSpec(_S):
    kind: Literal["diurnal"]
    base: float = Field(ge=0)
    amplitude: float = Field(ge=0)
    period: float = Field(default=86400.0, ge=1)
    phase: float = 0.0
    noise: float = Field(default=0.0, ge=0, le=1)
    _parse = field_validator("period", mode="before")(classmethod(lambda cls, v: _dur(v)))

    @model_validator(mode="after")
    def _non_negative(self) -> DiurnalTraceSpec:
        if self.amplitude > self.base:
            raise ValueError("amplitude must be <= base so the rate never goes negative")
        return self


class BurstyTraceSpec(_S):
    kind: Literal["bursty"]
    base: float = Field(ge=0)
    burst_rate: float = Field(ge=0)
    mean_gap: float = Field(default=600.0, ge=10, description="mean time between bursts")
    burst_duration: Seconds = 120.0
    noise: float = Field(default=0.0, ge=0, le=1)
    _parse = field_validator("mean_gap", "burst_duration", mode="before")(
        classmethod(lambda cls, v: _dur(v))
    )


class CsvTraceSpec(_S):
    kind: Literal["csv"]
    file: str
    time_column: str = "timestamp"
    rate_column: str = "rate"
    loop: bool = True
    scale: float = Field(default=1.0, gt=0)
    noise: float = Field(default=0.0, ge=0, le=1)


class RandomWalkTraceSpec(_S):
    """A bounded geometric random walk (:class:`simulator.traces.RandomWalkTrace`)."""

    kind: Literal["random_walk"]
    initial: float = Field(gt=0, description="rate at time 0")
    low: float = Field(gt=0, description="the walk is reflected at this rate")
    high: float = Field(gt=0, description="... and at this one")
    volatility: float = Field(default=0.5, ge=0, le=5, description="standard deviation of "
                              "the log rate's change over one hour")
    interval: float = Field(default=60.0, ge=1)
    noise: float = Field(default=0.0, ge=0, le=1)
    _parse = field_validator("interval", mode="before")(classmethod(lambda cls, v: _dur(v)))

    @model_validator(mode="after")
    def _ordered(self) -> RandomWalkTraceSpec:
        if not self.low <= self.initial <= self.high:
            raise ValueError("need low <= initial <= high")
        return self


TraceSpec = Annotated[
    ConstantTraceSpec | StepTraceSpec | DiurnalTraceSpec | BurstyTraceSpec | CsvTraceSpec
    | RandomWalkTraceSpec,
    Field(discriminator="kind"),
]


class ClientRegionSpec(_S):
    """Where some of the clients are: a region and its weight in the demand (a constant
    ``share``, or a ``trace`` of weights over time); shares are the weights over their sum."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)
    share: float | None = Field(default=None, ge=0)
    trace: TraceSpec | None = None

    @model_validator(mode="after")
    def _one_weight(self) -> ClientRegionSpec:
        if (self.share is None) == (self.trace is None):
            raise ValueError(f"client region {self.name!r}: give exactly one of share (a "
                             "constant weight) or trace (weights over time)")
        return self


class ClientsSpec(_S):
    """Client geography (``docs/regions.md``): where requests come from, the round trip from
    each client region to each pool region, and what one exposed pool's load balancer costs.
    Only workloads with ``exposure`` are served this way."""

    regions: list[ClientRegionSpec] = Field(min_length=1, max_length=50)
    latency_ms: dict[str, dict[str, Annotated[float, Field(ge=0, le=60_000)]]] = Field(
        description="client region -> pool region -> round trip in ms (every pair)")
    lb_cost_per_hour: float = Field(default=0.0, ge=0, description="per exposed pool")


class WorkloadSpec(_S):
    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    namespace: str = Field(default="default", min_length=1, max_length=63, pattern=DNS_LABEL)
    replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    cpu: float = Field(default=1.0, gt=0)
    device: Literal["cpu", "gpu"] = "cpu"
    pool: str | None = None
    service: ServiceModel
    trace: TraceSpec
    exposure: list[str] | None = Field(default=None, min_length=1, max_length=100,
                                       description="the pools whose load balancers expose "
                                       "the Service at the start (needs clients)")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClusterSpec(_S):
    pools: list[PoolSpec] = Field(min_length=1, max_length=100)
    in_place_resize: bool = Field(default=False, description="a resize changes running pods' "
                                  "CPU in place (Kubernetes >= 1.33), not by a rollout")
    resize_delay_s: Seconds = Field(default=3.0, le=3600, description="how long the kubelet "
                                    "takes to apply an in-place resize the node has room for")
    resize_deferred_limit_s: Seconds = Field(default=300.0, le=86400, description="how long an "
                                             "in-place resize may wait for room (Deferred) "
                                             "before the pod is replaced by one of the new size")

    _parse = field_validator("resize_delay_s", "resize_deferred_limit_s", mode="before")(
        classmethod(lambda cls, v: _dur(v))
    )

    @model_validator(mode="after")
    def _bounded(self) -> ClusterSpec:
        total = sum(p.nodes for p in self.pools)
        if total > MAX_NODES:
            raise ValueError(f"{total} nodes in all pools, more than the {MAX_NODES} a "
                             "simulation runs with")
        return self


class ScenarioSpec(_S):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=0)
    duration: float = Field(default=3600.0, ge=MIN_DURATION_S, le=MAX_DURATION_S)
    step_s: float = Field(default=5.0, ge=0.1, le=60)
    kpi_window_s: float = Field(default=60.0, gt=0, le=86400)
    cluster: ClusterSpec
    workloads: list[WorkloadSpec] = Field(min_length=1, max_length=MAX_WORKLOADS)
    admin: AdminConfig = AdminConfig()
    clients: ClientsSpec | None = None
    manifests: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_MANIFESTS)

    _parse = field_validator("duration", mode="before")(classmethod(lambda cls, v: _dur(v)))

    @model_validator(mode="after")
    def _consistent(self) -> ScenarioSpec:
        pools = {p.name for p in self.cluster.pools}
        keys = [w.key for w in self.workloads]
        if len(keys) != len(set(keys)):
            raise ValueError("workload namespace/name pairs must be unique")
        for w in self.workloads:
            if w.pool is not None and w.pool not in pools:
                raise ValueError(f"workload {w.key}: pool {w.pool!r} is not in cluster.pools")
        self._check_geography(pools)
        pods = sum(w.replicas for w in self.workloads)
        if pods > MAX_PODS:
            raise ValueError(f"{pods} replicas in all workloads, more than the {MAX_PODS} a "
                             "simulation starts with")
        if self.duration / self.step_s > MAX_STEPS:
            raise ValueError(f"duration / step_s is {self.duration / self.step_s:.0f} steps, "
                             f"more than {MAX_STEPS}: shorten the duration or raise step_s")
        return self

    def _check_geography(self, pools: set[str]) -> None:
        clients = self.clients
        for w in self.workloads:
            if w.exposure is None:
                continue
            if clients is None:
                raise ValueError(f"workload {w.key}: exposure needs clients (regions and "
                                 "latency_ms) at the scenario's top level")
            if w.pool is not None:
                raise ValueError(f"workload {w.key}: give exposure or pool, not both (an "
                                 "exposed workload's pods follow the demand of its pools)")
            for p in w.exposure:
                if p not in pools:
                    raise ValueError(f"workload {w.key}: exposure pool {p!r} is not in "
                                     "cluster.pools")
        if clients is None:
            return
        names = [r.name for r in clients.regions]
        if len(names) != len(set(names)):
            raise ValueError("clients.regions: region names must be unique")
        pool_regions = sorted({p.region for p in self.cluster.pools})
        for r in names:
            row = clients.latency_ms.get(r)
            if row is None:
                raise ValueError(f"clients.latency_ms: no row for client region {r!r}; give "
                                 f"its round trip to each pool region {pool_regions}")
            missing = [x for x in pool_regions if x not in row]
            if missing:
                raise ValueError(f"clients.latency_ms.{r}: no round trip to pool region(s) "
                                 f"{missing}; give one for each of {pool_regions}")


class Scenario:
    """A validated scenario with its parsed intents and profiles."""

    def __init__(self, spec: ScenarioSpec, intents: list[Intent], profiles: list[KPIProfile],
                 base_dir: Path) -> None:
        self.spec = spec
        self.intents = intents
        self.profiles = profiles
        self.base_dir = base_dir

    @property
    def name(self) -> str:
        return self.spec.name

    def trace_for(self, workload: WorkloadSpec, seed: int) -> Trace:
        return self.trace_of(workload.trace, seed * 1000 + sum(map(ord, workload.key)))

    def region_weights(self, seed: int) -> dict[str, Trace]:
        """Each client region's weight in the demand over time (``clients.regions``)."""
        clients = self.spec.clients
        if clients is None:
            return {}
        out: dict[str, Trace] = {}
        for r in clients.regions:
            s = seed * 1000 + 7 + sum(map(ord, "region/" + r.name))
            out[r.name] = (ConstantTrace(float(r.share), 0.0, s) if r.share is not None
                           else self.trace_of(r.trace, s) if r.trace is not None
                           else ConstantTrace(1.0, 0.0, s))
        return out

    def trace_of(self, t: TraceSpec, s: int) -> Trace:
        if isinstance(t, ConstantTraceSpec):
            return ConstantTrace(t.rate, t.noise, s)
        if isinstance(t, StepTraceSpec):
            return StepTrace(t.initial, [(x.at, x.rate) for x in t.steps], t.noise, s)
        if isinstance(t, DiurnalTraceSpec):
            return DiurnalTrace(t.base, t.amplitude, t.period, t.phase, t.noise, s)
        if isinstance(t, BurstyTraceSpec):
            return BurstyTrace(t.base, t.burst_rate, t.mean_gap, t.burst_duration,
                               horizon=max(self.spec.duration, 1.0), noise=t.noise, seed=s)
        if isinstance(t, RandomWalkTraceSpec):
            return RandomWalkTrace(t.initial, t.low, t.high, t.volatility, t.interval,
                                   horizon=max(self.spec.duration, 1.0), noise=t.noise, seed=s)
        path = Path(t.file)
        if not path.is_absolute():
            path = self.base_dir / path
        return CsvTrace(path, t.time_column, t.rate_column, t.loop, t.scale, t.noise, s,
                        max_bytes=MAX_TRACE_BYTES)


def parse_scenario(doc: Any, source: str = "", base_dir: Path | None = None) -> Scenario:
    if not isinstance(doc, dict):
        raise SpecError(source, "(document)", "a scenario must be a YAML mapping",
                        "start from a file in examples/scenarios/")
    spec = validate_strict(ScenarioSpec, doc, source)
    intents: list[Intent] = []
    profiles: list[KPIProfile] = []
    for i, m in enumerate(spec.manifests):
        prefix = f"manifests[{i}]"
        kind = m.get("kind")
        if kind == "Intent":
            intents.append(parse_intent(m, source, prefix))
        elif kind == "KPIProfile":
            profiles.append(parse_profile(m, source, prefix))
        else:
            raise SpecError(source, f"{prefix}.kind", f"unsupported kind {kind!r}",
                            "use kind: Intent or kind: KPIProfile")
    check_references(intents, profiles, source)
    check_admin_names(spec.admin, source)
    workloads = {w.key for w in spec.workloads}
    intent_docs = [i for i, m in enumerate(spec.manifests) if m.get("kind") == "Intent"]
    for doc_index, intent in zip(intent_docs, intents, strict=True):
        if intent.workload_key not in workloads:
            raise SpecError(source, f"manifests[{doc_index}].spec.targetRef.name",
                            f"no workload {intent.workload_key!r} in this scenario",
                            f"use one of {sorted(workloads)}")
    csv_check = [w for w in spec.workloads if isinstance(w.trace, CsvTraceSpec)]
    scenario = Scenario(spec, intents, profiles, base_dir or Path.cwd())
    for w in csv_check:
        try:
            scenario.trace_for(w, 0)
        except (OSError, ValueError) as exc:
            raise SpecError(source, f"workloads[{w.key}].trace.file", str(exc),
                            "give a readable CSV with timestamp and rate columns") from None
        except LoadError as exc:
            raise SpecError(source, f"workloads[{w.key}].trace.file",
                            f"{exc.source}: {exc.problem}", exc.fix) from None
    return scenario


def check_admin_names(admin: AdminConfig, source: str) -> None:
    """Planner and actuator names must be installed plugins, pools must exist. Planners are
    checked by name (no planner module is imported, they import the model libraries) unless
    the admin sets options for them; actuators are created."""
    from actuators import registry as actuators
    from planner.planners import registry as planners

    known_planners = planners.REGISTRY.names()
    for field, name in [("admin.planner", admin.planner),
                        *((f"admin.plannersByNamespace.{ns}", n)
                          for ns, n in admin.planners_by_namespace.items())]:
        if name not in known_planners:
            raise SpecError(source, field, f"unknown planner {name!r}",
                            f"use one of {known_planners}")
    for name, options in admin.planner_options.items():
        if name not in known_planners:
            raise SpecError(source, f"admin.plannerOptions.{name}", f"unknown planner {name!r}",
                            f"use one of {known_planners}")
        try:
            planners.create(name, options)
        except SpecError as exc:
            raise SpecError(source, f"admin.{exc.field}", exc.problem, exc.fix) from None
    try:
        actuators.create(actuators.enabled_names(admin), admin)
    except SpecError as exc:
        raise SpecError(source, f"admin.{exc.field}", exc.problem, exc.fix) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (one YAML document, or ``.json``)."""
    p = Path(path)
    try:
        docs = load_file(p)
    except LoadError as exc:
        if exc.field == "(file)":
            raise LoadError(exc.source, exc.field, exc.problem, f"{exc.fix}: a scenario YAML "
                            "file, e.g. examples/scenarios/diurnal-shop.yaml") from None
        raise
    return parse_scenario_documents(docs, p)


def parse_scenario_documents(docs: list[Any], path: Path) -> Scenario:
    """The scenario of a file's documents (exactly one)."""
    if len(docs) != 1:
        raise LoadError(str(path), "(document)", f"{len(docs)} YAML documents",
                        "a scenario is one YAML document, e.g. examples/scenarios/"
                        "diurnal-shop.yaml")
    return parse_scenario(docs[0], str(path), path.parent)


def check_duration(seconds: float, step_s: float, field: str = "duration",
                   source: str = "") -> None:
    """A simulated duration within the scenario bounds (for ``--duration``)."""
    if not MIN_DURATION_S <= seconds <= MAX_DURATION_S:
        raise SpecError(source, field, f"{seconds:g} s is outside [{MIN_DURATION_S:g} s, "
                        f"{MAX_DURATION_S / 86400:g} d]", "use e.g. 30m, 2h or 7d "
                        "(objectives are accounted per minute)")
    if seconds / step_s > MAX_STEPS:
        raise SpecError(source, field, f"{seconds / step_s:.0f} steps of {step_s:g} s, more "
                        f"than {MAX_STEPS}", "shorten the duration or raise step_s")


def validate_file(path: str | Path) -> Scenario | tuple[list[Intent], list[KPIProfile]]:
    """A scenario file or a file of Intents and KPIProfiles, validated (what ``validate``
    does); :class:`SpecError` on anything wrong."""
    p = Path(path)
    docs = load_file(p)
    if docs and is_scenario(docs[0]):
        return parse_scenario_documents(docs, p)
    return parse_manifest_documents(docs, str(p))


def is_scenario(doc: Any) -> bool:
    """Whether a loaded document is a scenario (rather than an Intent or a KPIProfile)."""
    return isinstance(doc, dict) and "workloads" in doc and "kind" not in doc
