"""Test support: a local HTTP server that records every GET (path and headers) and answers
``server.reply`` = (status, body); a ``str`` body is sent as is, anything else as JSON."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server: Any = self.server
        server.seen.append((self.path, dict(self.headers)))
        status, body = server.reply
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def recording_server(reply: tuple[int, Any] = (200, {})) -> Any:
    """A :class:`Recorder` server on 127.0.0.1 (not started: call ``serve_forever`` in a
    thread); ``seen`` lists the requests, ``reply`` is what it answers."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen, server.reply = [], reply
    return server
