"""The embedded default the REST API serves when no cluster is given: a scenario's simulated
cluster and its controller (``intent-planner run --api`` and ``intent-planner serve``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from knowledge.connect import open_knowledge_base
from planner.api.runtime import Runtime
from planner.api.settings import Settings
from simulator.runner import DEFAULT_START, ScenarioRun, resumed_start
from simulator.scenario import load_scenario


def scenario_runtime(run: ScenarioRun, *, looping: bool = True) -> Runtime:
    """A :class:`Runtime` over a scenario run: the run's steps and cycles hold the runtime's
    lock, and KPI reads through :meth:`Runtime.measure` leave the simulator's noise stream
    where it was."""
    rt = Runtime(run.controller, looping=looping,
                 description=f"simulated cluster, scenario {run.scenario.name}")
    rt.guard(run, "advance")
    rt.guard(run.controller, "cycle")
    sim = run.sim

    @contextmanager
    def peek() -> Iterator[None]:
        with rt.lock:
            state = sim.noise_rng.bit_generator.state
            try:
                yield
            finally:
                sim.noise_rng.bit_generator.state = state

    rt.peek = peek
    return rt


def serve_runtime(settings: Settings) -> Runtime:
    """For ``serve``: the settings' scenario and knowledge base, warmed up, then held still."""
    scenario = load_scenario(settings.scenario)
    kb = open_knowledge_base(settings.kb, resilient=True, background=True)
    run = ScenarioRun(scenario, settings.planner, knowledge=kb,
                      start_time=resumed_start(kb, DEFAULT_START), keep_heap=True)
    if settings.warmup_s > 0:
        run.run(settings.warmup_s)
    rt = scenario_runtime(run, looping=False)
    rt.closers.append(kb.close)
    if run.trainer is not None:
        rt.closers.append(run.trainer.close)
    if run.heap is not None:
        rt.closers.append(run.heap.close)
    return rt
