"""Work per distinct pool of a candidate batch (:attr:`CandidateBatch.pool_rows`), looked up per
row: the same prices, restart counts and shape masks as the row-by-row code before it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.domain.cost import pool_prices
from planner.domain.state import ClusterSnapshot, NodeState, WorkloadConfig
from planner.models.predictor import CandidateBatch
from planner.planners import feedback
from planner.planners.search_space import prices

POOLS = (None, "a", "b", "c")
config_st = st.builds(WorkloadConfig, st.integers(1, 40), st.sampled_from((0.5, 1.0, 2.0)),
                      st.sampled_from(("cpu", "gpu")), st.sampled_from(POOLS))
node_st = st.tuples(st.sampled_from(("a", "b")), st.sampled_from((0.02, 0.03, 0.05)),
                    st.sampled_from((0.0, 1.2, 2.5)), st.integers(0, 2))


def _prices_row_by_row(snapshot: ClusterSnapshot, batch: CandidateBatch) -> np.ndarray:
    """The code before the per-pool look-up."""
    pools = np.asarray(["" if p is None else p for p in batch.pool])
    gpu = batch.gpu > 0.5
    core = np.empty(len(batch))
    gpu_price = np.empty(len(batch))
    for pool, g in set(zip(batch.pool, gpu.tolist(), strict=True)):
        rows = (pools == ("" if pool is None else pool)) & (gpu == g)
        core[rows], gpu_price[rows] = pool_prices(snapshot, pool, "gpu" if g else "cpu")
    out: np.ndarray = batch.replicas * (batch.cpu * core + batch.gpu * gpu_price)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(config_st, max_size=30), st.lists(node_st, max_size=6), config_st)
def test_per_pool_work_equals_the_row_by_row_code(configs: list[WorkloadConfig],
                                                  nodes: list[tuple[str, float, float, int]],
                                                  cur: WorkloadConfig) -> None:
    cluster = tuple(NodeState(f"n{i}", pool, "r", 32.0, 0.0, gpus, 0, core, gpu)
                    for i, (pool, core, gpu, gpus) in enumerate(nodes))
    snapshot = ClusterSnapshot(0.0, cluster, {})
    batch = CandidateBatch.of(configs)
    assert prices(snapshot, batch).tobytes() == _prices_row_by_row(snapshot, batch).tobytes()
    same = np.array([p == cur.pool for p in batch.pool], dtype=bool)
    assert batch.in_pool(cur.pool).tolist() == same.tolist()
    shape = feedback.shape_of(cur)
    mask = ((batch.cpu == cur.cpu) & ((batch.gpu > 0.5) == (cur.device == "gpu"))
            & np.array([p == cur.pool for p in batch.pool], dtype=bool))
    assert feedback.shape_mask(batch, shape).tolist() == mask.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(config_st, st.booleans()), max_size=30), config_st)
def test_unobserved_shapes_and_explicit_support_equal_the_row_by_row_code(
        rows: list[tuple[WorkloadConfig, bool]], cur: WorkloadConfig) -> None:
    from planner.models.explicit import _supported

    batch = CandidateBatch.of([c for c, _ in rows])
    supported = np.array([s for _, s in rows], dtype=bool)
    want = ~supported
    for i in np.flatnonzero(supported).tolist():
        shape = (float(batch.cpu[i]), "gpu" if batch.gpu[i] > 0.5 else "cpu", batch.pool[i])
        want &= ~feedback.shape_mask(batch, shape)
    assert feedback.unobserved_shapes(batch, supported).tolist() == want.tolist()
    same = np.array([p == cur.pool for p in batch.pool], dtype=bool)
    gpu_now = 1.0 if cur.device == "gpu" else 0.0
    assert _supported(batch, cur).tolist() == ((batch.gpu == gpu_now) & same).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(config_st, min_size=1, max_size=30), st.data())
def test_a_taken_batch_answers_per_pool_as_one_built_from_its_rows(
        configs: list[WorkloadConfig], data: st.DataObject) -> None:
    """A batch taken from one whose pools were worked out keeps them (some perhaps with no
    row): every per-pool answer is that of the same rows built afresh."""
    parent = CandidateBatch.of(configs)
    assert len(parent.pool_rows[1]) == len(configs)   # worked out before the take
    idx = np.array(data.draw(st.lists(st.integers(0, len(configs) - 1), max_size=40)),
                   dtype=np.intp)
    taken = parent.take(idx)
    fresh = CandidateBatch.of([configs[i] for i in idx.tolist()])
    assert taken.pool == fresh.pool
    pools, rows = taken.pool_rows
    assert [pools[j] for j in rows.tolist()] == list(fresh.pool)
    for pool in POOLS:
        assert taken.in_pool(pool).tolist() == fresh.in_pool(pool).tolist()
    cluster = (NodeState("n0", "a", "r", 32.0, 0.0, 1, 0, 0.03, 2.5),)
    snapshot = ClusterSnapshot(0.0, cluster, {})
    assert prices(snapshot, taken).tobytes() == prices(snapshot, fresh).tobytes()
