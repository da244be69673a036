"""The server set of one HAProxy backend, kept equal to a desired set through the runtime API.

:mod:`actuators.dataplanes.haproxy` writes weights of servers that already exist; a load
balancer whose backends follow a Service's endpoints also adds and removes servers. This
module does that with the same client (:class:`~actuators.dataplanes.haproxy.RuntimeAPI`):

* :func:`read_servers` parses ``show servers state <backend>`` (name, address, port, user
  weight, whether the admin put the server in maintenance);
* :func:`server_commands` is pure: the runtime-API commands that turn the current set into the
  desired one, and only those (nothing when they are equal):
  ``add server B/S ADDR:PORT weight W`` then ``enable server B/S`` for a new server (HAProxy
  creates dynamic servers in maintenance), ``set server B/S addr A port P`` for a moved one,
  ``set server B/S weight W``, ``enable server B/S`` for one in maintenance, and
  ``disable server B/S`` then ``del server B/S`` for one no longer wanted;
* :class:`ServerSetWriter` reads, diffs and sends, one command per connection (each answer
  is checked), and never raises for HAProxy trouble: an unreachable runtime API or a refused
  command is in its :class:`SyncResult`. A server HAProxy refuses to delete (connections still
  attached) stays disabled, so it takes no new traffic, and is deleted by a later sync.

Needs HAProxy 2.5 or later (dynamic servers without ``experimental-mode``); the backend must
use a dynamic algorithm (``roundrobin``, ``leastconn``, ``first``, ``random``), and its frontend
and backend must exist in the configuration (the runtime API cannot create them).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import re
from collections.abc import Mapping

from actuators import dataplanes
from actuators.dataplanes import haproxy

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
"""A server or backend name HAProxy accepts (and that needs no quoting on the CLI)."""
_MAINT = 0x01
"""``srv_admin_state`` bit: forced maintenance (``disable server``)."""


@dataclasses.dataclass(frozen=True)
class Server:
    """One server of a backend: where it is, its weight, and whether it takes traffic."""

    name: str
    address: str
    port: int
    weight: int
    enabled: bool = True

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise ValueError(f"server name {self.name!r}: use letters, digits and _.:- only")
        try:
            ipaddress.ip_address(self.address)
        except ValueError:
            raise ValueError(f"server {self.name}: address {self.address!r} is not an IP "
                             "address") from None
        if not 0 < self.port < 65536:
            raise ValueError(f"server {self.name}: port {self.port} is not in 1..65535")
        dataplanes.check_weights({self.name: self.weight}, 0, 256)


class NoSuchBackend(OSError):
    """HAProxy answers, but has no backend of that name (its configuration lacks it)."""


class UnusableBackend(OSError):
    """The backend holds a server this module cannot represent (a static server of the
    configuration: an unresolved name, a weight above 256...), so its set cannot be kept."""


@dataclasses.dataclass(frozen=True)
class SyncResult:
    """What one :meth:`ServerSetWriter.sync` did. ``reachable`` false: nothing was read or
    written (``message`` says why). ``failed``: commands HAProxy refused, with its answer."""

    backend: str
    reachable: bool
    sent: tuple[str, ...] = ()
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    message: str = ""
    servers: Mapping[str, Server] = dataclasses.field(default_factory=dict)
    """The backend's servers after the sync, as HAProxy reports them."""
    no_backend: bool = False
    """HAProxy was reached but has no such backend (not reachable through the runtime API)."""
    unusable: bool = False
    """HAProxy was reached but the backend holds a server that cannot be managed
    (:class:`UnusableBackend`); nothing was written."""

    @property
    def ok(self) -> bool:
        return self.reachable and not self.failed


