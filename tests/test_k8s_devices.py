"""KubernetesBackend.set_device over the API emulator: a workload made a GPU workload and back,
exactly (the user's own selector keys, tolerations and resources kept), a GPU canary beside a
CPU workload, and the GPU settings' validation."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from bench.harness.apiserver import Kube, RunningApiserver, deployment, node, wait_until
from planner.domain.errors import PermanentError, SpecError
from planner.domain.ports import UnsupportedOperation
from planner.domain.state import WorkloadConfig
from planner.k8s import devices
from planner.k8s.backend import KubernetesBackend
from planner.k8s.resources import DEPLOYMENTS
from planner.k8s.settings import GpuSettings, parse_settings
from planner.k8s.transport import ApiClientTransport
from planner.k8s.watchcache import CacheSettings, WatchCache

NS = "shop"
WEB = f"{NS}/web"
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
USER_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "shop",
                   "effect": "NoSchedule"}
SETTINGS = {"gpu": {"containers": ["app"], "cpuPerPod": 2,
                    "nodeSelector": {"nvidia.com/gpu.present": "true", "disk": "ssd"}}}


@pytest.fixture
def kube(api: RunningApiserver) -> Iterator[Kube]:
    k = Kube(api.url)
    k.create(node("node-a1", "pool-a", cpu="8"))
    k.create(node("gpu-1", "pool-gpu", cpu="16",
                  labels={"nvidia.com/gpu.present": "true", "disk": "ssd"}))
    web = deployment(NS, "web", 2, cpu="500m")
    tspec = web["spec"]["template"]["spec"]
    tspec["containers"][0]["resources"]["limits"] = {"cpu": "1", "memory": "512Mi"}
    tspec["containers"].append({"name": "proxy", "image": "registry.example/proxy:1",
                                "resources": {"requests": {"cpu": "100m"}}})
    tspec["nodeSelector"] = {"disk": "ssd"}  # the user's own, also in the GPU selector
    tspec["tolerations"] = [USER_TOLERATION]
    k.create(web)
    yield k
    k.close()


def make_backend(api: RunningApiserver, settings: dict[str, Any]
                 ) -> tuple[KubernetesBackend, WatchCache, ApiClient]:
    client = ApiClient(Configuration(host=api.url))
    cache = WatchCache(ApiClientTransport(client), settings=CacheSettings(watch_timeout_s=30))
    b = KubernetesBackend(cache, client, ready_wait_s=10, request_timeout_s=5,
                          settings=parse_settings(settings))
    return b, cache, client


@pytest.fixture
def backend(api: RunningApiserver, kube: Kube) -> Iterator[KubernetesBackend]:
    b, cache, client = make_backend(api, SETTINGS)
    yield b
    cache.stop()
    client.close()


def template(kube: Kube, name: str = "web") -> dict[str, Any]:
    spec: dict[str, Any] = kube.get("Deployment", NS, name)["spec"]["template"]["spec"]
    return spec


def updates(api: RunningApiserver, start: int) -> list[str | None]:
    return [c.name for c in api.server.calls[start:]
            if c.resource == "deployments" and c.verb in ("create", "update", "delete")]


def test_set_device_to_gpu_and_back_is_exact(api: RunningApiserver, kube: Kube,
                                             backend: KubernetesBackend) -> None:
    original = copy.deepcopy(template(kube))
    backend.set_device(WEB, "gpu")
    t = template(kube)
    app, proxy = t["containers"]
    assert app["resources"] == {"requests": {"cpu": "1667m", "memory": "256Mi",
                                             "nvidia.com/gpu": "1"},
                                "limits": {"cpu": "3333m", "memory": "512Mi",
                                           "nvidia.com/gpu": "1"}}, (
        "2 cores over the pod, spread as resize spreads them; the GPU only to 'app'")
    assert proxy["resources"] == {"requests": {"cpu": "333m"}}
    assert app["image"] == "registry.example/app:1"
    assert t["nodeSelector"] == {"disk": "ssd", "nvidia.com/gpu.present": "true"}
    assert t["tolerations"] == [USER_TOLERATION, GPU_TAINT]
    record = devices.read_record(kube.get("Deployment", NS, "web")["metadata"])
    assert record is not None and record["nodeSelector"] == {"nvidia.com/gpu.present": None}, (
        "'disk: ssd' was the user's already: not ours to take back")
    # Observed as a GPU workload once the cache has the write.
    wait_until(lambda: backend.observe().workloads[WEB].config.device == "gpu")
    assert backend.observe().workloads[WEB].config.cpu == pytest.approx(2.0)
    # Level-based: asking again writes nothing.
    mark = len(api.server.calls)
    backend.set_device(WEB, "gpu")
    assert updates(api, mark) == []
    # And back: the template is the one we started from, byte for byte.
    backend.set_device(WEB, "cpu")
    assert template(kube) == original
    meta = kube.get("Deployment", NS, "web")["metadata"]
    assert devices.GPU_ANNOTATION not in (meta.get("annotations") or {})
    mark = len(api.server.calls)
    backend.set_device(WEB, "cpu")
    assert updates(api, mark) == []
    wait_until(lambda: backend.observe().workloads[WEB].config.device == "cpu")
    assert backend.observe().workloads[WEB].config.cpu == pytest.approx(0.6)


def test_the_user_s_changes_while_on_gpu_are_kept(kube: Kube,
                                                  backend: KubernetesBackend) -> None:
    backend.set_device(WEB, "gpu")
    t = template(kube)
    t["tolerations"].append({"key": "spot", "operator": "Exists"})
    t["nodeSelector"]["zone"] = "eu-1a"
    kube.patch("Deployment", NS, "web", {"spec": {"template": {"spec": {
        "tolerations": t["tolerations"], "nodeSelector": t["nodeSelector"]}}}})
    backend.set_device(WEB, "cpu")
    back = template(kube)
    assert back["tolerations"] == [USER_TOLERATION, {"key": "spot", "operator": "Exists"}]
    assert back["nodeSelector"] == {"disk": "ssd", "zone": "eu-1a"}
    assert "nvidia.com/gpu" not in back["containers"][0]["resources"]["requests"]


def test_changed_gpu_settings_are_applied_on_the_next_call(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    backend.set_device(WEB, "gpu")
    other, cache, client = make_backend(api, {"gpu": {"count": 2, "resource": "amd.com/gpu"}})
    try:
        other.set_device(WEB, "gpu")
        t = template(kube)
        assert t["containers"][0]["resources"]["limits"] == {
            "cpu": "1", "memory": "512Mi", "amd.com/gpu": "2"}, "CPU kept, the old GPU gone"
        assert t["containers"][1]["resources"] == {"requests": {"cpu": "100m"}}, (
            "gpu.containers [] (the default): the first container only, not the proxy")
        assert t["nodeSelector"] == {"disk": "ssd"}
        other.set_device(WEB, "cpu")
    finally:
        cache.stop()
        client.close()


def test_a_gpu_workload_not_made_by_us_is_left_alone(api: RunningApiserver, kube: Kube,
                                                    backend: KubernetesBackend) -> None:
    ml = deployment(NS, "ml", 1)
    ml["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "nvidia.com/gpu": "1"}
    kube.create(ml)
    wait_until(lambda: backend.cache.get(DEPLOYMENTS, NS, "ml", wait=10))
    mark = len(api.server.calls)
    backend.set_device(f"{NS}/ml", "gpu")
    with pytest.raises(UnsupportedOperation, match="not added by intent-planner"):
        backend.set_device(f"{NS}/ml", "cpu")
    assert updates(api, mark) == []


def test_a_gpu_canary_beside_a_cpu_workload(kube: Kube, backend: KubernetesBackend) -> None:
    backend.set_canary(WEB, WorkloadConfig(1, cpu=4.0, device="gpu"))
    c = template(kube, "web-canary")
    assert c["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert sum(float(x["resources"]["requests"]["cpu"].rstrip("m")) / 1000
               for x in c["containers"]) == pytest.approx(4.0, abs=0.002), "the canary's CPU"
    assert c["tolerations"] == [USER_TOLERATION, GPU_TAINT]
    assert c["nodeSelector"] == {"disk": "ssd", "nvidia.com/gpu.present": "true"}
    assert "tolerations" in template(kube) and "nvidia.com/gpu" not in template(kube)[
        "containers"][0]["resources"]["requests"], "the workload itself is untouched"
    wait_until(lambda: backend.observe().workloads[WEB].canary is not None)
    canary = backend.observe().workloads[WEB].canary
    assert canary is not None and canary.config.device == "gpu"
    # A CPU canary of the workload once it is a GPU workload (ours): the way back.
    backend.set_device(WEB, "gpu")
    backend.set_canary(WEB, WorkloadConfig(1, cpu=1.0, device="cpu"))
    c = template(kube, "web-canary")
    assert "nvidia.com/gpu" not in c["containers"][0]["resources"]["requests"]
    assert c["tolerations"] == [USER_TOLERATION]


def test_a_missing_gpu_container_names_the_fix(kube: Kube, api: RunningApiserver) -> None:
    b, cache, client = make_backend(api, {"gpu": {"containers": ["model"]}})
    try:
        with pytest.raises(PermanentError, match=r"no container model .*\(it has app, proxy\)"):
            b.set_device(WEB, "gpu")
    finally:
        cache.stop()
        client.close()


@pytest.mark.parametrize(("doc", "field", "fix"), [
    ({"gpu": {"resource": "gpu"}}, "kubernetes.gpu.resource", "vendor-domain/name"),
    ({"gpu": {"count": 0}}, "kubernetes.gpu.count", ">= 1"),
    ({"gpu": {"cpuPerPod": -1}}, "kubernetes.gpu.cpuPerPod", "> 0"),
    ({"gpu": {"containers": ["a", "a"]}}, "kubernetes.gpu.containers", "once"),
    ({"gpu": {"nodeSelector": {"bad key": "x"}}}, "kubernetes.gpu.nodeSelector", "prefix/name"),
    ({"gpu": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
     "kubernetes.gpu.tolerations[0]", "remove value"),
    ({"gpu": {"tolerations": [{"key": "k", "effect": "Sometimes"}]}},
     "kubernetes.gpu.tolerations[0].effect", "NoSchedule"),
    ({"inPlaceResize": {"mode": "maybe"}}, "kubernetes.inPlaceResize.mode", "'auto'"),
    ({"inPlaceResize": {"deferredSeconds": -5}}, "kubernetes.inPlaceResize.deferredSeconds",
     ">= 0"),
    ({"gpuMetrics": {"utilization": "DCGM-UTIL"}}, "kubernetes.gpuMetrics.utilization",
     "metric name"),
    ({"gpuMetrics": {"podLabel": "exported pod"}}, "kubernetes.gpuMetrics.podLabel",
     "label name"),
    ({"gpu": {"cpus": 2}}, "kubernetes.gpu.cpus", "spelling"),
])
def test_bad_settings_name_the_field_and_the_fix(doc: dict[str, Any], field: str,
                                                 fix: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_settings(doc)
    assert err.value.field == field
    assert fix in str(err.value)


def test_defaults() -> None:
    s = parse_settings(None)
    assert s.gpu == GpuSettings() and s.gpu.resource == "nvidia.com/gpu" and s.gpu.count == 1
    assert [t.as_api() for t in s.gpu.tolerations] == [GPU_TAINT]
    assert s.in_place_resize.mode == "auto" and s.in_place_resize.deferred_s == 300
    assert s.gpu_metrics.utilization == "DCGM_FI_DEV_GPU_UTIL"


def test_the_operator_command_checks_the_backend_settings(tmp_path: Any) -> None:
    import typer
    from typer.testing import CliRunner

    from planner.k8s import command

    app = typer.Typer()
    app.command()(command.operator)
    bad = tmp_path / "backend.yaml"
    bad.write_text("gpu:\n  resource: gpu\n")
    result = CliRunner().invoke(app, ["--backend-settings", str(bad)])
    assert result.exit_code == 2
    assert "kubernetes.gpu.resource" in result.output and "nvidia.com/gpu" in result.output


def test_the_cpu_chosen_since_the_switch_is_kept(api: RunningApiserver, kube: Kube,
                                                backend: KubernetesBackend) -> None:
    def cpus() -> list[str]:
        return [c["resources"]["requests"]["cpu"] for c in template(kube)["containers"]]

    backend.set_device(WEB, "gpu")
    assert cpus() == ["1667m", "333m"], "cpuPerPod: 2"
    backend.resize(WEB, 3.0)  # the CPU actuator, after the switch
    assert cpus() == ["2500m", "500m"]
    backend.set_device(WEB, "gpu")  # asked again (e.g. new GPU settings): the CPU stays
    assert cpus() == ["2500m", "500m"]
    backend.set_device(WEB, "cpu")  # and back: the GPU goes, the CPU chosen since stays
    t = template(kube)
    assert cpus() == ["2500m", "500m"] and "nvidia.com/gpu" not in t["containers"][0][
        "resources"]["requests"]
    assert t["containers"][0]["resources"]["limits"] == {"cpu": "5", "memory": "512Mi"}
    # Unchanged since the switch: the CPU from before comes back exactly.
    backend.resize(WEB, 0.6)
    original = copy.deepcopy(template(kube))
    backend.set_device(WEB, "gpu")
    backend.set_device(WEB, "cpu")
    assert template(kube) == original
    # The CPU actuator's size in the same plan (after the observation) is not overwritten.
    wait_until(lambda: backend.observe().workloads[WEB].config.cpu == pytest.approx(0.6))
    backend.resize(WEB, 1.2)
    backend.set_device(WEB, "gpu")
    assert cpus() == ["1", "200m"], "1.2 CPU kept, not cpuPerPod"


def test_a_bad_gpu_annotation_names_the_fix_and_blocks_no_canary(
        api: RunningApiserver, kube: Kube, backend: KubernetesBackend) -> None:
    kube.patch("Deployment", NS, "web", {"metadata": {"annotations": {
        devices.GPU_ANNOTATION: "{not json"}}})
    wait_until(lambda: (backend.cache.get(DEPLOYMENTS, NS, "web", wait=10) or {}).get(
        "metadata", {}).get("annotations"))
    backend.set_canary(WEB, WorkloadConfig(1, cpu=0.5))  # same device: the record is not read
    assert template(kube, "web-canary")["containers"][0]["resources"]["requests"]["cpu"]
    with pytest.raises(PermanentError, match=r"shop/web: annotation intent-planner.io/gpu is "
                                             r"not JSON.*fix: remove the annotation"):
        backend.set_device(WEB, "cpu")
    kube.patch("Deployment", NS, "web", {"metadata": {"annotations": {
        devices.GPU_ANNOTATION: "[1]"}}})
    with pytest.raises(PermanentError, match=r"not a GPU record .*fix: remove the annotation"):
        backend.set_device(WEB, "cpu")
