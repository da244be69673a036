"""GPU utilisation and memory per pod from Prometheus (the DCGM exporter's metrics), into the
pods' state and the dispatch weights' samples; a real Prometheus scraping a small exporter
that serves DCGM-named gauges labelled as the exporter's Kubernetes mode labels them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from actuators.weights import endpoint_metrics
from planner.domain.state import PodState, WorkloadConfig, WorkloadState
from planner.k8s.backend import _utilized
from planner.k8s.loadmetrics import PrometheusLoadMetrics
from planner.k8s.settings import GpuMetricSettings
from tests.support.prometheus import PrometheusServer, free_port, require_prometheus

# (namespace, pod, gpu, utilisation %, MiB used, MiB free)
GPUS = (("shop", "web-0", "0", 40, 1000, 3000), ("shop", "web-0", "1", 60, 3000, 1000),
        ("shop", "web-1", "2", 90, 7000, 1000), ("lab", "web-0", "3", 10, 100, 7900),
        ("", "", "4", 0, 0, 8000))
"""web-0 has two GPUs (mean 50 %, half their memory), web-1 one; another namespace has a pod
of the same name; GPU 4 is idle (no pod label value: not a pod's)."""


def workloads(device: str = "gpu") -> dict[str, WorkloadState]:
    pods = tuple(PodState(f"web-{i}", "gpu-1", 2.0, device) for i in range(3))
    return {"shop/web": WorkloadState("shop", "web", WorkloadConfig(3, 2.0, device), pods)}


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    binary = require_prometheus()
    registry = CollectorRegistry()
    labels = ["gpu", "UUID", "namespace", "pod", "container"]
    util = Gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels, registry=registry)
    used = Gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels,
                 registry=registry)
    free = Gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels,
                 registry=registry)
    for ns, pod, gpu, u, mu, mf in GPUS:
        key = (gpu, f"GPU-{gpu}", ns, pod, "app" if pod else "")
        util.labels(*key).set(u)
        used.labels(*key).set(mu)
        free.labels(*key).set(mf)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    prometheus = PrometheusServer(binary, [f"127.0.0.1:{server.server_port}"],
                                  scrape_interval="1s")
    try:
        prometheus.start()
        prometheus.wait_for('count(DCGM_FI_DEV_FB_FREE{pod!=""}) == 4', timeout=20)
        yield prometheus
    finally:
        prometheus.stop()
        server.shutdown()
        server.server_close()


def test_gpu_utilisation_and_memory_per_pod(prom: PrometheusServer) -> None:
    lm = PrometheusLoadMetrics(prom.url)
    try:
        load = lm(workloads())["shop/web"]
    finally:
        lm.close()
    assert load.pod_gpu_utilization == pytest.approx({"web-0": 0.5, "web-1": 0.9})
    assert load.pod_gpu_memory == pytest.approx({"web-0": 0.5, "web-1": 0.875})
    assert load.cpu_utilization is None and load.request_rate is None, "no such series here"
    # Into the pods, and from them into the dispatch weights' samples.
    pods = _utilized(workloads()["shop/web"].pods, load)
    assert [(p.gpu_utilization, p.gpu_memory_utilization) for p in pods] == [
        (pytest.approx(0.5), pytest.approx(0.5)), (pytest.approx(0.9), pytest.approx(0.875)),
        (None, None)]
    sample = endpoint_metrics(pods[1], 100.0, 0.5, now=10.0)
    assert sample.gpu_util == pytest.approx(0.9) and sample.cpu_util is None
    assert sample.utilisation == pytest.approx(0.9) and sample.request_rate == 50.0
    assert endpoint_metrics(pods[2], 100.0, 0.5, now=10.0).gpu_util is None


def test_renamed_labels(prom: PrometheusServer) -> None:
    """Where Prometheus renamed the exporter's labels (``exported_pod``), the settings say so;
    with names that match nothing, the values are unknown, not zero."""
    lm = PrometheusLoadMetrics(prom.url, gpu=GpuMetricSettings(pod_label="exported_pod"))
    try:
        load = lm(workloads())["shop/web"]
    finally:
        lm.close()
    assert load.pod_gpu_utilization == {} and load.pod_gpu_memory == {}


class Answers:
    """A Prometheus stand-in (httpx transport): canned vectors, DCGM queries failing or not."""

    def __init__(self, gpu_status: int = 200) -> None:
        self.gpu_status = gpu_status
        self.queries: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        self.queries.append(query)
        if "DCGM" in query:
            if self.gpu_status != 200:
                return httpx.Response(self.gpu_status, text="exporter gone")
            return _vector({"namespace": "shop", "pod": "web-0"}, 0.25)
        if "container_cpu_usage_seconds_total" in query:
            return _vector({"namespace": "shop", "pod": "web-0"}, 1.0)
        return _vector({"namespace": "shop", "service": "web"}, 30.0)


