"""``/v1/effects``: the effect models' metadata (never their bytes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query

from planner.api import schemas
from planner.api.dependencies import RuntimeDep, require_read_token
from planner.api.preview import json_safe
from planner.domain.errors import IntentPlannerError
from planner.domain.status import rfc3339

router = APIRouter(
    prefix="/v1/effects", tags=["effects"], dependencies=[Depends(require_read_token)],
    responses={401: {"model": schemas.Problem, "description": "missing or invalid token"}})


def _effect(doc: dict[str, Any], newest: bool) -> schemas.EffectOut:
    ts = float(doc.get("timestamp") or 0.0)
    meta = doc.get("metadata")
    return schemas.EffectOut(
        intent=str(doc.get("intent")), objective=str(doc.get("objective")), timestamp=ts,
        trained_at=rfc3339(ts), static=bool(doc.get("static")), kind=str(doc.get("kind")),
        format=str(doc["format"]) if doc.get("format") is not None else None, newest=newest,
        metadata=json_safe(meta) if isinstance(meta, dict) else {})


@router.get("", response_model=schemas.EffectList, summary="Effect models (metadata only)",
            responses={503: {"model": schemas.Problem,
                             "description": "the knowledge base cannot be read now"}},
            description="Every stored version, newest first: training window, features, "
                        "node pools seen, samples, validation score, library versions. "
                        "`newest` marks the version the planner would pick (unless stale).")
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
    seen: set[tuple[str, str]] = set()
    items: list[schemas.EffectOut] = []
    for doc in docs:
        doc.pop("blob", None)  # never serve model bytes, whatever the store returned
        pair = (str(doc.get("intent")), str(doc.get("objective")))
        if objective is not None and pair[1] != objective:
            continue
        items.append(_effect(doc, pair not in seen))
        seen.add(pair)
    items = items[:limit]
    return schemas.EffectList(items=items, count=len(items))
