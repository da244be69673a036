"""In-place CPU resize on the Kubernetes backend, over the API emulator (kmock plus
bench/harness/apiserver.py: the Pod ``resize`` and ``eviction`` subresources, ReplicaSets and a
``/version`` of our choice).

The emulator runs no controller: the tests play the Deployment and ReplicaSet controllers'
part where the backend waits for them (``status.observedGeneration``), and the kubelet's
(the ``PodResizePending`` / ``PodResizeInProgress`` conditions)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import (
    Kube,
    RunningApiserver,
    deployment,
    node,
    pod,
    running_apiserver,
    wait_until,
)
from planner.domain.errors import TemporaryError
from planner.k8s import inplace
from planner.k8s.backend import KubernetesBackend
from planner.k8s.resizer import paused_by_us
from planner.k8s.resources import DEPLOYMENTS
from planner.k8s.settings import parse_settings
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"
WEB = f"{NS}/web"
PODS = ("web-0", "web-1", "web-2")


def make_api(version: str) -> Iterator[RunningApiserver]:
    with running_apiserver(server_version=("1", version)) as api:
        yield api


@pytest.fixture
def api() -> Iterator[RunningApiserver]:
    """An API server that says it is Kubernetes 1.33."""
    yield from make_api("33")


@pytest.fixture
def kube(api: RunningApiserver) -> Iterator[Kube]:
    k = Kube(api.url)
    k.create(node("node-a1", "pool-a", cpu="8"))
    web = deployment(NS, "web", 3, cpu="500m")
    web["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "1"}
    created = k.create(web)
    # The Deployment controller's ReplicaSet: the Deployment's template plus the hash label.
    template = copy.deepcopy(created["spec"]["template"])
    template["metadata"]["labels"]["pod-template-hash"] = "abc123"
    rs = k.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": "web-abc123", "namespace": NS,
                                "labels": template["metadata"]["labels"],
                                "ownerReferences": [{
                                    "apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "web", "uid": created["metadata"]["uid"],
                                    "controller": True}]},
                   "spec": {"replicas": 3, "selector": {"matchLabels": {
                       "app": "web", "pod-template-hash": "abc123"}}, "template": template}})
    for kind, name in (("Deployment", "web"), ("ReplicaSet", "web-abc123")):
        controller_sees(k, kind, name)
    for name in PODS:
        p = pod(NS, "web", "node-a1", name=name)
        p["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1"
        owned_by(p, rs)
        k.create(p)
    yield k
    k.close()


def owned_by(p: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    """``p`` with ``owner`` (a ReplicaSet or StatefulSet as created) as its controller."""
    p["metadata"]["ownerReferences"] = [{
        "apiVersion": "apps/v1", "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": True}]
    return p


def make_backend(api: RunningApiserver, **in_place: Any) -> tuple[KubernetesBackend, Any]:
    client = ApiClient(Configuration(host=api.url))
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    settings = parse_settings({"inPlaceResize": {"settleSeconds": 0, **in_place}})
    b = KubernetesBackend(cache, client, ready_wait_s=10, request_timeout_s=5,
                          settings=settings)
    return b, (cache, client)


@pytest.fixture
def backend(api: RunningApiserver, kube: Kube) -> Iterator[KubernetesBackend]:
    b, (cache, client) = make_backend(api)
    yield b
    cache.stop()
    client.close()


def controller_sees(kube: Kube, kind: str, name: str) -> None:
    """What the object's controller does once it has synced: ``observedGeneration``."""
    obj = kube.get(kind, NS, name)
    kube.patch(kind, NS, name, {"status": {
        "observedGeneration": obj["metadata"].get("generation", 1)}}, sub="status")


def writes(api: RunningApiserver, start: int) -> list[tuple[str, str, str | None, str | None]]:
    """(verb, resource, name, subresource) of the writes since call number ``start``, but
    status writes (the tests' own, playing controllers and kubelets)."""
    return [(c.verb, c.resource, c.name, c.subresource) for c in api.server.calls[start:]
            if c.verb in ("create", "update", "delete") and c.subresource != "status"]


