"""``/v1/intents``: the intents, their status (conditions, last plan) and their events.

An intent's status comes from the controller of this process when it plans the intent, else
from the knowledge base's ``status`` collection (written by whichever controller plans it).
"""

from __future__ import annotations

import logging
import math
import urllib.parse
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from planner.api import schemas
from planner.api.dependencies import RuntimeDep, require_read_token
from planner.api.preview import json_safe
from planner.api.runtime import Runtime
from planner.domain.errors import IntentPlannerError, TemporaryError
from planner.domain.intents import Intent

log = logging.getLogger(__name__)

NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500

router = APIRouter(
    prefix="/v1/intents", tags=["intents"], dependencies=[Depends(require_read_token)],
    responses={401: {"model": schemas.Problem, "description": "missing or invalid token"}})

Namespace = Annotated[str, Path(min_length=1, max_length=63, pattern=NAMESPACE_PATTERN,
                                examples=["shop"])]
Name = Annotated[str, Path(min_length=1, max_length=253, pattern=NAME_PATTERN,
                           examples=["checkout"])]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": schemas.Problem, "description": "no such intent"}}
KB_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": schemas.Problem, "description": "the knowledge base cannot be read now"}}


def _kb_statuses(rt: Runtime) -> dict[str, dict[str, Any]]:
    try:
        return rt.knowledge.statuses()
    except IntentPlannerError as exc:
        log.warning("statuses unavailable from the knowledge base: %s", exc)
        return {}


def _status(rt: Runtime, key: str, stored: dict[str, dict[str, Any]]
            ) -> tuple[dict[str, Any] | None, str]:
    live = rt.controller.status(key)
    if live is not None:
        return json_safe(live), "controller"
    doc = stored.get(key)
    if doc is not None and isinstance(doc.get("status"), dict):
        return json_safe(doc["status"]), "knowledge-base"
    return None, "none"


def _summary(rt: Runtime, key: str, intent: Intent | None,
             stored: dict[str, dict[str, Any]]) -> schemas.IntentSummary:
    namespace, _, name = key.partition("/")
    status, source = _status(rt, key, stored)
    st = status or {}
    conditions = {str(c.get("type")): str(c.get("status")) for c in st.get("conditions", [])
                  if isinstance(c, dict)}
    last_plan = st.get("lastPlan") if isinstance(st.get("lastPlan"), dict) else None
    return schemas.IntentSummary(
        key=key, namespace=namespace, name=name,
        workload=intent.workload_key if intent is not None else None,
        active=intent.spec.active if intent is not None else None,
        priority=intent.spec.priority if intent is not None else None,
        planner=rt.controller.admin.planner_for(namespace),
        objectives_met=st.get("objectivesMet") if isinstance(st.get("objectivesMet"), str)
        else None,
        conditions=conditions,
        last_action=(st.get("lastAction") or None) if isinstance(st.get("lastAction"), str)
        else None,
        last_plan_time=str(last_plan["time"]) if last_plan and last_plan.get("time") else None,
        status_from=source)  # type: ignore[arg-type]


def _known(rt: Runtime) -> tuple[dict[str, Intent], dict[str, dict[str, Any]]]:
    try:
        intents = {i.key: i for i in rt.source.intents()}
    except IntentPlannerError as exc:
        raise HTTPException(503, f"the intent source cannot be read: {exc}") from None
    return intents, _kb_statuses(rt)


@router.get("", response_model=schemas.IntentList, summary="List intents with their status")
def list_intents(rt: RuntimeDep) -> schemas.IntentList:
    intents, stored = _known(rt)
    keys = sorted(set(intents) | set(stored))
    items = [_summary(rt, k, intents.get(k), stored) for k in keys]
    return schemas.IntentList(items=items, count=len(items))


@router.get("/{namespace}/{name}", response_model=schemas.IntentDetail, responses=NOT_FOUND,
            summary="One intent: spec, status (conditions) and last plan")
