from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from planner.domain.errors import SpecError
from planner.domain.intents import (
    KPIType,
    load_manifests,
    objective_met,
    parse_documents,
    parse_intent,
    parse_profile,
)


def intent_doc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "targetRef": {"kind": "Deployment", "name": "checkout"},
        "objectives": [{"name": "p95", "value": 50, "measuredBy": "p95latency"}],
    }
    base.update(spec)
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "Intent",
            "metadata": {"name": "checkout", "namespace": "shop"}, "spec": base}


def profile_doc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "intent-planner.io/v1alpha1", "kind": "KPIProfile",
            "metadata": {"name": "p95latency", "namespace": "shop"},
            "spec": {"type": "latency", **spec}}


def test_defaults_and_keys() -> None:
    intent = parse_intent(intent_doc())
    assert intent.key == "shop/checkout"
    assert intent.workload_key == "shop/checkout"
    assert intent.spec.active is True and intent.spec.priority == 0.5
    assert intent.spec.objectives[0].profile_key("shop") == "shop/p95latency"


@pytest.mark.parametrize(
    ("spec", "field", "fix"),
    [
        ({"objectives": [{"name": "p95", "value": -5, "measuredBy": "x"}]},
         "spec.objectives[0].value", "> 0"),
        ({"objectives": [{"name": "p95", "value": "fast", "measuredBy": "x"}]},
         "spec.objectives[0].value", "number without quotes"),
        ({"objectives": [{"name": "p95", "value": 5, "measuredBy": "x", "tolerence": 0.1}]},
         "spec.objectives[0].tolerence", "tolerance"),
        ({"priority": 2}, "spec.priority", "<= 1"),
        ({"targetRef": {"kind": "CronJob", "name": "x"}}, "spec.targetRef.kind", "Deployment"),
        ({"objectives": []}, "spec.objectives", "between 1 and"),
        ({"replicas": 3}, "spec.replicas", "remove this key"),
    ],
)
def test_errors_name_field_and_fix(spec: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_intent(intent_doc(**spec), "intent.yaml")
    assert err.value.field == field
    assert fix in err.value.fix
    line = str(err.value)
    assert "\n" not in line and line.startswith("intent.yaml: " + field)


def test_profile_percentile_only_for_latency() -> None:
    assert parse_profile(profile_doc(percentile=99)).spec.latency_percentile == 99
    with pytest.raises(SpecError) as err:
        parse_profile(profile_doc(percentile=150))
    assert err.value.field == "spec.percentile"
    with pytest.raises(SpecError):
        parse_profile({**profile_doc(), "spec": {"type": "throughput", "percentile": 95}})


def test_unknown_profile_reference() -> None:
    with pytest.raises(SpecError) as err:
        parse_documents([intent_doc(), {**profile_doc(), "metadata": {"name": "other",
                                                                       "namespace": "shop"}}])
    assert err.value.field.endswith("spec.objectives[0].measuredBy")
    assert "shop/other" in err.value.fix


def test_load_manifests(tmp_path: Path) -> None:
    import yaml

    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump_all([profile_doc(), intent_doc()]))
    intents, profiles = load_manifests(f)
    assert [i.key for i in intents] == ["shop/checkout"]
    assert profiles[0].spec.type is KPIType.LATENCY


def test_objective_met_honours_tolerance_and_direction() -> None:
    intent = parse_intent(intent_doc(objectives=[
        {"name": "p95", "value": 50, "measuredBy": "p95latency", "tolerance": 0.1}]))
    lat = parse_profile(profile_doc())
    obj = intent.spec.objectives[0]
    assert objective_met(54.9, obj, lat) is True
    assert objective_met(55.1, obj, lat) is False
    assert objective_met(None, obj, lat) is None
    avail = parse_profile({**profile_doc(), "spec": {"type": "availability"}})
    a_obj = obj.model_copy(update={"value": 0.99, "tolerance": 0.0})
    assert objective_met(0.995, a_obj, avail) is True
    assert objective_met(0.98, a_obj, avail) is False