def cpu_of(kube: Kube, kind: str, name: str) -> tuple[str, str]:
    obj = kube.get(kind, NS, name)
    spec = obj["spec"] if kind == "Pod" else obj["spec"]["template"]["spec"]
    res = spec["containers"][0]["resources"]
    return res["requests"]["cpu"], res["limits"]["cpu"]


def set_condition(kube: Kube, name: str, kind: str, reason: str = "",
                  since: float | None = None) -> None:
    """The kubelet's report on a resize of pod ``name``."""
    p = kube.get("Pod", NS, name)
    cond: dict[str, Any] = {"type": kind, "status": "True", "reason": reason,
                            "message": f"{reason} by the test"}
    if since is not None:
        cond["lastTransitionTime"] = datetime.fromtimestamp(since, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    conditions = [c for c in p["status"]["conditions"] if c["type"] != kind] + [cond]
    kube.patch("Pod", NS, name, {"status": {"conditions": conditions}}, sub="status")


def adopted(api: RunningApiserver, kube: Kube, backend: KubernetesBackend, cpu: float) -> None:
    """Run resize until the template has the new size, playing the controllers."""
    for _ in range(4):
        backend.resize(WEB, cpu)
        d = kube.get("Deployment", NS, "web")
        if not d["spec"].get("paused") and cpu_of(kube, "Deployment", "web")[0] != "500m":
            return
        controller_sees(kube, "Deployment", "web")
        controller_sees(kube, "ReplicaSet", "web-abc123")
    raise AssertionError("the template was not resized")


def test_the_server_version_decides(api: RunningApiserver, kube: Kube) -> None:
    b, (cache, client) = make_backend(api)
    try:
        assert b.observe().in_place_resize and b.server_version == (1, 33)
    finally:
        cache.stop()
        client.close()
    b, (cache, client) = make_backend(api, mode="off")
    try:
        assert not b.observe().in_place_resize
    finally:
        cache.stop()
        client.close()
    assert inplace.server_version({"major": "1", "minor": "33+"}) == (1, 33)
    assert inplace.server_version({"gitVersion": "v1.35.1-gke.2"}) == (1, 35)
    assert not inplace.supports_in_place((1, 32), "auto")
    assert inplace.supports_in_place((1, 32), "on") and not inplace.supports_in_place(
        (1, 35), "off")


def old_replicaset(kube: Kube, cpu: str, limit: str) -> None:
    """A ReplicaSet of the revision history (scaled to 0) whose template is the Deployment's
    at ``cpu``: what a resize by rollout left behind."""
    rs = kube.get("ReplicaSet", NS, "web-abc123")
    template = copy.deepcopy(rs["spec"]["template"])
    template["metadata"]["labels"]["pod-template-hash"] = "old111"
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    template["spec"]["containers"][0]["resources"]["limits"]["cpu"] = limit
    kube.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": "web-old111", "namespace": NS,
                              "labels": template["metadata"]["labels"],
                              "ownerReferences": rs["metadata"]["ownerReferences"]},
                 "spec": {"replicas": 0, "selector": {"matchLabels": {
                     "app": "web", "pod-template-hash": "old111"}}, "template": template}})


