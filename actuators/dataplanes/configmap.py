"""Weights as a Kubernetes ConfigMap (for sidecars, ingress controllers or custom proxies).

:func:`render_configmap` builds the manifest; :func:`apply_configmap` hands it to a caller-supplied
function (server-side apply, a kopf patch, a test fake); :class:`ConfigMapWriter` combines both
behind :class:`~actuators.dataplanes.DataPlaneWriter`. The Kubernetes wiring lives elsewhere.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from actuators import dataplanes

log = logging.getLogger(__name__)

DEFAULT_KEY = "weights.json"
MANAGED_BY = "intent-planner"

#: receives the manifest; raising means the apply failed
ApplyFn = Callable[[dict[str, Any]], object]

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def render_configmap(
    weights: Mapping[str, int],
    *,
    name: str,
    namespace: str,
    key: str = DEFAULT_KEY,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``v1/ConfigMap`` manifest whose ``data[key]`` is the weights as sorted JSON."""
    if not _DNS1123.match(name) or not _DNS1123.match(namespace):
        raise ValueError("name and namespace must be DNS-1123 names")
    meta_labels = {"app.kubernetes.io/managed-by": MANAGED_BY, **(labels or {})}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": meta_labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    payload = json.dumps({k: int(v) for k, v in sorted(weights.items())}, sort_keys=True)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {key: payload}}


def apply_configmap(
    manifest: dict[str, Any],
    apply: ApplyFn,
    *,
    endpoints: tuple[str, ...] = (),
    max_attempts: int = 3,
    backoff_s: float = 0.1,
    max_backoff_s: float = 2.0,
    is_temporary: Callable[[Exception], bool] = lambda exc: True,
    sleep: Callable[[float], None] = time.sleep,
) -> dataplanes.WriteResult:
    """Call ``apply(manifest)``, retrying temporary errors with bounded backoff; never raises.

    ``endpoints`` only labels the result (which weights were carried by the manifest).
    """
    meta = manifest.get("metadata", {})
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    delays = dataplanes.backoff_delays(max_attempts, backoff_s, max_backoff_s)
    for attempt in range(1, max(1, max_attempts) + 1):
        try:
            apply(manifest)
        except Exception as exc:
            temporary = is_temporary(exc)
            log.warning(
                "configmap %s: apply failed (attempt %d/%d, %s): %s",
                where,
                attempt,
                max_attempts,
                "temporary" if temporary else "permanent",
                exc,
            )
            if not temporary or attempt >= max_attempts:
                failed = {e: f"apply failed: {exc}" for e in endpoints}
                return dataplanes.WriteResult(
                    "configmap", False, (), failed, attempt, f"apply of {where} failed: {exc}"
                )
            sleep(delays[attempt - 1])
            continue
        return dataplanes.WriteResult("configmap", True, endpoints, {}, attempt, f"applied {where}")
    raise AssertionError("unreachable")  # pragma: no cover


class ConfigMapWriter(dataplanes.DataPlaneWriter):
    """Renders the weights to a ConfigMap and applies it with ``apply``."""

    target = "configmap"

    def __init__(
        self,
        name: str,
        namespace: str,
        apply: ApplyFn,
        *,
        key: str = DEFAULT_KEY,
        labels: Mapping[str, str] | None = None,
        max_attempts: int = 3,
        backoff_s: float = 0.1,
        is_temporary: Callable[[Exception], bool] = lambda exc: True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.apply = apply
        self.key = key
        self.labels = dict(labels or {})
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.is_temporary = is_temporary
        self.sleep = sleep

    def render(self, weights: Mapping[str, int]) -> dict[str, Any]:
        return render_configmap(
            weights, name=self.name, namespace=self.namespace, key=self.key, labels=self.labels
        )

    def write(self, weights: Mapping[str, int]) -> dataplanes.WriteResult:
        dataplanes.check_weights(weights, 0, 2**31 - 1)
        return apply_configmap(
            self.render(weights),
            self.apply,
            endpoints=tuple(sorted(weights)),
            max_attempts=self.max_attempts,
            backoff_s=self.backoff_s,
            is_temporary=self.is_temporary,
            sleep=self.sleep,
        )
