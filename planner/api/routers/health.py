"""``/healthz`` (the process answers), ``/readyz`` (it can serve) and ``/metrics``: always
open, for probes and Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from planner.api import checks, schemas
from planner.api.dependencies import MetricsDep, OptionalRuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=schemas.HealthOut, summary="Liveness")
def healthz() -> schemas.HealthOut:
    return schemas.HealthOut()


@router.get("/readyz", response_model=schemas.ReadyOut, summary="Readiness",
            description="Ready when the controller completed at least one cycle and the "
                        "knowledge base answers; 503 otherwise (with the failing checks).",
            responses={503: {"model": schemas.ReadyOut, "description": "not ready"}})
def readyz(runtime: OptionalRuntimeDep, response: Response) -> schemas.ReadyOut:
    out = checks.readiness(runtime)
    if not out.ready:
        response.status_code = 503
    return out


@router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics",
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format"}})
def metrics(m: MetricsDep) -> Response:
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
