"""HAProxy through its runtime API (``stats socket ... level admin``), TCP or unix socket.

Weights are written with ``set server <backend>/<server> weight N`` (several commands joined by
``;`` on one connection; a chunk that answers anything but blank lines is replayed one command at
a time to find which server refused). ``show stat`` is parsed to read weights back.
"""

from __future__ import annotations

import csv
import io
import logging
import re
import socket
import time
from collections.abc import Callable, Mapping

from actuators import dataplanes

log = logging.getLogger(__name__)

#: ``(host, port)`` for ``stats socket ipv4@host:port``, or a filesystem path for a unix socket
Address = tuple[str, int] | str

_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
_MAX_RESPONSE = 16 * 1024 * 1024


class RuntimeAPI:
    """A minimal client: one connection per command line (HAProxy's non-interactive mode)."""

    def __init__(self, address: Address, timeout: float = 1.0) -> None:
        self.address = address
        self.timeout = timeout

    def _connect(self) -> socket.socket:
        if isinstance(self.address, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.address)
            except OSError:
                sock.close()
                raise
            return sock
        return socket.create_connection(self.address, timeout=self.timeout)

    def execute(self, command: str) -> str:
        """Send one command line, return the whole answer. Raises ``OSError`` if unreachable."""
        if "\n" in command:
            raise ValueError("one command line at a time")
        with self._connect() as sock:
            sock.sendall(command.encode() + b"\n")
            chunks: list[bytes] = []
            size = 0
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > _MAX_RESPONSE:
                    raise OSError("runtime API answer too large")
        return b"".join(chunks).decode(errors="replace")

    def show_stat(self) -> list[dict[str, str]]:
        """``show stat`` as one dict per row (keys from the ``# pxname,svname,...`` header)."""
        text = self.execute("show stat")
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines or not lines[0].startswith("# "):
            raise OSError(f"unexpected 'show stat' answer: {text[:200]!r}")
        reader = csv.DictReader(io.StringIO("\n".join([lines[0][2:], *lines[1:]])))
        return [{k: v for k, v in row.items() if k} for row in reader]

    def server_weights(self, backend: str) -> dict[str, int]:
        """Current (user) weight of each server of ``backend``, from ``show stat``."""
        return {
            row["svname"]: int(row["weight"] or 0)
            for row in self.show_stat()
            if row.get("pxname") == backend and row.get("svname") not in {"FRONTEND", "BACKEND"}
        }


class HAProxyWriter(dataplanes.DataPlaneWriter):
    """Writes weights to servers of one HAProxy backend.

    ``server_names`` maps endpoint ids to server names (identity by default). Unreachable
    HAProxy: each attempt is logged, retried up to ``max_attempts`` times with exponential backoff
    (``backoff_s`` doubling, capped at ``max_backoff_s``), then a failed result is returned.
    A server HAProxy refuses ("No such server.") is a permanent error: reported, not retried.
    """

    target = "haproxy"

    def __init__(
        self,
        backend: str,
        address: Address,
        *,
        server_names: Mapping[str, str] | None = None,
        timeout: float = 1.0,
        max_attempts: int = 4,
        backoff_s: float = 0.05,
        max_backoff_s: float = 1.0,
        batch_size: int = 50,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not _NAME.match(backend):
            raise ValueError(f"invalid HAProxy backend name {backend!r}")
        if max_attempts < 1 or batch_size < 1:
            raise ValueError("max_attempts and batch_size must be >= 1")
        self.backend = backend
        self.api = RuntimeAPI(address, timeout)
        self.server_names = dict(server_names or {})
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.batch_size = batch_size
        self.sleep = sleep

    def read_weights(self) -> dict[str, int]:
        """Weights as HAProxy reports them, keyed by server name (raises ``OSError``)."""
        return self.api.server_weights(self.backend)

    def _command(self, endpoint_id: str, weight: int) -> str | None:
        server = self.server_names.get(endpoint_id, endpoint_id)
        if not _NAME.match(server):
            return None
        return f"set server {self.backend}/{server} weight {weight}"

    def write(self, weights: Mapping[str, int]) -> dataplanes.WriteResult:
        dataplanes.check_weights(weights, 0, 256)
        failed: dict[str, str] = {}
        pending: dict[str, str] = {}
        for endpoint_id, weight in weights.items():
            command = self._command(endpoint_id, weight)
            if command is None:
                failed[endpoint_id] = "invalid server name"
            else:
                pending[endpoint_id] = command
        written: list[str] = []
        delays = dataplanes.backoff_delays(self.max_attempts, self.backoff_s, self.max_backoff_s)
        attempt = 0
        while pending:
            attempt += 1
            try:
                self._write_batches(pending, written, failed)
            except OSError as exc:
                log.warning(
                    "haproxy %s: runtime API unreachable (attempt %d/%d): %s",
                    _describe(self.api.address),
                    attempt,
                    self.max_attempts,
                    exc,
                )
                if attempt >= self.max_attempts:
                    for endpoint_id in pending:
                        failed[endpoint_id] = f"unreachable: {exc}"
                    message = f"runtime API unreachable after {attempt} attempts: {exc}"
                    return dataplanes.WriteResult(
                        self.target, False, tuple(written), failed, attempt, message
                    )
                self.sleep(delays[attempt - 1])
        ok = not failed
        message = "" if ok else f"{len(failed)} server(s) refused: " + ", ".join(sorted(failed))
        if failed:
            log.warning("haproxy %s: %s", self.backend, message)
        return dataplanes.WriteResult(self.target, ok, tuple(written), failed, attempt, message)

    def _write_batches(
        self, pending: dict[str, str], written: list[str], failed: dict[str, str]
    ) -> None:
        """Send pending commands; move each endpoint to ``written`` or ``failed``."""
        ids = list(pending)
        for start in range(0, len(ids), self.batch_size):
            chunk = ids[start : start + self.batch_size]
            answer = self.api.execute("; ".join(pending[e] for e in chunk))
            if answer.strip():  # someone refused: replay one by one to find out who
                for endpoint_id in chunk:
                    single = self.api.execute(pending[endpoint_id]).strip()
                    if single:
                        failed[endpoint_id] = single.splitlines()[0]
                    else:
                        written.append(endpoint_id)
                    del pending[endpoint_id]
            else:
                for endpoint_id in chunk:
                    written.append(endpoint_id)
                    del pending[endpoint_id]


def _describe(address: Address) -> str:
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"
