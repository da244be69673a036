"""Applying ConfigMap manifests (the dispatch-weight ConfigMap output) through the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException


def configmap_applier(api_client: ApiClient) -> Callable[[dict[str, Any]], object]:
    """A function that creates or updates (merge-patches ``data``) one ConfigMap manifest."""
    core = CoreV1Api(api_client)

    def apply(manifest: dict[str, Any]) -> object:
        meta = manifest["metadata"]
        name, namespace = str(meta["name"]), str(meta["namespace"])
        try:
            return core.patch_namespaced_config_map(name, namespace,
                                                    {"data": manifest.get("data") or {}})
        except ApiException as exc:
            if exc.status != 404:
                raise
        return core.create_namespaced_config_map(namespace, manifest)  # type: ignore[arg-type]

    return apply
