"""``/v1/intents``: the intents, their status (conditions, last plan), their events and their
pod details.

An intent's status comes from the controller of this process when it plans the intent, else
from the knowledge base's ``status`` collection (written by whichever controller plans it).
"""

from __future__ import annotations

import logging
import math
import urllib.parse
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import pydantic
from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request

from planner.api import schemas, stored
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
DEFAULT_DETAIL_LIMIT = 5
MAX_DETAIL_LIMIT = 20
"""Pod details are 30-90 KiB each: a page of them is kept to about a megabyte or two."""

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


def _kb_statuses(rt: Runtime) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The statuses stored in the knowledge base and, when it cannot be read, a warning."""
    try:
        return rt.knowledge.statuses(), []
    except IntentPlannerError as exc:
        log.warning("statuses unavailable from the knowledge base: %s", exc)
        return {}, [f"the knowledge base cannot be read ({exc}): statuses written by other "
                    "processes are missing"]


def _unknowable(keys: list[str], rt: Runtime, warnings: list[str]) -> None:
    """503 when the knowledge base cannot be read and this process's controller has no
    status of any of ``keys`` either (``serve`` over a shared store): an answer without
    statuses would read as "nothing planned yet"."""
    if warnings and not any(rt.controller.status(k) is not None for k in keys):
        raise HTTPException(503, warnings[0].replace(
            "statuses written by other processes are missing", "the statuses are unknown; "
            "try again when it answers (GET /readyz)"))


def _status(rt: Runtime, key: str, kb_statuses: dict[str, dict[str, Any]]
            ) -> tuple[dict[str, Any] | None, str]:
    live = rt.controller.status(key)
    if live is not None:
        return json_safe(live), "controller"
    status = stored.status(kb_statuses.get(key))
    if status is not None:
        return status, "knowledge-base"
    return None, "none"


def _summary(rt: Runtime, key: str, intent: Intent | None,
             stored: dict[str, dict[str, Any]]) -> schemas.IntentSummary:
    namespace, _, name = key.partition("/")
    status, source = _status(rt, key, stored)
    st = status or {}
    listed = st.get("conditions")
    conditions = {str(c.get("type")): str(c.get("status"))
                  for c in (listed if isinstance(listed, list) else []) if isinstance(c, dict)}
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


def _known(rt: Runtime
           ) -> tuple[dict[str, Intent], dict[str, dict[str, Any]], list[str]]:
    try:
        intents = {i.key: i for i in rt.source.intents()}
    except IntentPlannerError as exc:
        raise HTTPException(503, f"the intent source cannot be read: {exc}") from None
    kb_statuses, warnings = _kb_statuses(rt)
    return intents, kb_statuses, warnings


@router.get("", response_model=schemas.IntentList, summary="List intents with their status",
            responses=KB_UNAVAILABLE,
            description="While the knowledge base cannot be read, the statuses of this "
                        "process's controller are served with a warning; without any (e.g. "
                        "`serve` over a shared MongoDB) the answer is 503.")
def list_intents(rt: RuntimeDep) -> schemas.IntentList:
    intents, kb_statuses, warnings = _known(rt)
    keys = sorted(set(intents) | set(kb_statuses))
    _unknowable(keys, rt, warnings)
    items = [_summary(rt, k, intents.get(k), kb_statuses) for k in keys]
    return schemas.IntentList(items=items, count=len(items), warnings=warnings)


@router.get("/{namespace}/{name}", response_model=schemas.IntentDetail,
            responses={**NOT_FOUND, **KB_UNAVAILABLE},
            summary="One intent: spec, status (conditions) and last plan")
def get_intent(namespace: Namespace, name: Name, rt: RuntimeDep) -> schemas.IntentDetail:
    key = f"{namespace}/{name}"
    intents, kb_statuses, warnings = _known(rt)
    intent = intents.get(key)
    _unknowable([key], rt, warnings)  # also: an intent only the knowledge base may know
    if intent is None and key not in kb_statuses:
        raise HTTPException(404, f"unknown intent {key!r}")
    status, source = _status(rt, key, kb_statuses)
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
        status_from=source if out_status is not None else "none",  # type: ignore[arg-type]
        warnings=warnings)


# ------------------------------------------------------------------------------ events
CURSOR_PATTERN = r"^[0-9]{1,18}\.[0-9]{1,9}$"
MAX_ANCHOR_US = 10**17
"""The latest window end a cursor carries (year 5138, within the pattern's 18 digits)."""


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


SINCE = Annotated[float | None, Query(
    description="only documents at or after this time (seconds since the epoch)", ge=0, le=1e11)]
LIMIT = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size")]
CURSOR = Annotated[str | None, Query(max_length=40, pattern=CURSOR_PATTERN,
                                     description="next_cursor of the previous page")]


@router.get(
    "/{namespace}/{name}/events", response_model=schemas.EventPage,
    responses={**NOT_FOUND, **KB_UNAVAILABLE},
    summary="The intent's events, newest first, paginated",
    description="One event per intent per cycle (observed objectives, configuration, load, "
                "pods per pool and state, the plan). An event with `pod_detail: true` has "
                "every pod at `.../pods`. Pages are stable while new events arrive: follow "
                "`next_cursor` (or the `next` URL) until it is null.")
def list_events(
    namespace: Namespace, name: Name, rt: RuntimeDep, request: Request,
    since: SINCE = None, limit: LIMIT = DEFAULT_LIMIT, cursor: CURSOR = None,
) -> schemas.EventPage:
    items, problems, next_cursor, next_url = _page(
        rt, request, f"{namespace}/{name}", since, limit, cursor, "events",
        rt.knowledge.events, stored.event)
    return schemas.EventPage(items=items, limit=limit, next_cursor=next_cursor, next=next_url,
                             skipped=problems.count, problems=problems.problems)


@router.get(
    "/{namespace}/{name}/pods", response_model=schemas.PodDetailPage,
    responses={**NOT_FOUND, **KB_UNAVAILABLE},
    summary="Every pod and hosting node, when they changed: newest first, paginated",
    description="Recorded beside the events that say `pod_detail: true` (same `time`), when "
                "the intent's pods changed, at most every few minutes: `pods` and `nodes` "
                "are tables (one list per field). Paginated as `.../events`, at most "
                f"{MAX_DETAIL_LIMIT} a page.")
def list_pod_details(
    namespace: Namespace, name: Name, rt: RuntimeDep, request: Request,
    since: SINCE = None,
    until: Annotated[float | None, Query(
        description="only documents before this time (with `since`: the detail of the event "
                    "at `since`, `until` just after it)", ge=0, le=1e11)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_DETAIL_LIMIT, description="page size")]
    = DEFAULT_DETAIL_LIMIT,
    cursor: CURSOR = None,
) -> schemas.PodDetailPage:
    items, problems, next_cursor, next_url = _page(
        rt, request, f"{namespace}/{name}", since, limit, cursor, "pod details",
        rt.knowledge.pod_details, stored.pod_detail, until)
    return schemas.PodDetailPage(items=items, limit=limit, next_cursor=next_cursor,
                                 next=next_url, skipped=problems.count,
                                 problems=problems.problems)


