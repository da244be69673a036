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
(state lives in the objects: the pause, our annotation, generations). Each step writes with
the ``resourceVersion`` of the object as last read (the controllers write its status while we
wait: step 3 reads the Deployment again and retries once on a conflict). A call that fails
between the pause and step 3 leaves the Deployment paused with our annotation; the backend
takes every such Deployment up again at its next :meth:`~planner.k8s.backend.
KubernetesBackend.observe` (:meth:`~planner.k8s.backend.KubernetesBackend.advance_resizes`),
whatever the planner decides: a pause of ours is never left for good. A permanent error
there (but a 403, which the backend answers by rolling out) rolls the template out, which
also resumes the Deployment. Where there is no current ReplicaSet (a rollout in progress, or
a template changed by someone else) the template is patched plainly and rolls out, as
without in-place resize. For a StatefulSet
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
the new size elsewhere: one pod restarts, not all of them as a rollout would; at most the
workload's ``maxUnavailable`` pods unavailable at once (:func:`planner.k8s.inplace.
max_unavailable`: 25 % of a Deployment's replicas by default, at least 1; pods not ready or
terminating count), the rest at the next calls. An eviction refused (429 for a budget) is
retried at the next call. The pods are the workload's own: those
the selector matches *and* owned by one of the Deployment's ReplicaSets (the StatefulSet
itself). Only the containers the template names are resized (:mod:`planner.k8s.inplace`).

A node only reports a resize it cannot do after the resize was sent, usually after the
template was taken over: the backend's :meth:`~planner.k8s.backend.KubernetesBackend.
advance_resizes` calls :meth:`InPlaceResizer.resize` again, every cycle, for the workloads
with a resize under way (:func:`planner.k8s.inplace.resize_pending`), so the fallback runs.

**The feature off.** A 404 of the ``resize`` subresource for a pod that exists means the API
server has no such subresource (the ``InPlacePodVerticalScaling`` feature gate off):
:class:`InPlaceUnavailable` is raised, and the backend turns in-place resize off and rolls out
(a 404 for a pod gone is nothing to do). The pods' resizes go first, so a missing permission
(403) shows before the workload is touched; the backend then turns in-place resize off too
and rolls out instead.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubernetes.client import AppsV1Api, CoreV1Api

from planner.domain.errors import TemporaryError
from planner.k8s import canary as canaries
from planner.k8s import inplace
from planner.k8s.apierrors import (
    KubernetesPermanentError,
    KubernetesTemporaryError,
    NotFound,
    api_call,
)
from planner.k8s.apierrors import read_body as _read
from planner.k8s.convert import containers_cpu, ready, timestamp
from planner.k8s.quantities import cpu_quantity
from planner.k8s.resources import PODS
from planner.k8s.settings import InPlaceResizeSettings, KubernetesSettings
from planner.k8s.templates import containers_with_cpu

log = logging.getLogger(__name__)

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
POLL_S = 0.2

Raw = dict[str, Any]


class InPlaceUnavailable(KubernetesPermanentError):
    """The API server has no Pod ``resize`` subresource (404 for a pod that exists): the
    ``InPlacePodVerticalScaling`` feature is off on this cluster."""


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


def container_names(obj: Mapping[str, Any]) -> frozenset[str]:
    """The names of the containers of a workload's pod template."""
    return frozenset(str(c.get("name")) for c in _containers(obj))


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

    def read_workload(self, kind: str, ns: str, name: str) -> dict[str, Any]: ...

    def patch_template_cpu(self, kind: str, ns: str, name: str, fresh: Mapping[str, Any],
                           cpu: float) -> None: ...

    def request(self, method: str, path: str, what: str, body: Any = None
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
        before the workload is touched), then the template, then the replacements (at most
        ``maxUnavailable`` per call)."""
        workload = f"{ns}/{name}"
        if kind == "StatefulSet" and _strategy(fresh) != "OnDelete":
            self.backend.patch_template_cpu(kind, ns, name, fresh, cpu)  # a rollout
            return
        names = container_names(fresh)
        rss = self._replicasets(ns, fresh) if kind == "Deployment" else []
        pods = self._pods(kind, ns, fresh, rss)
        now = self.backend.now()
        decisions = [(p, *inplace.progress(p, cpu, now, self.settings, names)) for p in pods]
        rejected: list[tuple[Raw, str]] = []
        failed = self._each(workload, [p for p, d, _ in decisions if d == "resize"],
                            lambda p: self._resize_pod(ns, p, cpu, names, rejected))
        if self._template_step(kind, ns, name, fresh, cpu, rss):
            stuck = [(p, why) for p, d, why in decisions if d == "replace"] + rejected
            # At most maxUnavailable pods unavailable at once, counting those already not
            # ready or terminating (the replacements of the last call's evictions among them).
            down = sum(1 for p in pods if _meta(p).get("deletionTimestamp") or not ready(p))
            budget = max(0, inplace.max_unavailable(fresh, kind) - down)
            if len(stuck) > budget:
                log.info("resize %s: %d pods to replace, %d now (maxUnavailable, %d pods "
                         "unavailable), the rest at the next calls", workload, len(stuck),
                         budget, down)
                stuck = stuck[:budget]
            for p, why in stuck:
                log.info("resize %s: replacing pod %s (%s)", workload, _name(p), why)
            failed += self._each(workload, [p for p, _ in stuck],
                                 lambda p: self._evict(ns, _name(p)))
        if failed:
            raise TemporaryError(f"resize {workload} in place: {'; '.join(failed)}")

    # ------------------------------------------------------------------ the template
    def _template_step(self, kind: str, ns: str, name: str, fresh: Raw, cpu: float,
                       rss: list[Raw]) -> bool:
        """Whether the template has the new size now (pods may then be replaced); ``rss``:
        a Deployment's ReplicaSets."""
        if kind == "StatefulSet":  # OnDelete: a template change replaces no pod
            self.backend.patch_template_cpu(kind, ns, name, fresh, cpu)
            return True
        if at_size(fresh, cpu) and not paused_by_us(fresh):
            return True
        return self._adopt(ns, name, fresh, cpu, rss)

    def _adopt(self, ns: str, name: str, d: Raw, cpu: float, rss: list[Raw]) -> bool:
        what = f"Deployment {ns}/{name}"
        rs = self._replicaset(d, rss)
        if rs is None:
            log.info("%s: no current ReplicaSet (a rollout in progress?): the template is "
                     "patched and rolls out", what)
            self.backend.patch_template_cpu("Deployment", ns, name, d, cpu)
            return True
        try:
            return self._adopt_steps(ns, name, d, rs, cpu)
        except NotFound as exc:  # the ReplicaSet gone meanwhile: the next call looks again
            log.info("%s: %s (next call goes on)", what, exc)
            return False
        except KubernetesPermanentError as exc:
            if exc.status == 403:
                raise  # the backend turns in-place resize off and rolls out
            log.warning("%s: in-place template change failed (%s): the template is patched "
                        "and rolls out", what, exc)
            self.backend.patch_template_cpu(
                "Deployment", ns, name, self.backend.read_workload("Deployment", ns, name),
                cpu)
            return True

    def _adopt_steps(self, ns: str, name: str, d: Raw, rs: Raw, cpu: float) -> bool:
        what = f"Deployment {ns}/{name}"
        target = cpu_quantity(cpu)
        if not _spec(d).get("paused") or (
                paused_by_us(d)
                and (_meta(d).get("annotations") or {}).get(inplace.PAUSED_ANNOTATION) != target):
            # (a new size while paused: the annotation says where the backend goes on to)
            d = self._patch("Deployment", ns, name, {
                "metadata": {"resourceVersion": _meta(d).get("resourceVersion"),
                             "annotations": {inplace.PAUSED_ANNOTATION: target}},
                "spec": {"paused": True}}, f"pause {what} to resize it in place")
        seen = self._settled(d, lambda: self.backend.read_workload("Deployment", ns, name))
        if seen is None:
            log.info("%s: paused; its controller has not seen it yet (next call goes on)", what)
            return False
        d = seen
        rs_name = str(_meta(rs).get("name"))
        # The Deployment's containers at the new size, for both: equal to the byte, so the
        # controller finds the ReplicaSet equal to the Deployment's template.
        # Our annotation keeps an older ReplicaSet of the same size from matching too.
        want = containers_with_cpu(_containers(d), cpu)
        mark = {"annotations": {inplace.TEMPLATE_ANNOTATION: rs_name}}
        rs_annotations = (_template(rs).get("metadata") or {}).get("annotations") or {}
        if (_containers(rs) != want
                or rs_annotations.get(inplace.TEMPLATE_ANNOTATION) != rs_name):
            rs = self._patch("ReplicaSet", ns, rs_name, {
                "metadata": {"resourceVersion": _meta(rs).get("resourceVersion")},
                "spec": {"template": {"metadata": mark, "spec": {"containers": want}}}},
                f"resize the template of ReplicaSet {ns}/{rs_name} to {cpu:g} CPU")
        if self._settled(rs, lambda: self._read_replicaset(ns, rs_name)) is None:
            log.info("%s: ReplicaSet %s resized; its controller has not seen it yet", what,
                     rs_name)
            return False
        # The Deployment as it is now: its controller writes its status while we wait.
        for attempt in (1, 2):
            d = self.backend.read_workload("Deployment", ns, name)
            if not _spec(d).get("paused") or containers_with_cpu(_containers(d), cpu) != want:
                log.info("%s changed while it was resized (unpaused, or a new template): "
                         "the next call goes on from there", what)
                return False
            meta, spec = resume_fields(d)
            meta["resourceVersion"] = _meta(d).get("resourceVersion")
            spec["template"] = {"metadata": mark, "spec": {"containers": want}}
            try:
                self._patch("Deployment", ns, name, {"metadata": meta, "spec": spec},
                            f"resize the template of {what} to {cpu:g} CPU (no rollout: "
                            f"ReplicaSet {rs_name} has it already)")
            except KubernetesTemporaryError as exc:
                if exc.status != 409 or attempt == 2:
                    raise
                continue
            break
        return True

    def _settled(self, obj: Raw, read: Callable[[], Raw]) -> Raw | None:
        """``obj`` as last read once its controller has seen its spec (``None``: not within
        ``settleSeconds``)."""
        deadline = self.monotonic() + float(self.settings.settle_s)
        while not inplace.observed(obj):
            if self.monotonic() >= deadline:
                return None
            self.sleep(POLL_S)
            obj = read()
        return obj

    def _replicaset(self, d: Raw, rss: list[Raw]) -> Raw | None:
        """The Deployment's current ReplicaSet: owned by it, with its template but perhaps
        for the containers' CPU (step 2 done, for this size or another). Of several, the one
        with exactly the template, else the one running the most pods (an older revision
        that differed in CPU only is scaled to 0), else the newest."""
        template = _template(d)
        found = [rs for rs in rss
                 if inplace.same_template(_template(rs), template, but_cpu=True)]
        found.sort(key=lambda r: (inplace.same_template(_template(r), template),
                                  int(_spec(r).get("replicas") or 0),
                                  timestamp(_meta(r).get("creationTimestamp")) or 0.0))
        return found[-1] if found else None

    def _replicasets(self, ns: str, d: Raw) -> list[Raw]:
        """The ReplicaSets the Deployment controls (its uid as their controller owner)."""
        return [rs for rs in self._list(ns, "replicasets", _spec(d).get("selector") or {})
                if _owned_by(rs, _meta(d).get("uid"))]

    # ------------------------------------------------------------------ the pods
    def _pods(self, kind: str, ns: str, w: Raw, rss: list[Raw]) -> list[Raw]:
        """The workload's pods as the API server has them now: matching its selector (not its
        canary's) and owned by it (a Deployment's: by one of its ReplicaSets ``rss``)."""
        selector = _spec(w).get("selector") or {}
        owners = ({_meta(rs).get("uid") for rs in rss}
                  if kind == "Deployment" else {_meta(w).get("uid")})
        return [p for p in self._list(ns, "pods", selector)
                if canaries.selects(selector, _meta(p).get("labels") or {}, canary=False)
                and any(_owned_by(p, uid) for uid in owners)]

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

    def _resize_pod(self, ns: str, pod: Raw, cpu: float, names: frozenset[str],
                    rejected: list[tuple[Raw, str]]) -> None:
        """Send the resize; a pod whose resize the API server refuses as invalid (422: a pod
        that cannot be resized, e.g. a Windows pod) goes to ``rejected``, to be replaced; a 404
        for a pod that exists raises :class:`InPlaceUnavailable`."""
        ops = inplace.resize_patch(pod, cpu, names)
        if not ops:
            return
        b = self.backend
        name = _name(pod)
        what = f"resize pod {ns}/{name} in place to {cpu:g} CPU"
        try:
            with api_call(what):
                _read(b.core.patch_namespaced_pod_resize(
                    name, ns, ops, _content_type=JSON_PATCH, _preload_content=False,
                    _request_timeout=b.timeout, field_manager=b.field_manager))
        except NotFound as exc:
            if self._pod_exists(ns, name):
                raise InPlaceUnavailable(
                    f"{what}: the API server has no pods/resize subresource ({exc}); fix: "
                    f"enable the InPlacePodVerticalScaling feature gate (Kubernetes >= 1.27, "
                    f"on by default from 1.33), or set inPlaceResize.mode: off", 404) from exc
        except KubernetesPermanentError as exc:
            if exc.status != 422:
                raise
            rejected.append((pod, f"resize refused: {exc}"))

    def _pod_exists(self, ns: str, name: str) -> bool:
        b = self.backend
        with contextlib.suppress(NotFound), api_call(f"read pod {ns}/{name}"):
            _read(b.core.read_namespaced_pod(name, ns, _preload_content=False,
                                             _request_timeout=b.timeout))
            return True
        return False

    def _evict(self, ns: str, pod: str) -> None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod, "namespace": ns}}
        with contextlib.suppress(NotFound):
            self.backend.request("POST", PODS.path(ns, pod, "eviction"),
                                 f"evict pod {ns}/{pod}", body)

    # ------------------------------------------------------------------ requests
    def _list(self, ns: str, plural: str, selector: Mapping[str, Any]) -> list[Raw]:
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

    def _patch(self, kind: str, ns: str, name: str, body: Raw, what: str) -> Raw:
        """A JSON merge patch of the Deployment or ReplicaSet ``ns/name``; the object after."""
        b = self.backend
        patch = (b.apps.patch_namespaced_replica_set if kind == "ReplicaSet"
                 else b.apps.patch_namespaced_deployment)
        with api_call(what):
            return _read(patch(name, ns, body, _content_type=MERGE_PATCH,
                               _preload_content=False, _request_timeout=b.timeout,
                               field_manager=b.field_manager))


def _owned_by(obj: Mapping[str, Any], uid: Any) -> bool:
    return uid is not None and any(
        o.get("uid") == uid and o.get("controller")
        for o in _meta(obj).get("ownerReferences") or ())


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name"))


def _strategy(obj: Mapping[str, Any]) -> str:
    return str((_spec(obj).get("updateStrategy") or {}).get("type") or "RollingUpdate")
