"""Test support: a real Prometheus server and a tiny exporter with known traffic, on 127.0.0.1.

* :class:`Exporter` serves ``http_request_duration_seconds`` (histogram) and
  ``http_requests_total{code=...}`` (counter), labelled ``namespace``/``service``, built with
  prometheus-client. A background thread "serves" a fixed batch of requests per service every
  :data:`TICK` seconds; batches and scrapes exclude each other, so every scrape sees whole
  batches and the quantiles/ratios Prometheus computes are exact (only the request *rate*
  depends on timing).
* :class:`PrometheusServer` runs the real ``prometheus`` binary with a temporary data dir and
  a generated config (1 s scrape interval) on a free port, waits for ``/-/ready`` and stops
  cleanly. :func:`prometheus_binary` finds it (``$PROMETHEUS_BIN`` or ``prometheus`` on PATH);
  :func:`require_prometheus` skips the calling test when it is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.registry import Collector

BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
TICK = 0.1
"""Seconds between two batches of requests."""


@dataclass(frozen=True)
class Traffic:
    """One service's batch, served every :data:`TICK` seconds.

    ``latencies``: (seconds, how many requests) per batch; ``codes``: (status code, how many);
    both add up to the same number of requests.
    """

    namespace: str
    service: str
    latencies: tuple[tuple[float, int], ...]
    codes: tuple[tuple[str, int], ...]

    @property
    def batch(self) -> int:
        return sum(n for _, n in self.latencies)

    @property
    def rate(self) -> float:
        """Requests per second."""
        return self.batch / TICK

    @property
    def availability(self) -> float:
        errors = sum(n for c, n in self.codes if c.startswith("5"))
        return 1.0 - errors / self.batch

    def quantile_ms(self, q: float) -> float:
        """What ``histogram_quantile(q, ...)`` gives over :data:`BUCKETS`, in milliseconds."""
        total = self.batch
        rank = q * total
        lower, below = 0.0, 0
        for upper in (*BUCKETS, float("inf")):
            count = sum(n for v, n in self.latencies if lower < v <= upper)
            if below + count >= rank and count > 0:
                if upper == float("inf"):
                    return BUCKETS[-1] * 1000.0
                return (lower + (upper - lower) * (rank - below) / count) * 1000.0
            below += count
            lower = upper
        raise AssertionError("unreachable")


CART = Traffic(
    "shop",
    "cart",
    latencies=((0.02, 10), (0.07, 8), (0.3, 2)),
    codes=(("200", 16), ("404", 1), ("500", 2), ("503", 1)),
)
"""p95 375 ms, p70 75 ms, 200 req/s, availability 0.85 (404 is not an error)."""

CHECKOUT = Traffic("shop", "checkout", latencies=((0.003, 5),), codes=(("200", 5),))
"""All fast, no 5xx at all (availability 1.0), 50 req/s."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Locked(Collector):
    """Collects the wrapped metrics while holding the traffic lock (scrapes see whole batches)."""

    def __init__(self, lock: threading.Lock, metrics: Iterable[Any]) -> None:
        self._lock = lock
        self._metrics = list(metrics)

    def collect(self) -> Iterable[Any]:
        with self._lock:
            return [fam for m in self._metrics for fam in m.collect()]


