"""The REST API against bad input and failing dependencies: a corpus of bad bodies (each a 4xx
naming the field, within 1 s), stored documents it cannot read (skipped and reported, never a
500), effects from the future, slow clients, an unreachable knowledge base."""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from knowledge import documents
from knowledge.base import KnowledgeBase
from knowledge.connect import open_knowledge_base
from knowledge.mongo import MongoKnowledgeBase
from planner.api import server
from planner.api.app import create_app
from planner.api.settings import Settings
from planner.cli.embedded import scenario_runtime, serve_runtime
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario
from tests.support.prometheus import free_port

SHOP = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "diurnal-shop.yaml"
TOKEN = "hardening-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "shop/checkout"
REF = '"ref": {"namespace": "shop", "name": "checkout"}'


def obj(*parts: str) -> str:
    """A JSON object from its members' text (so that NaN and Infinity can be written)."""
    return "{" + ", ".join(parts) + "}"


def inline(priority: str = "0.5", value: str = "60", workload: str = "checkout") -> str:
    return ('"intent": {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent", '
            '"metadata": {"name": "c", "namespace": "shop"}, "spec": {"targetRef": {"name": '
            f'"{workload}"}}, "priority": {priority}, "objectives": [{{"name": "p95latency", '
            f'"value": {value}, "measuredBy": "p95latency"}}]}}}}')


def what_if(member: str) -> str:
    return obj(REF, '"overrides": ' + obj(member))

def settings(**changes: Any) -> Settings:
    return Settings(**{"api_tokens": (TOKEN,), "kb": "memory", **changes})


@pytest.fixture(scope="module")
def run() -> ScenarioRun:
    # the pymongo store over mongomock: raw_db() writes documents the store would refuse
    r = ScenarioRun(load_scenario(SHOP), "queueing",
                    knowledge=open_knowledge_base("mongomock://"))
    for _ in range(3 * 15):  # three cycles: events, statuses
        r.advance()
    return r


@pytest.fixture(scope="module")
def client(run: ScenarioRun) -> Iterator[TestClient]:
    with TestClient(create_app(settings(), scenario_runtime(run)),
                    raise_server_exceptions=False) as c:
        yield c


def raw_db(kb: KnowledgeBase) -> Any:
    """The database under ``kb``, to store what the store itself would refuse."""
    inner = getattr(kb, "inner", kb)
    assert isinstance(inner, MongoKnowledgeBase)
    return inner.client[inner.database_name]


# -- the corpus of bad bodies ------------------------------------------------------------------

CORPUS: list[tuple[str, str, int, str]] = [
    # (case, body, status, the field the answer must name)
    ("NaN what-if load", what_if('"load": NaN'), 400, "overrides.load"),
    ("Infinity cpu", what_if('"cpu": Infinity'), 400, "overrides.cpu"),
    ("-Infinity load", what_if('"load": -Infinity'), 400, "overrides.load"),
    ("1e999 load", what_if('"load": 1e999'), 400, "overrides.load"),
    ("NaN priority inline", obj(inline(priority="NaN")), 400, "intent.spec.priority"),
    ("Infinity objective value", obj(inline(value="Infinity")), 400,
     "intent.spec.objectives[0].value"),
    ("-1e400 objective value", obj(inline(value="-1e400")), 400,
     "intent.spec.objectives[0].value"),
    ("NaN in an unknown field", obj(REF, '"x": [1, {"y": NaN}]'), 400, "x[1].y"),
    ("NaN as the whole body", "NaN", 400, "(the body)"),
    ("load as a string", what_if('"load": "lots"'), 422, "load"),
    ("negative load", what_if('"load": -5'), 422, "load"),
    ("load above the bound", what_if('"load": 1e12'), 422, "load"),
    ("negative replicas", what_if('"replicas": -1'), 422, "replicas"),
    ("zero cpu", what_if('"cpu": 0'), 422, "cpu"),
    ("unknown device", what_if('"device": "tpu"'), 422, "device"),
    ("unknown override", what_if('"colour": 1'), 422, "colour"),
    ("unknown pool", what_if('"pool": "nowhere"'), 422, "pool"),
    ("unknown planner", obj(REF, '"planner": "nope"'), 422, "planner"),
    ("null intent", obj('"intent": null'), 422, "intent"),
    ("both intent and ref", obj(REF, inline()), 422, "intent"),
    ("neither intent nor ref", "{}", 422, "intent"),
    ("empty ref name", obj('"ref": {"namespace": "shop", "name": ""}'), 422, "name"),
    ("ref as a list", obj('"ref": [1, 2]'), 422, "ref"),
    ("a list body", "[1, 2, 3]", 422, "body"),
    ("a string body", '"preview"', 422, "body"),
    ("not JSON", "{ref: shop/checkout}", 422, "body"),
    ("truncated JSON", "{" + REF, 422, "body"),
    ("priority as a string", obj(inline(priority='"high"')), 422, "priority"),
    ("priority as a boolean", obj(inline(priority="true")), 422, "priority"),
    ("negative objective", obj(inline(value="-1")), 422, "value"),
    ("unknown workload", obj(inline(workload="ghost")), 422, "targetRef"),
    ("deep nesting", obj('"x": ' + "[" * 5000 + "]" * 5000), 400, "body"),
]

