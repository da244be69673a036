"""A corpus of bad input (manifests, scenarios, traces), each refused with one short line
naming the field and the fix, within 1 s and 100 MB; a few through the command line (exit code
2, plain text), the rest in-process (what ``validate`` calls). See docs/input-limits.md."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from planner.domain.errors import SpecError
from simulator import scenario as scenario_module
from simulator.scenario import validate_file

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = ROOT / "examples/k8s/checkout.yaml"
FLASH = ROOT / "examples/scenarios/flash-sale.yaml"
MAX_LINE = 800
"""Longest error line accepted (the parts of a SpecError are kept to 240 characters)."""

BOMB = "\n".join(
    [f"a0: &a0 [{', '.join(['lol'] * 9)}]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"
"""A billion laughs in 300 bytes: 9^10 values once expanded."""


def manifests() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(CHECKOUT.read_text()))


def intent_doc(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == "Intent")


def manifest_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], Path]:
    """A case writing the checkout manifests with ``edit`` applied to the Intent."""
    def make(tmp: Path) -> Path:
        docs = manifests()
        edit(intent_doc(docs))
        out = tmp / "bad.yaml"
        out.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        return out
    return make


def scenario_edit(edit: Callable[[dict[str, Any], Path], None]) -> Callable[[Path], Path]:
    """A case writing flash-sale with ``edit`` applied (given the directory written to)."""
    def make(tmp: Path) -> Path:
        doc = yaml.safe_load(FLASH.read_text())
        edit(doc, tmp)
        out = tmp / "bad.yaml"
        out.write_text(yaml.safe_dump(doc, sort_keys=False))
        return out
    return make


def text(content: str | bytes, name: str = "bad.yaml") -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        out = tmp / name
        if isinstance(content, bytes):
            out.write_bytes(content)
        else:
            out.write_text(content)
        return out
    return make


def replace_in(path: Path, old: str, new: str) -> Callable[[Path], Path]:
    """A case writing ``path``'s text with ``old`` replaced by ``new`` (exactly once)."""
    source = path.read_text()
    assert source.count(old) == 1, old
    return text(source.replace(old, new))


