"""Per-resource projections: the fields of each object the planner needs, and nothing else.

The watch cache stores the projection of every object it receives, not the object. A pod as the
API server sends it is typically 3-8 KB of JSON (``managedFields``, env, volumes, probes,
tolerations, ...); its projection keeps a dozen fields. Strings that repeat across objects
(namespaces, node names, label keys and values, timestamps) are interned, and identical label
maps and small sub-structures (owner references, container requests, conditions, container
statuses) are shared between objects (:class:`Interner`): the pods of one Deployment all point
at one ``labels`` dict and one ``containers`` list. A pod then takes about 2 KB of cache
memory against about 18 KB for the whole parsed object (``bench/watch.py`` measures both).
Projected objects are therefore **read-only** for consumers.

What each projection keeps (everything else is dropped):

``pods``
    ``metadata``: name, namespace, resourceVersion, labels, creationTimestamp,
    deletionTimestamp, ownerReferences (kind, name), the ``pod-deletion-cost`` annotation;
    ``spec``: nodeName, nodeSelector, containers (name; cpu and ``*/gpu`` requests and limits);
    ``status``: phase, startTime, the ``Ready`` condition, containerStatuses (name,
    restartCount).
``nodes``
    ``metadata``: name, uid, resourceVersion, labels, ``intent-planner.io/*`` annotations;
    ``spec.unschedulable``; ``status``: cpu and ``*/gpu`` of capacity and allocatable, the
    ``Ready`` condition.
``deployments``, ``statefulsets``
    ``metadata``: name, namespace, uid, resourceVersion, generation, labels,
    ``intent-planner.io/*`` annotations;
    ``spec``: replicas, selector, template labels, template nodeSelector, template containers
    (name; cpu and ``*/gpu`` requests and limits); ``status``: replicas, readyReplicas.
``services``
    ``metadata`` basics, labels, finalizers, deletionTimestamp, and of the annotations only
    OpenYurt's pool selector and the ``aggregated.*`` keys; ``spec``: type, selector, ports,
    loadBalancerClass; ``status.loadBalancer.ingress`` (what the PoolService fan-out reads).
``poolservices``, ``nodepools``
    as ``intents`` below.
``endpointslices``
    ``metadata`` basics and labels (``kubernetes.io/service-name``); addressType; endpoints
    (addresses, ``conditions.ready``, nodeName, targetRef kind/name); ports.
``intents``, ``kpiprofiles``
    the whole object except ``metadata.managedFields`` (and other server metadata the planner
    does not read, such as ``selfLink``) and kopf's ``last-handled-configuration`` annotation
    (a copy of the spec).

A custom projection can be passed per resource to :class:`planner.k8s.watchcache.WatchCache`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from planner.k8s.openyurt import AGGREGATED_PREFIX, POOL_SELECTOR_ANNOTATION

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
KOPF_LAST_HANDLED = "kopf.zalando.org/last-handled-configuration"
PLANNER_PREFIX = "intent-planner.io/"


class Interner:
    """Shares equal strings, label maps and small sub-structures between the objects of one
    resource (the pods of a ReplicaSet have the same labels, owner, container requests and,
    mostly, the same conditions).

    Not thread-safe: the watch cache uses one per resource, from that resource's thread.
    """

    def __init__(self, max_maps: int = 100_000) -> None:
        self._maps: dict[Any, Any] = {}
        self._max_maps = max_maps

    @staticmethod
    def s(value: Any) -> Any:
        return sys.intern(value) if isinstance(value, str) else value

    def _share(self, key: Any, value: Any) -> Any:
        shared = self._maps.get(key)
        if shared is None:
            if len(self._maps) >= self._max_maps:
                self._maps.clear()
            shared = self._maps[key] = value
        return shared

    def labels(self, value: Any) -> dict[str, str]:
        if not isinstance(value, Mapping) or not value:
            return _EMPTY
        key = tuple(sorted((sys.intern(str(k)), sys.intern(str(v))) for k, v in value.items()))
        shared: dict[str, str] = self._share(key, dict(key))
        return shared

    def shared(self, value: Any) -> Any:
        """An equal JSON-like value (dicts, lists, scalars) shared with earlier objects."""
        return self._share(("json", _freeze(value)), value)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("[", *(_freeze(v) for v in value))
    return value


_EMPTY: dict[str, str] = {}

Projection = Callable[[Mapping[str, Any], Interner], dict[str, Any]]


def _meta(obj: Mapping[str, Any], it: Interner, *extra: str,
          keys: tuple[str, ...] = ("uid", "resourceVersion")) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {"name": it.s(meta.get("name"))}
    if meta.get("namespace") is not None:
        out["namespace"] = it.s(meta["namespace"])
    for key in (*keys, *extra):
        if meta.get(key) is not None:
            out[key] = meta[key]
    labels = it.labels(meta.get("labels"))
    if labels:
        out["labels"] = labels
    return out


def _resource_list(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {Interner.s(k): v for k, v in value.items() if k == "cpu" or str(k).endswith("/gpu")}


def _containers(spec: Mapping[str, Any], it: Interner) -> list[dict[str, Any]]:
    out = []
    for c in spec.get("containers") or ():
        res = c.get("resources") or {}
        proj: dict[str, Any] = {"name": it.s(c.get("name"))}
        kept = {k: v for k, v in (("requests", _resource_list(res.get("requests"))),
                                  ("limits", _resource_list(res.get("limits")))) if v}
        if kept:
            proj["resources"] = kept
        out.append(proj)
    return out


def _ready_condition(status: Mapping[str, Any]) -> list[dict[str, str]]:
    return [{"type": "Ready", "status": Interner.s(c.get("status"))}
            for c in status.get("conditions") or () if c.get("type") == "Ready"]


def _container_status(c: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    """Name, restarts and, where the kubelet reports it (Kubernetes >= 1.33), the CPU the
    container runs with now (``resources.requests.cpu``: behind the spec while an in-place
    resize is pending)."""
    out: dict[str, Any] = {"name": it.s(c.get("name")),
                           "restartCount": int(c.get("restartCount") or 0)}
    cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
    if cpu is not None:
        out["resources"] = {"requests": {"cpu": it.s(str(cpu))}}
    return out


def project_pod(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    meta_in = obj.get("metadata") or {}
    meta = _meta(obj, it, "creationTimestamp", "deletionTimestamp", keys=("resourceVersion",))
    owners = [{"kind": it.s(o.get("kind")), "name": it.s(o.get("name"))}
              for o in meta_in.get("ownerReferences") or ()]
    if owners:
        meta["ownerReferences"] = it.shared(owners)
    if meta.get("creationTimestamp"):
        meta["creationTimestamp"] = it.s(meta["creationTimestamp"])
    cost = (meta_in.get("annotations") or {}).get(DELETION_COST)
    if cost is not None:
        meta["annotations"] = {DELETION_COST: cost}
    spec_in = obj.get("spec") or {}
    spec: dict[str, Any] = {"containers": it.shared(_containers(spec_in, it))}
    if spec_in.get("nodeName"):
        spec["nodeName"] = it.s(spec_in["nodeName"])
    if spec_in.get("nodeSelector"):
        spec["nodeSelector"] = it.labels(spec_in["nodeSelector"])
    st = obj.get("status") or {}
    status: dict[str, Any] = {"phase": it.s(st.get("phase")),
                              "conditions": it.shared(_ready_condition(st)),
                              "containerStatuses": it.shared([
                                  _container_status(c, it)
                                  for c in st.get("containerStatuses") or ()])}
    if st.get("startTime"):
        status["startTime"] = it.s(st["startTime"])
    return {"metadata": meta, "spec": spec, "status": status}


def project_node(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    meta = _meta(obj, it)
    ann = {k: v for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items()
           if str(k).startswith(PLANNER_PREFIX)}
    if ann:
        meta["annotations"] = ann
    spec_in = obj.get("spec") or {}
    st = obj.get("status") or {}
    return {
        "metadata": meta,
        "spec": {"unschedulable": bool(spec_in.get("unschedulable", False))},
        "status": {"capacity": _resource_list(st.get("capacity")),
                   "allocatable": _resource_list(st.get("allocatable")),
                   "conditions": _ready_condition(st)},
    }


def project_workload(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    spec_in = obj.get("spec") or {}
    tmpl = spec_in.get("template") or {}
    tspec = tmpl.get("spec") or {}
    template: dict[str, Any] = {
        "metadata": {"labels": it.labels((tmpl.get("metadata") or {}).get("labels"))},
        "spec": {"containers": _containers(tspec, it)},
    }
    if tspec.get("nodeSelector"):
        template["spec"]["nodeSelector"] = it.labels(tspec["nodeSelector"])
    st = obj.get("status") or {}
    meta = _meta(obj, it, "generation")
    ann = {k: v for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items()
           if str(k).startswith(PLANNER_PREFIX)}
    if ann:
        meta["annotations"] = ann
    return {
        "metadata": meta,
        "spec": {"replicas": int(spec_in.get("replicas", 1)),
                 "selector": spec_in.get("selector") or {}, "template": template},
        "status": {"replicas": int(st.get("replicas") or 0),
                   "readyReplicas": int(st.get("readyReplicas") or 0)},
    }


def project_service(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    spec_in = obj.get("spec") or {}
    meta = _meta(obj, it, "finalizers", "deletionTimestamp")
    ann = {k: v for k, v in ((obj.get("metadata") or {}).get("annotations") or {}).items()
           if k == POOL_SELECTOR_ANNOTATION or str(k).startswith(AGGREGATED_PREFIX)}
    if ann:
        meta["annotations"] = ann
    spec: dict[str, Any] = {
        "type": it.s(spec_in.get("type", "ClusterIP")),
        "selector": it.labels(spec_in.get("selector")),
        "ports": [{k: p[k] for k in ("name", "port", "targetPort", "protocol") if k in p}
                  for p in spec_in.get("ports") or ()]}
    if spec_in.get("loadBalancerClass"):
        spec["loadBalancerClass"] = it.s(spec_in["loadBalancerClass"])
    out: dict[str, Any] = {"metadata": meta, "spec": spec}
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")
    if ingress:
        out["status"] = {"loadBalancer": {"ingress": ingress}}
    return out


def project_endpointslice(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    endpoints = []
    for ep in obj.get("endpoints") or ():
        proj: dict[str, Any] = {"addresses": list(ep.get("addresses") or ()),
                                "conditions": {"ready": (ep.get("conditions") or {}).get("ready")}}
        if ep.get("nodeName"):
            proj["nodeName"] = it.s(ep["nodeName"])
        ref = ep.get("targetRef")
        if ref:
            proj["targetRef"] = {"kind": it.s(ref.get("kind")), "name": it.s(ref.get("name"))}
        endpoints.append(proj)
    return {"metadata": _meta(obj, it), "addressType": it.s(obj.get("addressType")),
            "endpoints": endpoints, "ports": list(obj.get("ports") or ())}


CUSTOM_METADATA = ("name", "namespace", "generation", "labels", "annotations", "uid",
                   "resourceVersion", "creationTimestamp", "deletionTimestamp", "generateName",
                   "finalizers", "ownerReferences")
"""The metadata kept of a custom resource (what :mod:`planner.domain.intents` accepts)."""


def project_custom(obj: Mapping[str, Any], it: Interner | None = None) -> dict[str, Any]:
    """A custom resource without ``managedFields`` and kopf's copy of the last spec."""
    out = dict(obj)
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if k in CUSTOM_METADATA}
    ann = meta.get("annotations")
    if isinstance(ann, Mapping) and KOPF_LAST_HANDLED in ann:
        meta["annotations"] = {k: v for k, v in ann.items() if k != KOPF_LAST_HANDLED}
    out["metadata"] = meta
    return out


def project_all(obj: Mapping[str, Any], it: Interner) -> dict[str, Any]:
    """No projection: keep the whole object (for tests and benchmarks)."""
    return dict(obj)


PROJECTIONS: dict[str, Projection] = {
    "pods": project_pod,
    "nodes": project_node,
    "deployments": project_workload,
    "statefulsets": project_workload,
    "services": project_service,
    "endpointslices": project_endpointslice,
    "intents": project_custom,
    "kpiprofiles": project_custom,
    "poolservices": project_custom,
    "nodepools": project_custom,
}
"""The default projection of each resource, by plural."""
