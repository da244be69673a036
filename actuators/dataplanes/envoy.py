"""Envoy through file-based EDS: a ``DiscoveryResponse`` holding one ``ClusterLoadAssignment``.

Each endpoint becomes an ``lb_endpoint`` with ``load_balancing_weight`` = its weight. Envoy
requires that weight to be at least 1, so a weight-0 (not ready) endpoint is rendered with weight
1 and ``health_status: DRAINING`` (no new requests). The file is replaced atomically (temporary
file in the same directory, fsync, rename), which is what Envoy's filesystem watch expects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from actuators import dataplanes

log = logging.getLogger(__name__)

CLA_TYPE = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"


def parse_host_port(endpoint_id: str) -> tuple[str, int] | None:
    """``"10.0.0.1:8080"`` or ``"[fd00::1]:8080"`` -> (host, port); None if not of that form."""
    host, sep, port = endpoint_id.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def render_cluster_load_assignment(
    cluster_name: str,
    weights: Mapping[str, int],
    addresses: Mapping[str, tuple[str, int]],
) -> dict[str, Any]:
    """The ``ClusterLoadAssignment`` (proto3 JSON) for endpoints present in ``addresses``."""
    lb_endpoints = []
    for endpoint_id in sorted(weights):
        if endpoint_id not in addresses:
            continue
        host, port = addresses[endpoint_id]
        weight = weights[endpoint_id]
        lb_endpoints.append(
            {
                "endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}},
                "health_status": "HEALTHY" if weight > 0 else "DRAINING",
                "load_balancing_weight": max(1, weight),
                "metadata": {"filter_metadata": {"intent_planner": {"endpoint_id": endpoint_id}}},
            }
        )
    return {"cluster_name": cluster_name, "endpoints": [{"lb_endpoints": lb_endpoints}]}


def render_discovery_response(cla: Mapping[str, Any]) -> dict[str, Any]:
    """Wrap a ``ClusterLoadAssignment`` for file-based EDS; version = hash of the content."""
    resource = {"@type": CLA_TYPE, **cla}
    digest = hashlib.sha256(json.dumps(resource, sort_keys=True).encode()).hexdigest()[:16]
    return {"version_info": digest, "resources": [resource]}


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` so readers see the old or the new file, never a mix."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".eds-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class EnvoyEdsWriter(dataplanes.DataPlaneWriter):
    """Writes an EDS file for one cluster.

    ``addresses`` maps endpoint ids to (host, port); ids missing there are parsed as
    ``host:port``. The file holds the endpoints of the latest write only (level-based: pass every
    endpoint of the cluster each time).
    """

    target = "envoy-eds"

    def __init__(
        self,
        cluster_name: str,
        path: str,
        *,
        addresses: Mapping[str, tuple[str, int]] | None = None,
        max_attempts: int = 3,
        backoff_s: float = 0.05,
        max_backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cluster_name = cluster_name
        self.path = path
        self.addresses = dict(addresses or {})
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep = sleep

    def render(self, weights: Mapping[str, int]) -> tuple[dict[str, Any], dict[str, str]]:
        """The discovery response, and endpoints left out (no address) with the reason."""
        addresses: dict[str, tuple[str, int]] = {}
        skipped: dict[str, str] = {}
        for endpoint_id in weights:
            address = self.addresses.get(endpoint_id) or parse_host_port(endpoint_id)
            if address is None:
                skipped[endpoint_id] = "no address (not host:port, not in addresses)"
            else:
                addresses[endpoint_id] = address
        cla = render_cluster_load_assignment(self.cluster_name, weights, addresses)
        return render_discovery_response(cla), skipped

    def write(self, weights: Mapping[str, int]) -> dataplanes.WriteResult:
        dataplanes.check_weights(weights, 0, 2**32 - 1)
        document, skipped = self.render(weights)
        text = json.dumps(document, indent=2, sort_keys=True) + "\n"
        written = tuple(e for e in sorted(weights) if e not in skipped)
        delays = dataplanes.backoff_delays(self.max_attempts, self.backoff_s, self.max_backoff_s)
        for attempt in range(1, self.max_attempts + 1):
            try:
                write_atomically(self.path, text)
            except OSError as exc:
                log.warning(
                    "envoy eds %s: write failed (attempt %d/%d): %s",
                    self.path,
                    attempt,
                    self.max_attempts,
                    exc,
                )
                if attempt == self.max_attempts:
                    failed = {e: f"write failed: {exc}" for e in weights}
                    return dataplanes.WriteResult(
                        self.target, False, (), failed, attempt, f"cannot write {self.path}: {exc}"
                    )
                self.sleep(delays[attempt - 1])
                continue
            message = f"version {document['version_info']}"
            if skipped:
                message += f"; {len(skipped)} endpoint(s) without address"
            return dataplanes.WriteResult(
                self.target, not skipped, written, skipped, attempt, message
            )
        raise AssertionError("unreachable")  # pragma: no cover