def test_resize_in_place_then_the_template_without_a_rollout(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    old_replicaset(kube, "1", "2")
    before = {n: kube.get("Pod", NS, n) for n in PODS}
    start = len(api.server.calls)
    backend.resize(WEB, 1.0)
    # 1. Every running pod resized through its resize subresource, as a JSON patch.
    resized = [(c.name, c.params) for c in api.server.calls[start:]
               if c.resource == "pods" and c.subresource == "resize"]
    assert sorted(str(n) for n, _ in resized) == list(PODS)
    for n in PODS:
        assert cpu_of(kube, "Pod", n) == ("1", "2"), "requests and the limit's ratio"
        now = kube.get("Pod", NS, n)
        assert now["spec"]["containers"][0]["image"] == before[n]["spec"]["containers"][0][
            "image"] and now["metadata"]["uid"] == before[n]["metadata"]["uid"]
    # ... and the Deployment paused (marked as ours), its template not yet changed.
    d = kube.get("Deployment", NS, "web")
    assert d["spec"]["paused"] is True
    assert d["metadata"]["annotations"][inplace.PAUSED_ANNOTATION] == "1"
    assert cpu_of(kube, "Deployment", "web") == ("500m", "1")
    assert cpu_of(kube, "ReplicaSet", "web-abc123") == ("500m", "1")
    # 2. Once the Deployment controller has seen the pause: the ReplicaSet's template first.
    backend.resize(WEB, 1.0)
    assert cpu_of(kube, "ReplicaSet", "web-abc123") == ("500m", "1"), "not seen yet: wait"
    controller_sees(kube, "Deployment", "web")
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert cpu_of(kube, "ReplicaSet", "web-abc123") == ("1", "2")
    assert cpu_of(kube, "Deployment", "web") == ("500m", "1")
    assert writes(api, mark) == [("update", "replicasets", "web-abc123", None)]
    # 3. Once the ReplicaSet controller has seen it: the Deployment's template, unpaused.
    controller_sees(kube, "ReplicaSet", "web-abc123")
    backend.resize(WEB, 1.0)
    d = kube.get("Deployment", NS, "web")
    rs = kube.get("ReplicaSet", NS, "web-abc123")
    assert cpu_of(kube, "Deployment", "web") == ("1", "2")
    assert d["spec"]["paused"] is False
    assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})
    # The Deployment controller finds its ReplicaSet by this very comparison: no new one,
    # and not the old one of the same size either (our annotation tells them apart).
    assert inplace.same_template(rs["spec"]["template"], d["spec"]["template"])
    old = kube.get("ReplicaSet", NS, "web-old111")
    assert not inplace.same_template(old["spec"]["template"], d["spec"]["template"])
    assert old["spec"]["template"]["spec"]["containers"] == d["spec"]["template"]["spec"][
        "containers"], "the same size: only the annotation differs"
    assert not [w for w in writes(api, start) if w[0] == "delete" or w[1:] == (
        "replicasets", None, None)], "no pod deleted, no ReplicaSet created"
    # Level-based: the next call finds everything at the size and writes nothing.
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert writes(api, mark) == []
    # And back to the first size, in place too: the same ReplicaSet, found again.
    controller_sees(kube, "Deployment", "web")
    for _ in range(3):
        backend.resize(WEB, 0.5)
        controller_sees(kube, "Deployment", "web")
        controller_sees(kube, "ReplicaSet", "web-abc123")
    d = kube.get("Deployment", NS, "web")
    assert cpu_of(kube, "Deployment", "web") == ("500m", "1") and not d["spec"]["paused"]
    assert inplace.same_template(kube.get("ReplicaSet", NS, "web-abc123")["spec"]["template"],
                                 d["spec"]["template"])
    assert [cpu_of(kube, "Pod", n) for n in PODS] == [("500m", "1")] * 3
    assert not [w for w in writes(api, start) if w[0] == "delete" or w[1:] == (
        "replicasets", None, None)]


def test_an_infeasible_resize_replaces_the_pod(api: RunningApiserver, kube: Kube,
                                               backend: KubernetesBackend) -> None:
    backend.resize(WEB, 2.0)
    set_condition(kube, "web-1", inplace.RESIZE_PENDING, "Infeasible")
    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert not [w for w in writes(api, mark) if w[1] == "pods"], (
        "the template does not have the new size yet: a replacement would come back small")
    mark = len(api.server.calls)
    adopted(api, kube, backend, 2.0)  # the call that gives the template its size evicts
    assert [w for w in writes(api, mark) if w[1] == "pods"] == [
        ("create", "pods", "web-1", "eviction")]
    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert writes(api, mark) == []
    assert [p["metadata"]["name"] for p in kube.http.get(
        f"/api/v1/namespaces/{NS}/pods").json()["items"]] == ["web-0", "web-2"]