def _vector(metric: dict[str, str], value: float) -> httpx.Response:
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": metric, "value": [0, str(value)]}]}}
    return httpx.Response(200, text=json.dumps(body))


def test_no_gpu_queries_without_a_gpu_pod() -> None:
    answers = Answers()
    lm = PrometheusLoadMetrics("http://prom", client=httpx.Client(
        transport=httpx.MockTransport(answers)))
    load = lm(workloads("cpu"))["shop/web"]
    assert len(answers.queries) == 2 and not any("DCGM" in q for q in answers.queries)
    assert load.pod_gpu_utilization == {} and load.pod_utilization == {"web-0": 0.5}
    lm(workloads("gpu"))
    assert len(answers.queries) == 6


def test_failing_gpu_queries_leave_only_the_gpu_values_unknown(
        caplog: pytest.LogCaptureFixture) -> None:
    answers = Answers(gpu_status=500)
    lm = PrometheusLoadMetrics("http://prom", client=httpx.Client(
        transport=httpx.MockTransport(answers)))
    load = lm(workloads())["shop/web"]
    assert load.pod_gpu_utilization == {} and load.pod_gpu_memory == {}
    assert load.request_rate == 30.0 and load.pod_utilization == {"web-0": 0.5}
    assert lm.last_gpu_error is not None and "500" in lm.last_gpu_error
    assert "GPU metrics from http://prom unavailable" in caplog.text
    answers.gpu_status = 200
    assert lm(workloads())["shop/web"].pod_gpu_utilization == {"web-0": 0.25}
    assert lm.last_gpu_error is None


def _observe_gpu_pods(api_url: str, lm: PrometheusLoadMetrics,
                      names: tuple[str, ...]) -> WorkloadState:
    """``shop/web`` as the backend observes it over the API emulator at ``api_url``, with
    ``lm`` its load metrics: one GPU pod per name on one GPU node."""
    from kubernetes.client import ApiClient, Configuration

    from bench.harness.apiserver import Kube, deployment, node, pod
    from planner.k8s.backend import KubernetesBackend
    from planner.k8s.transport import ApiClientTransport
    from planner.k8s.watchcache import WatchCache

    kube = Kube(api_url)
    kube.create(node("gpu-1", "pool-gpu"))
    kube.create(deployment("shop", "web", len(names)))
    for name in names:
        gpu_pod = pod("shop", "web", "gpu-1", name=name)
        gpu_pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
        kube.create(gpu_pod)
    client = ApiClient(Configuration(host=api_url))
    backend = KubernetesBackend(WatchCache(ApiClientTransport(client)), client, load=lm,
                                ready_wait_s=10, request_timeout_s=5)
    try:
        return backend.observe().workloads["shop/web"]
    finally:
        backend.cache.stop()
        client.close()
        lm.close()
        kube.close()


def test_a_down_prometheus_is_unknown_not_a_crash(api: Any) -> None:
    """Through the backend's observe, over the API emulator: a GPU pod, Prometheus down."""
    lm = PrometheusLoadMetrics(f"http://127.0.0.1:{free_port()}", timeout=1.0)
    web_state = _observe_gpu_pods(api.url, lm, ("web-0",))
    assert lm.last_error is not None
    (p,) = web_state.pods
    assert p.device == "gpu"
    assert (p.gpu_utilization, p.gpu_memory_utilization, p.cpu_utilization) == (None,) * 3
    assert web_state.cpu_utilization is None and web_state.request_rate is None
    assert web_state.utilization is None and web_state.busy is None


def test_the_backend_reads_gpu_pods_as_busy_as_their_gpus(prom: PrometheusServer,
                                                          api: Any) -> None:
    """Through the backend's observe, over the API emulator and the real Prometheus: two GPU
    pods whose GPUs are 50 % and 90 % busy make a workload 70 % busy to the planners
    (:attr:`WorkloadState.busy`), whatever their CPUs (no CPU series here: unknown)."""
    web = _observe_gpu_pods(api.url, PrometheusLoadMetrics(prom.url), ("web-0", "web-1"))
    assert sorted((p.name, p.gpu_utilization) for p in web.pods) == [
        ("web-0", pytest.approx(0.5)), ("web-1", pytest.approx(0.9))]
    assert web.cpu_utilization is None
    assert web.utilization == pytest.approx(0.7) and web.busy == pytest.approx(0.7)
