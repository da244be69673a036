"""The command line, as a user runs it: a real subprocess, exit codes, stdout/stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples/scenarios/diurnal-shop.yaml"


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_simulate_json_shape() -> None:
    res = cli("simulate", "--scenario", str(SHOP), "--planner", "hpa", "--seed", "3", "--json",
              "--duration", "10m")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["planner"] == "hpa" and data["seed"] == 3 and data["duration_s"] == 600
    t = data["totals"]
    assert {"violation_minutes", "core_hours", "actions", "plan_ms_p50", "plan_ms_p99"} <= set(t)
    obj = data["intents"]["shop/checkout"]["objectives"]["p95latency"]
    assert 0.0 <= obj["attainment"] <= 1.0 and obj["minutes"] == 10


def test_simulate_table() -> None:
    res = cli("simulate", "-s", str(SHOP), "--duration", "5m")
    assert res.returncode == 0, res.stderr
    assert "attainment" in res.stdout and "core-hours" in res.stdout


@pytest.mark.slow
def test_run_live_log_mode_ends_at_duration() -> None:
    res = cli("run", "--speed", "3000", "--duration", "10m", "--no-live")
    assert res.returncode == 0, res.stderr
    assert "shop/checkout" in res.stdout and "p95latency" in res.stdout


def test_run_says_what_an_unreachable_knowledge_base_did_not_store() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = cli("run", "--speed", "3000", "--duration", "2m", "--no-live",
              "--kb", f"mongodb://127.0.0.1:{port}/x")
    assert res.returncode == 0, res.stderr  # it kept working
    last = [line for line in res.stderr.splitlines() if "were not stored" in line]
    assert last, res.stderr
    assert f"--kb mongodb://127.0.0.1:{port}/x" in last[0]
    assert "8 events and 1 status of this run were not stored" in last[0]  # 8 cycles


def mutate(path: Path, tmp: Path, edit: Any) -> Path:
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    out = tmp / "bad.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


def _intent(doc: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in doc["manifests"] if m["kind"] == "Intent")


BAD = {
    "wrong type": (lambda d: d["workloads"][0].__setitem__("replicas", "many"),
                   "workloads[0].replicas"),
    "negative target": (lambda d: _intent(d)["spec"]["objectives"][0].__setitem__("value", -1),
                        "spec.objectives[0].value"),
    "unknown KPI reference": (
        lambda d: _intent(d)["spec"]["objectives"][0].__setitem__("measuredBy", "p50"),
        "spec.objectives[0].measuredBy"),
    "unknown key": (lambda d: d["workloads"][0]["service"].__setitem__("rate_per_cpu", 3),
                    "workloads[0].service.rate_per_cpu"),
    "unknown key in intent": (lambda d: _intent(d)["spec"].__setitem__("replicas", 3),
                              "spec.replicas"),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_bad_input_one_line_exit_2(case: str, command: str, tmp_path: Path) -> None:
    edit, field = BAD[case]
    bad = mutate(SHOP, tmp_path, edit)
    args = ["simulate", "--scenario", str(bad)] if command == "simulate" else ["validate",
                                                                                str(bad)]
    res = cli(*args)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert field in lines[0] and "fix:" in lines[0]


def test_bad_input_writes_nothing_to_the_knowledge_base(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process: the scenario is validated before any knowledge base is touched."""
    from typer.testing import CliRunner

    from planner import cli as cli_mod

    opened: list[str] = []
    monkeypatch.setattr(cli_mod, "_open_kb", lambda uri, *a: opened.append(uri))
    bad = mutate(SHOP, tmp_path, BAD["negative target"][0])
    res = CliRunner().invoke(cli_mod.app, ["simulate", "--scenario", str(bad), "--kb", "memory"])
    assert res.exit_code == 2
    assert opened == []


def test_unknown_planner_and_missing_file() -> None:
    res = cli("simulate", "-s", str(SHOP), "-p", "magic")
    assert res.returncode == 2 and "planner" in res.stderr and "hpa" in res.stderr
    res = cli("simulate", "-s", "nope.yaml")
    assert res.returncode == 2 and "nope.yaml" in res.stderr


@pytest.mark.slow
def test_planner_spec_sets_the_hpa_target() -> None:
    """``--planner hpa@50`` is HPA at a 50 % CPU target: it keeps more pods than at 80 %; a
    bad target names the option and the field."""
    used = {}
    for spec in ("hpa@50", "hpa"):
        res = cli("simulate", "-s", str(SHOP), "-p", spec, "--duration", "30m", "--json")
        assert res.returncode == 0, res.stderr
        used[spec] = json.loads(res.stdout)["totals"]["core_hours"]
    assert used["hpa@50"] > used["hpa"]
    res = cli("simulate", "-s", str(SHOP), "-p", "hpa@0")
    assert res.returncode == 2 and "planner" in res.stderr
    assert "targetCPUUtilizationPercentage" in res.stderr


def test_generate_writes_a_scenario_simulate_runs(tmp_path: Path) -> None:
    out = tmp_path / "gen.yaml"
    res = cli("generate", "--seed", "3", "--out", str(out))
    assert res.returncode == 0, res.stderr
    res = cli("simulate", "-s", str(out), "-p", "hpa@70", "--duration", "5m", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["scenario"] == "gen-3"
    res = cli("generate", "--seed", "-1")
    assert res.returncode == 2 and "--seed" in res.stderr


@pytest.mark.parametrize("args, field", [
    (["simulate", "-s", str(SHOP), "--seed", "-1"], "--seed"),
    (["simulate", "-s", str(SHOP), "--duration", "0"], "--duration"),
    (["validate", "/tmp"], "(file)"),
])
def test_more_bad_input_exits_2(args: list[str], field: str) -> None:
    res = cli(*args)
    assert res.returncode == 2 and field in res.stderr


def test_validate_checks_admin_plugin_names(tmp_path: Path) -> None:
    bad = mutate(SHOP, tmp_path, lambda d: d["admin"].__setitem__("actuators",
                                                                  ["replicas", "teleport"]))
    res = cli("validate", str(bad))
    assert res.returncode == 2 and "admin.actuators" in res.stderr and "teleport" in res.stderr
    bad = mutate(SHOP, tmp_path, lambda d: d["admin"].__setitem__("planner", "magic"))
    res = cli("validate", str(bad))
    assert res.returncode == 2 and "admin.planner" in res.stderr
    bad = mutate(SHOP, tmp_path, lambda d: d["admin"].__setitem__(
        "plannerOptions", {"hpa": {"targetCPUUtilizationPercentage": 0}}))
    res = cli("validate", str(bad))
    assert res.returncode == 2
    assert "admin.plannerOptions.hpa.targetCPUUtilizationPercentage" in res.stderr
