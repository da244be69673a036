"""Cluster facts computed once per snapshot price every (pool, device) exactly as a scan of the
nodes does, and carry over to a view with other allocations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.cluster_facts import ClusterFacts
from planner.domain.cost import pool_prices
from planner.domain.state import ClusterSnapshot, NodeState


def scanned_prices(nodes: tuple[NodeState, ...], pool: str | None,
                   device: str) -> tuple[float, float]:
    """The per-call scan the facts replace (its rule, written out again as the reference)."""
    eligible = [n for n in nodes if (pool is None or n.pool == pool)
                and (device != "gpu" or n.gpus > 0)] or list(nodes)
    if not eligible:
        return 0.0, 0.0
    if pool is None:
        return (max(n.cost_per_core_hour for n in eligible),
                max(n.cost_per_gpu_hour for n in eligible))
    return eligible[0].cost_per_core_hour, eligible[0].cost_per_gpu_hour


PRICE = st.floats(0.0, 5.0, allow_nan=False)
NODES = st.lists(st.builds(
    lambda i, pool, gpus, core, gpu, cpu: NodeState(f"n{i}", pool, "r", cpu, 0.0, gpus, 0,
                                                    core, gpu),
    st.integers(0, 10**6), st.sampled_from(["a", "b", "c"]), st.integers(0, 2), PRICE, PRICE,
    st.sampled_from([2.0, 4.0, 8.0])), max_size=12).map(tuple)


@settings(max_examples=200, deadline=None)
@given(nodes=NODES, pool=st.sampled_from([None, "a", "b", "c", "elsewhere"]),
       device=st.sampled_from(["cpu", "gpu"]))
def test_prices_equal_a_scan_of_the_nodes(nodes: tuple[NodeState, ...], pool: str | None,
                                          device: str) -> None:
    snapshot = ClusterSnapshot(0.0, nodes, {})
    assert pool_prices(snapshot, pool, device) == scanned_prices(nodes, pool, device)
    facts = snapshot.facts
    assert facts.total_gpus == sum(n.gpus for n in nodes)
    assert facts.total_cores == sum(n.cpu_capacity for n in nodes)
    assert facts.pool_names == tuple(sorted({n.pool for n in nodes}))
    assert facts.has_gpu == any(n.gpus > 0 for n in nodes)


def test_a_view_with_other_allocations_keeps_the_facts_and_they_still_hold() -> None:
    nodes = (NodeState("n1", "a", "r", 4.0, 0.0, 0, 0, 0.04, 0.0),
             NodeState("n2", "b", "r", 8.0, 0.0, 1, 0, 0.05, 2.5))
    snapshot = ClusterSnapshot(0.0, nodes, {})
    facts = snapshot.facts
    busy = tuple(NodeState(n.name, n.pool, n.region, n.cpu_capacity, 3.0, n.gpus, n.gpus,
                           n.cost_per_core_hour, n.cost_per_gpu_hour) for n in nodes)
    view = snapshot.with_allocation(busy)
    assert view.facts is facts
    assert view.facts == ClusterFacts.of(busy)
    assert view.nodes == busy and snapshot.nodes == nodes