def objective(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["spec"]["objectives"][0].__setitem__(key, value)


def csv_trace(rows: str) -> Callable[[dict[str, Any], Path], None]:
    def edit(doc: dict[str, Any], tmp: Path) -> None:
        (tmp / "trace.csv").write_text(rows)
        doc["workloads"][0]["trace"] = {"kind": "csv", "file": "trace.csv"}
    return edit


def setting(*path: str | int, value: Any) -> Callable[[dict[str, Any], Path], None]:
    def edit(doc: dict[str, Any], tmp: Path) -> None:
        node = doc
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
        node[path[-1]] = value
    return edit


class Case(NamedTuple):
    name: str
    make: Callable[[Path], Path]
    field: str
    """Text the error's field must contain."""
    word: str
    """Text the problem or the fix must contain."""


CHECKOUT_TEXT = CHECKOUT.read_text()
TRACE_OK = "timestamp,rate\n0,100\n60,120\n120,90\n"

CASES = [
    # -- the loader: size, aliases, depth, plain data
    Case("alias bomb", text(BOMB), "line", "aliases"),
    Case("recursive alias", text("a: &a [1, *a]\n"), "line", "nested deeper"),
    Case("1000-deep list", text("a: " + "[" * 1000 + "]" * 1000 + "\n"), "line",
         "nested deeper"),
    Case("1000-deep mapping", text("a: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n"), "line",
         "nested deeper"),
    Case("file over 1 MiB", text("# " + "x" * (1 << 20) + "\n"), "(file)", "bytes"),
    Case("not UTF-8", text(b"kind: Intent\nname: \xff\xfe\n"), "(file)", "UTF-8"),
    Case("a directory", lambda tmp: tmp, "(file)", "regular"),
    Case("/dev/zero as the file", lambda tmp: Path("/dev/zero"), "(file)", "regular"),
    Case("missing file", lambda tmp: tmp / "nope.yaml", "(file)", "cannot read"),
    Case("empty file", text(""), "(document)", "no documents"),
    Case("only comments", text("# nothing\n---\n"), "(document)", "no documents"),
    Case("duplicate key", replace_in(CHECKOUT, "  priority: 0.8\n",
                                     "  priority: 0.8\n  priority: 0.9\n"), "line",
         "given twice"),
    Case("YAML syntax error", text("kind: Intent\nspec: [1, 2\nx: 3\n"), "line",
         "not valid YAML"),
    Case("python tag", text("kind: !!python/object:os.system [ls]\n"), "line",
         "unsupported YAML tag"),
    Case("set tag", text("kind: !!set {a, b}\n"), "line", "unsupported YAML tag"),
    Case("non-string key", text("1: Intent\n"), "line", "not a string"),
    Case("5,000-digit integer", text("kind: Intent\nx: " + "9" * 5000 + "\n"), "(document)",
         "digits"),
    Case("integer beyond int64", manifest_edit(objective("value", 2**70)),
         "spec.objectives[0].value", "too large"),
    Case("value .inf", replace_in(CHECKOUT, "value: 50", "value: .inf"),
         "spec.objectives[0].value", "finite"),
    Case("tolerance .nan", replace_in(CHECKOUT, "tolerance: 0.05", "tolerance: .nan"),
         "spec.objectives[0].tolerance", "finite"),
    Case("value 1e400", replace_in(CHECKOUT, "value: 50", "value: 1e400"),
         "spec.objectives[0].value", "finite"),
    Case("JSON NaN", text('{"kind": "Intent", "spec": {"x": NaN}}', "bad.json"),
         "(document)", "finite"),
    Case("JSON duplicate key", text('{"kind": "Intent", "kind": "KPIProfile"}', "bad.json"),
         "(document)", "given twice"),
    Case("JSON 1000 deep", text("[" * 1000 + "]" * 1000, "bad.json"), "(document)",
         "nested deeper"),
    # -- strict types, as the CRD
    Case('value "60" (a string)', manifest_edit(objective("value", "60")),
         "spec.objectives[0].value", "without quotes"),
    Case("value true", manifest_edit(objective("value", True)), "spec.objectives[0].value",
         "not true or false"),
    Case("active 0", manifest_edit(lambda d: d["spec"].__setitem__("active", 0)),
         "spec.active", "true or false"),
    Case('priority "high"', manifest_edit(lambda d: d["spec"].__setitem__("priority", "high")),
         "spec.priority", "number"),
    Case("generation 1.5", manifest_edit(lambda d: d["metadata"].__setitem__("generation", 1.5)),
         "metadata.generation", "whole number"),
    Case("name 42", manifest_edit(lambda d: d["spec"]["targetRef"].__setitem__("name", 42)),
         "spec.targetRef.name", "string"),
    Case("namespace ../../etc",
         manifest_edit(lambda d: d["metadata"].__setitem__("namespace", "../../etc")),
         "metadata.namespace", "matching"),
    Case('value "[/red]"', manifest_edit(objective("value", "[/red]")),
         "spec.objectives[0].value", "[/red]"),
    Case("900 KB of a value", replace_in(CHECKOUT, "value: 50", f"value: {'x' * 900_000}"),
         "spec.objectives[0].value", "without quotes"),
    Case("unknown kind", replace_in(CHECKOUT, "kind: Intent", "kind: Intnet"), "kind",
         "Intent"),
    # -- plausible targets
    Case("availability 99.5", replace_in(CHECKOUT, "value: 0.999", "value: 99.5"),
         "spec.objectives[1].value", "0.995"),
    Case("availability 0", replace_in(CHECKOUT, "value: 0.999", "value: 0"),
         "spec.objectives[1].value", "> 0"),
    Case("latency 0", manifest_edit(objective("value", 0)), "spec.objectives[0].value", "> 0"),
    Case("latency 0.05 (seconds)", manifest_edit(objective("value", 0.05)),
         "spec.objectives[0].value", "milliseconds"),
    # -- scenarios
    Case("two scenario documents", text(FLASH.read_text() + "---\n" + FLASH.read_text()),
         "(document)", "one YAML document"),
    Case("nodes 1e9", scenario_edit(setting("cluster", "pools", 0, "nodes", value=1e9)),
         "cluster.pools[0].nodes", "whole number"),
    Case("nodes 1000000000",
         scenario_edit(setting("cluster", "pools", 0, "nodes", value=1_000_000_000)),
         "cluster.pools[0].nodes", "<= 10000"),
    Case("11,000 nodes in two pools", scenario_edit(setting("cluster", "pools", value=[
        {"name": "a", "nodes": 6000, "cpu": 16}, {"name": "b", "nodes": 5000, "cpu": 16}])),
         "cluster", "10000"),
    Case("200,000 replicas", scenario_edit(setting("workloads", 0, "replicas", value=200_000)),
         "workloads[0].replicas", "<= 10000"),
    Case("replicas.max 1e12", scenario_edit(setting("admin", "replicas", "max", value=1e12)),
         "admin.replicas.max", "whole number"),
    Case("replicas.max 10^12",
         scenario_edit(setting("admin", "replicas", "max", value=10**12)),
         "admin.replicas.max", "<= 10000"),
    Case("duration 0", scenario_edit(setting("duration", value=0)), "duration", ">= 60"),
    Case("duration 90d", scenario_edit(setting("duration", value="90d")), "duration",
         "<= 2592000"),
    Case("2.6 million steps", scenario_edit(lambda d, _: d.update(duration="30d", step_s=0.5)),
         "(document)", "steps"),
    Case("bursty mean_gap 0", scenario_edit(setting("workloads", 0, "trace", "mean_gap",
                                                    value=0)),
         "workloads[0].trace.bursty.mean_gap", ">= 10"),
    Case("bursty mean_gap null (found by the fuzz test)", scenario_edit(setting(
        "workloads", 0, "trace", "mean_gap", value=None)),
         "workloads[0].trace.bursty.mean_gap", "duration such as"),
    Case("diurnal period 0", scenario_edit(setting("workloads", 0, "trace", value={
        "kind": "diurnal", "base": 10, "amplitude": 5, "period": 0})),
         "workloads[0].trace.diurnal.period", ">= 1"),
    Case("workload namespace ../../etc",
         scenario_edit(setting("workloads", 0, "namespace", value="../../etc")),
         "workloads[0].namespace", "matching"),
    Case('intent value "60" in a scenario',
         scenario_edit(lambda d, _: d["manifests"][1]["spec"]["objectives"][0].update(
             value="60")), "manifests[1].spec.objectives[0].value", "without quotes"),
    Case("CSV row without a rate", scenario_edit(csv_trace("timestamp,rate\n0,100\n60\n")),
         "workloads[shop/catalog].trace.file", "line 3 has no rate"),
    Case("CSV rate NaN", scenario_edit(csv_trace("timestamp,rate\n0,100\n60,nan\n")),
         "workloads[shop/catalog].trace.file", "finite"),
    Case("CSV rate inf", scenario_edit(csv_trace("timestamp,rate\n0,100\n60,inf\n")),
         "workloads[shop/catalog].trace.file", "finite"),
    Case("CSV rate a word", scenario_edit(csv_trace("timestamp,rate\n0,100\n60,many\n")),
         "workloads[shop/catalog].trace.file", "not a number"),
    Case("CSV file /dev/zero", scenario_edit(lambda d, _: d["workloads"][0].__setitem__(
        "trace", {"kind": "csv", "file": "/dev/zero"})),
         "workloads[shop/catalog].trace.file", "regular"),
    Case("CSV file over the limit", scenario_edit(csv_trace(TRACE_OK + "180,100\n" * 3000)),
         "workloads[shop/catalog].trace.file", "bytes"),
]


@pytest.fixture(scope="module")
def warm() -> None:
    """One good scenario validated first: the plugins' first import (about a second) is
    not the check's time."""
    validate_file(FLASH)


@pytest.fixture
def small_trace_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CSV size limit at 16 KiB (the cases stay small; the limit is the same code)."""
    monkeypatch.setattr(scenario_module, "MAX_TRACE_BYTES", 16 << 10)


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.usefixtures("warm", "small_trace_limit")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_refused_with_one_short_line(case: Case, tmp_path: Path) -> None:
    path = case.make(tmp_path)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(SpecError) as info:
            validate_file(path)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = info.value
    line = err.line()
    assert "\n" not in line and len(line) <= MAX_LINE, line[:2000]
    assert case.field in err.field, line
    assert case.word in err.problem + " " + err.fix, line
    assert err.fix
    assert elapsed < 1.0, f"{elapsed:.2f} s"
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_the_examples_still_validate() -> None:
    for path in [*sorted((ROOT / "examples/scenarios").glob("*.yaml")),
                 *sorted((ROOT / "examples/k8s").glob("*.yaml"))]:
        validate_file(path)


# ------------------------------------------------------------------------- the command line
MEASURE = """
import resource, runpy, sys
sys.argv = ["intent-planner", *sys.argv[1:]]
try:
    runpy.run_module("planner.cli", run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code
sys.stderr.write(f"maxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
sys.exit(code)
"""


def cli(*args: str) -> tuple[subprocess.CompletedProcess[str], list[str], int]:
    """Run the CLI in a subprocess: the result, stderr's lines (without the measurement) and
    the process's peak resident memory in KiB."""
    res = subprocess.run([sys.executable, "-c", MEASURE, *args], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    rss = int(lines.pop().removeprefix("maxrss_kib="))
    return res, lines, rss


@pytest.fixture(scope="module")
def baseline_kib() -> int:
    """Peak memory of validating a good file (the interpreter and the modules)."""
    res, _, rss = cli("validate", str(CHECKOUT))
    assert res.returncode == 0, res.stderr
    return rss


def _refused(args: list[str], field: str, baseline_kib: int) -> str:
    res, lines, rss = cli(*args)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("error: ") and "fix:" in line and len(line) <= MAX_LINE + 10, line
    assert field in line, line
    assert rss - baseline_kib < 100 * 1024, f"{(rss - baseline_kib) / 1024:.0f} MiB more"
    return line


def test_cli_alias_bomb(tmp_path: Path, baseline_kib: int) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    _refused(["validate", str(bomb)], "aliases", baseline_kib)


def test_cli_prints_values_and_paths_as_plain_text(tmp_path: Path, baseline_kib: int) -> None:
    """No markup: "[/red]" is printed as given, and so are bracketed field paths."""
    red = manifest_edit(objective("value", "[/red]"))(tmp_path)
    line = _refused(["validate", str(red)], "spec.objectives[0].value", baseline_kib)
    assert "'[/red]'" in line
    (tmp_path / "sub").mkdir()
    csv = scenario_edit(csv_trace("timestamp,rate\n0,100\n60\n"))(tmp_path / "sub")
    _refused(["validate", str(csv)], "workloads[shop/catalog].trace.file", baseline_kib)


def test_cli_long_value_gives_a_short_line(tmp_path: Path, baseline_kib: int) -> None:
    big = replace_in(CHECKOUT, "value: 50", f"value: {'y' * 900_000}")(tmp_path)
    line = _refused(["validate", str(big)], "spec.objectives[0].value", baseline_kib)
    assert "..." in line


def test_cli_simulate_refuses_with_exit_2(tmp_path: Path, baseline_kib: int) -> None:
    bad = scenario_edit(setting("admin", "replicas", "max", value=10**12))(tmp_path)
    _refused(["simulate", "-s", str(bad)], "admin.replicas.max", baseline_kib)
    _refused(["simulate", "-s", str(FLASH), "--duration", "90d"], "--duration", baseline_kib)


def test_cli_json_errors_are_refused(tmp_path: Path, baseline_kib: int) -> None:
    doc = intent_doc(manifests())
    doc["spec"]["objectives"][0]["value"] = "60"
    path = tmp_path / "intent.json"
    path.write_text(json.dumps(doc))
    _refused(["validate", str(path)], "spec.objectives[0].value", baseline_kib)


# --------------------------------------------------------------- the controller's condition
def test_an_implausible_target_is_reported_not_planned() -> None:
    """An intent that reached the controller without the check (an older CRD, a document
    stored before it): latency 0.5 ms is reported as the Invalid condition, and nothing is
    planned or applied for it."""
    from simulator.runner import ScenarioRun
    from simulator.scenario import Scenario, load_scenario

    sc = load_scenario(FLASH)
    intent = sc.intents[0]
    objective = intent.spec.objectives[0].model_copy(update={"value": 0.5})
    bad = intent.model_copy(update={"spec": intent.spec.model_copy(
        update={"objectives": [objective]})})
    run = ScenarioRun(Scenario(sc.spec, [bad], sc.profiles, sc.base_dir), seed=1)
    replicas = run.sim.observe().workload(bad.workload_key).config.replicas  # type: ignore
    outcome = run.controller.cycle()[0]
    assert outcome.plan is None and not outcome.applied
    conditions = {c["type"]: c for c in outcome.status["conditions"]}
    assert conditions["Invalid"]["status"] == "True"
    assert "spec.objectives[0].value" in conditions["Invalid"]["message"]
    assert "milliseconds" in conditions["Invalid"]["message"]
    assert run.sim.observe().workload(bad.workload_key).config.replicas == replicas  # type: ignore
