"""A time limit on the request head: uvicorn's HTTP/1.1 protocol, plus a header-read timeout.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` but waits forever for
a request head that arrives slowly, a byte now and then ("slowloris": 20 half-sent requests
were held for over 150 s). :class:`HeadTimeoutProtocol` closes a connection whose request head
(request line and headers) is not complete ``head_timeout_s`` after the connection opened or
the previous response was sent. The body's time limit is
:class:`planner.api.limits.BodySizeLimit`'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol


class HeadTimeoutProtocol(H11Protocol):
    """:class:`~uvicorn.protocols.http.h11_impl.H11Protocol` with a request-head time limit
    (``head_timeout_s``, a class attribute set by :func:`protocol`)."""

    head_timeout_s: float = 10.0

    def __init__(self, config: Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.logger.info("closing a connection whose request head did not arrive within "
                             "%g s", self.head_timeout_s)
            self.transport.close()

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._waiting_for_head():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._waiting_for_head():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def protocol(head_timeout_s: float) -> type[HeadTimeoutProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with this head time limit."""
    return type("HeadTimeoutProtocol", (HeadTimeoutProtocol,),
                {"head_timeout_s": head_timeout_s})
