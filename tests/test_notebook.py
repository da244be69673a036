"""The effects notebook runs headless against a seeded in-memory knowledge base; a failing cell
fails the test.

The controller seeds 15 simulated minutes instead of the notebook's 45 (a cell after the
parameters cell sets ``SEED_DURATION``, as papermill injects parameters): every cell runs the
same code on fewer events. The characterisation before the run already trains a
``queueing-latency`` model and the run trains it again every 5 minutes, so each table and figure
checked below has its content at 15 minutes as at 45. The simulated minutes were half of the
test's time."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "effects_exploration.ipynb"
SEED_MINUTES = 15
SEED_DURATION = f"{SEED_MINUTES}m"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_effects_notebook_executes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTENT_PLANNER_KB", raising=False)  # seed an in-memory knowledge base
    figure = tmp_path / "effects-response.png"
    monkeypatch.setenv("INTENT_PLANNER_FIGURE", str(figure))  # leave docs/img/ alone
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    [at] = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert "SEED_DURATION = " in nb.cells[at].source
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(
        f'SEED_DURATION = "{SEED_DURATION}"', metadata={"tags": ["injected-parameters"]}))
    client = NotebookClient(nb, timeout=150, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError naming the cell that failed
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "seeded from scenario diurnal-shop" in text
    assert f"then {SEED_MINUTES * 4} controller cycles" in text  # 15-second cycles: it ran
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # response curves, predicted vs observed, one timeline
    tables = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert any("queueing-latency" in t for t in tables)
    assert figure.stat().st_size > 10_000 and figure.read_bytes()[:4] == b"\x89PNG"
