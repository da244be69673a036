"""``simulate`` on a long run: progress on stderr (never in the ``--json`` output) and Ctrl-C
as "stop and report what ran" (exit code 130)."""

from __future__ import annotations

import io
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from planner import cli as cli_mod
from planner.cli.progress import SimulationProgress, StopOnInterrupt
from simulator.runner import ScenarioRun

ROOT = Path(__file__).resolve().parents[1]
FLASH = ROOT / "examples/scenarios/flash-sale.yaml"


def test_progress_lines_when_stderr_is_not_a_terminal() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200)
    with SimulationProgress(console, "flash-sale / grid [x]", 7200.0, every_s=0.0) as progress:
        progress.update(1800.0)
    assert buf.getvalue().startswith("flash-sale / grid [x]: 30.0 of 120.0 simulated min (25%)")
    quiet = io.StringIO()
    with SimulationProgress(Console(file=quiet, force_terminal=False), "x", 60.0) as progress:
        progress.update(30.0)  # within the first 10 s: nothing
    assert quiet.getvalue() == ""


@pytest.fixture
def python_sigint() -> Any:
    """Python's own SIGINT handler (a test runner's worker may have another)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.mark.usefixtures("python_sigint")
def test_first_interrupt_stops_second_one_raises() -> None:
    with StopOnInterrupt() as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.stopped
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("python_sigint")
def test_ctrl_c_prints_the_partial_report(monkeypatch: pytest.MonkeyPatch) -> None:
    advance = ScenarioRun.advance
    calls = [0]

    def interrupted_after_ten(self: ScenarioRun) -> Any:
        calls[0] += 1
        if calls[0] == 10:  # 50 simulated seconds in: the user presses Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)
        return advance(self)

    monkeypatch.setattr(ScenarioRun, "advance", interrupted_after_ten)
    res = CliRunner().invoke(cli_mod.app, ["simulate", "-s", str(FLASH), "--json"])
    assert res.exit_code == 130, res.output
    data = json.loads(res.stdout)
    assert data["interrupted"] is True and data["duration_s"] == 50
    assert "interrupted: partial report of 0.8 of 120.0 simulated min" in res.stderr