def parse_servers_state(text: str, backend: str) -> dict[str, Server]:
    """The servers of ``backend`` in a ``show servers state`` answer (format version 1)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("# ")), None)
    if header is None:
        raise OSError(f"unexpected 'show servers state' answer: {text[:200]!r}")
    columns = header[2:].split()
    want = ("be_name", "srv_name", "srv_addr", "srv_admin_state", "srv_uweight", "srv_port")
    if any(c not in columns for c in want):
        raise OSError(f"'show servers state' lacks a column of {want}: {header[:200]!r}")
    at = {c: columns.index(c) for c in want}
    out: dict[str, Server] = {}
    for line in lines:
        if line.startswith("#") or line.strip().isdigit():  # the header and the version line
            continue
        cells = line.split()
        if len(cells) < len(columns) or cells[at["be_name"]] != backend:
            continue
        name = cells[at["srv_name"]]
        try:
            out[name] = Server(name, cells[at["srv_addr"]], int(cells[at["srv_port"]]),
                               int(cells[at["srv_uweight"]]),
                               enabled=not int(cells[at["srv_admin_state"]]) & _MAINT)
        except ValueError as exc:
            raise UnusableBackend(
                f"backend {backend} holds server {name} that cannot be managed ({exc}): a "
                f"static server of the configuration; fix: remove the static servers from "
                f"backend {backend}, the load balancer adds its own") from None
    return out


def read_servers(api: haproxy.RuntimeAPI, backend: str) -> dict[str, Server]:
    """The servers of ``backend`` now (raises ``OSError`` if HAProxy is unreachable, or if it
    has no such backend: its answer is then not a state table)."""
    text = api.execute(f"show servers state {backend}")
    if "Can't find backend" in text:
        raise NoSuchBackend(f"HAProxy has no backend {backend!r}: {text.strip()[:200]}")
    return parse_servers_state(text, backend)


def server_commands(backend: str, current: Mapping[str, Server],
                    desired: Mapping[str, Server]) -> list[str]:
    """The runtime-API commands that make ``current`` equal to ``desired`` (module docstring);
    servers to remove first, so that a backend never holds both an old and a new server for
    longer than it must."""
    commands: list[str] = []
    for name in sorted(set(current) - set(desired)):
        if current[name].enabled:
            commands.append(f"disable server {backend}/{name}")
        commands.append(f"del server {backend}/{name}")
    for name in sorted(desired):
        want, have = desired[name], current.get(name)
        target = f"{backend}/{name}"
        if have is None:
            commands.append(f"add server {target} {hostport(want.address, want.port)} "
                            f"weight {want.weight}")
            if want.enabled:
                commands.append(f"enable server {target}")
            continue
        if (have.address, have.port) != (want.address, want.port):
            commands.append(f"set server {target} addr {want.address} port {want.port}")
        if have.weight != want.weight:
            commands.append(f"set server {target} weight {want.weight}")
        if have.enabled != want.enabled:
            commands.append(f"{'enable' if want.enabled else 'disable'} server {target}")
    return commands


def hostport(address: str, port: int) -> str:
    """``ADDR:PORT`` as HAProxy reads it (an IPv6 address in brackets)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def refused(command: str, answer: str) -> str | None:
    """HAProxy's complaint about ``command`` in ``answer``, or ``None`` if it was done."""
    text = answer.strip()
    verb = command.split(" ", 2)[:2]
    if verb == ["add", "server"]:
        return None if "New server registered" in text else text or "no answer"
    if verb == ["del", "server"]:
        return None if "Server deleted" in text else text or "no answer"
    if command.startswith("set server") and " addr " in command:
        return None if ("changed" in text or "no need to change" in text) else text or "no answer"
    return text or None


class ServerSetWriter:
    """Keeps one HAProxy backend's servers equal to a desired set (see the module docstring).

    Configuration only (backend name, runtime API address, timeout): no state between syncs.
    """

    def __init__(self, backend: str, address: haproxy.Address, *, timeout: float = 1.0) -> None:
        if not NAME.match(backend):
            raise ValueError(f"HAProxy backend name {backend!r}: use letters, digits and _.:- "
                             "only")
        self.backend = backend
        self.api = haproxy.RuntimeAPI(address, timeout)

    def read(self) -> dict[str, Server]:
        """The backend's servers now (raises ``OSError``)."""
        return read_servers(self.api, self.backend)

    def sync(self, desired: Mapping[str, Server]) -> SyncResult:
        """Make the backend hold exactly ``desired``; idempotent (nothing is sent when it
        already does)."""
        where = _describe(self.api.address)
        try:
            current = self.read()
        except OSError as exc:
            log.warning("haproxy %s: cannot read backend %s: %s", where, self.backend, exc)
            return SyncResult(self.backend, False, message=f"runtime API {where}: {exc}",
                              no_backend=isinstance(exc, NoSuchBackend),
                              unusable=isinstance(exc, UnusableBackend))
        sent: list[str] = []
        failed: dict[str, str] = {}
        try:
            for command in server_commands(self.backend, current, desired):
                if _skip_after_refusal(command, failed):
                    continue
                answer = self.api.execute(command)
                sent.append(command)
                problem = refused(command, answer)
                if problem is not None:
                    failed[command] = problem.splitlines()[0]
            after = self.read()
        except OSError as exc:
            log.warning("haproxy %s: runtime API lost during sync of %s: %s", where,
                        self.backend, exc)
            return SyncResult(self.backend, False, tuple(sent), failed,
                              f"runtime API {where}: {exc}")
        message = "; ".join(f"{c}: {why}" for c, why in failed.items())
        if failed:
            log.warning("haproxy %s: %s", where, message)
        return SyncResult(self.backend, True, tuple(sent), failed, message, after)


def _skip_after_refusal(command: str, failed: Mapping[str, str]) -> bool:
    """``enable server B/S`` is pointless after ``add server B/S ...`` was refused."""
    if not command.startswith("enable server "):
        return False
    target = command.split(" ", 2)[2]
    return any(c.startswith(f"add server {target} ") for c in failed)


def _describe(address: haproxy.Address) -> str:
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"
