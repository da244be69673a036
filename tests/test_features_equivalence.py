"""``EffectModel.features`` written column by column into one array: the same rows as the
stacked columns it replaced (f9f11cd), bit for bit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.models.effects import KIND_LATENCY, EffectModel
from planner.models.observations import UNKNOWN_CLASS, pool_code
from planner.models.predictor import CandidateBatch

NAMES = ("a", "b", "c", UNKNOWN_CLASS)


def old_features(self: EffectModel, batch: CandidateBatch, rate: float,
                 mix: Mapping[str, float] | None = None) -> np.ndarray:
    at, rows = batch.pool_rows
    codes = np.array([pool_code(p, self.pools) for p in at], dtype=float)[rows]
    base = np.column_stack([np.full(len(batch), rate), batch.replicas, batch.cpu, batch.gpu,
                            codes])
    if not self.classes:
        return base
    index = {c: i for i, c in enumerate(self.classes)}
    unpinned = np.zeros(len(self.classes))
    spread = dict(mix) if mix else {UNKNOWN_CLASS: 1.0}
    if all(k in index for k, v in spread.items() if v > 0):
        for k, v in spread.items():
            if v > 0:
                unpinned[index[k]] = v
    per_pool = np.zeros((len(at), len(self.classes)))
    for j, pool in enumerate(at):
        if pool is None:
            per_pool[j] = unpinned
        elif pool in index:
            per_pool[j, index[pool]] = 1.0
    return np.column_stack([base, per_pool[rows]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(NAMES), max_size=4), st.lists(st.sampled_from(NAMES[:3]),
                                                               max_size=3),
       st.none() | st.dictionaries(st.sampled_from((*NAMES, "z")),
                                   st.sampled_from((0.0, 0.25, 1.0, -1.0))),
       st.lists(st.tuples(st.integers(0, 400), st.sampled_from((0.5, 1, 2.0)),
                          st.sampled_from((0.0, 1.0)), st.sampled_from((None, *NAMES, "z"))),
                min_size=1, max_size=30),
       st.sampled_from((0.0, 3.5, 1e6, np.inf)))
def test_features_are_the_stacked_columns(classes: list[str], pools: list[str],
                                          mix: dict[str, float] | None, rows: list[Any],
                                          rate: float) -> None:
    model = EffectModel("ns/x", "p95", KIND_LATENCY, None, tuple(pools), 0.0,
                        classes=tuple(classes))
    batch = CandidateBatch(np.array([r for r, _, _, _ in rows], dtype=float),
                           np.array([c for _, c, _, _ in rows], dtype=float),
                           np.array([g for _, _, g, _ in rows]), tuple(p for *_, p in rows))
    want = old_features(model, batch, rate, mix)
    got = model.features(batch, rate, mix)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