class Exporter:
    """prometheus-client exporter on 127.0.0.1 with steady, known traffic."""

    def __init__(self, traffic: Iterable[Traffic] = (CART, CHECKOUT)) -> None:
        self.traffic = tuple(traffic)
        self._lock = threading.Lock()
        self.duration = Histogram(
            "http_request_duration_seconds",
            "Request latency.",
            ["namespace", "service"],
            buckets=BUCKETS,
            registry=None,
        )
        self.requests = Counter(
            "http_requests_total",
            "Requests by status code.",
            ["namespace", "service", "code"],
            registry=None,
        )
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Locked(self._lock, (self.duration, self.requests)))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.port = 0
        self.batches = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve_batch(self) -> None:
        with self._lock:
            for t in self.traffic:
                hist = self.duration.labels(t.namespace, t.service)
                for value, n in t.latencies:
                    for _ in range(n):
                        hist.observe(value)
                for code, n in t.codes:
                    self.requests.labels(t.namespace, t.service, code).inc(n)
            self.batches += 1

    def _run(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            self._serve_batch()
            deadline += TICK
            delay = deadline - time.monotonic()
            if delay < -1.0:  # far behind (machine stalled): do not burst to catch up
                deadline = time.monotonic()
            elif delay > 0:
                self._stop.wait(delay)

    def start(self) -> Exporter:
        self._serve_batch()  # every series exists before the first scrape
        server, _thread = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self._server = server
        self.port = server.server_port
        self._thread = threading.Thread(target=self._run, name="exporter-traffic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def prometheus_binary() -> str | None:
    """``$PROMETHEUS_BIN`` if set, else ``prometheus`` on PATH or ``/usr/bin/prometheus``."""
    explicit = os.environ.get("PROMETHEUS_BIN")
    if explicit:
        return shutil.which(explicit)
    found = shutil.which("prometheus")
    if found is None and os.access("/usr/bin/prometheus", os.X_OK):
        found = "/usr/bin/prometheus"
    return found


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies (no orphaned Prometheus)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def require_prometheus() -> str:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip(
            "Prometheus server binary not found (set PROMETHEUS_BIN or install it: "
            "`apt-get install -y prometheus`; the Makefile installs it)"
        )
    return binary


def _config(targets: Iterable[str], interval: str) -> str:
    lines = [
        "global:",
        f"  scrape_interval: {interval}",
        f"  scrape_timeout: {interval}",
        f"  evaluation_interval: {interval}",
        "scrape_configs:",
    ]
    targets = list(targets)
    if targets:
        quoted = ", ".join(f'"{t}"' for t in targets)
        lines += [
            "  - job_name: exporter",
            "    static_configs:",
            f"      - targets: [{quoted}]",
        ]
    else:
        lines[-1] = "scrape_configs: []"
    return "\n".join(lines) + "\n"


class PrometheusServer:
    """The real Prometheus on 127.0.0.1 with a temp data dir; use as a context manager."""

    def __init__(
        self,
        binary: str,
        targets: Iterable[str] = (),
        *,
        scrape_interval: str = "1s",
        workdir: Path | None = None,
    ) -> None:
        self.binary = binary
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.workdir = workdir
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "prometheus.log"

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="prom-test-")
            self.workdir = Path(self._tmp.name)
        config = self.workdir / "prometheus.yml"
        config.write_text(_config(self.targets, self.scrape_interval))
        last = ""
        for _attempt in range(3):  # a free port can be taken between probe and bind: retry
            self.port = free_port()
            data = self.workdir / f"data-{self.port}"
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
            self.proc = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                ],
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
            if self._wait_ready(timeout):
                return self
            last = self.log_tail()
            self._terminate()
        self.stop()
        raise RuntimeError(f"Prometheus did not become ready; log:\n{last}")

    def _wait_ready(self, timeout: float) -> bool:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if httpx.get(self.url + "/-/ready", timeout=1.0).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query; the vector result (raises on any error)."""
        resp = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=5.0)
        resp.raise_for_status()
        body = resp.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(
        self,
        promql: str,
        done: Callable[[list[dict[str, Any]]], bool] = bool,
        timeout: float = 20.0,
    ) -> list[dict[str, Any]]:
        """Poll ``promql`` until ``done(result)``; RuntimeError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if done(result):
                return result
            time.sleep(0.2)
        raise RuntimeError(
            f"timed out waiting for {promql!r} (last result {result}); log:\n{self.log_tail()}"
        )

    def _terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        self._terminate()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self.workdir = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def silent_tcp_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            accepted.append(conn)  # keep it open, never write

    thread = threading.Thread(target=accept, name="silent-tcp", daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in accepted:
            conn.close()
        sock.close()
