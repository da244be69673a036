"""JSON request bodies with ``NaN``, ``Infinity`` or a number too large for a float.

Python's JSON decoder accepts them (standard JSON does not), pydantic then either accepts them or
fails in a way that ends in a 500 (the error cannot be rendered as JSON). :class:`FiniteNumbers`,
a pure ASGI middleware, looks at a JSON body before anything else parses it and answers ``400``
naming the first such field (``loc``, ``field``) and the fix. Bodies that are not JSON (or not
well-formed) pass through: the framework's own validation answers those.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from planner.api.asgi import replaying, send_json

METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
FIX = "send a finite number, or leave the field out"


@dataclass(frozen=True)
class _NonFinite:
    text: str


def _float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def non_finite(body: bytes) -> tuple[list[str | int], str] | None:
    """The path to the first non-finite number of a JSON ``body`` and how it was written;
    ``None`` when there is none, or when ``body`` is not well-formed JSON."""
    try:
        doc = json.loads(body, parse_constant=_NonFinite, parse_float=_float)
    except (ValueError, RecursionError):  # not JSON (UnicodeDecodeError is a ValueError)
        return None
    stack: list[tuple[list[str | int], Any]] = [([], doc)]
    while stack:  # depth-first, in document order; no recursion however deep the body
        path, value = stack.pop()
        if isinstance(value, _NonFinite):
            return path, value.text
        if isinstance(value, dict):
            items: list[tuple[str | int, Any]] = list(value.items())
        elif isinstance(value, list):
            items = list(enumerate(value))
        else:
            continue
        stack.extend(([*path, key], item) for key, item in reversed(items))
    return None


def field_name(path: list[str | int]) -> str:
    """``["intent", "spec", "objectives", 0, "value"]`` -> ``intent.spec.objectives[0].value``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(the body)"


def problem(path: list[str | int], text: str) -> dict[str, Any]:
    """The 400's ``detail`` item, in the shape of FastAPI's validation errors."""
    field = field_name(path)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return {"loc": ["body", *path],
            "msg": f"{shown} is not a finite number; fix: {FIX}",
            "type": "non_finite_number", "field": field, "fix": FIX}


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    return True  # FastAPI reads a body without a content type as JSON


class FiniteNumbers:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in METHODS_WITH_BODY \
                or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:  # the body's size is bounded by BodySizeLimit, outside this middleware
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        found = non_finite(body)
        if found is not None:
            await send_json(send, 400, {"detail": [problem(*found)]})
            return
        await self.app(scope, replaying(body, receive), send)
