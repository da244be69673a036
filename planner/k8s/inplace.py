"""In-place pod resize, the pure part: the server version, a pod's resize progress, the patch.

Kubernetes changes the CPU of a running pod through the Pod ``resize`` subresource (alpha 1.27,
beta and on by default from 1.33, GA 1.35). The kubelet reports progress in two pod
conditions: ``PodResizePending`` (reason ``Deferred``: the node may make room later;
``Infeasible``: it never will) and ``PodResizeInProgress`` (reason ``Error`` when it failed).
:func:`progress` turns them into what the backend does with the pod, as VPA's
``InPlaceOrRecreate`` does: wait, or replace the pod (Infeasible; Deferred or in progress for
longer than the settings allow; Error). The time a pod has been deferred or in progress is the
condition's ``lastTransitionTime`` (set by the kubelet), so the backend keeps no clock of its
own and a restarted planner picks up where it was.

The patch (:func:`resize_patch`) is a JSON patch as VPA's updater sends it: per container
whose resources change, a ``test`` of the container's name (the index is the pod's, and the
pod's containers cannot change) and an ``add`` of its whole ``resources``.

**Which containers.** Only the containers the workload's pod template names are resized and
compared (``names``): a container injected at admission (a service mesh's sidecar) is not the
workload's to size, and the template's CPU is spread over the template's containers only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from planner.k8s.convert import containers_cpu, quantity, running_cpu, timestamp
from planner.k8s.settings import InPlaceResizeSettings
from planner.k8s.templates import containers_with_cpu

IN_PLACE_SINCE = (1, 33)
"""The first Kubernetes version with in-place resize on by default."""
RESIZE_PENDING = "PodResizePending"
RESIZE_IN_PROGRESS = "PodResizeInProgress"
HASH_LABEL = "pod-template-hash"
PAUSED_ANNOTATION = "intent-planner.io/resize-paused"
"""On a Deployment the backend paused to give its ReplicaSet the new size first (see
:mod:`planner.k8s.resizer`); the value is the CPU it was resizing to."""
TEMPLATE_ANNOTATION = "intent-planner.io/replicaset"
"""Pod template annotation an in-place resize sets on the ReplicaSet and the Deployment alike:
the ReplicaSet's name. It keeps their template apart from an older ReplicaSet's kept in the
revision history with the same size (the controller would take the oldest equal one as the
Deployment's, and roll back to it)."""
CPU_EPSILON = 0.0005
"""CPU sizes closer than this (half a millicore) are the same size."""

Decision = Literal["resized", "resize", "wait", "replace", "skip"]


def server_version(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``/version`` answer (``"33+"`` reads as 33); ``None`` when it
    has none."""
    try:
        major = int(re.sub(r"\D.*$", "", str(body.get("major", ""))))
        minor = int(re.sub(r"\D.*$", "", str(body.get("minor", ""))))
    except ValueError:
        git = re.match(r"^v(\d+)\.(\d+)", str(body.get("gitVersion", "")))
        return (int(git.group(1)), int(git.group(2))) if git else None
    return major, minor


def supports_in_place(version: tuple[int, int] | None, mode: str) -> bool:
    if mode != "auto":
        return mode == "on"
    return version is not None and version >= IN_PLACE_SINCE


def condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The pod's condition of type ``kind`` when its status is ``True``."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind and c.get("status") == "True":
            out: Mapping[str, Any] = c
            return out
    return None


def named(containers: Sequence[Mapping[str, Any]], names: Collection[str] | None
          ) -> list[tuple[int, Mapping[str, Any]]]:
    """``(index, container)`` of the containers called one of ``names`` (all: ``None``)."""
    return [(i, c) for i, c in enumerate(containers)
            if names is None or c.get("name") in names]


def pod_cpu(pod: Mapping[str, Any], names: Collection[str] | None = None) -> float:
    """The CPU the pod's spec asks for, over the containers called one of ``names``."""
    containers = (pod.get("spec") or {}).get("containers") or ()
    return containers_cpu([c for _, c in named(containers, names)])


def resize_pending(pod: Mapping[str, Any], cpu: float, names: Collection[str] | None = None
                   ) -> bool:
    """Whether the pod's spec asks for ``cpu`` (over the containers ``names``) while the kubelet
    reports it running with another size (``containerStatuses[].resources``): a resize sent
    and not done (pending, deferred, in progress, infeasible)."""
    containers = [c for _, c in named((pod.get("spec") or {}).get("containers") or (), names)]
    if not containers or abs(containers_cpu(containers) - cpu) >= CPU_EPSILON:
        return False
    return abs(running_cpu(containers, pod.get("status") or {}) - cpu) >= CPU_EPSILON


def max_unavailable(obj: Mapping[str, Any], kind: str) -> int:
    """How many pods of the workload may be replaced at once: the Deployment's
    ``spec.strategy.rollingUpdate.maxUnavailable`` (default 25 %), the StatefulSet's
    ``spec.updateStrategy.rollingUpdate.maxUnavailable`` (default 1); a percentage of
    ``spec.replicas`` rounded down, as the controllers do; at least 1."""
    spec = obj.get("spec") or {}
    key, default = (("updateStrategy", 1) if kind == "StatefulSet" else ("strategy", "25%"))
    value = ((spec.get(key) or {}).get("rollingUpdate") or {}).get("maxUnavailable", default)
    replicas = int(spec.get("replicas", 1) or 0)
    if isinstance(value, str) and value.endswith("%"):
        try:
            n = math.floor(replicas * float(value[:-1]) / 100)
        except ValueError:
            n = 1
    else:
        n = int(quantity(value))
    return max(1, n)


def progress(pod: Mapping[str, Any], cpu: float, now: float,
             settings: InPlaceResizeSettings, names: Collection[str] | None = None
             ) -> tuple[Decision, str]:
    """What to do with ``pod`` to bring it to ``cpu`` cores, and why:

    * ``skip``: not a running pod on a node (pending, finishing, gone): left to its controller;
    * ``resize``: its spec asks for another size: send the resize;
    * ``replace``: the node will not resize it (Infeasible, an Error, or Deferred / in
      progress past the settings' limits);
    * ``wait``: deferred or in progress within the limits;
    * ``resized``: asks for ``cpu`` and no resize is pending.

    ``cpu`` is over the containers called one of ``names`` (every container: ``None``).
    """
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if (meta.get("deletionTimestamp") or status.get("phase") not in ("Running", "Pending")
            or not (pod.get("spec") or {}).get("nodeName")):
        return "skip", "not running on a node"
    asks = pod_cpu(pod, names)
    if abs(asks - cpu) >= CPU_EPSILON:
        return "resize", f"asks for {asks:g} CPU"
    pending = condition(pod, RESIZE_PENDING)
    if pending is not None:
        reason = str(pending.get("reason") or "")
        message = str(pending.get("message") or "")
        if reason == "Deferred":
            return _limited(pending, now, settings.deferred_s, f"deferred: {message}")
        return "replace", f"{reason or 'pending'}: {message}".rstrip(": ")
    running = condition(pod, RESIZE_IN_PROGRESS)
    if running is not None:
        if running.get("reason") == "Error":
            return "replace", f"resize failed: {running.get('message') or ''}".rstrip(": ")
        return _limited(running, now, settings.in_progress_s, "in progress")
    return "resized", "resized"


def _limited(cond: Mapping[str, Any], now: float, limit: float, what: str
             ) -> tuple[Decision, str]:
    since = timestamp(cond.get("lastTransitionTime"))
    if since is None:
        return "wait", f"{what} (since unknown)"
    if now - since > limit:
        return "replace", f"{what} for {now - since:.0f} s (limit {limit:g} s)"
    return "wait", f"{what} for {now - since:.0f} s"


def resize_patch(pod: Mapping[str, Any], cpu: float, names: Collection[str] | None = None
                 ) -> list[dict[str, Any]]:
    """The JSON patch of the pod's ``resize`` subresource giving the containers called one of
    ``names`` (every container: ``None``) ``cpu`` cores (requests spread and limits scaled as
    :func:`planner.k8s.templates.containers_with_cpu` does); empty when nothing changes."""
    containers: Sequence[Mapping[str, Any]] = (pod.get("spec") or {}).get("containers") or ()
    chosen = named(containers, names)
    resized = containers_with_cpu([c for _, c in chosen], cpu)
    ops: list[dict[str, Any]] = []
    for (i, old), new in zip(chosen, resized, strict=True):
        if (old.get("resources") or {}) != (new.get("resources") or {}):
            ops.append({"op": "test", "path": f"/spec/containers/{i}/name",
                        "value": old.get("name")})
            ops.append({"op": "add", "path": f"/spec/containers/{i}/resources",
                        "value": new["resources"]})
    return ops


def label_selector(selector: Mapping[str, Any]) -> str:
    """A ``LabelSelector`` as the ``labelSelector`` query parameter."""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or ():
        key, op, values = e.get("key"), e.get("operator"), ",".join(e.get("values") or ())
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def same_template(a: Mapping[str, Any], b: Mapping[str, Any], *, but_cpu: bool = False
                  ) -> bool:
    """Whether two pod templates are equal but for the ``pod-template-hash`` label: how the
    Deployment controller finds the ReplicaSet of a Deployment's template
    (``EqualIgnoreHash``); ``but_cpu``: and but for what an in-place resize changes (the
    containers' CPU requests and limits, :data:`TEMPLATE_ANNOTATION`)."""
    a, b = _without_hash(a), _without_hash(b)
    if but_cpu:
        a, b = _without_cpu(a), _without_cpu(b)
    return a == b


def _without_cpu(template: dict[str, Any]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != TEMPLATE_ANNOTATION}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    spec = dict(template.get("spec") or {})
    containers = []
    for c in spec.get("containers") or ():
        c = dict(c)
        res = {part: {k: v for k, v in (values or {}).items() if k != "cpu"}
               for part, values in (c.get("resources") or {}).items()}
        c["resources"] = res
        containers.append(c)
    spec["containers"] = containers
    return {**template, "metadata": meta, "spec": spec}


def _without_hash(template: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(template)
    meta = dict(out.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    out["metadata"] = meta
    return out


def observed(obj: Mapping[str, Any]) -> bool:
    """Whether the object's controller has seen its latest spec (``status.observedGeneration``
    at least ``metadata.generation``)."""
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    seen = (obj.get("status") or {}).get("observedGeneration")
    return seen is not None and int(seen) >= generation
