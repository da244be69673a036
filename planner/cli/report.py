"""Human-readable rendering of a run report (the JSON shape of ``RunReport.as_dict``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def print_report(console: Console, data: dict[str, Any]) -> None:
    table = Table(title=f"{escape(data['scenario'])} - planner {escape(data['planner'])} - "
                        f"seed {data['seed']} - {data['duration_s'] / 60:.0f} simulated min")
    for col in ("intent", "objective", "target", "attainment", "violation min"):
        table.add_column(col, justify="left" if col in ("intent", "objective") else "right")
    for key, intent in data["intents"].items():
        for name, obj in intent["objectives"].items():
            table.add_row(escape(key), escape(name), f"{obj['target']:g}",
                          f"{obj['attainment']:.1%}", str(obj["violation_minutes"]))
    console.print(table)
    res = Table(title="resources and planning")
    for col in ("intent", "core-hours", "cost", "actions", "plan p50 ms", "plan p99 ms"):
        res.add_column(col, justify="left" if col == "intent" else "right")
    for key, intent in data["intents"].items():
        res.add_row(escape(key), f"{intent['core_hours']:.2f}", f"{intent['cost']:.2f}",
                    str(intent["actions"]), f"{intent['plan_ms_p50']:.2f}",
                    f"{intent['plan_ms_p99']:.2f}")
    t = data["totals"]
    res.add_row("[bold]total", f"{t['core_hours']:.2f}", f"{t['cost']:.2f}", str(t["actions"]),
                f"{t['plan_ms_p50']:.2f}", f"{t['plan_ms_p99']:.2f}")
    console.print(res)
    console.print(f"{data['cycles']} controller cycles in {data['wall_s']:.1f} s wall time")
