"""The REST API: plan previews equal the controller's next plan and change nothing; auth, size
limit, validation errors naming the field, 404s, events pagination, effects without blobs,
metrics."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from knowledge.connect import open_knowledge_base
from planner.api import dependencies
from planner.api.app import create_app
from planner.api.runtime import Runtime
from planner.api.settings import Settings
from planner.cli.embedded import scenario_runtime, serve_runtime
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario
from tests.support.runs import SharedRun, on_shared_run

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "scenarios" / "diurnal-shop.yaml"
TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
REF = {"ref": {"namespace": "shop", "name": "checkout"}}
KEY = "shop/checkout"
ON_SHOP = on_shared_run(SHOP)
"""The tests on ``warm`` (or ``client``) share diurnal-shop's run (tests/support/runs.py)."""


def settings(**changes: Any) -> Settings:
    return Settings(**{"api_tokens": (TOKEN,), "kb": "memory", **changes})


def shop_intent() -> dict[str, Any]:
    scenario = load_scenario(SHOP)
    intent = next(m for m in scenario.spec.manifests if m["kind"] == "Intent")
    return copy.deepcopy(intent)


def _shop_at(shared_run: Callable[[Path], SharedRun], elapsed: float) -> ScenarioRun:
    """diurnal-shop with the grid planner (its own, the run ``shared_run`` shares with other
    tests) after ``elapsed`` seconds: a copy of its own, with the API's runtime built on it then
    (as ``serve`` builds it after the warm-up)."""
    run = shared_run(SHOP).copy_at(elapsed)
    assert run.admin == ScenarioRun(load_scenario(SHOP), "grid").admin
    return run


@pytest.fixture(scope="module")
def warm(shared_run: Callable[[Path], SharedRun]) -> Iterator[tuple[ScenarioRun, Runtime]]:
    run = _shop_at(shared_run, 25 * 60)  # learned models exist from minute 5 on
    rt = scenario_runtime(run)
    yield run, rt


@pytest.fixture(scope="module")
def client(warm: tuple[ScenarioRun, Runtime]) -> Iterator[TestClient]:
    _, rt = warm
    with TestClient(create_app(settings(), rt)) as c:
        yield c


