"""``POST /v1/plans:preview``: the plan the planner would make now, never applied."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException

from planner.api import preview, schemas
from planner.api.dependencies import (
    ExecutorDep,
    MetricsDep,
    RuntimeDep,
    SettingsDep,
    require_token,
)

router = APIRouter(tags=["plans"])

EXAMPLES: dict[str, Any] = {
    "inline": {
        "summary": "An Intent inline",
        "description": "The same document you would `kubectl apply`.",
        "value": {"intent": schemas.EXAMPLE_INTENT},
    },
    "by-name-what-if": {
        "summary": "A known intent, what if the load were 900 req/s",
        "value": {"ref": {"namespace": "shop", "name": "checkout"},
                  "overrides": {"load": 900.0}},
    },
    "other-planner": {
        "summary": "A known intent, planned by the IDO-style A* planner",
        "value": {"ref": {"namespace": "shop", "name": "checkout"}, "planner": "astar"},
    },
}

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": schemas.BadRequest, "description": "the body cannot be decoded (not UTF-8), "
          "or holds a number that is not finite (NaN, Infinity, 1e999): the field is named"},
    408: {"model": schemas.Problem, "description": "the body did not arrive within "
                                                   "INTENT_PLANNER_CLIENT_TIMEOUT_S"},
    401: {"model": schemas.Problem, "description": "missing or invalid token"},
    404: {"model": schemas.Problem, "description": "the referenced intent is unknown"},
    413: {"model": schemas.Problem, "description": "request body too large"},
    503: {"model": schemas.Problem, "description": "the cluster or a dependency cannot be "
                                                   "read right now"},
    504: {"model": schemas.Problem, "description": "the preview exceeded its time limit"},
}


@router.post(
    "/v1/plans:preview", response_model=schemas.PreviewOut, responses=ERRORS,
    dependencies=[Depends(require_token)], summary="Preview a plan (never applied)",
    description="Plans an intent against the current observed state, optionally with what-if "
                "overrides, on copies of the live planner and actuators: nothing is applied, "
                "recorded or reported, and cooldowns are untouched. A 422 names the field "
                "(`loc`, `field`) and the fix.")
async def preview_plan(
    body: Annotated[schemas.PreviewRequest, Body(openapi_examples=EXAMPLES)],
    rt: RuntimeDep, settings: SettingsDep, metrics: MetricsDep, executor: ExecutorDep,
) -> schemas.PreviewOut:
    future = executor.submit(preview.preview, rt, body)
    try:
        out = await asyncio.wait_for(asyncio.wrap_future(future), settings.preview_timeout_s)
    except TimeoutError:
        future.cancel()
        metrics.previews.labels("timeout").inc()
        raise HTTPException(504, f"the preview took longer than {settings.preview_timeout_s:g} s "
                                 "(INTENT_PLANNER_PREVIEW_TIMEOUT_S) and was abandoned; "
                                 "nothing was applied") from None
    except preview.PreviewInvalid:
        metrics.previews.labels("invalid").inc()
        raise
    except preview.PreviewFailed as exc:
        metrics.previews.labels("not_found" if exc.status == 404 else "unavailable").inc()
        raise
    except Exception:
        metrics.previews.labels("error").inc()
        raise
    metrics.previews.labels("ok").inc()
    metrics.plan_latency.labels("preview").observe(out.planning_ms / 1000.0)
    return out
