"""The embedded default, diurnal-shop with its own seed, planner (grid) and actuators, simulated
once per test process (the ``shop_day`` fixture in conftest.py) for the tests that check that
one run at different times. It runs as far as the tests asked for so far need, and records on
the way what they check: the status conditions after every cycle, and the knowledge base and
the controller at the times in :data:`SNAPSHOT_TIMES`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from knowledge.connect import open_knowledge_base
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

SHOP = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "diurnal-shop.yaml"
KEY = "shop/checkout"
SNAPSHOT_TIMES = (900.0, 1800.0)
"""Simulated seconds after which :meth:`ShopDay.snapshot` is taken."""


class ShopDay:
    def __init__(self) -> None:
        self.knowledge = open_knowledge_base(None)
        self.run = ScenarioRun(load_scenario(SHOP), knowledge=self.knowledge)
        self.conditions: list[tuple[float, dict[str, dict[str, Any]]]] = []
        """(cycle time, the intent's status conditions by type just after that cycle)."""
        self.snapshots: dict[float, dict[str, Any]] = {}

    def until(self, elapsed: float) -> ScenarioRun:
        """The run, advanced to ``elapsed`` simulated seconds unless it is there already."""
        run = self.run
        while run.elapsed + 1e-9 < elapsed:
            at = run.elapsed
            if run.advance() is not None:
                status = run.controller.status(KEY)
                assert status is not None
                self.conditions.append(
                    (at, copy.deepcopy({c["type"]: c for c in status["conditions"]})))
            for t in SNAPSHOT_TIMES:
                if t not in self.snapshots and abs(run.elapsed - t) < 1e-6:
                    self.snapshots[t] = self.snapshot()
        return run

    def snapshot(self) -> dict[str, Any]:
        """What the knowledge base and the controller hold about the intent now."""
        ctl = self.run.controller
        return {
            "elapsed": self.run.elapsed,
            "stored_memory": self.knowledge.memory(KEY),
            "live_memory": copy.deepcopy(ctl.memory(KEY).as_document()),
            "status": copy.deepcopy(ctl.status(KEY)),
            "effects": self.knowledge.effects(KEY),
            "last_events": self.knowledge.events(KEY, limit=5),
        }

    def at(self, elapsed: float) -> dict[str, Any]:
        """The snapshot after ``elapsed`` (one of :data:`SNAPSHOT_TIMES`) simulated seconds."""
        self.until(elapsed)
        return self.snapshots[elapsed]
