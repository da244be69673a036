"""Where a workload's dispatch weights go: the cluster backend and the data planes configured in
``admin.dispatch`` (HAProxy runtime API, Envoy EDS file, ConfigMap).

:class:`Sinks` builds each workload's data-plane writers from the configuration (and caches them:
they are configuration, not memory) and writes one set of weights to the sinks it is asked to,
returning a :class:`Delivery`: per sink, the weights it now holds and why a write failed. A data
plane never raises (its trouble is in the delivery and the log); the backend raises as the
:class:`~planner.domain.ports.ClusterBackend` does, after every data plane was written.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from actuators import dataplanes
from actuators.dataplanes import configmap as configmap_plane
from actuators.dataplanes import envoy as envoy_plane
from actuators.dataplanes import haproxy as haproxy_plane
from planner.domain import admin as admin_config
from planner.domain.errors import TemporaryError
from planner.domain.ports import ClusterBackend, UnsupportedOperation

log = logging.getLogger(__name__)

BACKEND = "backend"
"""Name of the cluster backend among the sinks the weights are delivered to."""
_TEMPORARY_PREFIXES = ("unreachable", "write failed", "apply failed")


@dataclasses.dataclass(frozen=True)
class Delivery:
    """What one write achieved: per sink written, the weights it now holds (pods it refused for
    good count as held: retrying the same weight cannot help; they are logged by the writer and
    written again when they change); per sink, why its write failed; whether the backend turned
    out to have no dispatch weights."""

    held: Mapping[str, Mapping[str, int]]
    failures: Mapping[str, str] = dataclasses.field(default_factory=dict)
    no_backend: bool = False

    @staticmethod
    def everywhere(sinks: Collection[str], weights: Mapping[str, int]) -> Delivery:
        """Every one of ``sinks`` holds ``weights``."""
        return Delivery({s: dict(weights) for s in sinks})


def split(workload: str) -> tuple[str, str]:
    namespace, _, name = workload.partition("/")
    return namespace, name


class Sinks:
    """The sinks of every workload (see the module docstring)."""

    def __init__(self, dispatch: admin_config.DispatchConfig,
                 configmap_apply: configmap_plane.ApplyFn | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.dispatch = dispatch
        self.configmap_apply = configmap_apply
        self._sleep = sleep
        self._writers: dict[str, list[dataplanes.DataPlaneWriter]] = {}
        self._warned: set[str] = set()

    def attach_configmap(self, apply: configmap_plane.ApplyFn) -> None:
        """Use ``apply`` to apply ConfigMap manifests (enables a ``configmap`` section)."""
        self.configmap_apply = apply
        self._writers.clear()

    def names(self, workload: str, backend: bool = True) -> list[str]:
        """The sinks of ``workload`` in the order they are written (``backend`` first unless
        it has no dispatch weights)."""
        return ([BACKEND] if backend else []) + [w.target for w in self.writers(workload)]

    def writers(self, workload: str) -> list[dataplanes.DataPlaneWriter]:
        """The data-plane writers of one workload, from ``admin.dispatch`` (cached)."""
        cached = self._writers.get(workload)
        if cached is not None:
            return cached
        ns, name = split(workload)
        d = self.dispatch
        out: list[dataplanes.DataPlaneWriter] = []
        sleep_kw: dict[str, Any] = {"sleep": self._sleep} if self._sleep is not None else {}
        if d.haproxy is not None:
            h = d.haproxy
            backend = dataplanes.render_template(h.backend, ns, name)
            try:
                out.append(haproxy_plane.HAProxyWriter(
                    backend, h.parsed_address(), timeout=h.timeout_s,
                    max_attempts=h.max_attempts, **sleep_kw))
            except ValueError as exc:
                self._warn_once(f"haproxy:{workload}", "haproxy writer for %s disabled: %s",
                                workload, exc)
        if d.envoy is not None:
            e = d.envoy
            out.append(envoy_plane.EnvoyEdsWriter(
                dataplanes.render_template(e.cluster, ns, name),
                dataplanes.render_template(e.path, ns, name),
                max_attempts=e.max_attempts, **sleep_kw))
        if d.configmap is not None:
            c = d.configmap
            if self.configmap_apply is None:
                self._warn_once("configmap", "admin.dispatch.configmap is set but no ConfigMap "
                                "apply function is attached: ConfigMap output disabled")
            else:
                out.append(configmap_plane.ConfigMapWriter(
                    dataplanes.render_template(c.name, ns, name),
                    dataplanes.render_template(c.namespace, ns, name),
                    self.configmap_apply, key=c.key, **sleep_kw))
        self._writers[workload] = out
        return out

    def write(self, workload: str, weights: Mapping[str, int], backend: ClusterBackend,
              targets: Collection[str]) -> Delivery:
        """Write ``weights`` to the sinks named in ``targets``: the backend first, then every
        data plane. A backend without dispatch weights is fine when a data plane is configured
        (the delivery says so) and an :class:`UnsupportedOperation` otherwise; a backend's
        :class:`TemporaryError` is raised after the data planes were written."""
        writers = [w for w in self.writers(workload) if w.target in targets]
        held: dict[str, dict[str, int]] = {}
        failures: dict[str, str] = {}
        no_backend = False
        pending: TemporaryError | None = None
        if BACKEND in targets:
            try:
                backend.set_weights(workload, dict(weights))
            except UnsupportedOperation as exc:
                if not self.writers(workload):
                    raise UnsupportedOperation(
                        f"{exc}; configure a data plane in admin.dispatch (haproxy, envoy or "
                        "configmap) or disable the weights actuator") from None
                no_backend = True
                log.info("backend %s has no dispatch weights; writing data planes only",
                         backend.name)
            except TemporaryError as exc:
                pending = exc
            else:
                held[BACKEND] = dict(weights)
        for writer in writers:
            self._write(workload, writer, weights, held, failures)
        if pending is not None:
            raise pending
        return Delivery(held, failures, no_backend)

    def _write(self, workload: str, writer: dataplanes.DataPlaneWriter,
               weights: Mapping[str, int], held: dict[str, dict[str, int]],
               failures: dict[str, str]) -> None:
        ns, name = split(workload)
        sink = writer.target
        if isinstance(writer, haproxy_plane.HAProxyWriter) and self.dispatch.haproxy:
            writer.server_names = {p: dataplanes.render_template(
                self.dispatch.haproxy.server, ns, name, p) for p in weights}
        if isinstance(writer, envoy_plane.EnvoyEdsWriter) and self.dispatch.envoy:
            e = self.dispatch.envoy
            writer.addresses = {p: (dataplanes.render_template(e.host, ns, name, p), e.port)
                                for p in weights}
        try:
            result = dataplanes.write_all([writer], weights)[0]
        except Exception as exc:  # a data plane must never take the cycle down
            log.exception("data plane %s for %s failed", sink, workload)
            failures[sink] = f"{type(exc).__name__}: {exc}"
            return
        held[sink] = {pod: weight for pod, weight in weights.items()
                      if (why := result.failed.get(pod)) is None
                      or not why.startswith(_TEMPORARY_PREFIXES)}
        if not result.ok:
            failures[sink] = result.message or "write failed"

    def _warn_once(self, key: str, msg: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)
