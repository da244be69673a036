"""Intent and KPIProfile: what a service owner declares.

Both load from the same YAML a user would ``kubectl apply`` (apiVersion/kind/metadata/spec).
Field names follow the CRDs in ``crds/`` (camelCase in YAML, snake_case in Python).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from planner.domain.errors import SpecError
from planner.domain.safeload import LoadError, load_file
from planner.domain.validation import validate_strict

API_GROUP = "intent-planner.io"
API_VERSION = f"{API_GROUP}/v1alpha1"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""A Kubernetes namespace (RFC 1123 label): no ``/``, ``.`` or ``..``."""
MIN_LATENCY_MS = 1.0
"""Smallest plausible latency target (ms): below what a request through a Kubernetes
Service takes; a smaller one is a unit mistake (seconds written for milliseconds) or 0."""


class KPIType(StrEnum):
    LATENCY = "latency"
    THROUGHPUT = "throughput"
    AVAILABILITY = "availability"
    POWER = "power"
    COST = "cost"

    @property
    def minimized_by_default(self) -> bool:
        return self in (KPIType.LATENCY, KPIType.POWER, KPIType.COST)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              allow_inf_nan=False)


class Metadata(_Spec):
    name: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    namespace: str = Field(default="default", min_length=1, max_length=63, pattern=DNS_LABEL)
    generation: int = Field(default=1, ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    uid: str | None = None
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    # Server-populated fields: accepted so that ``kubectl get -o yaml`` output loads.
    creation_timestamp: str | None = Field(default=None, alias="creationTimestamp")
    deletion_timestamp: str | None = Field(default=None, alias="deletionTimestamp")
    generate_name: str | None = Field(default=None, alias="generateName")
    finalizers: list[str] = Field(default_factory=list)
    owner_references: list[dict[str, Any]] = Field(default_factory=list, alias="ownerReferences")
    managed_fields: list[dict[str, Any]] = Field(default_factory=list, alias="managedFields")


class KPIProfileSpec(_Spec):
    type: KPIType
    minimize: bool | None = None
    query: str | None = Field(default=None, min_length=1)
    percentile: float | None = Field(default=None, gt=0, lt=100)
    endpoint: str | None = None
    unit: str | None = None

    @field_validator("percentile")
    @classmethod
    def _percentile_for_latency(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v is not None and info.data.get("type") not in (KPIType.LATENCY, None):
            raise ValueError("percentile is only meaningful for type latency")
        return v

    @property
    def minimizes(self) -> bool:
        return self.type.minimized_by_default if self.minimize is None else self.minimize

    @property
    def latency_percentile(self) -> float:
        return self.percentile if self.percentile is not None else 95.0


class KPIProfile(_Spec):
    api_version: Literal["intent-planner.io/v1alpha1"] = Field(
        default="intent-planner.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["KPIProfile"] = "KPIProfile"
    metadata: Metadata
    spec: KPIProfileSpec
    status: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


class TargetRef(_Spec):
    kind: Literal["Deployment", "StatefulSet", "ReplicaSet"] = "Deployment"
    name: str = Field(min_length=1)
    api_version: str = Field(default="apps/v1", alias="apiVersion")


class Objective(_Spec):
    name: str = Field(min_length=1, max_length=63)
    value: float = Field(gt=0)
    """Checked against its KPIProfile's type by :func:`implausible_target`."""
    measured_by: str = Field(alias="measuredBy", min_length=1)
    tolerance: float = Field(default=0.0, ge=0, le=1)

    def profile_key(self, namespace: str) -> str:
        """``measuredBy`` as ``namespace/name`` (a bare name is in the intent's namespace)."""
        return self.measured_by if "/" in self.measured_by else f"{namespace}/{self.measured_by}"


class UseCase(_Spec):
    """What the workload is and how it is served: the owner's description (issue 15).

    ``class`` and ``name`` say what the workload does (``ai``/``detect``, ``media``/``transcode``,
    ``gaming``/``render``, ...): free DNS labels, shown in the status and recorded with every
    event so that workloads of one kind can be compared. ``device`` pins the device (``cpu``,
    ``gpu``) or lets the planner choose (``auto``). ``dispatch`` chooses how requests are spread
    over the pods: ``balance`` (the admin's policy, ``slo`` by default), ``squeeze`` (pack onto
    as few pods as possible up to a threshold, so that idle pods can be removed) or ``manual``
    (the owner's rules); ``dispatchParams`` are that policy's parameters. With
    ``horizontallyScalable: false`` the planner never changes the replica count: only size,
    device, placement and weights."""

    workload_class: str = Field(alias="class", min_length=1, max_length=63, pattern=DNS_LABEL)
    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL)
    device: Literal["auto", "cpu", "gpu"] = "auto"
    dispatch: Literal["balance", "squeeze", "manual"] = "balance"
    dispatch_params: dict[str, Any] = Field(default_factory=dict, alias="dispatchParams")
    horizontally_scalable: bool = Field(default=True, alias="horizontallyScalable")

    @field_validator("dispatch_params")
    @classmethod
    def _params_need_a_policy(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if v and info.data.get("dispatch", "balance") == "balance":
            raise ValueError("dispatchParams are the squeeze or manual policy's parameters; "
                             "with dispatch: balance the admin's dispatch.policyParams apply "
                             "(remove dispatchParams, or set dispatch: squeeze or manual)")
        return v

    def as_dict(self) -> dict[str, Any]:
        """The use case as the CRD writes it (camelCase keys, defaults included)."""
        return self.model_dump(by_alias=True)


class IntentSpec(_Spec):
    target_ref: TargetRef = Field(alias="targetRef")
    priority: float = Field(default=0.5, ge=0.01, le=1.0)
    active: bool = True
    objectives: list[Objective] = Field(min_length=1, max_length=5)
    use_case: UseCase | None = Field(default=None, alias="useCase")
    """What the workload is, which device it needs, how requests are dispatched
    (:class:`UseCase`); ``None``: the planner chooses the device, ``balance`` dispatch,
    horizontally scalable."""
    regions: list[Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL)]] | None \
        = Field(default=None, min_length=1, max_length=100)
    """Data residency: only node pools in these regions may expose the workload's Service
    (and so run its pods, which follow the exposure; docs/regions.md). ``None``: any."""

    @field_validator("regions")
    @classmethod
    def _unique_regions(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(v) != len(set(v)):
            raise ValueError("regions must be unique")
        return v

    @field_validator("objectives")
    @classmethod
    def _unique_objectives(cls, v: list[Objective]) -> list[Objective]:
        names = [o.name for o in v]
        if len(names) != len(set(names)):
            raise ValueError("objective names must be unique")
        return v


class Intent(_Spec):
    api_version: Literal["intent-planner.io/v1alpha1"] = Field(
        default="intent-planner.io/v1alpha1", alias="apiVersion"
    )
    kind: Literal["Intent"] = "Intent"
    metadata: Metadata
    spec: IntentSpec
    status: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def workload_key(self) -> str:
        return f"{self.metadata.namespace}/{self.spec.target_ref.name}"


_ALLOWED: dict[str, dict[str, list[str]]] = {}


def _allowed_keys(model: type[BaseModel], prefix: str, out: dict[str, list[str]]) -> None:
    names = [f.alias or n for n, f in model.model_fields.items()]
    out[prefix or "(document)"] = names
    for n, f in model.model_fields.items():
        ann = f.annotation
        sub = prefix + "." + (f.alias or n) if prefix else (f.alias or n)
        for cand in (ann, *get_args(ann)):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                _allowed_keys(cand, sub, out)


def _allowed(model: type[BaseModel]) -> dict[str, list[str]]:
    key = model.__name__
    if key not in _ALLOWED:
        out: dict[str, list[str]] = {}
        _allowed_keys(model, "", out)
        _ALLOWED[key] = out
    return _ALLOWED[key]


def parse_intent(doc: Mapping[str, Any], source: str = "", prefix: str = "") -> Intent:
    """Validate one Intent document (strict types, as the CRD's schema); raise
    :class:`SpecError` naming the field and the fix."""
    return validate_strict(Intent, dict(doc), source, prefix, _allowed(Intent))


def parse_profile(doc: Mapping[str, Any], source: str = "", prefix: str = "") -> KPIProfile:
    """Validate one KPIProfile document (strict types, as the CRD's schema); raise
    :class:`SpecError` naming the field and the fix."""
    return validate_strict(KPIProfile, dict(doc), source, prefix, _allowed(KPIProfile))


def parse_documents(
    docs: Iterable[Mapping[str, Any]], source: str = ""
) -> tuple[list[Intent], list[KPIProfile]]:
    """Split a stream of manifests into intents and profiles; other kinds are an error."""
    intents: list[Intent] = []
    profiles: list[KPIProfile] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, Mapping):
            raise SpecError(source, f"document[{i}]", "not a mapping", "give a YAML mapping")
        kind = doc.get("kind")
        where = f"{source}#{i}" if source else f"document[{i}]"
        if kind == "Intent":
            intents.append(parse_intent(doc, where))
        elif kind == "KPIProfile":
            profiles.append(parse_profile(doc, where))
        else:
            raise SpecError(
                where, "kind", f"unsupported kind {kind!r}", "use kind: Intent or kind: KPIProfile"
            )
    check_references(intents, profiles, source)
    return intents, profiles


def objective_profiles(intent: Intent, profiles: Mapping[str, KPIProfile]
                       ) -> tuple[dict[str, KPIProfile], list[tuple[int, str]]]:
    """The KPIProfile of each of ``intent``'s objectives, by objective name, from ``profiles``
    (keyed ``namespace/name``); and the objectives whose profile is missing, as
    (index in ``spec.objectives``, the profile key it names)."""
    found: dict[str, KPIProfile] = {}
    missing: list[tuple[int, str]] = []
    for i, obj in enumerate(intent.spec.objectives):
        ref = obj.profile_key(intent.metadata.namespace)
        prof = profiles.get(ref)
        if prof is None:
            missing.append((i, ref))
        else:
            found[obj.name] = prof
    return found, missing


def implausible_target(objective: Objective, profile: KPIProfile) -> tuple[str, str] | None:
    """(problem, fix) when ``objective``'s value cannot be what was meant for its profile's
    type: an availability outside (0, 1] (99.5 for 0.995), a latency target below
    :data:`MIN_LATENCY_MS`; ``None`` when it is plausible."""
    v = objective.value
    kind = profile.spec.type
    if kind is KPIType.AVAILABILITY and not 0 < v <= 1:
        fix = (f"write it as a fraction: {v / 100:g} for {v:g} %" if 1 < v <= 100
               else "give a fraction in (0, 1], e.g. 0.999")
        return f"availability target {v:g} is not a fraction in (0, 1]", fix
    if kind is KPIType.LATENCY and v < MIN_LATENCY_MS:
        return (f"latency target {v:g} ms is below {MIN_LATENCY_MS:g} ms",
                f"give the target in milliseconds, at least {MIN_LATENCY_MS:g} (e.g. 50)")
    return None


def check_references(
    intents: Iterable[Intent], profiles: Iterable[KPIProfile], source: str = ""
) -> None:
    """Every objective must name a known KPIProfile, with a target plausible for its type
    (:func:`implausible_target`)."""
    by_key = {p.key: p for p in profiles}
    for intent in intents:
        for i, obj in enumerate(intent.spec.objectives):
            ref = obj.profile_key(intent.metadata.namespace)
            if ref not in by_key:
                have = ", ".join(sorted(by_key)) or "none"
                raise SpecError(
                    source or intent.key,
                    f"{intent.key}: spec.objectives[{i}].measuredBy",
                    f"unknown KPIProfile {ref!r}",
                    f"define a KPIProfile named {ref!r} or reference one of: {have}",
                )
            bad = implausible_target(obj, by_key[ref])
            if bad is not None:
                raise SpecError(source or intent.key, f"{intent.key}: spec.objectives[{i}].value",
                                *bad)


def load_manifests(path: str | Path) -> tuple[list[Intent], list[KPIProfile]]:
    """Load a multi-document YAML (or ``.json``) file of Intents and KPIProfiles, with the
    limits of :mod:`planner.domain.safeload`."""
    p = Path(path)
    return parse_manifest_documents(load_file(p), str(p))


def parse_manifest_documents(docs: list[Any], source: str
                             ) -> tuple[list[Intent], list[KPIProfile]]:
    """:func:`parse_documents` of a file's documents, which must not be empty."""
    if not docs:
        raise LoadError(source, "(document)", "no documents",
                        "give at least one Intent or KPIProfile")
    return parse_documents(docs, source)


def objective_met(value: float | None, objective: Objective, profile: KPIProfile) -> bool | None:
    """Whether an observed value meets the objective, honouring ``tolerance``; None if unknown."""
    if value is None:
        return None
    if profile.spec.minimizes:
        return value <= objective.value * (1.0 + objective.tolerance)
    return value >= objective.value * (1.0 - objective.tolerance)
