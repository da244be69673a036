"""The live view of ``intent-planner run``: one row per intent, refreshed every cycle."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from planner.control.outcome import IntentOutcome


def _fmt(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:.4f}" if v < 1.0 else f"{v:.1f}"


class LiveView:
    def __init__(self, console: Console, run: Any, enabled: bool = True) -> None:
        self.console = console
        self.run = run
        self.enabled = enabled
        self._live: Live | None = None
        self._last_action: dict[str, str] = {}

    def __enter__(self) -> LiveView:
        if self.enabled:
            self._live = Live(Table(), console=self.console, refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(et, ev, tb)

    def update(self, sim: Any, outcomes: list[IntentOutcome]) -> None:
        minute = sim.elapsed / 60.0
        for o in outcomes:
            if o.applied:
                self._last_action[o.intent.key] = f"{minute:5.1f}m {o.applied[-1]}"
        if self._live is None:
            for o in outcomes:
                self.console.print(self._line(minute, o), highlight=False)
            return
        table = Table(title=f"simulated time {minute:.1f} min", expand=True)
        for col in ("intent", "mode", "objectives (current / target)", "replicas", "load req/s",
                    "last action"):
            table.add_column(col)
        for o in outcomes:
            table.add_row(escape(o.intent.key), "active" if o.intent.spec.active else "shadow",
                          self._objectives(o), self._replicas(sim, o), self._load(sim, o),
                          escape(self._last_action.get(o.intent.key, "-")))
        self._live.update(table)

    def _objectives(self, o: IntentOutcome) -> str:
        parts = []
        for obj in o.intent.spec.objectives:
            met = o.met.get(obj.name)
            mark = {True: "[green]ok[/]", False: "[red]VIOLATED[/]", None: "[yellow]?[/]"}[met]
            parts.append(f"{escape(obj.name)} {_fmt(o.current.get(obj.name))} / "
                         f"{obj.value:g} {mark}")
        return "\n".join(parts)

    @staticmethod
    def _replicas(sim: Any, o: IntentOutcome) -> str:
        w = sim.workloads.get(o.intent.workload_key)
        if w is None:
            return "-"
        ready = sum(1 for p in w.pods if p.ready(sim.time))
        return f"{ready}/{w.config.replicas} x {w.config.cpu:g} cpu {w.config.device}"

    @staticmethod
    def _load(sim: Any, o: IntentOutcome) -> str:
        w = sim.workloads.get(o.intent.workload_key)
        return f"{w.history[-1].offered:.0f}" if w is not None and w.history else "-"

    def _line(self, minute: float, o: IntentOutcome) -> str:
        objs = ", ".join(f"{obj.name}={_fmt(o.current.get(obj.name))}/{obj.value:g}"
                         for obj in o.intent.spec.objectives)
        act = f" action: {o.applied[-1]}" if o.applied else ""
        return f"[{minute:6.1f}m] {escape(o.intent.key)}: {escape(objs)}{escape(act)}"
