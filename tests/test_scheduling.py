"""The simulated scheduler's heap index chooses exactly the node a scan of every node chooses,
over any sequence of placements and removals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cluster import SimNode
from simulator.scenario import PoolSpec
from simulator.scheduling import NodeIndex

POOLS = [PoolSpec(name="a", nodes=3, cpu=4), PoolSpec(name="b", nodes=2, cpu=8),
         PoolSpec(name="g", nodes=2, cpu=8, gpus=1)]


def scanned(nodes: list[SimNode], pool: str | None, cpu: float, gpus: int) -> SimNode | None:
    """The rule as a scan (the scheduler's code before the index), the reference."""
    best = None
    for n in nodes:
        if pool is not None and n.pool.name != pool:
            continue
        if gpus and n.pool.gpus == 0:
            continue
        if n.fits(cpu, gpus) and (best is None or n.pool.cpu - n.cpu_allocated
                                  > best.pool.cpu - best.cpu_allocated):
            best = n
    return best


OPS = st.lists(st.tuples(st.booleans(), st.sampled_from([None, "a", "b", "g", "x"]),
                         st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0]), st.integers(0, 1),
                         st.integers(0, 50)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(ops=OPS)
def test_the_index_picks_what_a_scan_picks(ops: list[tuple[bool, str | None, float, int,
                                                           int]]) -> None:
    nodes = [SimNode(f"{p.name}-{i}", p) for p in POOLS for i in range(p.nodes)]
    index = NodeIndex(nodes)
    placed: list[tuple[SimNode, float, int]] = []
    for add, pool, cpu, gpus, which in ops:
        if add or not placed:
            want = scanned(nodes, pool, cpu, gpus)
            assert index.pick(pool, cpu, gpus) is want
            if want is not None:
                want.cpu_allocated += cpu
                want.gpus_allocated += gpus
                index.changed(want)
                placed.append((want, cpu, gpus))
        else:
            node, cpu_, gpus_ = placed.pop(which % len(placed))
            node.cpu_allocated -= cpu_
            node.gpus_allocated -= gpus_
            index.changed(node)


def test_a_deep_copy_of_a_cluster_schedules_on_its_own_nodes() -> None:
    """Runs are deep-copied (tests share one simulation; previews work on copies): the copy's
    index must find the copy's nodes, and leave the original's alone."""
    import copy

    nodes = [SimNode(f"{p.name}-{i}", p) for p in POOLS for i in range(p.nodes)]
    index = NodeIndex(nodes)
    twin_nodes, twin = copy.deepcopy((nodes, index))
    node = twin.pick(None, 2.0, 0)
    assert node is not None and node in twin_nodes and all(node is not n for n in nodes)
    node.cpu_allocated += 2.0
    twin.changed(node)
    assert twin.pick(None, 8.0, 0) is not node
    assert index.pick(None, 8.0, 0) is scanned(nodes, None, 8.0, 0)
