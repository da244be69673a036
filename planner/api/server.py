"""Serving the app with uvicorn: in the foreground (``serve``) or in a thread beside the
controller loop (``run --api``)."""

from __future__ import annotations

import secrets
import threading
import time

import uvicorn
from fastapi import FastAPI

from planner.api import slowclients
from planner.api.settings import Settings


def with_token(settings: Settings) -> tuple[Settings, str | None]:
    """``settings`` with a generated token when auth is on and none is configured (the
    token is returned so that the caller can print it once), like Jupyter does."""
    if not settings.auth or settings.tokens():
        return settings, None
    token = secrets.token_urlsafe(24)
    return settings.model_copy(update={"api_tokens": (token,)}), token


def _config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    settings: Settings = getattr(app.state, "settings", None) or Settings()
    return uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                          lifespan="on", http=slowclients.protocol(settings.client_timeout_s))


def serve(app: FastAPI, host: str, port: int) -> None:
    """Serve until interrupted (SIGINT/SIGTERM)."""
    uvicorn.Server(_config(app, host, port)).run()


class BackgroundServer:
    """Serves ``app`` from a daemon thread; :meth:`stop` shuts it down gracefully."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        self.server = uvicorn.Server(_config(app, host, port))
        self.thread = threading.Thread(target=self.server.run, name="intent-planner-api",
                                       daemon=True)

    def start(self, timeout_s: float = 10.0) -> bool:
        """Start and wait until it listens; ``False`` if it did not (e.g. port in use)."""
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.server.started:
                return True
            if not self.thread.is_alive():
                return False
            time.sleep(0.02)
        return self.server.started

    def stop(self, timeout_s: float = 5.0) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout_s)
