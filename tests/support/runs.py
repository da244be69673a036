"""Scenario runs shared by the tests of one process, and copies of runs, so that one simulated
state serves several tests, or continues two ways, without simulating the way there twice.

:class:`SharedRun` is one run of a shipped scenario with seed 1 (the scenario's own planner
and admin, an in-memory knowledge base). The session fixture ``shared_run`` (conftest.py) keeps
one per scenario and process; each test advances it as far as it needs (:meth:`SharedRun.until`)
and reads what was recorded on the way, at the times below, whichever test came first. Under
pytest-xdist each worker has its own: a worker simulates no more than its own tests need.

So that one worker simulates each scenario once, every test that uses ``shared_run`` carries the
pytest-xdist group of its scenario (:func:`on_shared_run`, :func:`shared_run_params`):
``make test`` runs pytest with ``--dist loadgroup``, which sends the tests of one group to one
worker. conftest.py refuses a test that uses ``shared_run`` without such a group.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import mongomock
import pytest

from knowledge.connect import open_knowledge_base
from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.mongo import MongoKnowledgeBase
from planner.domain.memory import EMPTY
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

SEED = 1
"""diurnal-shop's own seed: its shared run is the embedded default (``make run``)."""
REPORT_TIMES = (300.0, 900.0)
"""Simulated seconds at which :attr:`SharedRun.reports` are taken."""
SNAPSHOT_TIMES = (900.0, 1800.0)
"""... :attr:`SharedRun.snapshots` (see :meth:`SharedRun.snapshot`)."""
COPY_TIMES = (540.0, 1200.0, 1500.0)
"""... :attr:`SharedRun.copies` (see :func:`copy_run`)."""


GROUP_PREFIX = "shared-run-"
"""The pytest-xdist groups of the tests that share a scenario's run are named so."""


def shared_run_group(path: Path) -> str:
    """The pytest-xdist group of the tests that share the run of the scenario at ``path``."""
    return GROUP_PREFIX + path.stem


def on_shared_run(path: Path) -> pytest.MarkDecorator:
    """Marks a test that uses the shared run of the scenario at ``path``: its pytest-xdist
    group (under ``--dist loadgroup`` one worker runs the group's tests and simulates the
    scenario once for all of them)."""
    return pytest.mark.xdist_group(shared_run_group(path))


def shared_run_params(paths: Iterable[Path]) -> list[pytest.ParameterSet]:
    """Parameters for a test parametrized over scenarios whose shared runs it uses: each path
    with its stem as id and its scenario's group (:func:`on_shared_run`)."""
    return [pytest.param(p, id=p.stem, marks=on_shared_run(p)) for p in paths]


def copy_knowledge_base(kb: MongoKnowledgeBase) -> MongoKnowledgeBase:
    """A new in-memory knowledge base holding copies of every document of ``kb`` (an in-memory
    one), collection by collection in their stored order; its indexes are created as for any
    new store."""
    if not isinstance(kb.client, mongomock.MongoClient):
        raise TypeError(f"can only copy an in-memory knowledge base, not {kb!r}")
    new = MongoKnowledgeBase(mongomock.MongoClient(), kb.database_name, kb.retention_s)
    source, target = kb.client[kb.database_name], new.client[new.database_name]
    for name in source.list_collection_names():
        docs = list(source[name].find({}))
        if docs:
            target[name].insert_many(docs)
    return new


def copy_run(run: ScenarioRun) -> ScenarioRun:
    """An independent copy of ``run`` as it is now: the simulated cluster (its random generators
    included), the controller with its planners, actuators and training hook, the accountant,
    and a copy of the knowledge base. Advancing either leaves the other as it was.

    The copy stands for a second run of the same scenario and seed up to this moment (runs are
    deterministic for a seed: tests/test_simulator.py::test_deterministic_for_a_seed).
    """
    kb = run.knowledge
    if not isinstance(kb, MongoKnowledgeBase | EmbeddedKnowledgeBase):
        raise TypeError(f"can only copy a run over an in-memory knowledge base, not {kb!r}")
    # The knowledge base is copied through its documents; the empty memory is a shared
    # read-only constant (its type cannot be copied).
    memo: dict[int, Any] = {id(kb): copy.deepcopy(kb) if isinstance(kb, EmbeddedKnowledgeBase)
                            else copy_knowledge_base(kb), id(EMPTY): EMPTY}
    if run.trainer is not None and not run.trainer.deterministic:
        raise TypeError("cannot copy a run whose training runs off the cycle's thread")
    return copy.deepcopy(run, memo)


class SharedRun:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.knowledge = open_knowledge_base(None)
        self.run = ScenarioRun(load_scenario(path), seed=SEED, knowledge=self.knowledge)
        self.conditions: dict[str, list[tuple[float, dict[str, dict[str, Any]]]]] = {
            i.key: [] for i in self.run.scenario.intents}
        """Per intent: (cycle time, the status conditions by type just after that cycle)."""
        self.reports: dict[float, dict[str, Any]] = {}
        self.snapshots: dict[float, dict[str, dict[str, Any]]] = {}
        self._copies: dict[float, ScenarioRun] = {}

    def until(self, elapsed: float) -> ScenarioRun:
        """The run, advanced to ``elapsed`` simulated seconds unless it is there already (as
        :meth:`ScenarioRun.run` advances it)."""
        run = self.run
        while run.elapsed + 1e-9 < elapsed:
            at = run.elapsed
            if run.advance() is not None:
                for key, seen in self.conditions.items():
                    status = run.controller.status(key)
                    assert status is not None
                    seen.append((at, copy.deepcopy({c["type"]: c for c in status["conditions"]})))
            now = run.elapsed
            for t in REPORT_TIMES:
                if t not in self.reports and abs(now - t) < 1e-6:
                    self.reports[t] = run.report(0.0).as_dict()
            for t in SNAPSHOT_TIMES:
                if t not in self.snapshots and abs(now - t) < 1e-6:
                    self.snapshots[t] = {key: self.snapshot(key) for key in self.conditions}
            for t in COPY_TIMES:
                if t not in self._copies and abs(now - t) < 1e-6:
                    self._copies[t] = copy_run(run)
        return run

    def snapshot(self, key: str) -> dict[str, Any]:
        """What the knowledge base and the controller hold about the intent ``key`` now."""
        ctl = self.run.controller
        return {
            "elapsed": self.run.elapsed,
            "stored_memory": self.knowledge.memory(key),
            "live_memory": copy.deepcopy(ctl.memory(key).as_document()),
            "status": copy.deepcopy(ctl.status(key)),
            "effects": self.knowledge.effects(key),
            "last_events": self.knowledge.events(key, limit=5),
        }

    def report_at(self, elapsed: float) -> dict[str, Any]:
        """The run's report after ``elapsed`` (one of :data:`REPORT_TIMES`) seconds."""
        self.until(elapsed)
        return copy.deepcopy(self.reports[elapsed])

    def snapshot_at(self, elapsed: float, key: str) -> dict[str, Any]:
        """:meth:`snapshot` after ``elapsed`` (one of :data:`SNAPSHOT_TIMES`) seconds."""
        self.until(elapsed)
        return self.snapshots[elapsed][key]

    def copy_at(self, elapsed: float) -> ScenarioRun:
        """A new independent copy of the run as it was after ``elapsed`` (one of
        :data:`COPY_TIMES`) seconds."""
        self.until(elapsed)
        return copy_run(self._copies[elapsed])