def test_deferred_waits_then_replaces_past_the_limit(api: RunningApiserver, kube: Kube,
                                                    backend: KubernetesBackend) -> None:
    adopted(api, kube, backend, 2.0)
    now = backend.now()
    set_condition(kube, "web-0", inplace.RESIZE_PENDING, "Deferred", since=now - 60)
    set_condition(kube, "web-2", inplace.RESIZE_IN_PROGRESS, since=now - 60)
    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert writes(api, mark) == [], "deferred 60 s of 300, in progress 60 s of 3600: wait"
    set_condition(kube, "web-0", inplace.RESIZE_PENDING, "Deferred", since=now - 400)
    backend.resize(WEB, 2.0)
    assert writes(api, mark) == [("create", "pods", "web-0", "eviction")]
    set_condition(kube, "web-2", inplace.RESIZE_IN_PROGRESS, "Error")
    backend.resize(WEB, 2.0)
    assert writes(api, mark)[1:] == [("create", "pods", "web-2", "eviction")]


def test_without_a_current_replicaset_the_template_rolls_out(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    kube.delete("ReplicaSet", NS, "web-abc123")
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert cpu_of(kube, "Deployment", "web") == ("1", "2")
    assert not kube.get("Deployment", NS, "web")["spec"].get("paused")
    assert [w for w in writes(api, mark) if w[1] == "deployments"] == [
        ("update", "deployments", "web", None)]


def test_place_resumes_a_deployment_a_resize_left_paused(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    backend.resize(WEB, 1.0)
    assert kube.get("Deployment", NS, "web")["spec"]["paused"] is True
    wait_until(lambda: (backend.cache.get(DEPLOYMENTS, NS, "web", wait=10) or {}).get(
        "metadata", {}).get("annotations"))
    backend.place(WEB, "pool-a")
    d = kube.get("Deployment", NS, "web")
    assert d["spec"]["paused"] is False
    assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})
    assert d["spec"]["template"]["spec"]["nodeSelector"] == {"intent-planner.io/pool": "pool-a"}


def test_a_statefulset_on_delete_is_resized_in_place(api: RunningApiserver, kube: Kube,
                                                     backend: KubernetesBackend) -> None:
    db = deployment(NS, "db", 1, kind="StatefulSet")
    db["spec"]["updateStrategy"] = {"type": "OnDelete"}
    created = kube.create(db)
    kube.create(owned_by(pod(NS, "db", "node-a1", name="db-0"), created))
    wait_until(lambda: backend.observe().workload(f"{NS}/db"))
    mark = len(api.server.calls)
    backend.resize(f"{NS}/db", 1.5)
    assert sorted(writes(api, mark)) == [("update", "pods", "db-0", "resize"),
                                         ("update", "statefulsets", "db", None)]
    assert cpu_of(kube, "Pod", "db-0")[0] == "1500m"


def test_before_1_33_resize_rolls_out_as_before() -> None:
    for api in make_api("32"):
        k = Kube(api.url)
        k.create(node("node-a1", "pool-a"))
        k.create(deployment(NS, "web", 2, cpu="500m"))
        k.create(pod(NS, "web", "node-a1", name="web-0"))
        b, (cache, client) = make_backend(api)
        try:
            assert not b.observe().in_place_resize
            mark = len(api.server.calls)
            b.resize(WEB, 1.0)
            assert writes(api, mark) == [("update", "deployments", "web", None)]
            assert k.get("Deployment", NS, "web")["spec"]["template"]["spec"]["containers"][0][
                "resources"]["requests"]["cpu"] == "1"
            assert not k.get("Deployment", NS, "web")["spec"].get("paused")
        finally:
            cache.stop()
            client.close()
            k.close()


