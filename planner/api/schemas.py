"""Request and response models of the REST API (they make its OpenAPI document)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.json_schema import SkipJsonSchema

from planner.domain import intents
from planner.domain.plan import REASON_KINDS

EXAMPLE_INTENT: dict[str, Any] = {
    "apiVersion": "intent-planner.io/v1alpha1",
    "kind": "Intent",
    "metadata": {"name": "checkout", "namespace": "shop"},
    "spec": {
        "targetRef": {"kind": "Deployment", "name": "checkout"},
        "priority": 0.8,
        "objectives": [
            {"name": "p95latency", "value": 60, "measuredBy": "p95latency"},
            {"name": "availability", "value": 0.995, "measuredBy": "availability"},
        ],
    },
}

EXAMPLE_CONFIG: dict[str, Any] = {"replicas": 8, "cpu": 1.0, "device": "cpu", "pool": None}
EXAMPLE_ACTION: dict[str, Any] = {"actuator": "replicas", "workload": "shop/checkout",
                  "params": {"replicas": 10, "from": 8}, "reason": "scale out 8 -> 10"}


class Problem(BaseModel):
    """An error: what went wrong and, where possible, what to do about it."""

    detail: str = Field(examples=["unknown intent 'shop/cart'"])


class BadRequest(BaseModel):
    """A body that cannot be read: not UTF-8 (``detail`` a sentence), or a non-finite number
    (``detail`` a list naming the field, as a 422 does: ``loc``, ``msg``, ``type``, ``field``,
    ``fix``)."""

    detail: str | list[dict[str, Any]] = Field(examples=[[{
        "loc": ["body", "overrides", "load"],
        "msg": "NaN is not a finite number; fix: send a finite number, or leave the field out",
        "type": "non_finite_number", "field": "overrides.load",
        "fix": "send a finite number, or leave the field out"}]])


# ------------------------------------------------------------------------ shared
class ConfigOut(BaseModel):
    """A workload configuration: the knobs a plan turns."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_CONFIG]})

    replicas: int
    cpu: float = Field(description="cores per pod")
    device: str
    pool: str | None = Field(description="node pool the workload is pinned to (null: any)")


class ActionOut(BaseModel):
    """One change an actuator would apply."""

    model_config = ConfigDict(json_schema_extra={"examples": [EXAMPLE_ACTION]})

    actuator: str
    workload: str
    params: dict[str, Any]
    reason: str


# ------------------------------------------------------------------------ preview
class Overrides(BaseModel):
    """What-if changes to the observed workload before planning."""

    model_config = ConfigDict(extra="forbid",
                              json_schema_extra={"examples": [{"load": 900.0}]})

    load: float | None = Field(default=None, ge=0, le=1e9,
                               description="request rate (req/s) instead of the observed one")
    replicas: int | None = Field(default=None, ge=0, le=100_000,
                                 description="current replica count instead of the observed")
    cpu: float | None = Field(default=None, gt=0, le=1024, description="cores per pod")
    device: Literal["cpu", "gpu"] | None = None
    pool: str | None = Field(default=None, min_length=1, max_length=253,
                             description="node pool the workload is pinned to")


class IntentRef(BaseModel):
    """An intent the controller already plans, by namespace and name."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(default="default", min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def intent_json_schema() -> dict[str, Any]:
    """The Intent document's JSON schema, self-contained (no ``$ref``), for the OpenAPI
    document. The body is still validated by :func:`planner.domain.intents.parse_intent`, whose
    errors name the field and the fix."""
    schema = intents.Intent.model_json_schema(by_alias=True)
    out: dict[str, Any] = _inline_refs(schema, schema.get("$defs", {}))
    out["description"] = "an Intent document (apiVersion, kind, metadata, spec), as you " \
        "would `kubectl apply` it"
    return out


InlineIntent = Annotated[dict[str, Any], WithJsonSchema(intent_json_schema())]


class PreviewRequest(BaseModel):
    """An intent (inline, the document you would ``kubectl apply``, or a reference to a known
    one), optional what-if overrides and an optional planner name."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "oneOf": [{"required": ["intent"]}, {"required": ["ref"]}]})

    intent: InlineIntent | SkipJsonSchema[None] = None
    ref: IntentRef | SkipJsonSchema[None] = Field(default=None, description="a known intent")
    overrides: Overrides | None = None
    planner: str | None = Field(default=None, min_length=1, max_length=63,
                                description="planner plugin (default: the admin's for the "
                                            "intent's namespace)")

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("intent", "ref"):
                if key in data and data[key] is None:
                    raise ValueError(f"'{key}' must be an object: leave it out instead of null")
        return data

    @model_validator(mode="after")
    def _one_intent(self) -> PreviewRequest:
        if (self.intent is None) == (self.ref is None):
            raise ValueError("give exactly one of 'intent' (inline) or 'ref' "
                             "({namespace, name})")
        return self


