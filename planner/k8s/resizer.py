"""In-place CPU resize of a workload: the running pods through their ``resize`` subresource,
the pod template without a rollout (:meth:`planner.k8s.backend.KubernetesBackend.resize` on a
cluster that resizes in place).

**Why the template needs care.** A change of a Deployment's pod template is a new revision:
the Deployment controller creates a ReplicaSet for the new template and replaces every pod
(a rollout), whatever the change. That is why VPA's ``InPlaceOrRecreate`` never touches the
workload: it resizes the pods and gives new pods the recommendation through its admission
webhook. Without a webhook, new pods (scale-out, a pod replaced) must get the new size from
the template, and the template must change without a rollout. The Deployment controller
decides "new ReplicaSet or not" by comparing the Deployment's template with its ReplicaSets'
templates, ignoring the ``pod-template-hash`` label (``FindNewReplicaSet`` /
``EqualIgnoreHash`` in ``pkg/controller/deployment/util``): when the current ReplicaSet's
template already equals the new one, it is the new ReplicaSet and no pod is replaced. So, for
a Deployment, one level-based step per call, each call going as far as it can:

1. **pause** the Deployment (``spec.paused``; annotation :data:`~planner.k8s.inplace.
   PAUSED_ANNOTATION` says we did) and wait until its controller has seen it
   (``status.observedGeneration``): while paused the controller creates no ReplicaSet, so
   the next step cannot race it into one for the old template;
2. patch the **current ReplicaSet's** template to the new size (a ReplicaSet's template only
   shapes the pods it creates from now on), with the annotation
   :data:`~planner.k8s.inplace.TEMPLATE_ANNOTATION` naming the ReplicaSet, and wait until the
   ReplicaSet controller has seen it (the controllers share one ReplicaSet informer, so the
   Deployment controller has too);
3. patch the **Deployment's** template to the same containers and annotation and unpause it
   in one write: the controller finds the ReplicaSet equal to the template, and nothing
   rolls. (Without the annotation an older ReplicaSet of the revision history at the same size
   would be equal too, and the controller takes the oldest equal one: a rollback.)

Waiting is bounded by ``settleSeconds`` per call; a step not yet seen is left to the next call
(state lives in the objects: the pause, our annotation, generations). Where there is no
current ReplicaSet (a rollout in progress, or a template changed by someone else) the
template is patched plainly and rolls out, as without in-place resize. For a StatefulSet
with ``updateStrategy: OnDelete`` a template change replaces no pod, so the template is patched
and the pods resized; with ``RollingUpdate`` (the default) the StatefulSet controller replaces
every pod whose revision differs, so it is a rollout as before. *This reading of the
controllers is from their source; the tests drive it on the API emulator, which runs no
controller, with the tests playing the controllers' part.*

**The pods.** Each call lists the workload's pods from the API server (the watch cache keeps
no resize conditions) and, per pod (:func:`planner.k8s.inplace.progress`): sends the resize
(a JSON patch of the ``resize`` subresource) to a pod asking for another size; waits for one
deferred or in progress within the limits; and once the template has the new size,
**evicts** a pod the node cannot resize (Infeasible, an error, deferred or in progress past
the limits; a resize the API server refuses as invalid) through the Eviction API
(PodDisruptionBudgets apply, as for VPA's eviction), so that its ReplicaSet makes a new pod of
the new size elsewhere: one pod restarts, not all of them as a rollout would. An eviction
refused (429 for a budget) is retried at the next call. The pods' resizes go first, so a
missing permission (403) shows before the workload is touched; the backend then rolls out
instead.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubernetes.client import AppsV1Api, CoreV1Api

from planner.domain.errors import TemporaryError
from planner.k8s import canary as canaries
from planner.k8s import inplace
from planner.k8s.apierrors import KubernetesPermanentError, NotFound, api_call
from planner.k8s.convert import containers_cpu, timestamp
from planner.k8s.quantities import cpu_quantity
from planner.k8s.resources import PODS
from planner.k8s.settings import InPlaceResizeSettings, KubernetesSettings
from planner.k8s.templates import containers_with_cpu

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
POLL_S = 0.2

Raw = dict[str, Any]


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = obj.get("spec") or {}
    return spec


def _template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    tmpl: Mapping[str, Any] = _spec(obj).get("template") or {}
    return tmpl


def _containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((_template(obj).get("spec") or {}).get("containers") or ())


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def at_size(obj: Mapping[str, Any], cpu: float) -> bool:
    return abs(containers_cpu(_containers(obj)) - cpu) < inplace.CPU_EPSILON


def paused_by_us(obj: Mapping[str, Any]) -> bool:
    return inplace.PAUSED_ANNOTATION in (_meta(obj).get("annotations") or {})


def resume_fields(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``metadata`` and ``spec`` parts of a patch that undo our pause (empty when the
    workload is not paused by us): a template patch carries them, so that no other change
    is held back by a pause a resize left behind."""
    if not paused_by_us(obj):
        return {}, {}
    return {"annotations": {inplace.PAUSED_ANNOTATION: None}}, {"paused": False}


