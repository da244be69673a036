"""Request body size and time limits: a pure ASGI middleware that answers 413 before the body
is parsed, and 408 when the body does not arrive in time.

It rejects a declared ``Content-Length`` above the limit at once, and counts the bytes of a
body sent without one (chunked) as they arrive, stopping at the limit. A client that sends its
body slower than ``timeout_s`` in all is answered 408 and does not hold the request any longer
(the time to send the request head is bounded by :mod:`planner.api.slowclients`).
"""

from __future__ import annotations

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from planner.api.asgi import replaying, send_json


class BodySizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def _reject(self, send: Send, status: int = 413, detail: str | None = None) -> None:
        await send_json(send, status, {"detail": detail or f"request body larger than "
                                                           f"{self.max_bytes} bytes"},
                        close=True)

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
        await self.app(scope, replaying(b"".join(chunks), receive), send)
