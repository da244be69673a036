"""Heterogeneous local HTTP backends with live metrics, for dispatch tests and the benchmark.

Each backend is an asyncio HTTP/1.1 server on 127.0.0.1 with ``workers`` workers of speed
``speed``: a request ``GET /work?ms=W`` waits (FIFO) for a free worker, which "serves" it by
sleeping ``W / speed`` milliseconds. Service capacity is therefore ``workers * speed`` times that of
a single speed-1 worker. ``GET /_metrics`` answers at once (outside the worker queue) with
cumulative counters as JSON; :class:`MetricsSampler` turns successive scrapes into the rates and
utilisations that feed :mod:`actuators.dispatch`.

By default the fleet runs in a child process (``python bench/harness/backends.py --specs JSON``)
so that the load generator's interpreter does not disturb the backends' timing; ``in_process=True``
runs the same servers on a background thread instead.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import http.client
import json
import math
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from typing import Any

_LATENCY_WINDOW_S = 5.0
_MAX_HEADER_BYTES = 16384


@dataclasses.dataclass(frozen=True)
class BackendSpec:
    """One backend: ``workers`` parallel workers, each serving ``speed`` units of work per unit
    of time; ``error_every`` > 0 answers every n-th request with HTTP 500 (after serving it)."""

    name: str
    workers: int
    speed: float = 1.0
    error_every: int = 0

    @property
    def capacity(self) -> float:
        return self.workers * self.speed


@dataclasses.dataclass(frozen=True)
class BackendSnapshot:
    """Cumulative counters of one backend at one instant (monotonic clock, seconds)."""

    name: str
    timestamp: float
    workers: int
    speed: float
    in_flight: int
    busy: int
    arrivals: int
    completed: int
    errors: int
    busy_seconds: float
    latency_p50: float | None
    latency_p95: float | None
    latency_p99: float | None


def _percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


class _Backend:
    """State and request handling of one backend (runs inside an asyncio loop)."""

    def __init__(self, spec: BackendSpec) -> None:
        self.spec = spec
        self._workers = asyncio.Semaphore(spec.workers)
        self.in_flight = 0
        self.busy = 0
        self.arrivals = 0
        self.completed = 0
        self.errors = 0
        self._busy_integral = 0.0
        self._busy_since = time.monotonic()
        self._latencies: collections.deque[tuple[float, float]] = collections.deque()

    def _set_busy(self, delta: int) -> None:
        now = time.monotonic()
        self._busy_integral += self.busy * (now - self._busy_since)
        self._busy_since = now
        self.busy += delta

    def snapshot(self) -> dict[str, Any]:
        now = time.monotonic()
        busy_seconds = self._busy_integral + self.busy * (now - self._busy_since)
        while self._latencies and self._latencies[0][0] < now - _LATENCY_WINDOW_S:
            self._latencies.popleft()
        recent = sorted(latency for _, latency in self._latencies)
        return {
            "name": self.spec.name,
            "timestamp": now,
            "workers": self.spec.workers,
            "speed": self.spec.speed,
            "in_flight": self.in_flight,
            "busy": self.busy,
            "arrivals": self.arrivals,
            "completed": self.completed,
            "errors": self.errors,
            "busy_seconds": busy_seconds,
            "latency_p50": _percentile(recent, 0.50),
            "latency_p95": _percentile(recent, 0.95),
            "latency_p99": _percentile(recent, 0.99),
        }

    async def serve(self, work_ms: float) -> int:
        start = time.monotonic()
        self.in_flight += 1
        self.arrivals += 1
        try:
            async with self._workers:
                self._set_busy(+1)
                try:
                    await asyncio.sleep(max(0.0, work_ms) / 1000.0 / self.spec.speed)
                finally:
                    self._set_busy(-1)
        finally:
            self.in_flight -= 1
        self.completed += 1
        status = 200
        if self.spec.error_every > 0 and self.completed % self.spec.error_every == 0:
            self.errors += 1
            status = 500
        done = time.monotonic()
        self._latencies.append((done, done - start))
        return status

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    await _respond(writer, 400, b"bad request\n", close=True)
                    return
                _method, target, version = parts
                headers = {}
                for line in lines[1:]:
                    key, sep, value = line.partition(":")
                    if sep:
                        headers[key.strip().lower()] = value.strip().lower()
                length = int(headers.get("content-length", "0") or "0")
                if length:
                    await reader.readexactly(length)
                close = headers.get("connection") == "close" or (
                    version == "HTTP/1.0" and headers.get("connection") != "keep-alive"
                )
                url = urllib.parse.urlsplit(target)
                if url.path == "/_metrics":
                    body = json.dumps(self.snapshot()).encode()
                    await _respond(writer, 200, body, close=close, json_body=True)
                elif url.path == "/work":
                    query = urllib.parse.parse_qs(url.query)
                    try:
                        work_ms = float(query.get("ms", ["1"])[0])
                    except ValueError:
                        work_ms = 1.0
                    status = await self.serve(work_ms)
                    await _respond(writer, status, f"{self.spec.name}\n".encode(), close=close)
                else:
                    await _respond(writer, 404, b"not found\n", close=close)
                if close:
                    return
        except ConnectionError:
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


async def _respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, *, close: bool, json_body: bool = False
) -> None:
    ctype = "application/json" if json_body else "text/plain"
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
        f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + body)
    await writer.drain()


async def _start_servers(
    specs: Sequence[BackendSpec], host: str
) -> tuple[list[asyncio.Server], dict[str, int]]:
    servers: list[asyncio.Server] = []
    ports: dict[str, int] = {}
    for spec in specs:
        backend = _Backend(spec)
        server = await asyncio.start_server(
            backend.handle, host, 0, limit=_MAX_HEADER_BYTES, backlog=1024
        )
        servers.append(server)
        ports[spec.name] = int(server.sockets[0].getsockname()[1])
    return servers, ports


def _specs_to_json(specs: Sequence[BackendSpec]) -> str:
    return json.dumps([dataclasses.asdict(spec) for spec in specs])


def _specs_from_json(text: str) -> list[BackendSpec]:
    return [BackendSpec(**item) for item in json.loads(text)]


class BackendFleet:
    """N backends on 127.0.0.1; use as a context manager (``start`` / ``stop``)."""

    def __init__(
        self, specs: Sequence[BackendSpec], *, in_process: bool = False, host: str = "127.0.0.1"
    ) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError("backend names must be unique")
        self.specs = tuple(specs)
        self.host = host
        self.in_process = in_process
        self.ports: dict[str, int] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop_event: asyncio.Event | None = None

    def __enter__(self) -> BackendFleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def address(self, name: str) -> tuple[str, int]:
        return self.host, self.ports[name]

    def start(self, timeout: float = 15.0) -> None:
        if self.in_process:
            self._start_thread(timeout)
        else:
            self._start_subprocess(timeout)

    def _start_subprocess(self, timeout: float) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--host", self.host]
        cmd += ["--specs", _specs_to_json(self.specs)]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._proc = proc
        stdout = proc.stdout
        assert stdout is not None
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not ready or not ready[0].strip():
            self.stop()
            raise RuntimeError("backend fleet did not start")
        self.ports = {str(k): int(v) for k, v in json.loads(ready[0]).items()}

    def _start_thread(self, timeout: float) -> None:
        started = threading.Event()
        errors: list[BaseException] = []

        async def main() -> None:
            self._stop_event = asyncio.Event()
            try:
                servers, self.ports = await _start_servers(self.specs, self.host)
            except BaseException as exc:  # reported to the starting thread
                errors.append(exc)
                started.set()
                return
            started.set()
            await self._stop_event.wait()
            for server in servers:
                server.close()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="backend-fleet", daemon=True)
        self._thread.start()
        if not started.wait(timeout) or errors:
            raise RuntimeError(f"backend fleet did not start: {errors}")

    def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            with contextlib.suppress(Exception):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._loop is not None and self._stop_event is not None:
            loop, event = self._loop, self._stop_event
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._loop = None

    def snapshot(self, name: str, timeout: float = 2.0) -> BackendSnapshot:
        """Scrape ``/_metrics`` of one backend."""
        conn = http.client.HTTPConnection(self.host, self.ports[name], timeout=timeout)
        try:
            conn.request("GET", "/_metrics")
            data = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        return BackendSnapshot(**data)

    def snapshots(self) -> dict[str, BackendSnapshot]:
        return {spec.name: self.snapshot(spec.name) for spec in self.specs}

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait (bounded) until no backend has requests in flight."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(snap.in_flight == 0 for snap in self.snapshots().values()):
                return True
            time.sleep(0.1)
        return False


@dataclasses.dataclass(frozen=True)
class LiveMetrics:
    """Windowed per-backend metrics derived from two snapshots."""

    name: str
    timestamp: float
    in_flight: int
    request_rate: float
    error_rate: float
    utilisation: float
    latency_p50: float | None
    latency_p95: float | None
    latency_p99: float | None


class MetricsSampler:
    """Turns successive scrapes into rates over a sliding window of ``window_s`` seconds."""

    def __init__(self, fleet: BackendFleet, window_s: float = 2.0) -> None:
        self.fleet = fleet
        self.window_s = window_s
        self._history: dict[str, collections.deque[BackendSnapshot]] = {}

    def sample(self) -> dict[str, LiveMetrics]:
        out: dict[str, LiveMetrics] = {}
        for spec in self.fleet.specs:
            try:
                snap = self.fleet.snapshot(spec.name)
            except (OSError, ValueError, http.client.HTTPException):
                continue
            history = self._history.setdefault(spec.name, collections.deque())
            history.append(snap)
            while len(history) > 2 and snap.timestamp - history[1].timestamp >= self.window_s:
                history.popleft()
            out[spec.name] = derive(history[0], snap)
        return out


def derive(old: BackendSnapshot, new: BackendSnapshot) -> LiveMetrics:
    """Rates between two snapshots of one backend (zero rates if they are the same instant)."""
    dt = new.timestamp - old.timestamp
    if dt <= 0:
        rate = err = util = 0.0
    else:
        rate = (new.completed - old.completed) / dt
        err = (new.errors - old.errors) / dt
        util = min(1.0, max(0.0, (new.busy_seconds - old.busy_seconds) / (dt * new.workers)))
    return LiveMetrics(
        name=new.name,
        timestamp=new.timestamp,
        in_flight=new.in_flight,
        request_rate=rate,
        error_rate=err,
        utilisation=util,
        latency_p50=new.latency_p50,
        latency_p95=new.latency_p95,
        latency_p99=new.latency_p99,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of unsorted values; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


def _serve_main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--specs", required=True, help="JSON list of BackendSpec fields")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    specs = _specs_from_json(args.specs)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        servers, ports = await _start_servers(specs, args.host)
        print(json.dumps(ports), flush=True)

        def watch_stdin() -> None:  # parent closed our stdin (or died): shut down
            with contextlib.suppress(Exception):
                sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
        await stop.wait()
        for server in servers:
            server.close()

    asyncio.run(main())


if __name__ == "__main__":
    _serve_main()
