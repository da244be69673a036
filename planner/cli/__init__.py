"""The ``intent-planner`` command line."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from planner.domain.errors import SpecError
from planner.k8s import command as k8s_command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Intent-driven orchestration: declare SLOs, the planner decides how much.")
err = Console(stderr=True)
out = Console()

DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / \
    "diurnal-shop.yaml"

Scenario = Annotated[Path, typer.Option("--scenario", "-s", help="Scenario YAML file.")]
PlannerOpt = Annotated[str | None, typer.Option(
    "--planner", "-p", help="Planner plugin, optionally with its main option (hpa@60 for HPA "
    "at 60 % CPU); default: the scenario's.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", min=0,
                                             help="Random seed (default: scenario's).")]
KbOpt = Annotated[str, typer.Option("--kb", help="Knowledge base: 'memory', a directory "
                                    "(./kb: kept across runs) or a mongodb:// URI.")]


def _fail(exc: SpecError) -> typer.Exit:
    # The line quotes the user's input: plain text, never markup ("[/red]" is a value).
    err.print(Text.assemble(("error:", "bold red"), " ", exc.line()), highlight=False,
              soft_wrap=True)
    return typer.Exit(code=2)


def _parse_duration(value: str | None, field: str = "--duration",
                    allow_zero: bool = False) -> float | None:
    from simulator.durations import parse_duration

    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise SpecError("", field, str(exc), "use e.g. 30m or 2h") from None
    if seconds <= 0 and not allow_zero:
        raise SpecError("", field, "must be longer than 0", "use e.g. 30m or 2h")
    return seconds


def _run_duration(value: str | None, sc: Any) -> float:
    """``--duration`` (default: the scenario's), within the scenario bounds."""
    from simulator.scenario import check_duration

    given = _parse_duration(value)
    if given is None:
        return float(sc.spec.duration)
    check_duration(given, sc.spec.step_s, "--duration")
    return given


@app.command()
def simulate(
    scenario: Scenario,
    planner: PlannerOpt = None,
    seed: SeedOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    duration: Annotated[str | None, typer.Option(help="Override the scenario duration.")] = None,
    kb: KbOpt = "memory",
) -> None:
    """Run a scenario as fast as the CPU allows and report SLO attainment and cost.

    Progress goes to stderr; Ctrl-C stops the run and reports the time simulated so far
    (exit code 130)."""
    from planner.cli import report
    from planner.cli.progress import SimulationProgress, StopOnInterrupt
    from simulator.scenario import load_scenario

    try:
        sc = load_scenario(scenario)
        total = _run_duration(duration, sc)
        knowledge = _open_kb(kb)
        # Imported once the input is known good: it loads the planners and their model
        # libraries (seconds), which a command refusing its input does without.
        from simulator.runner import ScenarioRun

        run = ScenarioRun(sc, planner, seed, knowledge, keep_heap=True)
    except SpecError as exc:
        raise _fail(exc) from None
    with SimulationProgress(err, f"{sc.name} / {run.admin.planner}", total) as progress, \
            StopOnInterrupt() as interrupt:
        try:
            result = run.run(total, on_progress=progress.update,
                             should_stop=lambda: interrupt.stopped)
        finally:
            if run.heap is not None:
                run.heap.close()
    data = result.as_dict()
    if interrupt.stopped:
        data["interrupted"] = True
        err.print(f"interrupted: partial report of {result.duration_s / 60:.1f} of "
                  f"{total / 60:.1f} simulated min", markup=False, highlight=False)
    if as_json:
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        report.print_report(out, data)
    if interrupt.stopped:
        raise typer.Exit(code=130)


@app.command()
def run(
    scenario: Scenario = DEFAULT_SCENARIO,
    planner: PlannerOpt = None,
    seed: SeedOpt = None,
    speed: Annotated[float, typer.Option(help="Simulated seconds per wall second.")] = 60.0,
    duration: Annotated[str | None, typer.Option(help="Stop after this much simulated time "
                                                 "(default: the scenario's).")] = None,
    kb: KbOpt = "memory",
    retention: Annotated[str, typer.Option(
        help="Keep events this long (e.g. 7d, 12h); older ones are deleted hourly.")] = "7d",
    live: Annotated[bool, typer.Option(help="Live table (off: one log line per cycle).")] = True,
    api: Annotated[bool, typer.Option("--api/--no-api", help="Serve the REST API beside the "
                                      "controller (see docs/api.md).")] = False,
    port: Annotated[int | None, typer.Option(help="API port (default: INTENT_PLANNER_PORT or "
                                             "8080).")] = None,
) -> None:
    """Run the controller on the embedded default: a simulated cluster, in-memory knowledge
    (or a directory kept across runs: --kb ./kb; the simulated clock then resumes after what
    it holds)."""
    import time

    from knowledge.base import KnowledgeBaseUnavailable
    from planner.cli import live as live_view
    from planner.cli import report
    from simulator.runner import ScenarioRun, resumed_start
    from simulator.scenario import load_scenario

    try:
        sc = load_scenario(scenario)
        total = _run_duration(duration, sc)
        knowledge = _open_kb(kb, _parse_duration(retention, "--retention"), background=True)
        now = time.time()
        start = resumed_start(knowledge, now)
        runner = ScenarioRun(sc, planner, seed, knowledge, start_time=start,
                             threaded_training=True, keep_heap=True)
    except SpecError as exc:
        raise _fail(exc) from None
    if speed <= 0:
        raise _fail(SpecError("", "--speed", "must be > 0", "use e.g. --speed 60"))
    stop = {"now": False}

    def _interrupt(signum: int, frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    out.print(f"[bold]intent-planner[/] on the simulated cluster: scenario "
              f"[cyan]{escape(sc.name)}[/], planner [cyan]{escape(runner.admin.planner)}[/], "
              f"{speed:g}x real time, "
              f"{total / 60:.0f} simulated minutes. Ctrl-C stops.")
    if start > now:
        with contextlib.suppress(KnowledgeBaseUnavailable):   # only a greeting
            out.print(f"knowledge base {kb}: {knowledge.count_events()} events and "
                      f"{len(knowledge.effects())} models kept from earlier runs; the "
                      "simulated clock resumes after them.", markup=False, highlight=False)
    server = _start_api(runner, port) if api else None
    view = live_view.LiveView(out, runner, enabled=live and out.is_terminal)
    try:
        with view:
            result = runner.run(total, speed=speed, on_cycle=view.update,
                                should_stop=lambda: stop["now"])
    finally:
        if server is not None:
            server.stop()
        _close_kb(runner, kb)   # a directory store folds its journal on close
    report.print_report(out, result.as_dict())


@app.command()
def characterize(
    scenario: Scenario,
    workload: Annotated[str, typer.Option("--workload", "-w", help="namespace/name (or name).")],
    trials: Annotated[int, typer.Option("--trials", "-n", min=3, help="Configurations tried.")]
    = 40,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    kb: KbOpt = "memory",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Explore a workload's configuration space on the simulator (optuna ask/tell) and seed
    the knowledge base's events and effects."""
    import time

    from rich.progress import Progress

    from simulator.characterize import characterize as run_characterize
    from simulator.scenario import load_scenario

    try:
        sc = load_scenario(scenario)
        if "/" not in workload:
            matches = [w.key for w in sc.spec.workloads if w.name == workload]
            workload = matches[0] if len(matches) == 1 else workload
        knowledge = _open_kb(kb)
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task(f"characterising {workload}", total=trials)
            result = run_characterize(sc, workload, trials, knowledge, seed=seed,
                                      end_time=time.time(),
                                      on_trial=lambda n: progress.update(task, completed=n))
    except SpecError as exc:
        raise _fail(exc) from None
    if as_json:
        sys.stdout.write(json.dumps(result.as_dict(), sort_keys=True) + "\n")
        return
    out.print(f"{result.trials} trials on {result.workload}: {result.recorded} events recorded")
    for m in result.models:
        out.print(f"  model {m['intent']} / {m['objective']} ({m['kind']}): {m['samples']} "
                  f"samples, validation {m['validation']}")
    if kb == "memory":
        out.print("[yellow]note:[/] --kb memory keeps nothing after this command; pass "
                  "--kb ./DIRECTORY or --kb mongodb://... to keep the seeded effects")


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Scenario or Intent/KPIProfile YAML files.")],
) -> None:
    """Validate scenario and manifest files; exit 2 with the field and the fix on error."""
    from simulator.scenario import validate_file

    for f in files:
        try:
            validate_file(f)
        except SpecError as exc:
            raise _fail(exc) from None
        out.print(f"{f}: ok", markup=False, highlight=False)


@app.command()
def generate(
    seed: Annotated[int, typer.Option("--seed", min=0, help="Draw the scenario from this seed "
                                      "(the same seed gives the same scenario).")],
    output: Annotated[Path | None, typer.Option("--out", "-o", help="Write to this file "
                                                "(default: stdout).")] = None,
    contention: Annotated[str | None, typer.Option(
        "--contention", help="'tight': two or three workloads competing for one pool below "
        "their summed peak need (default: drawn from the seed).")] = None,
) -> None:
    """Print a random but realistic scenario (YAML) drawn from a seed: load shape, service,
    cluster, admin knobs and intents the planner has never seen (see simulator/generate.py)."""
    import yaml

    from simulator import generate as gen
    from simulator.scenario import parse_scenario

    if contention is not None and contention not in gen.CONTENTION:
        raise _fail(SpecError("", "--contention", f"{contention!r} is not a contention the "
                              "generator draws", f"use --contention {' or '.join(gen.CONTENTION)}"
                              ", or leave it out"))
    try:
        doc = gen.generate(seed, contention)
    except OSError as exc:
        raise _fail(SpecError("", "--seed", f"seed {seed} replays a recorded trace that cannot "
                              f"be read: {exc}", "run from a checkout with examples/scenarios/"
                              "traces, or choose another seed")) from None
    try:
        parse_scenario(gen.relocate(doc, None), doc["name"])
    except SpecError as exc:
        raise _fail(exc) from None
    # Recorded traces are named so that they resolve from where the file goes (stdout:
    # absolute, as the text may be saved anywhere).
    doc = gen.relocate(doc, None if output is None else output.resolve().parent)
    option = "" if contention is None else f" --contention {contention}"
    text = (f"# intent-planner generate --seed {seed}{option}\n"
            + yaml.safe_dump(doc, sort_keys=False, width=100))
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise _fail(SpecError(str(output), "--out", f"cannot write: {exc}",
                              "give a writable file path")) from None
    err.print(f"{output}: scenario {doc['name']}", highlight=False)


@app.command("planners")
def list_planners() -> None:
    """List the planner and actuator plugins installed."""
    from actuators import registry as actuators
    from planner.planners import registry as planners

    out.print("planners:  " + ", ".join(sorted(planners.available())))
    out.print("actuators: " + ", ".join(sorted(actuators.available())))


@app.command()
def serve(
    scenario: Annotated[Path | None, typer.Option(
        "--scenario", "-s", help="Scenario YAML (default: INTENT_PLANNER_SCENARIO or "
        "diurnal-shop).")] = None,
    planner: PlannerOpt = None,
    kb: Annotated[str | None, typer.Option(
        "--kb", help="Knowledge base: 'memory', a directory or a mongodb:// URI (default: "
        "INTENT_PLANNER_KB or memory).")] = None,
    warmup: Annotated[str | None, typer.Option(
        help="Simulated time to run before serving; the cluster is then held still "
        "(default: INTENT_PLANNER_WARMUP_S or 10m; 0 with --kb mongodb://...).")] = None,
    host: Annotated[str | None, typer.Option(
        help="Listen address (default: INTENT_PLANNER_HOST or 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(
        help="Port (default: INTENT_PLANNER_PORT or 8080).")] = None,
) -> None:
    """Serve the REST API alone, over the embedded simulated cluster (warmed up, then held
    still) and the knowledge base (see docs/api.md)."""
    from planner.api import app as api_app
    from planner.api import server
    from planner.cli import embedded

    try:
        warmup_s = _parse_duration(warmup, "--warmup", allow_zero=True)
        changes: dict[str, Any] = {k: v for k, v in {
            "scenario": scenario, "planner": planner, "kb": kb, "host": host, "port": port,
            "warmup_s": warmup_s}.items() if v is not None}
        if warmup_s is None and kb is not None and kb != "memory":
            # A shared store is read, not filled with simulated events: no warm-up unless asked.
            changes["warmup_s"] = 0.0
        settings, token = server.with_token(_api_settings(changes))
        runtime = embedded.serve_runtime(settings)
    except SpecError as exc:
        raise _fail(exc) from None
    _announce_api(settings, token)
    try:
        server.serve(api_app.create_app(settings, runtime), settings.host, settings.port)
    finally:
        runtime.close()


@app.command()
def openapi(
    output: Annotated[Path | None, typer.Option("--output", "-o",
                                                help="Write to this file (default: stdout).")]
    = None,
) -> None:
    """Print the REST API's OpenAPI document (JSON)."""
    from planner.api import app as api_app
    from planner.api.settings import Settings

    text = json.dumps(api_app.create_app(Settings()).openapi(), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def _api_settings(changes: dict[str, Any]) -> Any:
    """API settings from the environment, with command-line options on top."""
    import pydantic

    from planner.api.settings import Settings
    from planner.domain.validation import spec_error

    try:
        return Settings(**changes)
    except pydantic.ValidationError as exc:
        raise spec_error(exc, "") from None


def _announce_api(settings: Any, token: str | None) -> None:
    where = f"http://{settings.host}:{settings.port}"
    if not settings.auth:
        out.print(f"API on {where} [yellow](auth off)[/]")
    elif token is not None:
        out.print(f"API on {where}, bearer token (generated; set INTENT_PLANNER_API_TOKENS "
                  f"to choose one): {token}", soft_wrap=True)
    else:
        out.print(f"API on {where}, bearer token from INTENT_PLANNER_API_TOKENS")


def _start_api(runner: Any, port: int | None) -> Any:
    from planner.api import app as api_app
    from planner.api import server
    from planner.cli import embedded

    try:
        settings, token = server.with_token(_api_settings({} if port is None else
                                                          {"port": port}))
    except SpecError as exc:
        raise _fail(exc) from None
    bg = server.BackgroundServer(
        api_app.create_app(settings, embedded.scenario_runtime(runner)), settings.host,
        settings.port)
    if not bg.start():
        bg.stop()
        raise _fail(SpecError("", "--port", f"cannot serve the API on {settings.host}:"
                              f"{settings.port}", "choose a free port with --port"))
    _announce_api(settings, token)
    return bg


app.command("operator")(k8s_command.operator)


def _open_kb(uri: str, retention_s: float | None = None, background: bool = False) -> Any:
    """The ``--kb`` store; its writes are queued and written in batches at the end of each
    controller cycle (``background``: by a writer thread, for live runs; simulations write
    them in the cycle, deterministically)."""
    from knowledge.connect import open_knowledge_base
    from knowledge.mongo import DEFAULT_RETENTION_S

    return open_knowledge_base(uri, resilient=True, background=background,
                               retention_s=retention_s or DEFAULT_RETENTION_S)


def _close_kb(runner: Any, uri: str) -> None:
    """Stop training, write back what the knowledge base buffered and close it; say on stderr
    what could not be stored (a store that was unreachable at the end)."""
    if runner.trainer is not None:
        runner.trainer.close()
    if runner.heap is not None:
        runner.heap.close()
    kb = runner.knowledge
    kb.close()
    lost = kb.lost() if callable(getattr(kb, "lost", None)) else {}
    if any(lost.values()):
        names = {"events": ("event", "events"), "statuses": ("status", "statuses"),
                 "memories": ("planner memory", "planner memories")}
        parts = [f"{n} {names.get(what, (what, what))[n != 1]}" for what, n in lost.items()
                 if n]
        counters = kb.counters() if callable(getattr(kb, "counters", None)) else {}
        maybe = counters.get("unconfirmed", 0)
        note = (f" ({maybe} of the events were sent as the connection failed and may have "
                "arrived)" if maybe else "")
        err.print(f"warning: the knowledge base (--kb {uri}) could not be reached: "
                  f"{' and '.join([', '.join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)}"
                  f" of this run were not stored{note}", markup=False,
                  highlight=False, soft_wrap=True)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()


if __name__ == "__main__":
    main()
