"""A controller rebuilt from the knowledge base mid-scenario plans as the uninterrupted one.

Two runs of the same scenario and seed. The first runs through. The second, after
``RESTART_S``, throws its controller away (planner and actuator instances, caches, everything
in memory) and builds a new one over the same simulated cluster and the same knowledge base,
as a restarted process would. The plans of the next cycles must be the same in both runs:
cooldowns, risk margins, forecasts, exploration trials, online estimates and which learned
model was in use come back from the knowledge base.

The way to ``RESTART_S`` is simulated once per scenario (the run ``shared_run`` shares with
other tests); both runs continue from copies of that state (tests/support/runs.py: cluster,
controller, random generators and knowledge base copied), which is what a second run with the
same seed reaches (runs are deterministic for a seed, tests/test_simulator.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from knowledge.connect import open_knowledge_base
from planner.control import wiring
from planner.domain.plan import Plan
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario
from tests.support.runs import SharedRun, on_shared_run, shared_run_params

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
FLASH = ROOT / "examples" / "scenarios" / "flash-sale.yaml"
RESTART_S = 20 * 60.0
"""Late enough for trained models, an exploration window, cooldowns and a forecast."""
COMPARED_CYCLES = 1
"""The next plan (with the memory it returns). Later plans may differ for a reason outside the
planner's memory: the training hook's schedule is not restored, so a restarted controller
refits its models at once (docs/benchmarks.md section 7)."""


def _plans(run: ScenarioRun, cycles: int) -> list[dict[str, Any]]:
    """The plans of the next ``cycles`` controller cycles (planning time left out)."""
    out: list[dict[str, Any]] = []
    while len(out) < cycles:
        outcomes = run.advance()
        for o in outcomes or ():
            assert o.plan is not None, o.planner_error
            out.append(_comparable(o.plan))
    return out


def _comparable(plan: Plan) -> dict[str, Any]:
    d = plan.as_dict()
    d.pop("planning_ms")
    d["memory"] = plan.memory
    return d


def _restart(run: ScenarioRun) -> None:
    """Replace the run's controller (and its training hook) by one built from scratch."""
    if run.trainer is not None:
        run.trainer.close()
    built = wiring.build_controller(run.sim, run.sim, run.source, run.knowledge, run.admin)
    run.controller, run.trainer = built.controller, built.trainer


AtRestart = Callable[[Path], tuple[ScenarioRun, ScenarioRun]]


@pytest.fixture
def at_restart(shared_run: Callable[[Path], SharedRun]) -> AtRestart:
    """Two independent runs of a scenario (seed 1, in-memory knowledge base) at
    ``RESTART_S``: copies of the shared run as it was then."""

    def two_runs(path: Path) -> tuple[ScenarioRun, ScenarioRun]:
        shared = shared_run(path)
        assert shared.run.seed == 1
        return shared.copy_at(RESTART_S), shared.copy_at(RESTART_S)

    return two_runs


@pytest.mark.parametrize("path", shared_run_params(SCENARIOS))
def test_restarted_controller_makes_the_same_next_plans(path: Path,
                                                        at_restart: AtRestart) -> None:
    scenario = load_scenario(path)
    through, restarted = at_restart(path)
    assert through.elapsed == restarted.elapsed == RESTART_S
    remembered = restarted.controller.memory(next(iter(scenario.intents)).key)
    _restart(restarted)
    assert restarted.controller.cycles == 0       # a new controller, nothing carried over...
    assert restarted.controller.memory(remembered.intent) == remembered   # ...but the memory
    assert remembered.planning and remembered.planner
    assert _plans(restarted, COMPARED_CYCLES) == _plans(through, COMPARED_CYCLES)


@on_shared_run(FLASH)
def test_without_the_memory_a_restart_plans_differently(at_restart: AtRestart) -> None:
    """The check above can fail: with the memory deleted, the restarted planner has lost its
    cooldowns, margins, forecasts and model times, and its plans differ."""
    scenario = load_scenario(FLASH)
    through, amnesic = at_restart(FLASH)
    _restart(amnesic)
    for intent in scenario.intents:
        amnesic.knowledge.put_memory(intent.key, {"intent": intent.key})
    assert _plans(amnesic, COMPARED_CYCLES) != _plans(through, COMPARED_CYCLES)


def test_a_restart_during_a_knowledge_base_outage_keeps_the_stored_memory() -> None:
    """Restarted while the store is down: the controller plans on (from nothing), never writes
    that over the stored memory, and takes the stored memory back once it can read it."""
    from knowledge.resilient import ResilientKnowledgeBase
    from tests.test_kb_resilience import Flaky

    store = open_knowledge_base(None)
    flaky = Flaky(store)
    kb = ResilientKnowledgeBase(flaky, retry_interval_s=0.0, max_retry_interval_s=0.0)
    run = ScenarioRun(load_scenario(ROOT / "examples" / "scenarios" / "diurnal-shop.yaml"),
                      seed=1, knowledge=kb)
    run.run(600.0)
    key = "shop/checkout"
    stored = store.memory(key)
    assert stored is not None and stored["planning"]["forecast"]["points"]
    flaky.down = True
    _restart(run)
    assert _plans(run, 2)                                  # it plans during the outage...
    assert store.memory(key) == stored                     # ...and keeps the stored memory
    flaky.down = False
    _plans(run, 1)
    restored = run.controller.memory(key)
    before_restart = max(t for t, _ in stored["planning"]["forecast"]["points"])
    # The load history from before the restart is back (the memory built during the outage
    # started from nothing), and so are the last-change times.
    assert any(t <= before_restart for t, _ in restored.planning["forecast"]["points"])
    assert set(restored.changes) >= set(stored["changes"])
    assert store.memory(key) == restored.as_document()