class ModelUsed(BaseModel):
    """Which predictor the planner used for one objective."""

    objective: str
    source: str = Field(description="'learned' (an effect model from the knowledge base), "
                                    "'explicit' (the queueing estimate), 'computed' (e.g. "
                                    "cost from node-pool prices) or 'none'",
                        examples=["learned"])
    kind: str | None = Field(default=None, description="model family, for learned models")
    samples: int | None = None
    trained_at: float | None = Field(default=None, description="model timestamp (s)")
    validation: dict[str, Any] | None = None


class ReasonOut(BaseModel):
    """One part of the plan's reason."""

    kind: str = Field(description="one of " + ", ".join(REASON_KINDS)
                      + " (see planner.domain.plan.REASON_KINDS)", examples=["choice"])
    text: str


class StepOut(BaseModel):
    """The configuration after each action, and what the planner predicted for it at the
    planned load. Step 0 is the configuration the plan starts from; a last step with
    ``this_cycle: false`` is the target when this cycle's actions do not reach it yet."""

    step: int
    action: ActionOut | None
    config: ConfigOut
    predicted: dict[str, float | None] = Field(description="expected value per objective")
    bound: dict[str, float | None] = Field(
        description="conservative bound per objective (the value the planner plans against)")
    cost_per_hour: float | None
    this_cycle: bool


class PreviewOut(BaseModel):
    """The plan the planner would make now. Nothing is applied."""

    intent: str
    planner: str
    applied: bool = Field(default=False, description="always false: a preview never acts")
    observed_at: float = Field(description="time of the cluster snapshot (s)")
    observed: dict[str, float | None] = Field(description="measured value per objective")
    desired: dict[str, float]
    observed_rate: float | None = Field(description="request rate planned from (req/s)")
    planned_rate: float | None = Field(
        description="the load the plan was sized for (req/s; forecast, headroom and load "
                    "corrections included); null when the planner does not size for a load")
    overrides: Overrides | None
    current: ConfigOut
    target: ConfigOut
    chosen: ConfigOut | None = Field(
        default=None, description="the configuration the planner's search chose, when it "
                                  "differs from the target (clipped to the admin's bounds)")
    actions: list[ActionOut]
    steps: list[StepOut]
    predicted: dict[str, float] = Field(description="the planner's prediction at the target")
    cost_per_hour: float | None
    current_cost_per_hour: float | None
    reasons: list[str] = Field(description="the plan's reason parts, then notes on the "
                                           "preview itself")
    reason_parts: list[ReasonOut] = Field(default_factory=list,
                                          description="the plan's reason, structured")
    exploratory: bool
    models: list[ModelUsed]
    planning_ms: float
    total_ms: float


# ------------------------------------------------------------------------ intents
class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ConditionOut(_Open):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")


class LastPlanOut(_Open):
    time: str | None = None
    planner: str | None = None
    reason: str | None = None
    actions: list[ActionOut] = Field(default_factory=list)
    predicted: dict[str, float | None] = Field(default_factory=dict)


