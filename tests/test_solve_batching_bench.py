"""``bench/solve_batching.py``: the planner's mixture solves, call by call and joined."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from bench import solve_batching
from planner.models import latency


def _calls(seed: int) -> list[solve_batching.Call]:
    rng = np.random.default_rng(seed)
    out: list[solve_batching.Call] = []
    for n, k in ((3, 2), (5, 2), (4, 3), (1, 2)):
        mu = rng.uniform(5.0, 20.0, (n, k))
        lam = mu * rng.uniform(0.1, 0.99, (n, k))
        weight = rng.uniform(0.0, 1.0, (n, k))
        weight[:, 0] += 0.1
        weight /= weight.sum(axis=1, keepdims=True)
        out.append((0.95, lam, mu, np.ones((n, k)), weight, 8))
    return out


def test_the_joined_solve_gives_each_row_its_own_value() -> None:
    out = solve_batching.compare(_calls(1), repeat=1)
    assert out["calls"] == 4 and out["rows"] == 13
    assert out["classes"] == {2: 3, 3: 1} and out["solves_joined"] == 2
    assert out["bit_identical"] is True


def test_a_solve_whose_rows_depend_on_each_other_is_caught(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    real = latency.mixture_sojourn_quantile

    def coupled(q: float, lam: Any, mu: Any, c: Any, weight: Any, iterations: int = 8) -> Any:
        return real(q, lam, mu, c, weight, iterations) + len(lam)

    monkeypatch.setattr(latency, "mixture_sojourn_quantile", coupled)
    assert solve_batching.compare(_calls(2), repeat=1)["bit_identical"] is False
