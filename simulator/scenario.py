"""Scenario files: a cluster, its workloads and their load traces, the intents, admin bounds.

A scenario is one YAML file (see ``examples/scenarios/``). Every field is validated; an error
names the field and the fix (:class:`planner.domain.errors.SpecError`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.domain.admin import AdminConfig
from planner.domain.errors import SpecError
from planner.domain.intents import Intent, KPIProfile, check_references, parse_intent, parse_profile
from planner.domain.validation import spec_error
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


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _dur(v: Any) -> float:
    try:
        return parse_duration(v)
    except ValueError as exc:
        raise ValueError(str(exc)) from None


class PoolSpec(_S):
    name: str = Field(min_length=1)
    region: str = "default"
    nodes: int = Field(ge=1)
    cpu: float = Field(gt=0, description="cores per node")
    gpus: int = Field(default=0, ge=0, description="GPUs per node")
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
    at: Seconds
    rate: float = Field(ge=0)
    _parse = field_validator("at", mode="before")(classmethod(lambda cls, v: _dur(v)))


class StepTraceSpec(_S):
    kind: Literal["step"]
    initial: float = Field(ge=0)
    steps: list[StepSpec] = Field(min_length=1)
    noise: float = Field(default=0.0, ge=0, le=1)


class DiurnalTraceSpec(_S):
    kind: Literal["diurnal"]
    base: float = Field(ge=0)
    amplitude: float = Field(ge=0)
    period: Seconds = 86400.0
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
    mean_gap: Seconds = 600.0
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
    interval: Seconds = 60.0
    noise: float = Field(default=0.0, ge=0, le=1)
    _parse = field_validator("interval", mode="before")(classmethod(lambda cls, v: _dur(v)))

    @model_validator(mode="after")
    def _ordered(self) -> RandomWalkTraceSpec:
        if not self.low <= self.initial <= self.high:
            raise ValueError("need low <= initial <= high")
        if self.interval <= 0:
            raise ValueError("interval must be longer than 0")
        return self


TraceSpec = Annotated[
    ConstantTraceSpec | StepTraceSpec | DiurnalTraceSpec | BurstyTraceSpec | CsvTraceSpec
    | RandomWalkTraceSpec,
    Field(discriminator="kind"),
]


class WorkloadSpec(_S):
    name: str = Field(min_length=1)
    namespace: str = "default"
    replicas: int = Field(default=1, ge=0)
    cpu: float = Field(default=1.0, gt=0)
    device: Literal["cpu", "gpu"] = "cpu"
    pool: str | None = None
    service: ServiceModel
    trace: TraceSpec

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClusterSpec(_S):
    pools: list[PoolSpec] = Field(min_length=1)


class ScenarioSpec(_S):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=0)
    duration: Seconds = 3600.0
    step_s: float = Field(default=5.0, gt=0, le=60)
    kpi_window_s: float = Field(default=60.0, gt=0)
    cluster: ClusterSpec
    workloads: list[WorkloadSpec] = Field(min_length=1)
    admin: AdminConfig = AdminConfig()
    manifests: list[dict[str, Any]] = Field(min_length=1)

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
        return self


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
        t = workload.trace
        s = seed * 1000 + sum(map(ord, workload.key))
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
        return CsvTrace(path, t.time_column, t.rate_column, t.loop, t.scale, t.noise, s)


def parse_scenario(doc: Any, source: str = "", base_dir: Path | None = None) -> Scenario:
    if not isinstance(doc, dict):
        raise SpecError(source, "(document)", "a scenario must be a YAML mapping",
                        "start from a file in examples/scenarios/")
    try:
        spec = ScenarioSpec.model_validate(doc)
    except pydantic.ValidationError as exc:
        raise spec_error(exc, source) from None
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
        actuators.create(admin.actuators, admin)
    except SpecError as exc:
        raise SpecError(source, f"admin.{exc.field}", exc.problem, exc.fix) from None


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(str(p), "(file)", f"cannot read: {exc}", "give a readable scenario "
                        "YAML file, e.g. examples/scenarios/diurnal-shop.yaml") from None
    except yaml.YAMLError as exc:
        raise SpecError(str(p), "(document)", f"not valid YAML: {exc}", "fix the syntax") from None
    return parse_scenario(doc, str(p), p.parent)
