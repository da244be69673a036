"""A knowledge-base outage: the planner keeps its last good learned models (stale while error,
with their age in the plan's reason) instead of falling back to the explicit estimate; reads
are told apart from "no data" (the API answers 503, not an empty list)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from actuators import registry
from knowledge import base, connect, mongo, resilient
from planner.api.app import create_app
from planner.api.settings import Settings
from planner.cli.embedded import scenario_runtime
from planner.domain.admin import AdminConfig, CpuBounds, ReplicaBounds
from planner.domain.intents import parse_intent, parse_profile
from planner.domain.state import ClusterSnapshot, NodeState, PodState, WorkloadConfig, WorkloadState
from planner.models.effects import KIND_LATENCY, EffectModel, to_document
from planner.models.latency import QueueingLatencyRegressor
from planner.models.sojourn import sojourn_quantile
from planner.planners.base import PlanningContext
from planner.planners.grid import GridPlanner
from planner.planners.predictors import PredictorMemory, PredictorSource
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "scenarios" / "diurnal-shop.yaml"
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GATED = ("prepare", "record_event", "events", "count_events", "put_effect", "effect", "effects",
         "put_status", "statuses", "apply_retention")
T0 = 10_000.0
REFRESH_S = 60.0  # EffectCache's default


class Outage:
    """Makes every call of a store raise ``KnowledgeBaseUnavailable`` while ``down``."""

    def __init__(self, store: base.KnowledgeBase, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = False
        for name in GATED:
            monkeypatch.setattr(store, name, self._gate(getattr(store, name)))

    def _gate(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def gated(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise base.KnowledgeBaseUnavailable("simulated outage")
            return real(*args, **kwargs)

        return gated


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def stores(monkeypatch: pytest.MonkeyPatch) -> tuple[
        resilient.ResilientKnowledgeBase, mongo.MongoKnowledgeBase, Outage, Clock]:
    """The embedded store behind the resilient wrapper the CLI and the operator use, with a
    switch for outages and the wrapper's clock (its back-off) following planning time."""
    inner = connect.open_knowledge_base("mongomock://")
    assert isinstance(inner, mongo.MongoKnowledgeBase)
    outage = Outage(inner, monkeypatch)
    clock = Clock()
    return resilient.ResilientKnowledgeBase(inner, clock=clock), inner, outage, clock


def model(timestamp: float) -> EffectModel:
    """A fitted latency model of ``ns/w``'s p95 (mu = 100 req/s per core)."""
    rng = np.random.default_rng(int(timestamp))
    X = np.column_stack([rng.uniform(100, 600, 40), rng.integers(2, 20, 40),
                         rng.choice([0.5, 1, 2, 4], 40), np.zeros(40), -np.ones(40)])
    rate, rep, cpu = X[:, 0], X[:, 1], X[:, 2]
    y = 3.0 + sojourn_quantile(0.95, rate / rep, 100 * cpu, np.clip(np.floor(cpu), 1, 64))
    ok = np.isfinite(y) & (y < 2000)
    est = QueueingLatencyRegressor(n_bootstrap=2).fit(X[ok], y[ok])
    return EffectModel("ns/w", "p95", KIND_LATENCY, est, (), timestamp)


def context(knowledge: base.KnowledgeBase, now: float) -> PlanningContext:
    intent = parse_intent({"kind": "Intent", "metadata": {"name": "w", "namespace": "ns"},
                           "spec": {"targetRef": {"name": "w"}, "objectives": [
                               {"name": "p95", "value": 60, "measuredBy": "lat"}]}})
    prof = parse_profile({"kind": "KPIProfile", "metadata": {"name": "lat", "namespace": "ns"},
                          "spec": {"type": "latency"}})
    cfg = WorkloadConfig(4, 1.0)
    pods = tuple(PodState(f"p{i}", "n0", 1.0) for i in range(4))
    wl = WorkloadState("ns", "w", cfg, pods, request_rate=300.0, cpu_utilization=0.5)
    nodes = (NodeState("n0", "general", "eu", 64.0, cost_per_core_hour=0.04),)
    admin = AdminConfig(actuators=("replicas", "cpu"),
                        replicas=ReplicaBounds(min=1, max=40, max_step=50),
                        cpu=CpuBounds(sizes=(0.5, 1.0, 2.0, 4.0), cooldown_s=0), headroom=0.0)
    snap = ClusterSnapshot(now, nodes, {"ns/w": wl})
    return PlanningContext(intent, {"p95": prof}, wl, snap, {"p95": 40.0}, admin,
                           registry.create(admin.actuators, admin), knowledge, now)


