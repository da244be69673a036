"""Canaries on Kubernetes: a second Deployment beside a workload's, as Flagger and Argo Rollouts
run them (:meth:`planner.k8s.backend.KubernetesBackend.set_canary`).

The canary of Deployment ``web`` is the Deployment ``web-canary`` in the same namespace, made
from ``web`` as read from the API server:

* its labels and its pod template's are ``web``'s plus ``intent-planner.io/canary: "true"``
  (:data:`CANARY_LABEL`), so the Service selecting ``web``'s pods selects the canary's too;
* its ``spec.selector`` is ``web``'s plus that label in ``matchLabels``;
* an ownerReference to ``web`` (deleting ``web`` deletes the canary; no ``controller`` flag, no
  ``blockOwnerDeletion``: the planner needs no rights on ``web``'s finalizers);
* ``replicas`` the canary's, the CPU requests and limits scaled to the canary's CPU as
  ``resize`` does (:func:`planner.k8s.templates.containers_with_cpu`), the ``nodeSelector``
  on the canary's pool with the label ``place`` uses (other ``nodeSelector`` keys kept); the
  rest of ``web``'s spec as it is (image, probes, strategy, ...), except ``paused``.

Each ``set_canary`` call makes the canary again from ``web`` as it is then and patches only
what differs (:func:`patch`: nothing when the canary already is as asked), so a change of
``web``'s template reaches the canary at the next call, not before. A Deployment named
``web-canary`` without the canary label is not the planner's: it is neither patched nor deleted.

**The workload's selector matches the canary's pods.** ``web``'s selector (``app: web``, say)
cannot exclude them: a Deployment's selector is immutable, and pods behind the same Service
share its labels. Kubernetes itself is not confused: ``web``'s ReplicaSets select on their own
``pod-template-hash`` and adopt only pods without a controller, and the canary's pods belong
to the canary's ReplicaSets. But everything that lists ``web``'s pods by its selector counts
them: this backend's observation, ``kubectl get pods -l app=web``, and a HorizontalPodAutoscaler
on ``web`` (the ``scale`` subresource reports that selector). The backend therefore reads a
pod carrying :data:`CANARY_LABEL` as a canary pod: it belongs to a canary Deployment whose
selector matches it, never to another workload (:func:`selects`). An HPA on the same workload
still counts the canary's pods; the planner should own the replica count of a workload it
runs canaries for.

A Deployment carrying :data:`CANARY_LABEL` is not a workload of its own: the snapshot shows it
as :attr:`planner.domain.state.WorkloadState.canary` of the workload named by its name without
:data:`CANARY_SUFFIX` (:func:`split`), with its desired config and its pods.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from planner.domain.state import WorkloadConfig
from planner.k8s.quantities import selector_matches
from planner.k8s.templates import containers_with_cpu, merge_patch

Raw = Mapping[str, Any]

CANARY_LABEL = "intent-planner.io/canary"
CANARY_VALUE = "true"
CANARY_SUFFIX = "-canary"


def canary_name(name: str) -> str:
    return f"{name}{CANARY_SUFFIX}"


def _labels(obj: Raw) -> Mapping[str, str]:
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def is_canary(obj: Raw) -> bool:
    """Whether the object (a Deployment or a pod) carries :data:`CANARY_LABEL`."""
    return _labels(obj).get(CANARY_LABEL) == CANARY_VALUE


def owner_key(obj: Raw) -> str | None:
    """The ``namespace/name`` of the workload a canary Deployment belongs to (``None`` for a
    Deployment that is not a canary, or whose name does not end in :data:`CANARY_SUFFIX`)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    if not is_canary(obj) or not name.endswith(CANARY_SUFFIX) or name == CANARY_SUFFIX:
        return None
    return f"{(obj.get('metadata') or {}).get('namespace')}/{name[:-len(CANARY_SUFFIX)]}"


def selects(selector: Mapping[str, Any], labels: Mapping[str, str], canary: bool) -> bool:
    """Whether a workload (``canary``: a canary Deployment) owns a pod with ``labels``: its
    selector matches them, and the pod is a canary pod exactly when the workload is a canary."""
    return ((labels.get(CANARY_LABEL) == CANARY_VALUE) == canary
            and selector_matches(selector, labels))


def split(raw_workloads: Iterable[tuple[str, Raw]]
          ) -> tuple[list[tuple[str, Raw]], dict[str, tuple[str, Raw]]]:
    """``(kind, object)`` pairs without the canary Deployments, and the canary Deployments by
    the key of the workload each belongs to (one labelled a canary but not named like one
    belongs to none and is left out of both)."""
    workloads: list[tuple[str, Raw]] = []
    canaries: dict[str, tuple[str, Raw]] = {}
    for kind, raw in raw_workloads:
        if kind != "Deployment" or not is_canary(raw):
            workloads.append((kind, raw))
        elif (owner := owner_key(raw)) is not None:
            canaries[owner] = (kind, raw)
    return workloads, canaries


def _with_label(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {**(labels or {}), CANARY_LABEL: CANARY_VALUE}


def desired(main: Raw, cfg: WorkloadConfig, node_selector: Mapping[str, str]
            ) -> dict[str, Any]:
    """The canary Deployment of ``main`` (a Deployment as the API server returns it) running
    ``cfg.replicas`` pods of ``cfg.cpu`` cores on ``node_selector``; see the module doc."""
    meta = main.get("metadata") or {}
    spec = copy.deepcopy(dict(main.get("spec") or {}))
    spec.pop("paused", None)
    selector = spec.get("selector") or {}
    selector["matchLabels"] = _with_label(selector.get("matchLabels"))
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = _with_label(tmeta.get("labels"))
    tspec = template.setdefault("spec", {})
    tspec["containers"] = containers_with_cpu(tspec.get("containers") or (), cfg.cpu)
    if node_selector:
        tspec["nodeSelector"] = dict(node_selector)
    else:
        tspec.pop("nodeSelector", None)
    spec.update(replicas=int(cfg.replicas), selector=selector)
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": meta.get("name"),
             "uid": meta.get("uid")}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": canary_name(str(meta.get("name"))),
                         "namespace": meta.get("namespace"),
                         "labels": _with_label(meta.get("labels")),
                         "ownerReferences": [owner]},
            "spec": spec}


def patch(current: Raw, want: Raw) -> dict[str, Any]:
    """The merge patch that gives the existing canary ``current`` the labels, owner and spec
    of ``want`` (``{}``: it has them); guarded by ``current``'s ``resourceVersion``."""
    cur_meta = current.get("metadata") or {}
    meta: dict[str, Any] = {}
    labels = merge_patch(cur_meta.get("labels") or {}, want["metadata"]["labels"])
    if labels:
        meta["labels"] = labels
    if cur_meta.get("ownerReferences") != want["metadata"]["ownerReferences"]:
        meta["ownerReferences"] = want["metadata"]["ownerReferences"]
    spec = merge_patch(current.get("spec") or {}, want["spec"])
    if not meta and not spec:
        return {}
    meta["resourceVersion"] = cur_meta.get("resourceVersion")
    out: dict[str, Any] = {"metadata": meta}
    if spec:
        out["spec"] = spec
    return out