class Host(Protocol):
    """What the resizer uses of its backend
    (:class:`planner.k8s.backend.KubernetesBackend`)."""

    core: CoreV1Api
    apps: AppsV1Api
    timeout: float
    field_manager: str
    settings: KubernetesSettings

    def now(self) -> float: ...

    def _read_workload(self, kind: str, ns: str, name: str) -> dict[str, Any]: ...

    def _patch_template_cpu(self, kind: str, ns: str, name: str, fresh: Mapping[str, Any],
                            cpu: float) -> None: ...

    def _request(self, method: str, path: str, what: str, body: Any = None
                 ) -> dict[str, Any]: ...


class InPlaceResizer:
    """See the module docstring; ``backend`` is the caller (its API helpers and settings)."""

    def __init__(self, backend: Host,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.sleep = sleep
        self.monotonic = monotonic

    @property
    def settings(self) -> InPlaceResizeSettings:
        return self.backend.settings.in_place_resize

    # ------------------------------------------------------------------ entry point
    def resize(self, kind: str, ns: str, name: str, fresh: Raw, cpu: float) -> None:
        """One step towards ``cpu`` cores: the pods' resizes first (a missing permission shows
        before the workload is touched), then the template, then the replacements."""
        workload = f"{ns}/{name}"
        if kind == "StatefulSet" and _strategy(fresh) != "OnDelete":
            self.backend._patch_template_cpu(kind, ns, name, fresh, cpu)  # a rollout
            return
        pods = self._pods(ns, fresh)
        now = self.backend.now()
        decisions = [(p, *inplace.progress(p, cpu, now, self.settings)) for p in pods]
        rejected: list[tuple[Raw, str]] = []
        failed = self._each(workload, [p for p, d, _ in decisions if d == "resize"],
                            lambda p: self._resize_pod(ns, p, cpu, rejected))
        if self._template_step(kind, ns, name, fresh, cpu):
            stuck = [(p, why) for p, d, why in decisions if d == "replace"] + rejected
            for p, why in stuck:
                log.info("resize %s: replacing pod %s (%s)", workload, _name(p), why)
            failed += self._each(workload, [p for p, _ in stuck],
                                 lambda p: self._evict(ns, _name(p)))
        if failed:
            raise TemporaryError(f"resize {workload} in place: {'; '.join(failed)}")

    # ------------------------------------------------------------------ the template
    def _template_step(self, kind: str, ns: str, name: str, fresh: Raw, cpu: float) -> bool:
        """Whether the template has the new size now (pods may then be replaced)."""
        if kind == "StatefulSet":  # OnDelete: a template change replaces no pod
            self.backend._patch_template_cpu(kind, ns, name, fresh, cpu)
            return True
        if at_size(fresh, cpu) and not paused_by_us(fresh):
            return True
        return self._adopt(ns, name, fresh, cpu)

    def _adopt(self, ns: str, name: str, d: Raw, cpu: float) -> bool:
        what = f"Deployment {ns}/{name}"
        rs = self._replicaset(ns, d)
        if rs is None:
            log.info("%s: no current ReplicaSet (a rollout in progress?): the template is "
                     "patched and rolls out", what)
            self.backend._patch_template_cpu("Deployment", ns, name, d, cpu)
            return True
        if not _spec(d).get("paused"):
            d = self._patch_deployment(ns, name, {
                "metadata": {"resourceVersion": _meta(d).get("resourceVersion"),
                             "annotations": {inplace.PAUSED_ANNOTATION: cpu_quantity(cpu)}},
                "spec": {"paused": True}}, f"pause {what} to resize it in place")
        if not self._settled(d, lambda: self.backend._read_workload("Deployment", ns, name)):
            log.info("%s: paused; its controller has not seen it yet (next call goes on)", what)
            return False
        rs_name = str(_meta(rs).get("name"))
        # The Deployment's containers at the new size, for both: equal to the byte, so the
        # controller finds the ReplicaSet equal to the Deployment's template.
        # Our annotation keeps an older ReplicaSet of the same size from matching too.
        want = containers_with_cpu(_containers(d), cpu)
        mark = {"annotations": {inplace.TEMPLATE_ANNOTATION: rs_name}}
        rs_annotations = (_template(rs).get("metadata") or {}).get("annotations") or {}
        if (_containers(rs) != want
                or rs_annotations.get(inplace.TEMPLATE_ANNOTATION) != rs_name):
            rs = self._patch_replicaset(ns, rs_name, {
                "metadata": {"resourceVersion": _meta(rs).get("resourceVersion")},
                "spec": {"template": {"metadata": mark, "spec": {"containers": want}}}},
                f"resize the template of ReplicaSet {ns}/{rs_name} to {cpu:g} CPU")
        if not self._settled(rs, lambda: self._read_replicaset(ns, rs_name)):
            log.info("%s: ReplicaSet %s resized; its controller has not seen it yet", what,
                     rs_name)
            return False
        meta, spec = resume_fields(d)
        meta["resourceVersion"] = _meta(d).get("resourceVersion")
        spec["template"] = {"metadata": mark, "spec": {"containers": want}}
        self._patch_deployment(ns, name, {"metadata": meta, "spec": spec},
                               f"resize the template of {what} to {cpu:g} CPU (no rollout: "
                               f"ReplicaSet {rs_name} has it already)")
        return True

    def _settled(self, obj: Raw, read: Callable[[], Raw]) -> bool:
        deadline = self.monotonic() + float(self.settings.settle_s)
        while not inplace.observed(obj):
            if self.monotonic() >= deadline:
                return False
            self.sleep(POLL_S)
            obj = read()
        return True

    def _replicaset(self, ns: str, d: Raw) -> Raw | None:
        """The Deployment's current ReplicaSet: owned by it, with its template but perhaps
        for the containers' CPU (step 2 done, for this size or another). Of several, the one
        with exactly the template, else the one running the most pods (an older revision
        that differed in CPU only is scaled to 0), else the newest."""
        uid = _meta(d).get("uid")
        template = _template(d)
        found = []
        for rs in self._list(ns, "apps", "replicasets", _spec(d).get("selector") or {}):
            owners = _meta(rs).get("ownerReferences") or ()
            if not any(o.get("uid") == uid and o.get("controller") for o in owners):
                continue
            if inplace.same_template(_template(rs), template, but_cpu=True):
                found.append(rs)
        found.sort(key=lambda r: (inplace.same_template(_template(r), template),
                                  int(_spec(r).get("replicas") or 0),
                                  timestamp(_meta(r).get("creationTimestamp")) or 0.0))
        return found[-1] if found else None

    # ------------------------------------------------------------------ the pods
    def _pods(self, ns: str, w: Raw) -> list[Raw]:
        """The workload's pods as the API server has them now (not its canary's)."""
        selector = _spec(w).get("selector") or {}
        return [p for p in self._list(ns, "", "pods", selector)
                if canaries.selects(selector, _meta(p).get("labels") or {}, canary=False)]

    @staticmethod
    def _each(workload: str, pods: list[Raw], act: Callable[[Raw], None]) -> list[str]:
        """``act`` on every pod; the temporary failures, by pod (a permanent one raises)."""
        failed = []
        for p in pods:
            try:
                act(p)
            except TemporaryError as exc:
                failed.append(f"{_name(p)}: {exc}")
        return failed

    def _resize_pod(self, ns: str, pod: Raw, cpu: float,
                    rejected: list[tuple[Raw, str]]) -> None:
        """Send the resize; a pod whose resize the API server refuses as invalid (422: a pod
        that cannot be resized, e.g. a Windows pod) goes to ``rejected``, to be replaced."""
        ops = inplace.resize_patch(pod, cpu)
        if not ops:
            return
        b = self.backend
        name = _name(pod)
        try:
            with contextlib.suppress(NotFound), api_call(
                    f"resize pod {ns}/{name} in place to {cpu:g} CPU"):
                _read(b.core.patch_namespaced_pod_resize(
                    name, ns, ops, _content_type=JSON_PATCH, _preload_content=False,
                    _request_timeout=b.timeout, field_manager=b.field_manager))
        except KubernetesPermanentError as exc:
            if exc.status != 422:
                raise
            rejected.append((pod, f"resize refused: {exc}"))

    def _evict(self, ns: str, pod: str) -> None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod, "namespace": ns}}
        with contextlib.suppress(NotFound):
            self.backend._request("POST", PODS.path(ns, pod, "eviction"),
                                  f"evict pod {ns}/{pod}", body)

    # ------------------------------------------------------------------ requests
    def _list(self, ns: str, group: str, plural: str, selector: Mapping[str, Any]
              ) -> list[Raw]:
        b = self.backend
        kw: dict[str, Any] = {"label_selector": inplace.label_selector(selector),
                              "_preload_content": False, "_request_timeout": b.timeout}
        with api_call(f"list {plural} in {ns}"):
            if plural == "pods":
                body = _read(b.core.list_namespaced_pod(ns, **kw))
            else:
                body = _read(b.apps.list_namespaced_replica_set(ns, **kw))
        return list(body.get("items") or ())

    def _read_replicaset(self, ns: str, name: str) -> Raw:
        b = self.backend
        with api_call(f"read ReplicaSet {ns}/{name}"):
            return _read(b.apps.read_namespaced_replica_set(
                name, ns, _preload_content=False, _request_timeout=b.timeout))

    def _patch_replicaset(self, ns: str, name: str, body: Raw, what: str) -> Raw:
        b = self.backend
        with api_call(what):
            return _read(b.apps.patch_namespaced_replica_set(
                name, ns, body, _content_type=MERGE_PATCH, _preload_content=False,
                _request_timeout=b.timeout, field_manager=b.field_manager))

    def _patch_deployment(self, ns: str, name: str, body: Raw, what: str) -> Raw:
        b = self.backend
        with api_call(what):
            return _read(b.apps.patch_namespaced_deployment(
                name, ns, body, _content_type=MERGE_PATCH, _preload_content=False,
                _request_timeout=b.timeout, field_manager=b.field_manager))


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name"))


def _strategy(obj: Mapping[str, Any]) -> str:
    return str((_spec(obj).get("updateStrategy") or {}).get("type") or "RollingUpdate")


def _read(resp: Any) -> Raw:
    try:
        data = resp.data
    finally:
        release = getattr(resp, "release_conn", None)
        if callable(release):
            release()
    out: Raw = json.loads(data) if data else {}
    return out
