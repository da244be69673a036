"""``/healthz``, ``/readyz`` and ``/metrics`` over HTTP, from a daemon thread.

``/healthz`` answers 200 while ``live()`` is true (the operator's event loop keeps beating),
``/readyz`` 200 once ``ready()`` says so (the watch cache has its initial lists and the
operator started), with the reason as the body otherwise (503). ``/metrics`` serves the given
Prometheus registries (the watch cache's counters, the planner's own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


class HealthServer:
    def __init__(self, port: int, live: Callable[[], bool],
                 ready: Callable[[], tuple[bool, str]],
                 registries: Sequence[CollectorRegistry] = (), host: str = "0.0.0.0") -> None:
        self.live = live
        self.ready = ready
        self.registries = list(registries)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    ok = server.live()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"event loop stalled\n")
                elif path == "/readyz":
                    ok, why = server.ready()
                    self._send(200 if ok else 503, (why or "ok").encode() + b"\n")
                elif path == "/metrics":
                    body = b"".join(generate_latest(r) for r in server.registries)
                    self._send(200, body, CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="health",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