class StatusOut(_Open):
    """The intent's status, as the CRD's ``status`` subresource."""

    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    conditions: list[ConditionOut] = Field(default_factory=list)
    objectives_met: str | None = Field(default=None, alias="objectivesMet")
    current_objectives: dict[str, float | None] = Field(default_factory=dict,
                                                        alias="currentObjectives")
    desired_objectives: dict[str, float | None] = Field(default_factory=dict,
                                                        alias="desiredObjectives")
    last_action: str | None = Field(default=None, alias="lastAction")
    last_plan: LastPlanOut | None = Field(default=None, alias="lastPlan")


class IntentSummary(BaseModel):
    key: str
    namespace: str
    name: str
    workload: str | None
    active: bool | None
    priority: float | None
    planner: str | None
    objectives_met: str | None
    conditions: dict[str, str] = Field(description="condition type -> status")
    last_action: str | None
    last_plan_time: str | None
    status_from: Literal["controller", "knowledge-base", "none"]


class IntentList(BaseModel):
    items: list[IntentSummary]
    count: int
    warnings: list[str] = Field(
        default_factory=list, description="why the answer may be incomplete (e.g. the "
        "knowledge base cannot be read: statuses written by other processes are missing)")


class IntentDetail(BaseModel):
    key: str
    namespace: str
    name: str
    workload: str | None
    planner: str | None
    spec: dict[str, Any] | None = Field(description="the intent's spec (null when only its "
                                                    "stored status is known)")
    status: StatusOut | None
    status_from: Literal["controller", "knowledge-base", "none"]
    warnings: list[str] = Field(default_factory=list,
                                description="why the answer may be incomplete")


class EventOut(_Open):
    """One event (one intent, one cycle); further keys as stored (``pod_groups``,
    ``node_pools``, resources). ``pod_detail``: every pod of this event is at
    ``.../pods`` (the document with the same ``time``)."""

    time: float
    intent: str
    workload: str | None = None
    current: dict[str, float | None] = Field(default_factory=dict)
    desired: dict[str, float | None] = Field(default_factory=dict)
    config: dict[str, Any] | None = None
    load: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    planner: str | None = None
    exploratory: bool = False
    applied: bool | None = None
    pod_detail: bool = False


class _Page(BaseModel):
    """A page of stored documents, newest first (events, pod details)."""

    limit: int
    next_cursor: str | None = Field(description="pass as ?cursor= for the next (older) page")
    next: str | None = Field(description="the next page's URL (path and query)")
    skipped: int = Field(default=0, description="stored documents on this page left out "
                                                "because they cannot be read (see problems)")
    problems: list[str] = Field(default_factory=list,
                                description="why (at most 10), naming the field")


class EventPage(_Page):
    items: list[EventOut]


class PodDetailOut(_Open):
    """Every pod and hosting node of an intent's workload at ``time`` (the event of that time
    says ``pod_detail: true``): ``pods`` and ``nodes`` are tables, one list per field."""

    time: float
    intent: str
    workload: str | None = None
    pods: dict[str, list[Any]] | list[dict[str, Any]] | None = None
    nodes: dict[str, list[Any]] | dict[str, dict[str, Any]] | None = None


class PodDetailPage(_Page):
    items: list[PodDetailOut]


# ------------------------------------------------------------------------ effects
class EffectOut(BaseModel):
    """An effect model's envelope and metadata; the model bytes are never served."""

    intent: str
    objective: str
    timestamp: float
    trained_at: str
    static: bool
    kind: str
    format: str | None
    newest: bool = Field(description="the newest version for its intent and objective")
    metadata: dict[str, Any]


class EffectList(BaseModel):
    items: list[EffectOut]
    count: int
    skipped: int = Field(default=0, description="stored versions left out because they cannot "
                                                "be read, e.g. a timestamp in the future")
    problems: list[str] = Field(default_factory=list,
                                description="why (at most 10), naming the field")


# ------------------------------------------------------------------------ health
class HealthOut(BaseModel):
    status: Literal["ok"] = "ok"


class CheckOut(BaseModel):
    ok: bool
    detail: str


class ReadyOut(BaseModel):
    ready: bool
    checks: dict[str, CheckOut]
