"""A scenario of one inference workload beside a GPU pool, for tests of trials and models."""

from __future__ import annotations

from typing import Any


def gpu_trial(speedup: float, gpu_price: float, minutes: int = 40,
              actuators: tuple[str, ...] = ("replicas", "device", "placement"),
              step_s: int = 5, gpu_nodes: int = 2, gpus: int = 4) -> dict[str, Any]:
    """900 req/s (3 % noise) on 24 one-core pods pinned to pool ``general`` (50 req/s per
    core, 5 ms base), a GPU pool of ``gpu_nodes`` nodes with ``gpus`` GPUs each at
    ``gpu_price`` per GPU-hour, the GPU ``speedup`` times as fast; p95 <= 120 ms."""
    return {
        "name": "gpu-trial", "duration": f"{minutes}m", "step_s": step_s,
        "cluster": {"pools": [
            {"name": "general", "nodes": 8, "cpu": 16, "cost_per_core_hour": 0.04},
            {"name": "gpu", "nodes": gpu_nodes, "cpu": 16, "cost_per_core_hour": 0.04,
             "gpus": gpus,
             "cost_per_gpu_hour": gpu_price}]},
        "workloads": [{"name": "infer", "namespace": "ml", "replicas": 24, "cpu": 1,
                       "pool": "general",
                       "service": {"rate_per_core": 50, "base_latency_ms": 5,
                                   "gpu_speedup": speedup, "startup_s": "20s"},
                       "trace": {"kind": "constant", "rate": 900, "noise": 0.03}}],
        "admin": {"actuators": list(actuators),
                  "replicas": {"min": 2, "max": 60, "maxStep": 10}, "cycleSeconds": 15},
        "manifests": [
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
             "metadata": {"name": "p95", "namespace": "ml"},
             "spec": {"type": "latency", "percentile": 95}},
            {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
             "metadata": {"name": "infer", "namespace": "ml"},
             "spec": {"targetRef": {"kind": "Deployment", "name": "infer"},
                      "objectives": [{"name": "p95", "value": 120, "measuredBy": "p95"}]}}],
    }
