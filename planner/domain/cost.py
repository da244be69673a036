"""What a configuration costs per hour, from the node pools' prices."""

from __future__ import annotations

from planner.domain.state import ClusterSnapshot, WorkloadConfig


def pool_prices(snapshot: ClusterSnapshot, pool: str | None, device: str) -> tuple[float, float]:
    """(price per core-hour, price per GPU-hour) of the nodes that could host the config: in
    ``pool`` the pool's, anywhere (``None``) the dearest eligible node's, to be safe; see
    :meth:`planner.domain.cluster_facts.ClusterFacts.prices`."""
    return snapshot.facts.prices(pool, device)


def cost_per_hour(config: WorkloadConfig, snapshot: ClusterSnapshot) -> float:
    core, gpu = pool_prices(snapshot, config.pool, config.device)
    gpus = 1 if config.device == "gpu" else 0
    return config.replicas * (config.cpu * core + gpus * gpu)
