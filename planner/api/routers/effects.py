"""``/v1/effects``: the effect models' metadata (never their bytes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query

from planner.api import schemas, stored
from planner.api.dependencies import RuntimeDep, require_read_token
from planner.domain.errors import IntentPlannerError

router = APIRouter(
    prefix="/v1/effects", tags=["effects"], dependencies=[Depends(require_read_token)],
    responses={401: {"model": schemas.Problem, "description": "missing or invalid token"}})


@router.get("", response_model=schemas.EffectList, summary="Effect models (metadata only)",
            responses={503: {"model": schemas.Problem,
                             "description": "the knowledge base cannot be read now"}},
            description="Every stored version, newest first: training window, features, "
                        "node pools seen, samples, validation score, library versions. "
                        "`newest` marks the version the planner would pick (unless stale). "
                        "A stored version that cannot be read (e.g. a timestamp in the future) "
                        "is left out and counted in `skipped`, with the reason in `problems`.")
def list_effects(
    rt: RuntimeDep,
    intent: Annotated[str | None, Query(max_length=317, description="namespace/name",
                                        examples=["shop/checkout"])] = None,
    objective: Annotated[str | None, Query(max_length=63)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> schemas.EffectList:
    try:
        docs = rt.knowledge.effects(intent, with_blobs=False)
    except IntentPlannerError as exc:
        raise HTTPException(503, f"the knowledge base cannot be read: {exc}") from None
    not_after = rt.knowledge.effect_horizon()
    skipped = stored.Skipped("effects")
    seen: set[tuple[str, str]] = set()
    items: list[schemas.EffectOut] = []
    for doc in docs:
        doc.pop("blob", None)  # never serve model bytes, whatever the store returned
        if objective is not None and doc.get("objective") != objective:
            continue
        try:
            item = stored.effect(doc, not_after)
        except stored.Unreadable as exc:  # never "the newest": the next readable one is
            skipped.add(str(exc))
            continue
        pair = (item.intent, item.objective)
        item.newest = pair not in seen
        items.append(item)
        seen.add(pair)
    items = items[:limit]
    return schemas.EffectList(items=items, count=len(items), skipped=skipped.count,
                              problems=skipped.problems)