T = TypeVar("T")


def _page(rt: Runtime, request: Request, key: str, since: float | None, limit: int,
          cursor: str | None, what: str,
          read: Callable[..., list[dict[str, Any]]], serve: Callable[[dict[str, Any]], T],
          until_s: float | None = None
          ) -> tuple[list[T], stored.Skipped, str | None, str | None]:
    """One page of ``key``'s documents from ``read`` (``events`` or ``pod_details``): the
    items ``serve`` makes of them, those left out, the next cursor and URL. ``until_s``:
    the first page's end (exclusive); later pages take theirs from the cursor."""
    intents, kb_statuses, _ = _known(rt)
    until_us, skip = decode_cursor(cursor) if cursor else (
        None if until_s is None else math.ceil(until_s * 1e6), 0)
    until = until_us / 1e6 if until_us is not None else None
    try:
        if key not in intents and key not in kb_statuses and \
                rt.knowledge.count_events(key) == 0:
            raise HTTPException(404, f"unknown intent {key!r}")
        docs = read(key, since=since, until=until, limit=limit + 1, skip=skip)
    except TemporaryError as exc:  # not an empty page: that would read as "no events"
        raise HTTPException(503, f"the knowledge base cannot be read: {exc}") from None
    more = len(docs) > limit
    docs = docs[:limit]
    skipped = stored.Skipped(what)
    items: list[T] = []
    for doc in docs:
        try:
            items.append(serve(doc))
        except stored.Unreadable as exc:
            skipped.add(f"{key}: {exc}")
    next_cursor = next_url = None
    if more and docs:
        anchor = until_us if until_us is not None else _anchor(docs)
        # The next page asks for ``time < anchor``: skip what this page showed of that.
        counted = sum(1 for d in docs
                      if stored.is_number(d.get("time")) and d["time"] < anchor / 1e6)
        next_cursor = encode_cursor(anchor, skip + counted)
        query = {"limit": limit, "cursor": next_cursor}
        if since is not None:
            query["since"] = since
        next_url = f"{request.url.path}?{urllib.parse.urlencode(query)}"
    return items, skipped, next_cursor, next_url


def _anchor(docs: list[dict[str, Any]]) -> int:
    """The first page fixes the window (later pages exclude events recorded since): just
    after its newest event time (microseconds), at most :data:`MAX_ANCHOR_US`."""
    times = [float(d["time"]) for d in docs
             if stored.is_number(d.get("time")) and math.isfinite(d["time"])]
    if not times:
        return MAX_ANCHOR_US
    return min(math.floor(max(times) * 1e6) + 1, MAX_ANCHOR_US)
