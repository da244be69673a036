"""What a configuration costs per hour, from the node pools' prices."""

from __future__ import annotations

from planner.domain.state import ClusterSnapshot, WorkloadConfig


def pool_prices(snapshot: ClusterSnapshot, pool: str | None, device: str) -> tuple[float, float]:
    """(price per core-hour, price per GPU-hour) of the nodes that could host the config."""
    nodes = [n for n in snapshot.nodes if (pool is None or n.pool == pool)
             and (device != "gpu" or n.gpus > 0)]
    if not nodes:
        nodes = list(snapshot.nodes)
    if not nodes:
        return 0.0, 0.0
    if pool is None:
        # The scheduler may put pods anywhere: price at the dearest eligible pool, to be safe.
        return (max(n.cost_per_core_hour for n in nodes), max(n.cost_per_gpu_hour for n in nodes))
    return nodes[0].cost_per_core_hour, nodes[0].cost_per_gpu_hour


def cost_per_hour(config: WorkloadConfig, snapshot: ClusterSnapshot) -> float:
    core, gpu = pool_prices(snapshot, config.pool, config.device)
    gpus = 1 if config.device == "gpu" else 0
    return config.replicas * (config.cpu * core + gpus * gpu)
