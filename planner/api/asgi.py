"""Helpers for the API's pure ASGI middlewares (:mod:`planner.api.limits`,
:mod:`planner.api.finite`): a JSON answer sent without the framework, and a ``receive`` that
replays a body the middleware has already read."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Receive, Send


async def send_json(send: Send, status: int, payload: Any, close: bool = False) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(data)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the application: ``body`` once, then whatever the client sends next
    (a disconnect)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
