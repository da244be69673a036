"""Request body size and time limits: a pure ASGI middleware that answers 413 before the body
is parsed, and 408 when the body does not arrive in time.

It rejects a declared ``Content-Length`` above the limit at once, and counts the bytes of a
body sent without one (chunked) as they arrive, stopping at the limit. A client that sends its
body slower than ``timeout_s`` in all is answered 408 and does not hold the request any longer
(the time to send the request head is bounded by :mod:`planner.api.slowclients`).
"""

from __future__ import annotations

import json

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def _reject(self, send: Send, status: int = 413, detail: str | None = None) -> None:
        body = json.dumps({"detail": detail or f"request body larger than {self.max_bytes} "
                                               "bytes"}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._reject(send)
                    return
        # Read the (small) body first, then replay it: the framework would turn an error
        # raised while it reads the body into a 400.
        chunks: list[bytes] = []
        received = 0
        with anyio.move_on_after(self.timeout_s) as scope_:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break  # disconnected
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > self.max_bytes:
                    await self._reject(send)
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if scope_.cancelled_caught:
            await self._reject(send, 408, f"request body not received within {self.timeout_s:g} "
                               "s (INTENT_PLANNER_CLIENT_TIMEOUT_S); send it at once")
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
