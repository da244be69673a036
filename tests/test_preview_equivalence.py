"""A preview shows exactly the plan the next controller cycle makes: for every shipped
scenario, over its first 48 cycles, the preview taken just before a cycle has that cycle's
target, actions, planned load, per-step predictions, models and reasons (the preview reads
them off the plan; it recomputes nothing)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from planner.api import schemas
from planner.api.preview import preview
from planner.cli.embedded import scenario_runtime
from planner.domain.plan import Plan
from simulator.runner import ScenarioRun
from simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted((ROOT / "examples" / "scenarios").glob("*.yaml"))
CYCLES = 48


def _same(a: float | None, b: float | None) -> bool:
    """Equal to 1e-9 (relative), or both absent / not finite (a preview shows ``null``)."""
    fa = a if a is not None and math.isfinite(a) else None
    fb = b if b is not None and math.isfinite(b) else None
    if fa is None or fb is None:
        return fa is fb
    return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)


def assert_shows(out: schemas.PreviewOut, plan: Plan, when: str) -> None:
    """``out`` (a preview) shows ``plan`` (what the cycle then did)."""
    assert out.planner == plan.planner, when
    assert out.current.model_dump() == plan.current.as_dict(), when
    assert out.target.model_dump() == plan.target.as_dict(), when
    assert (out.chosen.model_dump() if out.chosen is not None else None) == (
        plan.chosen.as_dict() if plan.chosen is not None else None), when
    assert [a.model_dump() for a in out.actions] == [a.as_dict() for a in plan.actions], when
    assert _same(out.planned_rate, plan.planned_rate), (
        f"{when}: planned load {out.planned_rate} shown, {plan.planned_rate} planned")
    assert out.exploratory == plan.exploratory, when
    assert out.predicted.keys() == {k for k, v in plan.predicted.items() if math.isfinite(v)}
    assert all(_same(out.predicted[k], plan.predicted[k]) for k in out.predicted), when
    assert _same(out.cost_per_hour, plan.cost_per_hour), when
    assert len(out.steps) == len(plan.steps) >= 1, when
    for i, (shown, step) in enumerate(zip(out.steps, plan.steps, strict=True)):
        at = f"{when}, step {i}"
        assert shown.config.model_dump() == step.config.as_dict(), at
        assert shown.this_cycle == step.this_cycle, at
        assert _same(shown.cost_per_hour, step.cost_per_hour), at
        assert shown.predicted.keys() == shown.bound.keys() == step.predicted.keys(), at
        for name, p in step.predicted.items():
            assert _same(shown.predicted[name], p.mean), (
                f"{at}: {name} {shown.predicted[name]} shown, {p.mean} predicted")
            assert _same(shown.bound[name], p.bound), at
    assert [(m.objective, m.source, m.kind, m.samples) for m in out.models] == [
        (m.objective, m.source, m.kind, m.samples) for m in plan.models], when
    assert all(_same(s.trained_at, m.trained_at) for s, m in zip(out.models, plan.models,
                                                                strict=True)), when
    assert [(r.kind, r.text) for r in out.reason_parts] == [
        (r.kind, r.text) for r in plan.reason_parts], when
    assert "; ".join(out.reasons[:len(plan.reason_parts)]) == plan.reason, when


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_preview_shows_the_plan_the_next_cycle_makes(path: Path) -> None:
    run = ScenarioRun(load_scenario(path), "grid")
    rt = scenario_runtime(run)
    refs = {i.key: schemas.IntentRef(namespace=i.metadata.namespace, name=i.metadata.name)
            for i in run.scenario.intents}
    if len(refs) > 1:
        # The simulator draws measurement noise from one stream, in the order KPIs are read:
        # a cycle measures the second intent after the first one's draw, a preview (which
        # leaves the stream as it was) before it. Without noise both read the same values.
        run.sim.measurement_noise = 0.0
    per_cycle = round(run.cycle_s / run.step_s)
    compared = sized = predicted = 0
    for cycle in range(CYCLES):
        shown = {k: preview(rt, schemas.PreviewRequest(ref=r)) for k, r in refs.items()}
        outcomes = run.advance()  # a cycle is due: the one the previews foretell
        assert outcomes is not None
        for o in outcomes:
            if o.plan is None:
                continue
            assert_shows(shown[o.intent.key], o.plan, f"{path.stem} cycle {cycle} "
                                                      f"(t={run.elapsed:.0f} s) {o.intent.key}")
            compared += 1
            sized += o.plan.planned_rate is not None
            predicted += any(s.predicted for s in o.plan.steps)
        for _ in range(per_cycle - 1):
            assert run.advance() is None
    assert compared >= CYCLES
    assert sized and predicted, "no cycle planned for a load: the test compared nothing"
