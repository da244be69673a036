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
     "cpu": {"app": {"requests": "2"}},                # the CPU cpuPerPod set
     "nodeSelector": {"pool": null},                   # previous values
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}

**Which containers.** ``gpu.containers`` names them; empty (the default): the **first**
container of the pod template only (the application; a second container is usually a proxy
or a log shipper that would take a GPU of its own for nothing).

**The CPU.** ``cpuPerPod`` sets the CPU of a GPU pod and the way back restores the CPU from
before, *unless the CPU was changed since* (the CPU actuator resized the workload, in the same
plan or later): :func:`without_gpu` only restores a container's CPU that is still what the
record says was set (``"cpu"``; a record without it, from an older version, is restored as
before), and ``with_gpu(..., keep_cpu=True)`` leaves the CPU alone (the backend asks for it
when :func:`cpu_changed` says the CPU differs from what was set, or from what the last
observation saw). The device's GPUs per pod are counted by the snapshot as one device
(``PodState.device``); ``count`` > 1 is requested from Kubernetes but the planner's model
prices a GPU pod as using one GPU (see :func:`planner.k8s.convert.pod_state`).
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
    """The record in a workload's ``metadata`` (``None``: none); :class:`PermanentError`
    naming the workload, the annotation and the fix when it is not one."""
    raw = (meta.get("annotations") or {}).get(GPU_ANNOTATION)
    if not raw:
        return None
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    fix = (f"fix: remove the annotation (kubectl annotate -n {meta.get('namespace')} "
           f"deployment {meta.get('name')} {GPU_ANNOTATION}-) and take the GPU resource, "
           f"node selector and tolerations out of the pod template by hand")
    try:
        rec = json.loads(raw)
    except ValueError:
        raise PermanentError(f"{where}: annotation {GPU_ANNOTATION} is not JSON: "
                             f"{raw[:80]!r}; {fix}") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("resource"), str):
        raise PermanentError(f"{where}: annotation {GPU_ANNOTATION} is not a GPU record (a "
                             f"JSON object with a 'resource'): {raw[:80]!r}; {fix}")
    return rec


def _cpu_of(container: Mapping[str, Any], part: str) -> Any:
    return ((container.get("resources") or {}).get(part) or {}).get("cpu")


def cpu_changed(tspec: Mapping[str, Any], record: Record) -> bool:
    """Whether a container's CPU differs from what :func:`with_gpu` set (``record["cpu"]``)."""
    by_name = {str(c.get("name")): c for c in tspec.get("containers") or ()}
    for name, parts in (record.get("cpu") or {}).items():
        for part, value in parts.items():
            if _cpu_of(by_name.get(name) or {}, part) != value:
                return True
    return False


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


def with_gpu(tspec: Mapping[str, Any], gpu: GpuSettings, *, keep_cpu: bool = False
             ) -> tuple[dict[str, Any], Record]:
    """``tspec`` (a pod template's ``spec``, copied) made a GPU pod's, and the record;
    ``keep_cpu``: leave the CPU as it is (``cpuPerPod`` not applied)."""
    out = copy.deepcopy(dict(tspec))
    containers: list[dict[str, Any]] = out.get("containers") or []
    names = [str(c.get("name")) for c in containers]
    missing = [n for n in gpu.containers if n not in names]
    if missing or not containers:
        raise PermanentError(
            f"gpu.containers: no container {', '.join(missing) or '(none at all)'} in the pod "
            f"template (it has {', '.join(names) or 'none'}); fix: name one of them in the "
            f"backend settings' gpu.containers, or give [] for the first container")
    rec = _Recorder()
    cpu_set: dict[str, dict[str, str]] = {}
    if gpu.cpu_per_pod is not None and not keep_cpu:
        resized = containers_with_cpu(containers, gpu.cpu_per_pod)
        for c, new in zip(containers, resized, strict=True):
            for part in ("requests", "limits"):
                value = _cpu_of(new, part)
                if value is not None and value != _cpu_of(c, part):
                    rec.set(c, part, "cpu", value)
                    cpu_set.setdefault(str(c.get("name")), {})[part] = value
    count = str(gpu.count)
    chosen = set(gpu.containers) if gpu.containers else {names[0]}
    for c in containers:
        if c.get("name") in chosen:
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
    record: Record = {"resource": gpu.resource, "containers": rec.containers,
                      "nodeSelector": selector_before, "tolerations": added}
    if cpu_set:
        record["cpu"] = cpu_set
    return out, record


def without_gpu(tspec: Mapping[str, Any], record: Record) -> dict[str, Any]:
    """``tspec`` (copied) with what :func:`with_gpu` recorded in ``record`` undone."""
    out = copy.deepcopy(dict(tspec))
    by_name = {str(c.get("name")): c for c in out.get("containers") or []}
    resource = str(record["resource"])
    cpu_set = record.get("cpu")
    for name, parts in (record.get("containers") or {}).items():
        c = by_name.get(name)
        if c is None:
            continue
        res = c.get("resources") or {}
        for part, before in parts.items():
            section = dict(res.get(part) or {})
            # The CPU set by cpuPerPod goes back only while it is still that CPU (a record
            # without "cpu": always, as before).
            ours = cpu_set is None or ((cpu_set.get(name) or {}).get(part) == section.get("cpu")
                                       and section.get("cpu") is not None)
            if before is None:  # the part did not exist: drop what we put there
                section.pop(resource, None)
                if ours:
                    section.pop("cpu", None)
            else:
                for key, value in before.items():
                    if key == "cpu" and not ours:
                        continue
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
