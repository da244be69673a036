"""Property-based fuzzing of the REST API (hypothesis): whatever the body, the query or the
documents in the knowledge base, the API answers without a 5xx and without a traceback."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowledge.connect import open_knowledge_base
from knowledge.mongo import MongoKnowledgeBase
from planner.api.app import create_app
from planner.api.settings import Settings
from planner.cli.embedded import scenario_runtime
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

SHOP = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "diurnal-shop.yaml"
RAISE = False  # True while debugging: the traceback instead of a 500
TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
FUZZ_READS = settings(FUZZ, max_examples=30)  # each example makes 3 or 4 requests

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["shop", "checkout", "cpu", "gpu", "grid", "queueing", "astar",
                     "p95latency", "Deployment", "intent-planner.io/v1alpha1", "Intent"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def text(value: Any) -> str:
    """JSON as Python writes it: NaN and Infinity included."""
    return json.dumps(value, allow_nan=True)


REF = {"namespace": "shop", "name": "checkout"}
bodies = st.one_of(
    values.map(text),
    st.fixed_dictionaries({"ref": st.just(REF)}, optional={
        "overrides": st.one_of(values, st.fixed_dictionaries({}, optional={
            k: values for k in ("load", "replicas", "cpu", "device", "pool")})),
        "planner": values}).map(text),
    st.fixed_dictionaries({"intent": st.fixed_dictionaries({
        "apiVersion": st.just("intent-planner.io/v1alpha1"), "kind": st.just("Intent"),
        "metadata": st.fixed_dictionaries({"name": st.just("c"), "namespace": values}),
        "spec": st.fixed_dictionaries({"targetRef": st.just({"name": "checkout"})}, optional={
            "priority": values, "active": values,
            "objectives": st.lists(st.fixed_dictionaries(
                {"name": values, "value": values, "measuredBy": st.just("p95latency")}),
                max_size=2)})})}).map(text),
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
)


@pytest.fixture(scope="module")
def fuzz_run() -> ScenarioRun:
    # the pymongo store over mongomock: the tests write raw documents it would refuse
    run = ScenarioRun(load_scenario(SHOP), "queueing",
                      knowledge=open_knowledge_base("mongomock://"))
    for _ in range(2 * 15):
        run.advance()
    return run


@pytest.fixture(scope="module")
def client(fuzz_run: ScenarioRun) -> Iterator[TestClient]:
    app = create_app(Settings(api_tokens=(TOKEN,), kb="memory"), scenario_runtime(fuzz_run))
    with TestClient(app, raise_server_exceptions=RAISE) as c:
        yield c


def _sound(resp: Any) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:500])
    assert "Traceback" not in resp.text
    json.loads(resp.text)  # every answer is JSON a strict reader accepts


@FUZZ
@given(body=bodies)
def test_preview_bodies(client: TestClient, body: str) -> None:
    _sound(client.post("/v1/plans:preview", content=body.encode("utf-8", "surrogatepass"),
                       headers=AUTH))


query_text = st.one_of(st.text(max_size=20), st.sampled_from(
    ["nan", "inf", "-1", "1e400", "0", "99999999999999999999", "1.5", "", "shop/checkout"]))


@FUZZ_READS
@given(ns=query_text, name=query_text, since=query_text, limit=query_text, cursor=query_text,
       intent=query_text)
def test_read_queries(client: TestClient, ns: str, name: str, since: str, limit: str,
                      cursor: str, intent: str) -> None:
    path = f"/v1/intents/{quote(ns or 'shop', safe='')}/{quote(name or 'checkout', safe='')}"
    _sound(client.get(path, headers=AUTH))
    _sound(client.get(path + "/events", params={"since": since, "limit": limit,
                                                "cursor": cursor}, headers=AUTH))
    _sound(client.get("/v1/effects", params={"intent": intent, "limit": limit}, headers=AUTH))


storable = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
bson_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(),
    st.just(math.nan), st.just(1e300), st.text(storable, max_size=12))
stored_value = st.recursive(bson_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.text(storable, min_size=1, max_size=6).filter(
        lambda k: "$" not in k and "." not in k), inner, max_size=3)), max_leaves=8)


@FUZZ_READS
@given(event=st.dictionaries(st.sampled_from(["time", "intent", "current", "config", "plan",
                                              "load", "applied", "x"]), stored_value),
       effect=st.dictionaries(st.sampled_from(["intent", "objective", "timestamp", "static",
                                               "kind", "format", "metadata"]), stored_value),
       status=st.dictionaries(st.sampled_from(["intent", "time", "status"]), stored_value))
def test_stored_documents_of_any_shape(client: TestClient, fuzz_run: ScenarioRun,
                                       event: dict[str, Any], effect: dict[str, Any],
                                       status: dict[str, Any]) -> None:
    kb = fuzz_run.knowledge
    inner = getattr(kb, "inner", kb)
    assert isinstance(inner, MongoKnowledgeBase)
    db = inner.client[inner.database_name]
    marker = {"_fuzz": True}
    db.events.insert_one({**{"intent": "shop/checkout"}, **event, **marker})
    db.effects.insert_one({**effect, **marker})
    db.status.insert_one({**status, **marker})
    try:
        for path in ("/v1/intents", "/v1/intents/shop/checkout",
                     "/v1/intents/shop/checkout/events?limit=3", "/v1/effects"):
            _sound(client.get(path, headers=AUTH))
    finally:
        for name in ("events", "effects", "status"):
            db[name].delete_many({"_fuzz": True})
