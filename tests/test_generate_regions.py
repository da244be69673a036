"""Generated multi-region scenarios (``simulator/generate_regions.py``, ``generated-regions:N``):
deterministic per seed, valid for every seed drawn, within the drawn ranges, and varied (some
objectives rule serving from far out and some do not; residency, caps, moving client regions);
``generated:N`` is untouched (``tests/test_generate.py`` pins its documents)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.generate import SCENARIO_DIR, generate
from simulator.generate_regions import generate_regions
from simulator.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SEEDS = range(1, 51)


@pytest.fixture(scope="module")
def docs() -> dict[int, dict[str, Any]]:
    return {s: generate_regions(s) for s in SEEDS}


def test_same_seed_same_document_and_seeds_differ(docs: dict[int, dict[str, Any]]) -> None:
    assert generate_regions(7) == docs[7]
    assert generate_regions(7) is not docs[7]
    assert len({yaml.safe_dump(d) for d in docs.values()}) == len(docs)
    # its own stream: the default generator's document for the seed is another scenario
    assert generate(7)["name"] == "gen-7" and docs[7]["name"] == "gen-regions-7"


def test_every_drawn_scenario_is_valid(docs: dict[int, dict[str, Any]]) -> None:
    for seed, doc in docs.items():
        sc = parse_scenario(doc, doc["name"], SCENARIO_DIR)
        assert sc.spec.clients is not None, seed
        assert len(sc.intents) == len(sc.spec.workloads), seed
        # and through YAML, as bench/generate.py --regions writes it
        again = parse_scenario(yaml.safe_load(yaml.safe_dump(doc)), doc["name"], SCENARIO_DIR)
        assert again.spec == sc.spec, seed


def test_drawn_within_the_ranges(docs: dict[int, dict[str, Any]]) -> None:
    for seed, doc in docs.items():
        pools = doc["cluster"]["pools"]
        regions = {p["region"] for p in pools}
        assert 2 <= len(pools) <= 4 and 2 <= len(regions) <= 4, seed
        home = pools[0]
        clients = doc["clients"]
        names = [r["name"] for r in clients["regions"]]
        assert names[0] == home["region"], seed
        assert set(regions) <= set(names), seed
        for c, row in clients["latency_ms"].items():
            assert set(row) == regions, seed
            for p, ms in row.items():
                assert (1 <= ms <= 10) if c == p else (30 <= ms <= 200), (seed, c, p, ms)
                assert ms == clients["latency_ms"].get(p, {}).get(c, ms), seed   # symmetric
        assert 0.01 <= clients["lb_cost_per_hour"] <= 0.2, seed
        # every region but home carries a weight of its own; the first one moves
        assert "trace" in clients["regions"][1], seed
        assert 1 <= len(doc["workloads"]) <= 2, seed
        for w in doc["workloads"]:
            assert w["exposure"] == [home["name"]], seed
        cap = doc["admin"].get("exposure", {}).get("maxPools")
        assert cap is None or 1 <= cap < len(pools), seed
        for m in doc["manifests"]:
            if m["kind"] == "Intent" and "regions" in m["spec"]:
                assert m["spec"]["regions"][0] == home["region"], seed
                assert set(m["spec"]["regions"]) < regions, seed


def _far_ruled_out(doc: dict[str, Any]) -> list[bool]:
    """Per intent: whether half its latency target is below every cross-region round trip."""
    lat = doc["clients"]["latency_ms"]
    cross = min(ms for c, row in lat.items() for p, ms in row.items() if c != p)
    return [m["spec"]["objectives"][0]["value"] / 2 < cross
            for m in doc["manifests"] if m["kind"] == "Intent"]


def test_varied(docs: dict[int, dict[str, Any]]) -> None:
    ruled = [r for d in docs.values() for r in _far_ruled_out(d)]
    assert any(ruled) and not all(ruled)
    assert any("regions" in m["spec"] for d in docs.values() for m in d["manifests"]
               if m["kind"] == "Intent")
    assert any("exposure" in d["admin"] for d in docs.values())
    assert any(len(d["clients"]["regions"]) > len({p["region"] for p in d["cluster"]["pools"]})
               for d in docs.values())            # a client region without a pool
    assert {len(d["cluster"]["pools"]) for d in docs.values()} == {2, 3, 4}
    assert {len(d["workloads"]) for d in docs.values()} == {1, 2}
    text = " ".join(d["description"] for d in docs.values())
    for pattern in ("appears", "shifts", "diurnal weight", "steady share"):
        assert pattern in text
    # a shift moves demand away from home: the home region's weight then falls over time
    shifted = [d for d in docs.values() if "trace" in d["clients"]["regions"][0]]
    assert shifted
    for d in shifted:
        home = d["clients"]["regions"][0]["trace"]
        assert min(s["rate"] for s in home["steps"]) < home["initial"]


def test_references_resolve_in_the_benches() -> None:
    from bench import slo

    sc = slo.load("generated-regions:3")
    assert sc.name == "gen-regions-3" and sc.spec.clients is not None
    with pytest.raises(SystemExit, match="generated-regions:<seed>"):
        slo.load("generated-regions:x")
    assert slo.load("generated:3").name == "gen-3"