def test_learned_model_is_kept_through_an_outage_with_its_age(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kb, _, outage, clock = stores(monkeypatch)
    kb.put_effect(to_document(model(T0 - 300.0)))
    source = PredictorSource(kb)
    mem = PredictorMemory()
    assert source.predictors(context(kb, T0), mem)["p95"].kind == "learned"
    outage.down = True
    first_failure = T0 + REFRESH_S + 1.0
    for now in (first_failure, T0 + 5 * REFRESH_S, T0 + 20 * REFRESH_S):
        clock.now = now
        ctx = context(kb, now)
        preds = source.predictors(ctx, mem)
        assert preds["p95"].kind == "learned", f"dropped to {preds['p95'].kind} at {now}"
    assert source.cache.get("ns/w", "p95", ctx.now)[0] is getattr(preds["p95"], "model", None)
    stale = source.cache.stale("ns/w", "p95")
    assert stale is not None and stale.since == first_failure and stale.confirmed == T0
    assert stale.age_s(ctx.now) == pytest.approx(20 * REFRESH_S - REFRESH_S - 1.0)
    assert source.stale_note(ctx, preds) == (
        "learned model for p95 served stale: knowledge base unreachable for 1139 s")
    assert kb.counters()["skipped_reads"] >= 3


def test_plan_reason_says_the_model_is_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    kb, _, outage, clock = stores(monkeypatch)
    kb.put_effect(to_document(model(T0 - 300.0)))
    planner = GridPlanner()
    assert "served stale" not in planner.plan(context(kb, T0)).reason
    outage.down = True
    clock.now = T0 + 2 * REFRESH_S
    plan = planner.plan(context(kb, clock.now))
    assert "learned models" in plan.reason and "explicit" not in plan.reason
    assert "learned model for p95 served stale: knowledge base unreachable for 0 s" in plan.reason


def test_a_newer_model_is_picked_up_when_the_store_is_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kb, inner, outage, clock = stores(monkeypatch)
    kb.put_effect(to_document(model(T0 - 300.0)))
    source = PredictorSource(kb)
    mem = PredictorMemory()
    source.predictors(context(kb, T0), mem)
    outage.down = True
    clock.now = T0 + 2 * REFRESH_S
    assert source.predictors(context(kb, clock.now), mem)["p95"].kind == "learned"
    assert source.cache.stale("ns/w", "p95") is not None
    outage.down = False
    inner.put_effect(to_document(model(T0 + 3 * REFRESH_S)))  # trained elsewhere meanwhile
    clock.now = T0 + 4 * REFRESH_S
    ctx = context(kb, clock.now)
    preds = source.predictors(ctx, mem)
    used = getattr(preds["p95"], "model", None)
    assert isinstance(used, EffectModel) and used.timestamp == T0 + 3 * REFRESH_S
    assert source.cache.stale("ns/w", "p95") is None and source.stale_note(ctx, preds) == ""


def test_no_model_before_the_outage_gives_the_explicit_estimate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kb, _, outage, clock = stores(monkeypatch)
    outage.down = True
    source = PredictorSource(kb)
    mem = PredictorMemory()
    for now in (T0, T0 + 2 * REFRESH_S):
        clock.now = now
        ctx = context(kb, now)
        preds = source.predictors(ctx, mem)
        assert preds["p95"].kind == "explicit"
        assert source.cache.stale("ns/w", "p95") is None and source.stale_note(ctx, preds) == ""
    plan = GridPlanner().plan(context(kb, T0 + 3 * REFRESH_S))
    assert "explicit models" in plan.reason and "stale" not in plan.reason


def test_the_stale_model_expires_with_the_look_back(monkeypatch: pytest.MonkeyPatch) -> None:
    kb, _, outage, clock = stores(monkeypatch)
    kb.put_effect(to_document(model(T0 - 300.0)))
    source = PredictorSource(kb, lookback_s=3600.0)
    mem = PredictorMemory()
    source.predictors(context(kb, T0), mem)
    outage.down = True
    clock.now = T0 + 3000.0
    assert source.predictors(context(kb, clock.now), mem)["p95"].kind == "learned"
    clock.now = T0 + 3400.0  # the model is now older than the look-back: the store drops it too
    assert source.predictors(context(kb, clock.now), mem)["p95"].kind == "explicit"


def test_api_answers_503_for_knowledge_base_reads_during_an_outage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kb, _, outage, _ = stores(monkeypatch)
    run = ScenarioRun(load_scenario(SHOP), "queueing", knowledge=kb)
    for _ in range(3):
        run.advance()
    settings = Settings(api_tokens=(TOKEN,), kb="memory")
    with TestClient(create_app(settings, scenario_runtime(run, looping=False))) as c:
        events = c.get("/v1/intents/shop/checkout/events", headers=AUTH)
        assert events.status_code == 200 and events.json()["items"]
        outage.down = True
        for path in ("/v1/intents/shop/checkout/events", "/v1/effects"):
            resp = c.get(path, headers=AUTH)
            assert resp.status_code == 503, (path, resp.status_code, resp.text)
            assert "knowledge base cannot be read" in resp.json()["detail"]
        # degraded, still answers with this process's statuses, and says what is missing
        resp = c.get("/v1/intents", headers=AUTH)
        assert resp.status_code == 200 and resp.json()["items"][0]["status_from"] == "controller"
        assert "knowledge base cannot be read" in resp.json()["warnings"][0]

