"""bench/trace.py: one row per cycle and intent, filtered as asked, totals at the end."""

from __future__ import annotations

import json

import pytest

from bench import trace


def test_trace_prints_the_cycles_asked_for_and_stops_at_to(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert trace.main(["examples/scenarios/diurnal-shop.yaml", "--from", "60", "--to", "240",
                       "--every", "2", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows, totals = lines[:-1], lines[-1]
    assert rows and all(1.0 <= r["minute"] <= 4.0 for r in rows)
    assert {r["intent"] for r in rows} == {"shop/checkout"}
    assert all(r["reason"] and r["pods"].endswith("p") for r in rows)
    assert len(rows) <= (240 - 60) / 15 / 2 + 1
    assert set(totals) == {"totals"} and totals["totals"]


def test_trace_keeps_only_violated_cycles_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    # flash-sale's sale starts at minute 12: its first cycles after it are violated.
    trace.main(["examples/scenarios/flash-sale.yaml", "--to", "900", "--json"])
    every = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
    trace.main(["examples/scenarios/flash-sale.yaml", "--to", "900", "--violated", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:-1]
    assert rows and all(r["violated"] for r in rows)
    assert rows == [r for r in every if r["violated"]] and len(rows) < len(every)
