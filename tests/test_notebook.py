"""The effects notebook runs headless against a seeded in-memory knowledge base; a failing cell
fails the test."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "effects_exploration.ipynb"


@pytest.mark.timeout(180)
def test_effects_notebook_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTENT_PLANNER_KB", raising=False)  # seed an in-memory knowledge base
    figure = tmp_path / "effects-response.png"
    monkeypatch.setenv("INTENT_PLANNER_FIGURE", str(figure))  # leave docs/img/ alone
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    client = NotebookClient(nb, timeout=150, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "seeded from scenario diurnal-shop" in text
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # response curves, predicted vs observed, one timeline
    tables = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert any("queueing-latency" in t for t in tables)
    assert figure.stat().st_size > 10_000 and figure.read_bytes()[:4] == b"\x89PNG"