# ------------------------------------------------------------------ state fingerprints
def _plain(obj: Any, depth: int = 0) -> Any:
    """A comparable rendering of an object graph (objects as dicts of their attributes)."""
    if depth > 6:
        return repr(obj)
    if isinstance(obj, dict):
        return {repr(k): _plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        items = [_plain(v, depth + 1) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, set | frozenset) else items
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {k: _plain(v, depth + 1) for k, v in vars(obj).items()
                if k not in ("snapshot", "topology", "admin")}
    return obj


def fingerprint(run: ScenarioRun) -> dict[str, Any]:
    snap = run.sim.observe()
    ctl = run.controller
    live = ctl._planners
    return {
        "time": run.sim.time,
        "configs": {k: w.config for k, w in snap.workloads.items()},
        "pods": {k: [p.name for p in w.pods] for k, w in snap.workloads.items()},
        "events": run.knowledge.count_events(),
        "effects": len(run.knowledge.effects()),
        "statuses": run.knowledge.statuses(),
        "status": copy.deepcopy(ctl.status(KEY)),
        "actuators": {n: _plain(a) for n, a in ctl.actuators.items()},
        "actuator_snapshots": {n: id(getattr(a, "snapshot", None))
                               for n, a in ctl.actuators.items()},
        "planners": sorted(live),
        "online": {n: _plain(getattr(getattr(p, "source", None), "online", None))
                   for n, p in live.items()},
        "cache": {n: sorted(getattr(getattr(p, "source", None), "cache", None)._cache.items(),
                            key=repr).__repr__() for n, p in live.items()},
        "rng": run.sim.rng.bit_generator.state,
        "noise": run.sim.noise_rng.bit_generator.state,
        "cycles": ctl.cycles,
    }


def _until_cycle_is_next(run: ScenarioRun) -> None:
    while run.advance() is None:
        pass
    for _ in range(round(run.cycle_s / run.step_s) - 1):
        assert run.advance() is None


# ------------------------------------------------------------------ the must-show test
@ON_SHOP
def test_preview_equals_next_cycle_and_changes_nothing(
        shared_run: Callable[[Path], SharedRun]) -> None:
    run = _shop_at(shared_run, 9 * 60)  # on the rise, models learned: scale-outs, scale-ins
    rt = scenario_runtime(run)          # held by cooldowns
    with TestClient(create_app(settings(), rt)) as c:
        compared = with_actions = 0
        for i in range(64):
            _until_cycle_is_next(run)
            before = fingerprint(run)
            body = REF if i % 2 == 0 else {"intent": shop_intent()}
            resp = c.post("/v1/plans:preview", json=body, headers=AUTH)
            assert resp.status_code == 200, resp.text
            preview = resp.json()
            assert fingerprint(run) == before, "the preview changed live state"
            assert preview["applied"] is False
            outcomes = run.advance()
            assert outcomes is not None and len(outcomes) == 1
            plan = outcomes[0].plan
            assert plan is not None
            assert preview["planner"] == plan.planner == "grid"
            assert preview["current"] == plan.current.as_dict()
            assert preview["target"] == plan.target.as_dict()
            assert preview["actions"] == [a.as_dict() for a in plan.actions]
            assert preview["predicted"] == pytest.approx(plan.predicted)
            assert preview["cost_per_hour"] == pytest.approx(plan.cost_per_hour)
            assert preview["exploratory"] == plan.exploratory
            assert preview["reasons"][0] == plan.reason_parts[0].text
            compared += 1
            with_actions += bool(plan.actions)
            if plan.actions:  # steps: current, then one per action, predicted and priced
                steps = preview["steps"]
                assert steps[0]["config"] == plan.current.as_dict()
                assert [s["action"] for s in steps[1:len(plan.actions) + 1]] == \
                    preview["actions"]
                assert all(s["cost_per_hour"] is not None for s in steps)
                assert set(steps[-1]["predicted"]) == {"p95latency", "availability"}
    assert compared == 64
    assert with_actions >= 3, "the load rises in this window: some plans must act"
    sources = {m["source"] for m in preview["models"]}
    assert sources == {"learned"}


@ON_SHOP
def test_what_if_load_plans_more_capacity_and_changes_nothing(
        client: TestClient, warm: tuple[ScenarioRun, Runtime]) -> None:
    run, _ = warm
    before = fingerprint(run)
    base = client.post("/v1/plans:preview", json=REF, headers=AUTH).json()
    more = client.post("/v1/plans:preview", json={**REF, "overrides": {"load": 1500}},
                       headers=AUTH)
    assert more.status_code == 200, more.text
    body = more.json()
    assert body["observed_rate"] == 1500 and body["overrides"]["load"] == 1500

    def capacity(cfg: dict[str, Any]) -> float:
        return float(cfg["replicas"] * cfg["cpu"])

    assert capacity(body["target"]) > capacity(base["target"])
    assert any(r.startswith("what-if: load=1500") for r in body["reasons"])
    scaled = client.post("/v1/plans:preview", json={**REF, "overrides": {"replicas": 30}},
                         headers=AUTH).json()
    assert scaled["current"]["replicas"] == 30
    assert scaled["target"]["replicas"] < 30  # too many for the load: scale in
    assert fingerprint(run) == before


@ON_SHOP
def test_other_planner_is_a_fresh_instance(client: TestClient) -> None:
    resp = client.post("/v1/plans:preview", json={**REF, "planner": "queueing"}, headers=AUTH)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["planner"] == "queueing"
    assert "no memory of earlier cycles for this planner" in body["reasons"]


# ------------------------------------------------------------------ auth
@ON_SHOP
def test_auth_bearer_token(client: TestClient) -> None:
    resp = client.post("/v1/plans:preview", json=REF)
    assert resp.status_code == 401
    assert resp.headers["www-authenticate"].startswith("Bearer")
    resp = client.post("/v1/plans:preview", json=REF,
                       headers={"Authorization": "Bearer wrong"})
    assert resp.status_code == 401
    assert 'error="invalid_token"' in resp.headers["www-authenticate"]
    assert client.post("/v1/plans:preview", json=REF,
                       headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    for path in ("/v1/intents", f"/v1/intents/{KEY}", f"/v1/intents/{KEY}/events",
                 "/v1/effects"):
        assert client.get(path).status_code == 401, path
        assert client.get(path, headers=AUTH).status_code == 200, path
    for path in ("/healthz", "/readyz", "/metrics"):
        assert client.get(path).status_code == 200, path


@ON_SHOP
def test_auth_settings_and_dependency_override(warm: tuple[ScenarioRun, Runtime]) -> None:
    _, rt = warm
    app = create_app(settings(auth_reads=False), rt)
    with TestClient(app) as c:
        assert c.get("/v1/intents").status_code == 200
        assert c.post("/v1/plans:preview", json=REF).status_code == 401
        app.dependency_overrides[dependencies.get_settings] = lambda: settings(auth=False)
        assert c.post("/v1/plans:preview", json=REF).status_code == 200
    # Auth on and no token configured: fail closed.
    with TestClient(create_app(Settings(api_tokens=(), auth=True), rt)) as c:
        resp = c.post("/v1/plans:preview", json=REF, headers=AUTH)
        assert resp.status_code == 401 and "INTENT_PLANNER_API_TOKENS" in resp.json()["detail"]


def test_tokens_from_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTENT_PLANNER_API_TOKENS", "a, b")
    secret = tmp_path / "tokens"
    secret.write_text("# comment\nc\n\n")
    monkeypatch.setenv("INTENT_PLANNER_API_TOKENS_FILE", str(secret))
    assert Settings().tokens() == {"a", "b", "c"}


# ------------------------------------------------------------------ limits and errors
@ON_SHOP
def test_request_body_too_large_is_413(warm: tuple[ScenarioRun, Runtime]) -> None:
    _, rt = warm
    with TestClient(create_app(settings(max_body_bytes=2048), rt)) as c:
        big = {**REF, "padding": "x" * 4096}
        resp = c.post("/v1/plans:preview", json=big, headers=AUTH)
        assert resp.status_code == 413
        assert "2048" in resp.json()["detail"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"ref": {"namespace": "shop", "name": "checkout"}, "x": "'
            for _ in range(10):
                yield b"y" * 512
            yield b'"}'

        resp = c.post("/v1/plans:preview", content=chunks(),
                      headers={**AUTH, "content-type": "application/json"})
        assert resp.status_code == 413
        assert c.post("/v1/plans:preview", json=REF, headers=AUTH).status_code == 200


def _error(resp: Any) -> dict[str, Any]:
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert isinstance(detail, list) and detail
    first: dict[str, Any] = detail[0]
    return first


@ON_SHOP
def test_422_names_the_field_and_the_fix(client: TestClient) -> None:
    doc = shop_intent()
    doc["spec"]["objectives"][0]["value"] = -1
    err = _error(client.post("/v1/plans:preview", json={"intent": doc}, headers=AUTH))
    assert err["loc"] == ["body", "intent", "spec", "objectives", 0, "value"]
    assert err["field"] == "spec.objectives[0].value"
    assert "> 0" in err["fix"] and "> 0" in err["msg"]

    doc = shop_intent()
    doc["spec"]["objectivez"] = []
    err = _error(client.post("/v1/plans:preview", json={"intent": doc}, headers=AUTH))
    assert err["field"] == "spec.objectivez" and "objectives" in err["fix"]

    doc = shop_intent()
    doc["spec"]["objectives"][1]["measuredBy"] = "nines"
    err = _error(client.post("/v1/plans:preview", json={"intent": doc}, headers=AUTH))
    assert err["field"] == "spec.objectives[1].measuredBy"
    assert "shop/availability" in err["fix"]

    doc = shop_intent()
    doc["spec"]["targetRef"]["name"] = "cart"
    err = _error(client.post("/v1/plans:preview", json={"intent": doc}, headers=AUTH))
    assert err["field"] == "spec.targetRef.name" and "shop/checkout" in err["fix"]

    err = _error(client.post("/v1/plans:preview", json={**REF, "planner": "magic"},
                             headers=AUTH))
    assert err["loc"] == ["body", "planner"] and "grid" in err["fix"]

    err = _error(client.post("/v1/plans:preview", json={**REF, "overrides": {"pool": "moon"}},
                             headers=AUTH))
    assert err["loc"] == ["body", "overrides", "pool"] and "general" in err["fix"]

    err = _error(client.post("/v1/plans:preview", json={**REF, "overrides": {"load": -5}},
                             headers=AUTH))
    assert err["loc"] == ["body", "overrides", "load"]

    err = _error(client.post("/v1/plans:preview", json={**REF, "intent": shop_intent()},
                             headers=AUTH))
    assert "exactly one" in err["msg"]


@ON_SHOP
def test_404_for_unknown_intents(client: TestClient) -> None:
    resp = client.post("/v1/plans:preview", json={"ref": {"namespace": "shop", "name": "cart"}},
                       headers=AUTH)
    assert resp.status_code == 404 and "shop/cart" in resp.json()["detail"]
    assert client.get("/v1/intents/shop/cart", headers=AUTH).status_code == 404
    assert client.get("/v1/intents/shop/cart/events", headers=AUTH).status_code == 404


@ON_SHOP
def test_preview_time_limit_is_504(warm: tuple[ScenarioRun, Runtime]) -> None:
    _, rt = warm
    app = create_app(settings(preview_timeout_s=0.3), rt)
    with TestClient(app) as c:
        release = threading.Event()

        def hold() -> None:  # a long controller cycle: the preview waits for the lock
            with rt.lock:
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            resp = c.post("/v1/plans:preview", json=REF, headers=AUTH)
        finally:
            release.set()
            holder.join()
        assert resp.status_code == 504
        assert "nothing was applied" in resp.json()["detail"]
        metrics = c.get("/metrics").text
        assert 'intent_planner_preview_requests_total{outcome="timeout"} 1.0' in metrics


# ------------------------------------------------------------------ reads
@ON_SHOP
def test_intents_list_and_detail(client: TestClient) -> None:
    body = client.get("/v1/intents", headers=AUTH).json()
    assert body["count"] == 1
    item = body["items"][0]
    assert item["key"] == KEY and item["planner"] == "grid"
    assert item["status_from"] == "controller" and item["conditions"]["Invalid"] == "False"
    detail = client.get(f"/v1/intents/{KEY}", headers=AUTH).json()
    assert detail["spec"]["targetRef"]["name"] == "checkout"
    types = {c["type"] for c in detail["status"]["conditions"]}
    assert {"Invalid", "ObjectivesMet", "Planned", "Actuating"} <= types
    assert detail["status"]["lastPlan"]["planner"] == "grid"


@ON_SHOP
def test_events_pagination(client: TestClient, warm: tuple[ScenarioRun, Runtime]) -> None:
    run, _ = warm
    expected = [e["time"] for e in run.knowledge.events(KEY)]
    assert len(expected) >= 100
    url: str | None = f"/v1/intents/{KEY}/events?limit=37"
    times: list[float] = []
    pages = 0
    while url is not None:
        resp = client.get(url, headers=AUTH)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        assert len(page["items"]) <= 37
        times += [e["time"] for e in page["items"]]
        url = page["next"]
        pages += 1
        if pages == 1:
            for _ in range(6):  # new events arrive while paging: pages stay stable
                run.advance()
    assert times == expected
    assert pages == -(-len(expected) // 37)
    newest = run.knowledge.events(KEY, limit=1)[0]
    first = client.get(f"/v1/intents/{KEY}/events?limit=1", headers=AUTH).json()
    assert first["items"][0]["time"] == newest["time"]
    assert first["items"][0]["config"] == newest["config"]
    since = expected[9]
    recent = client.get(f"/v1/intents/{KEY}/events", params={"since": since, "limit": 500},
                        headers=AUTH).json()
    assert recent["next"] is None and all(e["time"] >= since for e in recent["items"])
    err = _error(client.get(f"/v1/intents/{KEY}/events?cursor=garbage", headers=AUTH))
    assert err["loc"] == ["query", "cursor"]
    err = _error(client.get(f"/v1/intents/{KEY}/events?limit=501", headers=AUTH))
    assert err["loc"] == ["query", "limit"]


@ON_SHOP
def test_pod_details_beside_their_events(client: TestClient,
                                         warm: tuple[ScenarioRun, Runtime]) -> None:
    run, _ = warm
    stored_times = [d["time"] for d in run.knowledge.pod_details(KEY)]
    marked = [e["time"] for e in run.knowledge.events(KEY) if e.get("pod_detail")]
    assert stored_times and stored_times == marked
    url: str | None = f"/v1/intents/{KEY}/pods?limit=2"
    times: list[float] = []
    while url is not None:
        page = client.get(url, headers=AUTH).json()
        times += [d["time"] for d in page["items"]]
        assert all(set(d["pods"]) >= {"name", "node", "ready"} and
                   len(d["pods"]["name"]) == len(d["pods"]["ready"]) for d in page["items"])
        url = page["next"]
    assert times == stored_times
    at = stored_times[-1]                         # the detail of one event, by its time
    one = client.get(f"/v1/intents/{KEY}/pods", params={"since": at, "until": at + 1e-3},
                     headers=AUTH).json()
    assert [d["time"] for d in one["items"]] == [at] and one["next"] is None
    err = _error(client.get(f"/v1/intents/{KEY}/pods?limit=21", headers=AUTH))
    assert err["loc"] == ["query", "limit"]
    events = client.get(f"/v1/intents/{KEY}/events?limit=500", headers=AUTH).json()["items"]
    assert all("pods" not in e for e in events)
    assert [e["time"] for e in events if e["pod_detail"]] == stored_times
    assert client.get("/v1/intents/shop/nothing/pods", headers=AUTH).status_code == 404


@ON_SHOP
def test_effects_metadata_never_blobs(client: TestClient,
                                      warm: tuple[ScenarioRun, Runtime]) -> None:
    run, _ = warm
    stored = run.knowledge.effects(with_blobs=True)
    assert stored and all(isinstance(d["blob"], bytes) for d in stored)
    resp = client.get("/v1/effects", headers=AUTH)
    assert resp.status_code == 200
    assert "blob" not in resp.text
    items = resp.json()["items"]
    assert len(items) == len(stored)
    assert all("blob" not in i and i["metadata"]["samples"] > 0 for i in items)
    newest = [(i["intent"], i["objective"]) for i in items if i["newest"]]
    assert sorted(newest) == [(KEY, "availability"), (KEY, "p95latency")]
    only = client.get("/v1/effects", params={"objective": "p95latency", "limit": 2},
                      headers=AUTH).json()
    assert only["count"] == 2 and {i["objective"] for i in only["items"]} == {"p95latency"}


@ON_SHOP
def test_metrics_content(client: TestClient, warm: tuple[ScenarioRun, Runtime]) -> None:
    run, _ = warm
    assert client.post("/v1/plans:preview", json=REF, headers=AUTH).status_code == 200
    run.advance()
    while run.advance() is None:  # one cycle with the API's hook installed
        pass
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(resp.text) for s in fam.samples}
    assert samples[("intent_planner_cycles_total", ())] == run.controller.cycles
    assert samples[("intent_planner_knowledge_base_up", ())] == 1.0
    assert samples[("intent_planner_intents", ())] == 1.0
    assert samples[("intent_planner_preview_requests_total", (("outcome", "ok"),))] >= 1
    assert samples[("intent_planner_plan_latency_seconds_count", (("source", "preview"),))] >= 1
    assert samples[("intent_planner_plan_latency_seconds_count", (("source", "cycle"),))] >= 1


# ------------------------------------------------------------------ readiness, lifespan
def test_readyz() -> None:
    run = ScenarioRun(load_scenario(SHOP), "grid")
    with TestClient(create_app(settings(), scenario_runtime(run))) as c:
        resp = c.get("/readyz")
        assert resp.status_code == 503
        assert resp.json()["checks"]["controller"]["ok"] is False
        run.advance()
        assert c.get("/readyz").status_code == 200
    down = open_knowledge_base("mongodb://127.0.0.1:9/x", server_selection_timeout_ms=100,
                               create_indexes=False)
    run = ScenarioRun(load_scenario(SHOP), "queueing", knowledge=down)
    run.advance()
    with TestClient(create_app(settings(), scenario_runtime(run))) as c:
        body = c.get("/readyz").json()
        assert body["ready"] is False and body["checks"]["knowledge_base"]["ok"] is False
        metrics = c.get("/metrics").text
        assert "intent_planner_knowledge_base_up 0.0" in metrics


def test_lifespan_builds_and_closes_the_runtime() -> None:
    app = create_app(settings(warmup_s=60, scenario=SHOP, planner="grid"),
                     runtime_factory=serve_runtime)
    with TestClient(app) as c:
        assert c.get("/readyz").json()["checks"]["controller"]["detail"] == \
            "held still after 4 cycle(s) (serve)"
        assert c.post("/v1/plans:preview", json=REF, headers=AUTH).status_code == 200
    assert app.state.runtime is None


# ------------------------------------------------------------------ the CLI
def test_cli_openapi_and_serve_errors(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from planner import cli

    out = tmp_path / "openapi.json"
    res = CliRunner().invoke(cli.app, ["openapi", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "/v1/plans:preview" in out.read_text()
    res = CliRunner().invoke(cli.app, ["serve", "--kb", "bogus://x", "--warmup", "0s"])
    assert res.exit_code == 2 and "--kb" in res.output
    res = CliRunner().invoke(cli.app, ["serve", "--port", "0"])
    assert res.exit_code == 2 and "port" in res.output


@pytest.mark.slow
def test_run_with_api_serves_beside_the_controller() -> None:
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "INTENT_PLANNER_API_TOKENS": TOKEN, "INTENT_PLANNER_HOST": "127.0.0.1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner.cli", "run", "--api", "--port", str(port), "--no-live",
         "--speed", "120", "--duration", "6m"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    seen: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and "preview" not in seen:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    resp = httpx.post(f"http://127.0.0.1:{port}/v1/plans:preview", json=REF,
                                      headers=AUTH, timeout=10)
                    seen["preview"] = resp.status_code
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert f"API on http://127.0.0.1:{port}" in stdout
    assert seen.get("preview") == 200
