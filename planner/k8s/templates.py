"""Pod template edits shared by :meth:`~planner.k8s.backend.KubernetesBackend.resize` and the
canary Deployment (:mod:`planner.k8s.canary`): pure functions over plain JSON objects."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from planner.k8s.convert import containers_cpu, quantity
from planner.k8s.quantities import cpu_quantity


def containers_with_cpu(containers: Sequence[Mapping[str, Any]], cpu: float
                        ) -> list[dict[str, Any]]:
    """``containers`` (copied) with CPU requests summing to ``cpu`` cores: several containers
    keep their proportions, a CPU limit keeps its ratio to the request (and is never below
    it); when no container requests CPU the first one gets it all."""
    out = [dict(c) for c in containers]
    total = containers_cpu(out)
    for i, c in enumerate(out):
        res = {k: dict(v) for k, v in (c.get("resources") or {}).items()}
        requests, limits = res.setdefault("requests", {}), res.get("limits")
        old = quantity(requests.get("cpu", 0))
        if total > 0:
            if old <= 0:
                continue
            new = max(0.001, cpu * old / total)
        elif i == 0:
            new = cpu
        else:
            continue
        requests["cpu"] = cpu_quantity(new)
        if limits and "cpu" in limits and old > 0:
            limits["cpu"] = cpu_quantity(max(new, quantity(limits["cpu"]) * new / old))
        c["resources"] = res
    return out


def node_selector_on(current: Mapping[str, str], pool_keys: Collection[str],
                     label: str | None, pool: str | None) -> dict[str, str]:
    """The template's ``nodeSelector`` pinned to ``pool`` through ``label`` (``None``:
    anywhere): ``current`` without any of the ``pool_keys``, plus ``label: pool``."""
    out = {k: v for k, v in current.items() if k not in pool_keys}
    if label is not None and pool is not None:
        out[label] = pool
    return out


_MISSING = object()


def merge_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``current`` into ``desired`` (``{}`` when
    they are equal): changed values, ``None`` for keys ``desired`` drops; lists whole."""
    out: dict[str, Any] = {}
    for k, v in desired.items():
        old = current.get(k, _MISSING)
        if isinstance(v, Mapping) and isinstance(old, Mapping):
            sub = merge_patch(old, v)
            if sub:
                out[k] = sub
        elif old != v:
            out[k] = v
    for k in current.keys() - desired.keys():
        out[k] = None
    return out
