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