@pytest.mark.parametrize(("case", "body", "status", "field"), CORPUS,
                         ids=[c[0] for c in CORPUS])
def test_bad_bodies_are_refused_naming_the_field(client: TestClient, case: str, body: str,
                                                 status: int, field: str) -> None:
    t0 = time.monotonic()
    resp = client.post("/v1/plans:preview", content=body.encode(),
                       headers={**AUTH, "content-type": "application/json"})
    assert time.monotonic() - t0 < 1.0
    assert resp.status_code == status, resp.text
    assert "Traceback" not in resp.text
    detail = resp.json()["detail"]
    if isinstance(detail, list):
        first = detail[0]
        named = first.get("field") or ".".join(str(p) for p in first["loc"])
        assert field in named or field in first["msg"], first
        assert len(first["msg"]) < 300 and "\n" not in first["msg"]
    else:
        assert "body" in field  # framework-level 400: the body as a whole


def test_not_utf8_and_no_content_type(client: TestClient) -> None:
    resp = client.post("/v1/plans:preview", content=b'{"ref": "\xff\xfe"}',
                       headers={**AUTH, "content-type": "application/json"})
    assert resp.status_code in (400, 422)
    resp = client.post("/v1/plans:preview", content=b'{"overrides": {"load": NaN}}',
                       headers=AUTH)  # no content type: read as JSON, so checked too
    assert resp.status_code == 400 and resp.json()["detail"][0]["field"] == "overrides.load"


# -- stored documents the API cannot read ------------------------------------------------------


def test_an_effect_from_the_future_is_skipped_and_hides_nothing(client: TestClient,
                                                                run: ScenarioRun) -> None:
    kb, now = run.knowledge, run.sim.now()
    db = raw_db(kb)
    kb.put_effect({"intent": KEY, "objective": "p95latency", "timestamp": now - 600,
                   "static": True, "kind": "k", "blob": b"old"})
    db.effects.insert_one({"intent": KEY, "objective": "p95latency", "timestamp": 1e300,
                           "static": True, "kind": "poison", "blob": b"x"})
    kb.put_effect({"intent": KEY, "objective": "p95latency", "timestamp": now,
                   "static": True, "kind": "k", "blob": b"new"})
    try:
        found = kb.effect(KEY, "p95latency", now, 60.0)
        assert found is not None and found["blob"] == b"new"  # the later model is served
        resp = client.get("/v1/effects", headers=AUTH)
        assert resp.status_code == 200
        body = resp.json()
        assert body["skipped"] == 1 and "timestamp 1e+300 is in the future" in body["problems"][0]
        newest = [i for i in body["items"] if i["newest"]]
        assert [i["timestamp"] for i in newest] == [now]
        with pytest.raises(documents.InvalidDocument, match=r"effect\.timestamp.*future"):
            kb.put_effect({"intent": KEY, "objective": "p95latency",
                           "timestamp": time.time() + 3600, "kind": "k"})
    finally:
        db.effects.delete_many({})


@pytest.mark.parametrize("timestamp", ["yesterday", None, True, math.nan, -5.0, 1e300, [1]])
def test_unreadable_effect_timestamps(client: TestClient, run: ScenarioRun,
                                      timestamp: Any) -> None:
    db = raw_db(run.knowledge)
    db.effects.insert_one({"intent": KEY, "objective": "p95latency", "timestamp": timestamp})
    db.effects.insert_one({"intent": None, "objective": "p95latency", "timestamp": 1.0})
    try:
        resp = client.get("/v1/effects", headers=AUTH)
        assert resp.status_code == 200, resp.text
        assert resp.json()["skipped"] == 2 and resp.json()["items"] == []
        assert "timestamp" in resp.json()["problems"][0] or "intent" in resp.json()["problems"][0]
    finally:
        db.effects.delete_many({})


