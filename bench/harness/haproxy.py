"""Start a real HAProxy (Debian package ``haproxy``) on 127.0.0.1 for tests and benchmarks.

:class:`HAProxyProcess` writes a generated configuration (one HTTP frontend, one backend with N
servers, ``balance roundrobin`` or ``leastconn``, the runtime API on
``stats socket ipv4@127.0.0.1:PORT level admin``) to a temporary directory, runs
``haproxy -db -f cfg`` in the foreground, waits until both the frontend and the runtime API answer,
and stops it with SIGTERM (SIGKILL after a bounded wait).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence

DEFAULT_BINARY = "/usr/sbin/haproxy"


def find_binary() -> str | None:
    """Path of the HAProxy binary (``$HAPROXY_BIN`` if set), or None when it is not installed."""
    override = os.environ.get("HAPROXY_BIN")
    if override is not None:
        return override if os.access(override, os.X_OK) else None
    if os.access(DEFAULT_BINARY, os.X_OK):
        return DEFAULT_BINARY
    return shutil.which("haproxy")


SKIP_REASON = (
    "HAProxy binary not found (/usr/sbin/haproxy or $HAPROXY_BIN); install the Debian package "
    "'haproxy' (apt-get install -y haproxy, or `make system-packages`) to run these tests"
)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class ServerSpec:
    name: str
    host: str
    port: int
    weight: int = 1


@dataclasses.dataclass(frozen=True)
class Timeouts:
    connect_s: float = 2.0
    client_s: float = 60.0
    server_s: float = 60.0
    queue_s: float = 30.0


def render_config(
    servers: Sequence[ServerSpec],
    *,
    frontend_port: int,
    api_port: int,
    balance: str = "roundrobin",
    backend: str = "be_app",
    host: str = "127.0.0.1",
    timeouts: Timeouts = Timeouts(),
    maxconn: int = 4096,
) -> str:
    """The HAProxy configuration text."""
    if balance not in {"roundrobin", "leastconn", "static-rr", "first", "random"}:
        raise ValueError(f"unsupported balance algorithm {balance!r}")

    def ms(seconds: float) -> str:
        return f"{int(seconds * 1000)}ms"

    lines = [
        "global",
        f"    maxconn {maxconn}",
        "    nbthread 1",
        f"    stats socket ipv4@{host}:{api_port} level admin",
        "    stats timeout 30s",
        "",
        "defaults",
        "    mode http",
        f"    timeout connect {ms(timeouts.connect_s)}",
        f"    timeout client {ms(timeouts.client_s)}",
        f"    timeout server {ms(timeouts.server_s)}",
        f"    timeout queue {ms(timeouts.queue_s)}",
        "    timeout http-keep-alive 10s",
        "",
        "frontend fe_app",
        f"    bind {host}:{frontend_port}",
        f"    maxconn {maxconn}",
        f"    default_backend {backend}",
        "",
        f"backend {backend}",
        f"    balance {balance}",
    ]
    lines += [f"    server {s.name} {s.host}:{s.port} weight {s.weight}" for s in servers]
    return "\n".join(lines) + "\n"


def _cli(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class HAProxyProcess:
    """A running HAProxy; use as a context manager."""

    def __init__(
        self,
        servers: Sequence[ServerSpec],
        *,
        balance: str = "roundrobin",
        backend: str = "be_app",
        host: str = "127.0.0.1",
        timeouts: Timeouts = Timeouts(),
        binary: str | None = None,
        frontend_port: int | None = None,
    ) -> None:
        self.servers = tuple(servers)
        self.fixed_frontend_port = frontend_port
        """Bind the frontend on this port (default: a free one the kernel picks)."""
        self.balance = balance
        self.backend = backend
        self.host = host
        self.timeouts = timeouts
        self.binary = binary or find_binary()
        self.frontend_port = 0
        self.api_port = 0
        self.config_text = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> HAProxyProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.frontend_port}"

    @property
    def api_address(self) -> tuple[str, int]:
        return self.host, self.api_port

    def command(self, command: str, timeout: float = 2.0) -> str:
        """Run one runtime-API command (test helper; production code uses the writer)."""
        return _cli(self.host, self.api_port, command, timeout)

    def start(self, timeout: float = 10.0, attempts: int = 3) -> None:
        if self.binary is None:
            raise RuntimeError(SKIP_REASON)
        last_error = ""
        for _ in range(attempts):  # a fresh pair of ports if another process grabbed ours
            self.frontend_port = self.fixed_frontend_port or free_port(self.host)
            self.api_port = free_port(self.host)
            if self._try_start(timeout):
                return
            last_error = self._collect_stderr()
            self.stop()
        raise RuntimeError(f"HAProxy did not start: {last_error}")

    def _try_start(self, timeout: float) -> bool:
        assert self.binary is not None
        self._tmpdir = tempfile.TemporaryDirectory(prefix="haproxy-test-")
        cfg = os.path.join(self._tmpdir.name, "haproxy.cfg")
        self.config_text = render_config(
            self.servers,
            frontend_port=self.frontend_port,
            api_port=self.api_port,
            balance=self.balance,
            backend=self.backend,
            host=self.host,
            timeouts=self.timeouts,
        )
        with open(cfg, "w", encoding="utf-8") as fh:
            fh.write(self.config_text)
        self._stderr_path = os.path.join(self._tmpdir.name, "stderr.log")
        with open(self._stderr_path, "wb") as err:
            self._proc = subprocess.Popen(
                [self.binary, "-db", "-f", cfg],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                return False
            if self._ready():
                return True
            time.sleep(0.05)
        return False

    def _ready(self) -> bool:
        try:
            info = self.command("show info", timeout=0.5)
            with socket.create_connection((self.host, self.frontend_port), timeout=0.5):
                pass
        except OSError:
            return False
        return "Pid:" in info

    def _collect_stderr(self) -> str:
        path = getattr(self, "_stderr_path", None)
        if not path or not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-2000:]

    def stop(self, timeout: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
        if self._tmpdir is not None:
            with contextlib.suppress(OSError):
                self._tmpdir.cleanup()
            self._tmpdir = None
