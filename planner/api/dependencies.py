"""FastAPI dependencies as ``Annotated`` aliases; tests override the ``get_*`` functions
(``app.dependency_overrides[get_runtime] = ...``)."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from planner.api.metrics import ApiMetrics
from planner.api.runtime import Runtime
from planner.api.settings import Settings

REALM = "intent-planner"

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearerAuth",
    description="`Authorization: Bearer <token>`; tokens from INTENT_PLANNER_API_TOKENS "
                "(or INTENT_PLANNER_API_TOKENS_FILE).")


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_tokens(request: Request) -> frozenset[str]:
    tokens: frozenset[str] = request.app.state.tokens
    return tokens


def get_metrics(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics


def get_optional_runtime(request: Request) -> Runtime | None:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    return runtime


def get_runtime(runtime: Annotated[Runtime | None, Depends(get_optional_runtime)]) -> Runtime:
    if runtime is None:
        raise HTTPException(503, "the planner runtime is not started yet")
    return runtime


def get_executor(request: Request) -> ThreadPoolExecutor:
    executor: ThreadPoolExecutor | None = getattr(request.app.state, "executor", None)
    if executor is None:
        raise HTTPException(503, "the API is not started (its lifespan has not run)")
    return executor


SettingsDep = Annotated[Settings, Depends(get_settings)]
TokensDep = Annotated[frozenset[str], Depends(get_tokens)]
MetricsDep = Annotated[ApiMetrics, Depends(get_metrics)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
OptionalRuntimeDep = Annotated[Runtime | None, Depends(get_optional_runtime)]
ExecutorDep = Annotated[ThreadPoolExecutor, Depends(get_executor)]
CredentialsDep = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _unauthorized(detail: str, error: str | None, metrics: ApiMetrics) -> HTTPException:
    metrics.auth_failures.inc()
    challenge = f'Bearer realm="{REALM}"' + (f', error="{error}"' if error else "")
    return HTTPException(401, detail, headers={"WWW-Authenticate": challenge})


def check_token(credentials: HTTPAuthorizationCredentials | None, tokens: frozenset[str],
                metrics: ApiMetrics) -> None:
    if credentials is None:
        raise _unauthorized("missing bearer token: send 'Authorization: Bearer <token>'",
                            None, metrics)
    if not tokens:
        raise _unauthorized("no API token is configured on the server: set "
                            "INTENT_PLANNER_API_TOKENS", "invalid_token", metrics)
    given = credentials.credentials.encode()
    if not any(secrets.compare_digest(given, t.encode()) for t in tokens):
        raise _unauthorized("invalid bearer token", "invalid_token", metrics)


def require_token(credentials: CredentialsDep, settings: SettingsDep, tokens: TokensDep,
                  metrics: MetricsDep) -> None:
    """Endpoints that cost real compute (plan previews): a token unless auth is off."""
    if settings.auth:
        check_token(credentials, tokens, metrics)


def require_read_token(credentials: CredentialsDep, settings: SettingsDep, tokens: TokensDep,
                       metrics: MetricsDep) -> None:
    """The ``GET /v1/...`` endpoints: a token when auth and ``auth_reads`` are on."""
    if settings.auth and settings.auth_reads:
        check_token(credentials, tokens, metrics)