@pytest.mark.parametrize("time_", ["yesterday", None, False, math.inf, {"$date": 1}, "9" * 40])
def test_unreadable_events_are_skipped_and_pages_stay_whole(
        client: TestClient, run: ScenarioRun, time_: Any) -> None:
    db = raw_db(run.knowledge)
    good = run.knowledge.count_events(KEY)
    db.events.insert_many([{"intent": KEY, "time": time_, "n": i} for i in range(3)])
    try:
        seen, skipped, url = 0, 0, "/v1/intents/shop/checkout/events?limit=2"
        for _ in range(good + 5):
            resp = client.get(url, headers=AUTH)
            assert resp.status_code == 200, resp.text
            page = resp.json()
            seen += len(page["items"])
            skipped += page["skipped"]
            assert all("time must be a finite number" in p for p in page["problems"])
            if page["next"] is None:
                break
            url = page["next"]
        assert seen == good  # every readable event, once: the bad ones shift no page
        assert skipped <= 3
    finally:
        db.events.delete_many({"n": {"$exists": True}})


def test_unreadable_statuses_are_skipped(client: TestClient, run: ScenarioRun) -> None:
    db = raw_db(run.knowledge)
    db.status.insert_many([{"time": 1.0, "status": {}},
                           {"intent": ["x"], "status": {}},
                           {"intent": "other/ns", "status": {"conditions": 7, "lastPlan": 3}}])
    try:
        resp = client.get("/v1/intents", headers=AUTH)
        assert resp.status_code == 200, resp.text
        keys = [i["key"] for i in resp.json()["items"]]
        assert keys == ["other/ns", KEY]
        assert client.get("/v1/intents/other/ns", headers=AUTH).status_code == 200
    finally:
        db.status.delete_many({"intent": {"$ne": KEY}})


# -- slow clients ------------------------------------------------------------------------------


def test_slow_clients_are_cut_off(run: ScenarioRun) -> None:
    port = free_port()
    app = create_app(settings(client_timeout_s=0.5, port=port), scenario_runtime(run))
    bg = server.BackgroundServer(app, "127.0.0.1", port)
    assert bg.start()
    socks: list[socket.socket] = []
    try:
        for _ in range(20):  # half-sent request heads
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(s)
        body = socket.create_connection(("127.0.0.1", port), timeout=5)  # a late body
        body.sendall(b"POST /v1/plans:preview HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"ref\": ")
        socks.append(body)
        t0 = time.monotonic()
        for s in socks[:-1]:
            assert s.recv(100) == b""  # closed by the server
        assert body.recv(1000).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - t0 < 3.0
        ok = socket.create_connection(("127.0.0.1", port), timeout=5)  # others still served
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert ok.recv(100).startswith(b"HTTP/1.1 200")
        socks.append(ok)
    finally:
        for s in socks:
            s.close()
        bg.stop()


# -- an unreachable knowledge base -----------------------------------------------------------


def _down_kb() -> KnowledgeBase:
    return open_knowledge_base(f"mongodb://127.0.0.1:{free_port()}/x", resilient=True,
                               server_selection_timeout_ms=100)


def test_serve_says_the_knowledge_base_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner.cli import embedded

    monkeypatch.setattr(embedded, "open_knowledge_base", lambda uri, **kw: _down_kb())
    app = create_app(settings(kb="mongodb://unreachable/x", warmup_s=0),
                     runtime_factory=serve_runtime)
    with TestClient(app) as c:
        for path in ("/v1/intents", "/v1/intents/shop/checkout",
                     "/v1/intents/shop/checkout/events", "/v1/effects"):
            resp = c.get(path, headers=AUTH)
            assert resp.status_code == 503, (path, resp.text)
            assert "knowledge base cannot be read" in resp.json()["detail"]
        ready = c.get("/readyz")
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert checks["controller"]["ok"] and not checks["knowledge_base"]["ok"]
    monkeypatch.undo()
    with TestClient(create_app(settings(warmup_s=0), runtime_factory=serve_runtime)) as c:
        assert c.get("/readyz").status_code == 200  # serve over a store that answers
        assert c.get("/v1/intents", headers=AUTH).json()["warnings"] == []


def test_run_with_the_api_warns_when_statuses_are_missing() -> None:
    r = ScenarioRun(load_scenario(SHOP), "queueing", knowledge=_down_kb())
    r.advance()
    with TestClient(create_app(settings(), scenario_runtime(r))) as c:
        resp = c.get("/v1/intents", headers=AUTH)
        assert resp.status_code == 200
        assert resp.json()["items"][0]["status_from"] == "controller"
        assert "knowledge base cannot be read" in resp.json()["warnings"][0]
        detail = c.get("/v1/intents/shop/checkout", headers=AUTH).json()
        assert detail["warnings"] and detail["status"] is not None
        assert c.get("/v1/intents/shop/other", headers=AUTH).status_code == 503

