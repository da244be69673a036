"""A pod template made a GPU template and back (:meth:`KubernetesBackend.set_device`): pure
functions over plain JSON objects.

:func:`with_gpu` adds what :class:`planner.k8s.settings.GpuSettings` says to a pod template's
``spec``: the GPU resource (request and limit, ``count`` each) to the chosen containers, the
GPU pool's labels to ``nodeSelector``, the GPU taints' tolerations to ``tolerations``, and the
CPU request of a GPU pod (``cpuPerPod``, spread over the containers as ``resize`` spreads it).
It returns the template and a **record** of what it changed: for every key it set, the value
the key had before (``None``: absent), and the tolerations it appended. :func:`without_gpu`
undoes exactly that record: the user's own selector keys, tolerations and resources stay as
they were (a key the user already had with the same value is not in the record, so it is not
removed). The backend keeps the record as JSON in the workload's annotation
:data:`GPU_ANNOTATION`, so the way back survives a restart of the planner.

Record shape::

    {"resource": "nvidia.com/gpu",
     "containers": {"app": {"requests": {"cpu": "500m", "nvidia.com/gpu": null},
                            "limits": null}},          # null: the part did not exist
     "nodeSelector": {"pool": null},                   # previous values
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from planner.domain.errors import PermanentError
from planner.k8s.settings import GpuSettings
from planner.k8s.templates import containers_with_cpu

GPU_ANNOTATION = "intent-planner.io/gpu"
"""Annotation of a workload that :func:`with_gpu` made a GPU workload: its record (JSON)."""

Record = dict[str, Any]


def read_record(meta: Mapping[str, Any]) -> Record | None:
    """The record in a workload's ``metadata`` (``None``: none, or not one of ours)."""
    raw = (meta.get("annotations") or {}).get(GPU_ANNOTATION)
    if not raw:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        raise PermanentError(f"annotation {GPU_ANNOTATION} is not JSON: {raw[:80]!r}; fix: "
                             f"remove it (and the GPU settings by hand)") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("resource"), str):
        raise PermanentError(f"annotation {GPU_ANNOTATION} is not a GPU record: {raw[:80]!r}")
    return rec


def dump_record(record: Record) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


class _Recorder:
    """Remembers the previous value of each resource key set (the first time only)."""

    def __init__(self) -> None:
        self.containers: dict[str, dict[str, dict[str, Any] | None]] = {}

    def set(self, container: dict[str, Any], part: str, key: str, value: str) -> None:
        res = container.setdefault("resources", {})
        parts = self.containers.setdefault(str(container.get("name")), {})
        if part not in parts:
            parts[part] = {} if part in res else None
        before = parts[part]
        section = res.setdefault(part, {})
        if before is not None and key not in before:
            before[key] = section.get(key)
        section[key] = value


def with_gpu(tspec: Mapping[str, Any], gpu: GpuSettings) -> tuple[dict[str, Any], Record]:
    """``tspec`` (a pod template's ``spec``, copied) made a GPU pod's, and the record."""
    out = copy.deepcopy(dict(tspec))
    containers: list[dict[str, Any]] = out.get("containers") or []
    names = [str(c.get("name")) for c in containers]
    missing = [n for n in gpu.containers if n not in names]
    if missing or not containers:
        raise PermanentError(
            f"gpu.containers: no container {', '.join(missing) or '(none at all)'} in the pod "
            f"template (it has {', '.join(names) or 'none'}); fix: name one of them, or give "
            f"[] for every container")
    rec = _Recorder()
    if gpu.cpu_per_pod is not None:
        resized = containers_with_cpu(containers, gpu.cpu_per_pod)
        for c, new in zip(containers, resized, strict=True):
            for part in ("requests", "limits"):
                value = ((new.get("resources") or {}).get(part) or {}).get("cpu")
                old = ((c.get("resources") or {}).get(part) or {}).get("cpu")
                if value is not None and value != old:
                    rec.set(c, part, "cpu", value)
    count = str(gpu.count)
    for c in containers:
        if not gpu.containers or c.get("name") in gpu.containers:
            for part in ("requests", "limits"):
                rec.set(c, part, gpu.resource, count)
    selector = dict(out.get("nodeSelector") or {})
    selector_before: dict[str, str | None] = {}
    for k, v in gpu.node_selector.items():
        if selector.get(k) != v:
            selector_before[k] = selector.get(k)
            selector[k] = v
    if selector:
        out["nodeSelector"] = selector
    tolerations = list(out.get("tolerations") or [])
    added = []
    for t in gpu.tolerations:
        api = t.as_api()
        if api not in tolerations:
            tolerations.append(api)
            added.append(api)
    if tolerations:
        out["tolerations"] = tolerations
    return out, {"resource": gpu.resource, "containers": rec.containers,
                 "nodeSelector": selector_before, "tolerations": added}


def without_gpu(tspec: Mapping[str, Any], record: Record) -> dict[str, Any]:
    """``tspec`` (copied) with what :func:`with_gpu` recorded in ``record`` undone."""
    out = copy.deepcopy(dict(tspec))
    by_name = {str(c.get("name")): c for c in out.get("containers") or []}
    resource = str(record["resource"])
    for name, parts in (record.get("containers") or {}).items():
        c = by_name.get(name)
        if c is None:
            continue
        res = c.get("resources") or {}
        for part, before in parts.items():
            section = dict(res.get(part) or {})
            if before is None:  # the part did not exist: drop what we put there
                section.pop(resource, None)
                section.pop("cpu", None)
            else:
                for key, value in before.items():
                    if value is None:
                        section.pop(key, None)
                    else:
                        section[key] = value
            if section:
                res[part] = section
            else:
                res.pop(part, None)
        if res:
            c["resources"] = res
        else:
            c.pop("resources", None)
    selector = dict(out.get("nodeSelector") or {})
    for k, before in (record.get("nodeSelector") or {}).items():
        if before is None:
            selector.pop(k, None)
        else:
            selector[k] = before
    if selector:
        out["nodeSelector"] = selector
    else:
        out.pop("nodeSelector", None)
    tolerations = list(out.get("tolerations") or [])
    for t in record.get("tolerations") or ():
        if t in tolerations:
            tolerations.remove(t)
    if tolerations:
        out["tolerations"] = tolerations
    else:
        out.pop("tolerations", None)
    return out


TEMPLATE_KEYS = ("containers", "nodeSelector", "tolerations")
"""The pod template ``spec`` keys :func:`with_gpu` changes."""
