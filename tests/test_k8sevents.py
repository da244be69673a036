"""The event poster's repeat filter: an event whose post failed is not counted as posted."""

from __future__ import annotations

from typing import Any

import pytest

from planner.k8s import k8sevents
from planner.k8s.apierrors import KubernetesTemporaryError
from planner.k8s.poolservice_desired import EventNote


def test_a_failed_post_does_not_silence_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    fail = [True]

    def request(api_client: Any, method: str, path: str, what: str, body: Any = None,
                **kw: Any) -> dict[str, Any]:
        calls.append(body)
        if fail[0]:
            raise KubernetesTemporaryError(f"{what}: 503", status=503)
        return {}

    monkeypatch.setattr(k8sevents, "json_request", request)
    poster = k8sevents.EventPoster(object(), clock=lambda: 100.0)  # type: ignore[arg-type]
    note = EventNote("Warning", "NoMatchNodePool", "no pool", "Service", "shop", "web")
    assert not poster.post(note)  # the API server refused it
    fail[0] = False
    assert poster.post(note)  # so the next reconcile posts it
    assert not poster.post(note)  # and then the repeat filter holds it back
    assert len(calls) == 2 and poster.posted == 1
