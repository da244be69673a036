"""One JSON request through the official client's :class:`ApiClient`, without its models.

Custom resources (PoolService, NodePool) and merge patches with ``resourceVersion``
preconditions are plain JSON here; errors come back as the planner's two kinds
(:mod:`planner.k8s.apierrors`).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from planner.k8s.apierrors import api_call

MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "intent-planner"


def json_request(api_client: ApiClient, method: str, path: str, what: str, body: Any = None,
                 content_type: str = "application/json", timeout: float = 30.0,
                 query: list[tuple[str, str]] | None = None,
                 field_manager: str = FIELD_MANAGER) -> dict[str, Any]:
    """``method path`` with a JSON ``body``; the JSON answer (``{}`` when empty).

    Raises :class:`planner.k8s.apierrors.KubernetesTemporaryError` (409, 429, 5xx, no answer)
    or :class:`~planner.k8s.apierrors.KubernetesPermanentError` (other 4xx; ``NotFound``).
    """
    params = list(query or [])
    if method in ("POST", "PATCH", "PUT"):
        params.append(("fieldManager", field_manager))
    with api_call(what):
        m, url, headers, data, _ = api_client.param_serialize(
            method, path, query_params=params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body, auth_settings=["BearerToken"])
        resp = api_client.call_api(m, url, headers, data, _request_timeout=timeout)
        raw: bytes = resp.response.data or b""
        if not 200 <= resp.status <= 299:
            raise ApiException(status=resp.status, reason=resp.reason,
                               body=raw.decode(errors="replace"))
        out: dict[str, Any] = json.loads(raw) if raw else {}
        return out
