"""Saturation is information: censored latency observations teach the model where capacity
ends (the issue's "saturation is thrown away" mechanism)."""

from __future__ import annotations

import numpy as np
import pytest

from planner.domain.state import PodState, WorkloadConfig, WorkloadState
from planner.models.latency import QueueingLatencyRegressor
from planner.models.queue_estimate import QueueEstimate, capped

TIMEOUT_MS = 5000.0


def _calm_and_saturated(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A few calm minutes at 10 pods (latency flat: the service rate cannot be told from the
    base latency) and three saturated ones at 2 pods (latency at the timeout)."""
    rng = np.random.default_rng(seed)
    mu, base = 10.0, 20.0
    rows, ys, cens = [], [], []
    for rate in np.linspace(1.0, 3.0, 12):
        y = base + 1000.0 * np.log(20.0) / (mu - rate / 10.0)
        rows.append([rate, 10.0, 1.0, 0.0, -1.0])
        ys.append(y * float(np.exp(rng.normal(0.0, 0.1))))
        cens.append(False)
    for rate in (40.0, 45.0, 50.0):
        rows.append([rate, 2.0, 1.0, 0.0, -1.0])
        ys.append(TIMEOUT_MS)
        cens.append(True)
    return np.asarray(rows), np.asarray(ys), np.asarray(cens)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_saturated_rows_bound_the_capacity(seed: int) -> None:
    X, y, cens = _calm_and_saturated(seed)
    model = QueueingLatencyRegressor(timeout_ms=TIMEOUT_MS).fit(X, y, cens)
    two_pods = np.array([[45.0, 2.0, 1.0, 0.0, -1.0]])
    # Two pods were seen saturated at 40-50 req/s: the model must not promise they carry 45.
    assert model.capacity(two_pods)[0] <= 50.0
    assert not np.isfinite(model.predict(two_pods)[0]) or model.predict(two_pods)[0] >= 1000.0


def test_without_the_saturated_rows_the_model_stays_flat() -> None:
    """The control: the same calm rows alone say nothing about capacity, so the test above
    could fail; the timeout rows are censored even without flags."""
    X, y, cens = _calm_and_saturated(0)
    calm_only = QueueingLatencyRegressor(timeout_ms=TIMEOUT_MS).fit(X[~cens], y[~cens])
    two_pods = np.array([[45.0, 2.0, 1.0, 0.0, -1.0]])
    assert calm_only.capacity(two_pods)[0] > 1000.0
    by_timeout = QueueingLatencyRegressor(timeout_ms=TIMEOUT_MS).fit(X, y)
    assert by_timeout.capacity(two_pods)[0] <= 50.0


def test_censored_rows_alone_are_not_enough() -> None:
    X, y, cens = _calm_and_saturated(0)
    with pytest.raises(ValueError, match="below saturation"):
        QueueingLatencyRegressor(timeout_ms=TIMEOUT_MS).fit(X[cens], y[cens], cens[cens])


def test_a_saturated_observation_caps_the_explicit_estimate() -> None:
    pods = tuple(PodState(f"p{i}", "n", 1.0, cpu_utilization=1.0) for i in range(2))
    wl = WorkloadState("ns", "w", WorkloadConfig(2, 1.0), pods, request_rate=30.0,
                       cpu_utilization=1.0)
    est = capped(QueueEstimate(100.0, 5.0, {"p99": 7.0}), wl)
    assert est.mu_per_core == pytest.approx(15.0)
    assert est.base_for("p99") == 7.0 and est.base_for("p50") == 5.0
    assert capped(QueueEstimate(10.0, 5.0), wl).mu_per_core == 10.0


def test_each_latency_objective_gets_its_own_base() -> None:
    """A p99 objective's fitted base is not applied to the p50 objective of the same intent
    (the issue's "one objective's fit applied to another")."""
    from actuators import registry
    from planner.domain.admin import AdminConfig
    from planner.domain.intents import parse_intent, parse_profile
    from planner.domain.state import ClusterSnapshot, NodeState
    from planner.planners.base import PlanningContext
    from planner.planners.online import (
        estimate_memory,
        explicit_predictors,
        recalled_estimate,
        updated_estimate,
    )

    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p99", "value": 400, "measuredBy": "p99"},
                               {"name": "p50", "value": 40, "measuredBy": "p50"}]}})
    profiles = {n: parse_profile({"kind": "KPIProfile",
                                  "metadata": {"name": n, "namespace": "ns"},
                                  "spec": {"type": "latency", "percentile": int(n[1:])}})
                for n in ("p99", "p50")}
    pods = tuple(PodState(f"p{i}", "n", 1.0, cpu_utilization=0.5) for i in range(4))
    wl = WorkloadState("ns", "w", WorkloadConfig(4, 1.0), pods, request_rate=200.0,
                       cpu_utilization=0.5)
    admin = AdminConfig()
    ctx = PlanningContext(intent, profiles, wl,
                          ClusterSnapshot(0.0, (NodeState("n", "a", "eu", 16.0, 4.0),),
                                          {"ns/w": wl}),
                          {"p99": 180.0, "p50": 25.0}, admin,
                          registry.create(admin.actuators, admin), None, 0.0)
    est = updated_estimate(ctx, None)
    assert est is not None
    assert est.base_for("p50") < est.base_for("p99")
    again = recalled_estimate(estimate_memory(est))
    assert again is not None and again.bases == est.bases
    preds = explicit_predictors(ctx, est)
    from planner.models.predictor import CandidateBatch

    now = CandidateBatch.of([ctx.config])
    # At the observed configuration each prediction is close to what was observed.
    assert preds["p50"].predict(now, 200.0).mean[0] == pytest.approx(25.0, rel=0.05)
    assert preds["p99"].predict(now, 200.0).mean[0] == pytest.approx(180.0, rel=0.05)


def test_a_model_vouches_only_for_loads_near_what_it_saw() -> None:
    """Fitted on calm minutes at 10 pods, the model does not vouch for 2 pods carrying five
    times the load per pod (the planner scaled a service from 29 pods to 2 on such a model):
    those candidates are unsupported; the ones it saw, and a margin beyond, are supported."""
    from planner.models.effects import EXTRAPOLATION_MARGIN, EffectModel, LearnedLatency
    from planner.models.observations import Dataset
    from planner.models.predictor import CandidateBatch
    from planner.models.training import load_range

    X, y, cens = _calm_and_saturated(0)
    calm = ~cens
    ds = Dataset(X[calm], y[calm], (), (), np.arange(calm.sum(), dtype=float),
                 np.full(int(calm.sum()), 0.2))
    top = load_range(ds)["cpu"]
    assert top == pytest.approx(3.0 / 10.0)
    est = QueueingLatencyRegressor(timeout_ms=TIMEOUT_MS).fit(ds.X, ds.y)
    model = EffectModel("ns/w", "p95", "queueing-latency", est, (), 0.0, False,
                        {"load_per_core_max": {"cpu": top}})
    pred = LearnedLatency(model).predict(
        CandidateBatch.of([WorkloadConfig(r, 1.0) for r in (10, 8, 2)]), 3.0)
    per_core = 3.0 / np.array([10, 8, 2])
    assert list(pred.supported) == list(per_core <= EXTRAPOLATION_MARGIN * top)
    assert pred.supported[0] and not pred.supported[2]
