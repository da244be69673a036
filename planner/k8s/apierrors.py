"""Kubernetes API errors as the planner's two kinds of error.

* no answer (connection refused or reset, timeout, TLS), 429 Too Many Requests, 5xx, and
  409 Conflict (someone else changed the object: the next cycle re-reads it) ->
  :class:`planner.domain.errors.TemporaryError`;
* every other 4xx (400, 403, 404, 422, ...) -> :class:`planner.domain.errors.PermanentError`
carrying
  the API server's own message (:class:`NotFound` for 404).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from planner.domain.errors import IntentPlannerError, PermanentError, TemporaryError

TEMPORARY_STATUSES = frozenset({409, 429, 500, 502, 503, 504})


class KubernetesTemporaryError(TemporaryError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubernetesPermanentError(PermanentError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KubernetesPermanentError):
    """404: the object (or the resource type) does not exist."""


def api_message(exc: ApiException) -> str:
    """The ``message`` of the API's ``Status`` body, else the HTTP reason."""
    body = exc.body
    if body:
        try:
            data = json.loads(body)
            if isinstance(data, dict) and data.get("message"):
                return str(data["message"])
        except (TypeError, ValueError):
            text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
            return text.strip()[:300]
    return str(exc.reason or "no details")


def translate(exc: BaseException, what: str) -> IntentPlannerError:
    """``exc`` (from the official client or urllib3) as a temporary or permanent error."""
    if isinstance(exc, ApiException):
        status = exc.status or None
        msg = f"{what}: HTTP {status} {exc.reason or ''}: {api_message(exc)}".replace("  ", " ")
        if status is None:
            return KubernetesTemporaryError(f"{what}: {exc.reason or 'no answer'}")
        if status in TEMPORARY_STATUSES or status >= 500:
            return KubernetesTemporaryError(msg, status)
        if status == 404:
            return NotFound(msg, status)
        return KubernetesPermanentError(msg, status)
    return KubernetesTemporaryError(f"{what}: API server unreachable: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def api_call(what: str) -> Iterator[None]:
    """Run one API call; re-raise its failure as :func:`translate` says."""
    try:
        yield
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise translate(exc, what) from exc


def read_body(resp: Any) -> dict[str, Any]:
    """The JSON body of a ``_preload_content=False`` response (and release the connection)."""
    try:
        data = resp.data
    finally:
        release = getattr(resp, "release_conn", None)
        if callable(release):
            release()
    out: dict[str, Any] = json.loads(data) if data else {}
    return out
