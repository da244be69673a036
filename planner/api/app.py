"""The FastAPI application factory.

``create_app(settings, runtime)`` serves a runtime that is already running (``intent-planner
run --api``: the controller loop owns it). ``create_app(settings, runtime_factory=...)`` builds
one from the settings when the app starts and closes it at shutdown (``intent-planner serve``
passes :func:`planner.cli.embedded.serve_runtime`). The API never builds a cluster itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

import planner
from planner.api import checks, preview
from planner.api.finite import FiniteNumbers
from planner.api.limits import BodySizeLimit
from planner.api.metrics import ApiMetrics
from planner.api.routers import effects, health, intents, plans
from planner.api.runtime import Runtime
from planner.api.settings import Settings

log = logging.getLogger(__name__)

DESCRIPTION = """\
What the planner knows and would do, before it acts.

* `POST /v1/plans:preview` plans an intent (inline or by name, with optional what-if overrides)
  on copies of the live planner and actuators: **nothing is applied**.
* `GET /v1/intents`, `/v1/intents/{namespace}/{name}` and `.../events`: intents, their status
  (Kubernetes-style conditions, last plan) and their events, paginated.
* `GET /v1/effects`: the learned effect models' metadata (never the model bytes).
* `/healthz`, `/readyz`, `/metrics`: open, for probes and Prometheus.

Authentication: `Authorization: Bearer <token>` (tokens from `INTENT_PLANNER_API_TOKENS`).
Previews always need a token while auth is on; the `GET /v1/...` endpoints too unless
`INTENT_PLANNER_AUTH_READS=false`.
"""

TAGS = [
    {"name": "plans", "description": "Plan previews."},
    {"name": "intents", "description": "Intents, their status and events."},
    {"name": "effects", "description": "Effect models (metadata)."},
    {"name": "health", "description": "Probes and metrics (no token needed)."},
]


RuntimeFactory = Callable[[Settings], Runtime]


def create_app(settings: Settings | None = None, runtime: Runtime | None = None, *,
               runtime_factory: RuntimeFactory | None = None) -> FastAPI:
    settings = settings if settings is not None else Settings()
    metrics = ApiMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = app.state.runtime is None
        if owned:
            if runtime_factory is None:
                raise RuntimeError("create_app needs a runtime or a runtime_factory to serve")
            app.state.runtime = await anyio.to_thread.run_sync(runtime_factory, settings)
        rt: Runtime = app.state.runtime
        executor = ThreadPoolExecutor(settings.preview_workers,
                                      thread_name_prefix="intent-planner-preview")
        app.state.executor = executor
        with rt.lock:
            rt.controller.hooks.append(metrics.cycle_hook)
        try:
            yield
        finally:
            with rt.lock:
                if metrics.cycle_hook in rt.controller.hooks:
                    rt.controller.hooks.remove(metrics.cycle_hook)
            app.state.executor = None
            executor.shutdown(wait=False, cancel_futures=True)
            if owned:
                app.state.runtime = None
                rt.close()

    app = FastAPI(title="intent-planner", version=planner.__version__, description=DESCRIPTION,
                  openapi_tags=TAGS, lifespan=lifespan)
    app.state.settings = settings
    app.state.tokens = settings.tokens()
    app.state.runtime = runtime
    app.state.executor = None
    app.state.metrics = metrics
    if settings.auth and not app.state.tokens:
        log.warning("API auth is on but no token is configured: protected endpoints answer "
                    "401 (set INTENT_PLANNER_API_TOKENS)")
    metrics.watch(lambda: app.state.runtime, lambda: checks.knowledge_base(app.state.runtime))
    app.add_middleware(FiniteNumbers)  # inside BodySizeLimit: sees bounded bodies only
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes,
                       timeout_s=settings.client_timeout_s)

    @app.exception_handler(preview.PreviewInvalid)
    async def _invalid(request: Request, exc: preview.PreviewInvalid) -> JSONResponse:
        return JSONResponse({"detail": exc.detail()}, status_code=422)

    @app.exception_handler(preview.PreviewFailed)
    async def _failed(request: Request, exc: preview.PreviewFailed) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    app.include_router(plans.router)
    app.include_router(intents.router)
    app.include_router(effects.router)
    app.include_router(health.router)
    return app