def test_the_resize_patch_and_the_progress_of_a_pod() -> None:
    p = pod(NS, "web", "node-a1", name="web-0")
    p["spec"]["containers"].append({"name": "side", "image": "x",
                                    "resources": {"requests": {"cpu": "500m"}}})
    ops = inplace.resize_patch(p, 2.0)
    assert ops == [
        {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/0/resources",
         "value": {"requests": {"cpu": "1", "memory": "256Mi"},
                   "limits": {"cpu": "4", "memory": "1Gi"}}},
        {"op": "test", "path": "/spec/containers/1/name", "value": "side"},
        {"op": "add", "path": "/spec/containers/1/resources",
         "value": {"requests": {"cpu": "1"}}}]
    assert inplace.resize_patch(p, 1.0) == [], "already 1 core: nothing to send"
    settings = parse_settings({}).in_place_resize
    assert inplace.progress(p, 2.0, 0.0, settings)[0] == "resize"
    assert inplace.progress(p, 1.0, 0.0, settings)[0] == "resized"
    p["status"]["conditions"].append({"type": "PodResizePending", "status": "True",
                                      "reason": "Deferred",
                                      "lastTransitionTime": "2024-01-01T00:00:00Z"})
    t0 = 1704067200.0
    assert inplace.progress(p, 1.0, t0 + 299, settings)[0] == "wait"
    assert inplace.progress(p, 1.0, t0 + 301, settings)[0] == "replace"
    p["status"]["phase"] = "Succeeded"
    assert inplace.progress(p, 1.0, t0 + 301, settings)[0] == "skip"


def test_without_the_permission_a_resize_rolls_out(api: RunningApiserver, kube: Kube,
                                                   backend: KubernetesBackend,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    api.server.fail("PATCH", "/pods/web-0/resize$", 403, 'pods "web-0" is forbidden: User '
                    'cannot patch resource "pods/resize"', reason="Forbidden")
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert [w for w in writes(api, mark) if w[1] != "pods"] == [
        ("update", "deployments", "web", None)]
    d = kube.get("Deployment", NS, "web")
    assert cpu_of(kube, "Deployment", "web") == ("1", "2") and not d["spec"].get("paused")
    assert "in-place-resize-rbac.yaml" in caplog.text
    # From then on in-place resize is off: the planner prices a CPU change as a restart.
    assert backend.observe().in_place_resize is False and backend.in_place_off
    mark = len(api.server.calls)
    backend.resize(WEB, 1.5)
    assert writes(api, mark) == [("update", "deployments", "web", None)], "a rollout, no pod"
    d = kube.get("Deployment", NS, "web")


def test_forbidden_on_the_replicaset_resumes_and_rolls_out(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    d = kube.get("Deployment", NS, "web")
    # Forbidden on the ReplicaSet once paused: the Deployment is resumed by the rollout.
    kube.patch("Deployment", NS, "web", {"spec": {"template": {"spec": {"containers": [
        {**d["spec"]["template"]["spec"]["containers"][0],
         "resources": {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"cpu": "2"}}}]}}}})
    controller_sees(kube, "Deployment", "web")
    tmpl = kube.get("Deployment", NS, "web")["spec"]["template"]
    kube.patch("ReplicaSet", NS, "web-abc123", {"spec": {"template": {
        "spec": tmpl["spec"]}}})  # the controller's ReplicaSet of the current template
    controller_sees(kube, "ReplicaSet", "web-abc123")
    backend.resize(WEB, 2.0)
    assert kube.get("Deployment", NS, "web")["spec"]["paused"] is True
    controller_sees(kube, "Deployment", "web")
    api.server.fail("PATCH", "/replicasets/web-abc123$", 403, "forbidden", reason="Forbidden")
    backend.resize(WEB, 2.0)
    d = kube.get("Deployment", NS, "web")
    assert cpu_of(kube, "Deployment", "web") == ("2", "4") and d["spec"]["paused"] is False
    assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})
    assert not backend.observe().in_place_resize