def get_intent(namespace: Namespace, name: Name, rt: RuntimeDep) -> schemas.IntentDetail:
    key = f"{namespace}/{name}"
    intents, stored = _known(rt)
    intent = intents.get(key)
    if intent is None and key not in stored:
        raise HTTPException(404, f"unknown intent {key!r}")
    status, source = _status(rt, key, stored)
    out_status = None
    if status is not None:
        try:
            out_status = schemas.StatusOut.model_validate(status)
        except pydantic.ValidationError as exc:
            log.warning("status of %s does not match the schema: %s", key, exc)
    spec = intent.spec.model_dump(mode="json", by_alias=True) if intent is not None else None
    return schemas.IntentDetail(
        key=key, namespace=namespace, name=name,
        workload=intent.workload_key if intent is not None else None,
        planner=rt.controller.admin.planner_for(namespace), spec=spec, status=out_status,
        status_from=source if out_status is not None else "none")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ events
CURSOR_PATTERN = r"^[0-9]{1,18}\.[0-9]{1,9}$"


def encode_cursor(until_us: int, skip: int) -> str:
    """``<until>.<skip>``: events before ``until`` microseconds, skipping ``skip`` of them.
    Treat it as opaque; every string of this shape is a valid cursor."""
    return f"{until_us}.{skip}"


def decode_cursor(cursor: str) -> tuple[int, int]:
    until, sep, skip = cursor.partition(".")
    if not (sep and until.isdigit() and skip.isdigit()):
        raise _bad_cursor("not a cursor this API issued")
    return int(until), int(skip)


def _bad_cursor(problem: str) -> HTTPException:
    return HTTPException(422, [{"loc": ["query", "cursor"], "msg": f"{problem}; fix: pass the "
                                "next_cursor of the previous page, or no cursor for the first",
                                "type": "invalid_cursor"}])


def _event(doc: dict[str, Any]) -> schemas.EventOut:
    safe = json_safe(doc)
    try:
        return schemas.EventOut.model_validate(safe)
    except pydantic.ValidationError:
        # A document written by another version: keep what matches the schema.
        return schemas.EventOut(time=float(safe.get("time") or 0.0),
                                intent=str(safe.get("intent")))


@router.get(
    "/{namespace}/{name}/events", response_model=schemas.EventPage,
    responses={**NOT_FOUND, **KB_UNAVAILABLE},
    summary="The intent's events, newest first, paginated",
    description="One event per intent per cycle (observed objectives, configuration, load, "
                "pods, the plan). Pages are stable while new events arrive: follow "
                "`next_cursor` (or the `next` URL) until it is null.")
def list_events(
    namespace: Namespace, name: Name, rt: RuntimeDep, request: Request,
    since: Annotated[float | None, Query(
        description="only events at or after this time (seconds since the epoch)",
        ge=0, le=1e11)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=40, pattern=CURSOR_PATTERN,
                                        description="next_cursor of the previous page")]
    = None,
) -> schemas.EventPage:
    key = f"{namespace}/{name}"
    intents, stored = _known(rt)
    until_us, skip = decode_cursor(cursor) if cursor else (None, 0)
    until = until_us / 1e6 if until_us is not None else None
    try:
        if key not in intents and key not in stored and rt.knowledge.count_events(key) == 0:
            raise HTTPException(404, f"unknown intent {key!r}")
        docs = rt.knowledge.events(key, since=since, until=until, limit=limit + 1, skip=skip)
    except TemporaryError as exc:  # not an empty page: that would read as "no events"
        raise HTTPException(503, f"the knowledge base cannot be read: {exc}") from None
    more = len(docs) > limit
    docs = docs[:limit]
    next_cursor = next_url = None
    if more and docs:
        # The first page fixes the window: later pages exclude events recorded since.
        anchor = until_us if until_us is not None else \
            math.floor(float(docs[0]["time"]) * 1e6) + 1
        next_cursor = encode_cursor(anchor, skip + limit)
        query = {"limit": limit, "cursor": next_cursor}
        if since is not None:
            query["since"] = since
        next_url = f"{request.url.path}?{urllib.parse.urlencode(query)}"
    return schemas.EventPage(items=[_event(d) for d in docs], limit=limit,
                             next_cursor=next_cursor, next=next_url)
