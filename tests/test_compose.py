"""docker-compose.yml, the Dockerfile and the Prometheus config hang together (Docker itself is
not available here): services, volumes, ports, and every command line the stack runs parses
with the real CLI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from planner import cli

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
KB = "mongodb://mongodb:27017/intent_planner"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


def _command(name: str) -> Any:
    group: Any = typer.main.get_command(cli.app)  # typer's (vendored) click group
    cmd = group.commands.get(name)
    assert cmd is not None, f"no '{name}' command in the CLI"
    return cmd


def _parses(args: list[str]) -> Any:
    """Parse ``args`` with the real CLI (types, unknown options) without running anything."""
    name, rest = args[0], args[1:]
    result = CliRunner().invoke(cli.app, [name, "--help"])
    assert result.exit_code == 0, result.output
    cmd = _command(name)
    known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    for arg in rest:
        if arg.startswith("--"):
            assert arg.split("=")[0] in known, f"{name} has no option {arg}"
    return cmd.make_context(name, list(rest))


def test_services_volumes_and_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) >= {"mongodb", "prometheus", "planner", "jupyter"}
    assert services["mongodb"]["image"].startswith("mongo:7")
    assert "mongodb-data:/data/db" in services["mongodb"]["volumes"]
    assert services["prometheus"]["image"].startswith("prom/prometheus")
    named = set(compose["volumes"])
    for svc in services.values():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if not src.startswith((".", "/", "$", "~")):
                assert src in named, f"volume {src} is not declared"
            elif src.startswith("./"):
                assert (ROOT / src).exists(), f"{src} does not exist"

    def published(svc: str) -> set[int]:
        return {int(p.rsplit(":", 1)[-1]) for p in services[svc]["ports"]}

    assert published("planner") == {8080}
    assert published("prometheus") == {9090}
    assert published("jupyter") == {8888}
    assert published("mongodb") == {27017}
    assert services["planner"]["build"]["target"] == "planner"
    assert services["jupyter"]["build"]["target"] == "jupyter"
    assert services["planner"]["depends_on"]["mongodb"]["condition"] == "service_healthy"


def test_planner_command_runs_controller_and_api(compose: dict[str, Any]) -> None:
    planner = compose["services"]["planner"]
    args = planner["command"]
    assert args[0] == "run" and "--api" in args
    ctx = _parses(args)
    assert ctx.params["api"] is True and ctx.params["kb"] == KB
    assert ctx.params["port"] == 8080
    scenario = Path(str(ctx.params["scenario"]))
    assert scenario.parts[:2] == ("/", "app")
    assert (ROOT / Path(*scenario.parts[2:])).is_file()  # the image copies examples/ to /app
    assert planner["environment"]["INTENT_PLANNER_HOST"] == "0.0.0.0"
    assert "INTENT_PLANNER_API_TOKENS" in planner["environment"]


def test_commented_kubernetes_alternative_parses() -> None:
    text = COMPOSE.read_text()
    match = re.search(r"^\s*# command: (\[.*\])$", text, re.MULTILINE)
    assert match, "the commented kubeconfig alternative is missing"
    args = yaml.safe_load(match.group(1))
    assert args[0] == "operator"
    ctx = _parses(args)
    assert ctx.params["kb"] == KB and ctx.params["health_port"] == 8080
    assert re.search(r"^\s*#\s+- .*kube/config:ro$", text, re.MULTILINE)


def test_prometheus_scrapes_the_planner(compose: dict[str, Any]) -> None:
    mount = next(v for v in compose["services"]["prometheus"]["volumes"]
                 if v.endswith("/etc/prometheus/prometheus.yml:ro"))
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "intent-planner")
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert job["static_configs"][0]["targets"] == ["planner:8080"]


def test_jupyter_reads_the_same_knowledge_base(compose: dict[str, Any]) -> None:
    jupyter = compose["services"]["jupyter"]
    assert jupyter["environment"]["INTENT_PLANNER_KB"] == KB
    assert "./notebooks:/app/notebooks" in jupyter["volumes"]
    assert (ROOT / "notebooks" / "effects_exploration.ipynb").is_file()


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)(?: AS (\S+))?$", text, re.MULTILINE)
    assert stages[0] == ("python:3.11-slim", "planner")
    assert ("planner", "jupyter") in stages
    assert stages[-1][0] == "planner"  # `docker build .` gives the planner image
    planner_stage = text.split("FROM planner AS jupyter")[0]
    assert re.search(r"^USER 65532", planner_stage, re.MULTILINE)  # non-root
    assert 'ENTRYPOINT ["intent-planner"]' in planner_stage
    assert "pip install -c constraints.txt ." in planner_stage   # the tested versions
    for line in re.findall(r"^COPY (.+) \S+$", text, re.MULTILINE):
        for src in line.split():
            assert (ROOT / src).exists(), f"COPY {src}: no such path"
    cmd = yaml.safe_load(re.search(r"^CMD (\[.*\])$", planner_stage, re.MULTILINE)
                         .group(1))  # type: ignore[union-attr]
    _parses(cmd)


def test_constraints_pin_what_make_install_installs() -> None:
    # `make install` and the image install the tested versions: one exact pin per package,
    # every dependency pyproject.toml names among them.
    pins: dict[str, str] = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version and " " not in line, line
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    for req in named:
        name = re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]).lower()
        assert name in pins, f"{name} is not pinned in constraints.txt (make constraints)"
    assert "-c $(CONSTRAINTS) -e '.[dev]'" in (ROOT / "Makefile").read_text()