def test_the_optional_role_grants_what_in_place_resize_uses() -> None:
    from pathlib import Path

    import kubernetes_validate
    import yaml

    root = Path(__file__).resolve().parent.parent / "deploy"
    role, binding = yaml.safe_load_all(
        (root / "optional" / "in-place-resize-rbac.yaml").read_text())
    for doc in (role, binding):
        kubernetes_validate.validate(doc, "1.33.0", strict=True)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["patch"]}]
    account = yaml.safe_load((root / "serviceaccount.yaml").read_text())
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_a_resize_refused_as_invalid_replaces_the_pod(api: RunningApiserver, kube: Kube,
                                                      backend: KubernetesBackend) -> None:
    adopted(api, kube, backend, 1.0)
    kube.patch("Pod", NS, "web-2", {"spec": {"containers": [{
        **kube.get("Pod", NS, "web-2")["spec"]["containers"][0],
        "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}]}})
    api.server.fail("PATCH", "/pods/web-2/resize$", 422, "Pod resize is not supported on "
                    "Windows", reason="Invalid")
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert writes(api, mark) == [("update", "pods", "web-2", "resize"),  # refused: 422
                                 ("create", "pods", "web-2", "eviction")]


def test_a_canary_does_not_copy_the_replicaset_annotation(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    from planner.domain.state import WorkloadConfig

    adopted(api, kube, backend, 1.0)
    tmpl = kube.get("Deployment", NS, "web")["spec"]["template"]
    assert tmpl["metadata"]["annotations"] == {inplace.TEMPLATE_ANNOTATION: "web-abc123"}
    backend.set_canary(WEB, WorkloadConfig(1, cpu=0.5))
    canary = kube.get("Deployment", NS, "web-canary")["spec"]["template"]
    assert inplace.TEMPLATE_ANNOTATION not in (canary["metadata"].get("annotations") or {})


# ---------------------------------------------------------------------- review fixes
def play_controllers(kube: Kube, stop: threading.Event) -> None:
    """The Deployment and ReplicaSet controllers as a cluster runs them: each writes its
    object's status (``observedGeneration``) within milliseconds of a spec change."""
    while not stop.is_set():
        for kind, name in (("Deployment", "web"), ("ReplicaSet", "web-abc123")):
            obj = kube.get(kind, NS, name)
            if (obj.get("status") or {}).get("observedGeneration") != obj["metadata"].get(
                    "generation"):
                controller_sees(kube, kind, name)
        time.sleep(0.05)


def test_one_call_resizes_in_place_with_live_controllers(api: RunningApiserver,
                                                         kube: Kube) -> None:
    """The controllers write the Deployment's status while ``resize`` waits for them: the
    last step must write with the Deployment as it is then, not as the pause left it."""
    b, (cache, client) = make_backend(api, settleSeconds=3)
    stop = threading.Event()
    t = threading.Thread(target=play_controllers, args=(kube, stop), daemon=True)
    t.start()
    try:
        mark = len(api.server.calls)
        b.resize(WEB, 1.0)
    finally:
        stop.set()
        t.join()
        cache.stop()
        client.close()
    d = kube.get("Deployment", NS, "web")
    assert not d["spec"].get("paused")
    assert cpu_of(kube, "Deployment", "web") == ("1", "2") == cpu_of(
        kube, "ReplicaSet", "web-abc123")
    assert [w for w in writes(api, mark) if w[1] != "pods"] == [
        ("update", "deployments", "web", None), ("update", "replicasets", "web-abc123", None),
        ("update", "deployments", "web", None)], "pause, ReplicaSet, template + resume"


def cache_has(backend: KubernetesBackend, test: Any) -> None:
    wait_until(lambda: test(backend.cache.get(DEPLOYMENTS, NS, "web", wait=10) or {}))


def test_a_resize_cut_short_is_resumed_by_the_next_observe(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    backend.resize(WEB, 1.0)
    controller_sees(kube, "Deployment", "web")
    backend.resize(WEB, 1.0)
    controller_sees(kube, "ReplicaSet", "web-abc123")
    api.server.fail("PATCH", "/deployments/web$", 409, "the object has been modified",
                    reason="Conflict", times=2)
    with pytest.raises(TemporaryError):
        backend.resize(WEB, 1.0)
    assert kube.get("Deployment", NS, "web")["spec"]["paused"] is True
    cache_has(backend, lambda d: paused_by_us(d))
    # The planner asks for nothing more: the next cycle's observe goes on by itself.
    backend.observe()
    d = kube.get("Deployment", NS, "web")
    assert not d["spec"]["paused"] and cpu_of(kube, "Deployment", "web") == ("1", "2")
    assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})


def test_a_pause_left_behind_is_resumed_with_in_place_off(api: RunningApiserver,
                                                          kube: Kube) -> None:
    b, (cache, client) = make_backend(api)
    b.resize(WEB, 1.0)  # paused; then the planner restarts with in-place resize off
    cache.stop()
    client.close()
    b, (cache, client) = make_backend(api, mode="off")
    try:
        wait_until(lambda: paused_by_us(cache.get(DEPLOYMENTS, NS, "web", wait=10) or {}))
        assert b.observe().in_place_resize is False
        d = kube.get("Deployment", NS, "web")
        assert not d["spec"]["paused"] and cpu_of(kube, "Deployment", "web") == ("1", "2")
        assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})
    finally:
        cache.stop()
        client.close()


def kubelet_runs(kube: Kube, name: str, cpu: str) -> None:
    """The kubelet's report of the CPU the pod's container runs with."""
    p = kube.get("Pod", NS, name)
    statuses = [{**s, "resources": {"requests": {"cpu": cpu}}}
                for s in p["status"]["containerStatuses"]]
    kube.patch("Pod", NS, name, {"status": {"containerStatuses": statuses}}, sub="status")


def test_a_resize_found_infeasible_after_the_takeover_falls_back_on_observe(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    adopted(api, kube, backend, 2.0)
    for n in PODS:
        kubelet_runs(kube, n, "2" if n != "web-1" else "500m")
    set_condition(kube, "web-1", inplace.RESIZE_PENDING, "Infeasible")
    # Observe only (once the watch cache has the kubelet's report): the planner sees the
    # template at 2 CPU and asks for nothing; the pod is evicted all the same.
    wait_until(lambda: backend.observe() is not None and kube.http.get(
        f"/api/v1/namespaces/{NS}/pods/web-1").status_code == 404, timeout=5)
    assert ("create", "pods", "web-1", "eviction") in writes(api, 0)
    # Nothing under way any more: an observe lists nothing from the API server.
    wait_until(lambda: all(p.name != "web-1" for p in backend.observe().workloads[WEB].pods))
    mark = len(api.server.calls)
    backend.observe()
    assert [c for c in api.server.calls[mark:] if c.verb != "watch"] == []


def test_stuck_pods_are_replaced_max_unavailable_at_a_time(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    adopted(api, kube, backend, 2.0)
    for n in PODS:
        set_condition(kube, n, inplace.RESIZE_PENDING, "Infeasible")

    def evictions(mark: int) -> list[str | None]:
        return [w[2] for w in writes(api, mark) if w[3] == "eviction"]

    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert len(evictions(mark)) == 1, "25 % of 3 rounds down to 0: at least 1"
    ready = kube.get("Pod", NS, "web-1")["status"]["conditions"]
    kube.patch("Pod", NS, "web-1", {"status": {"conditions": [
        {**c, "status": "False"} if c["type"] == "Ready" else c for c in ready]}}, sub="status")
    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert evictions(mark) == [], "a pod unavailable already (the last one's replacement)"
    kube.patch("Pod", NS, "web-1", {"status": {"conditions": ready}}, sub="status")
    kube.patch("Deployment", NS, "web", {"spec": {"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}}})
    mark = len(api.server.calls)
    backend.resize(WEB, 2.0)
    assert len(evictions(mark)) == 2
    d = {"spec": {"replicas": 10}}
    assert inplace.max_unavailable(d, "Deployment") == 2
    assert inplace.max_unavailable({"spec": {"replicas": 10, "strategy": {"rollingUpdate": {
        "maxUnavailable": "50%"}}}}, "Deployment") == 5
    assert inplace.max_unavailable({"spec": {"replicas": 10}}, "StatefulSet") == 1


def test_no_resize_subresource_turns_in_place_off(api: RunningApiserver, kube: Kube,
                                                  backend: KubernetesBackend) -> None:
    # A pod gone between the list and the resize: nothing to do, in place stays on.
    api.server.fail("PATCH", "/pods/web-0/resize$", 404, 'pods "web-0" not found',
                    reason="NotFound")
    api.server.fail("GET", "/pods/web-0$", 404, 'pods "web-0" not found', reason="NotFound")
    backend.resize(WEB, 1.0)
    assert backend.in_place_off is None and kube.get("Deployment", NS, "web")["spec"]["paused"]
    # The pod is there and its resize subresource is not: the feature is off.
    api.server.fail("PATCH", "/pods/web-0/resize$", 404, "the server could not find the "
                    "requested resource", reason="NotFound")
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert backend.in_place_off and "InPlacePodVerticalScaling" in backend.in_place_off
    d = kube.get("Deployment", NS, "web")
    assert cpu_of(kube, "Deployment", "web") == ("1", "2") and not d["spec"]["paused"]
    assert [w for w in writes(api, mark) if w[1] != "pods"] == [
        ("update", "deployments", "web", None)], "rolled out (and resumed)"
    assert backend.observe().in_place_resize is False


def test_only_the_template_s_containers_of_the_workload_s_own_pods(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    for n in PODS:  # a sidecar injected at admission
        p = kube.get("Pod", NS, n)
        kube.patch("Pod", NS, n, {"spec": {"containers": [*p["spec"]["containers"], {
            "name": "istio-proxy", "image": "istio/proxyv2",
            "resources": {"requests": {"cpu": "100m"}}}]}})
    stray = pod(NS, "web", "node-a1", name="web-stray")  # the selector's, not the RS's
    stray["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    kube.create(stray)
    mark = len(api.server.calls)
    adopted(api, kube, backend, 1.0)
    assert sorted(str(w[2]) for w in writes(api, mark) if w[3] == "resize") == list(PODS)
    for n in PODS:
        app, side = kube.get("Pod", NS, n)["spec"]["containers"]
        assert app["resources"]["requests"]["cpu"] == "1", "the whole 1 CPU to the template's"
        assert side["resources"] == {"requests": {"cpu": "100m"}}, "the sidecar untouched"
    assert cpu_of(kube, "Pod", "web-stray")[0] == "500m", "not the workload's pod"
    mark = len(api.server.calls)
    backend.resize(WEB, 1.0)
    assert writes(api, mark) == [], "at size: the sidecar's CPU is not compared"
    p = kube.get("Pod", NS, "web-0")
    assert inplace.resize_patch(p, 2.0, {"app"}) == [
        {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
        {"op": "add", "path": "/spec/containers/0/resources",
         "value": {**p["spec"]["containers"][0]["resources"],
                   "requests": {"cpu": "2", "memory": "256Mi"},
                   "limits": {"cpu": "4", "memory": "1Gi"}}}]


def test_a_replicaset_refused_as_invalid_rolls_out_and_resumes(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    backend.resize(WEB, 1.0)
    controller_sees(kube, "Deployment", "web")
    api.server.fail("PATCH", "/replicasets/web-abc123$", 422, "invalid", reason="Invalid")
    backend.resize(WEB, 1.0)
    d = kube.get("Deployment", NS, "web")
    assert cpu_of(kube, "Deployment", "web") == ("1", "2") and d["spec"]["paused"] is False
    assert inplace.PAUSED_ANNOTATION not in (d["metadata"].get("annotations") or {})
    assert backend.in_place_off is None, "one workload's trouble: in place stays on"
