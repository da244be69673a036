"""The PoolService fan-out's desired-state function and label selectors (no API server)."""

from __future__ import annotations

from typing import Any

import pytest

from planner.k8s import labelselector
from planner.k8s.openyurt import (
    FINALIZER,
    HAPROXY_LB_CLASS,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    POOL_NAME_LABEL,
    POOL_SELECTOR_ANNOTATION,
    SERVICE_NAME_LABEL,
)
from planner.k8s.poolservice_desired import build, desired, is_selected

NS = "shop"


def svc(selector: str | None = "region=eu", *, finalizers: tuple[str, ...] = (FINALIZER,),
        deleting: bool = False, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, ingress: list[dict[str, Any]] | None = None,
        svc_type: str = "LoadBalancer", lb_class: str | None = HAPROXY_LB_CLASS
        ) -> dict[str, Any]:
    ann = dict(annotations or {})
    if selector is not None:
        ann[POOL_SELECTOR_ANNOTATION] = selector
    meta: dict[str, Any] = {"name": "web", "namespace": NS, "uid": "svc-uid",
                            "resourceVersion": "7", "annotations": ann,
                            "labels": dict(labels or {}), "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"type": svc_type}
    if lb_class:
        spec["loadBalancerClass"] = lb_class
    out: dict[str, Any] = {"metadata": meta, "spec": spec}
    if ingress is not None:
        out["status"] = {"loadBalancer": {"ingress": ingress}}
    return out


def pool(name: str, deleting: bool = False, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"{name}-uid", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


POOLS = [pool("eu-a", region="eu"), pool("eu-b", region="eu"), pool("us-a", region="us")]


def ours(pool_name: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
    ps = build(svc(), next(p for p in POOLS if p["metadata"]["name"] == pool_name))
    ps["metadata"].update(uid=f"ps-{pool_name}", resourceVersion="3")
    if status is not None:
        ps["status"] = status
    return ps


def test_selection_needs_type_class_and_a_non_blank_selector() -> None:
    assert is_selected(svc())
    assert not is_selected(svc(selector=None))
    assert not is_selected(svc(selector="   "))
    assert not is_selected(svc(lb_class=None))
    assert not is_selected(svc(svc_type="NodePort"))


def test_fresh_service_gets_finalizer_and_one_poolservice_per_matching_pool() -> None:
    w = desired(svc(finalizers=("other.io/x",)), POOLS, [])
    assert w.service_metadata == {"finalizers": ["other.io/x", FINALIZER]}
    assert [c["metadata"]["name"] for c in w.create] == ["web-eu-a", "web-eu-b"]
    assert w.create[0]["metadata"]["labels"] == {
        SERVICE_NAME_LABEL: "web", POOL_NAME_LABEL: "eu-a", MANAGED_BY_LABEL: MANAGED_BY}
    assert w.pools == ("eu-a", "eu-b") and not w.delete and not w.events
    assert w.service_ingress is None, "no ingress yet and none before: nothing to write"


def test_converged_world_needs_no_writes() -> None:
    w = desired(svc(), POOLS, [ours("eu-a"), ours("eu-b")])
    assert not w and w.writes == 0 and not w.events


def test_pool_no_longer_matching_or_being_deleted_loses_its_poolservice() -> None:
    pools = [pool("eu-a", region="eu"), pool("eu-b", deleting=True, region="eu")]
    w = desired(svc(), pools, [ours("eu-a"), ours("eu-b"), ours("us-a")])
    assert sorted(d.name for d in w.delete) == ["web-eu-b", "web-us-a"]
    assert {d.uid for d in w.delete} == {"ps-eu-b", "ps-us-a"}
    assert not w.create


def test_withdraw_deletes_ours_then_removes_the_finalizer() -> None:
    theirs = {"metadata": {"name": "web-eu-b", "namespace": NS, "labels": {"a": "b"}}}
    first = desired(svc(deleting=True), POOLS, [ours("eu-a"), theirs])
    assert [d.name for d in first.delete] == ["web-eu-a"]
    assert first.service_metadata is None, "finalizer kept while a PoolService is left"
    gone = desired(svc(deleting=True), POOLS, [theirs])
    assert gone.service_metadata == {"finalizers": []} and not gone.delete
    unselected = desired(svc(selector=None), POOLS, [])
    assert unselected.service_metadata == {"finalizers": []}
    assert not desired(svc(selector=None, finalizers=()), POOLS, [])


def test_edited_labels_owners_and_class_are_repaired_with_a_warning() -> None:
    edited = ours("eu-a")
    edited["metadata"]["labels"][POOL_NAME_LABEL] = "x"
    edited["metadata"]["ownerReferences"] = []
    edited["spec"]["loadBalancerClass"] = "other"
    w = desired(svc(), POOLS[:1], [edited])
    [fix] = w.repair
    assert fix.patch["metadata"]["labels"] == {POOL_NAME_LABEL: "eu-a"}
    assert [o["kind"] for o in fix.patch["metadata"]["ownerReferences"]] == [
        "Service", "NodePool"]
    assert fix.patch["spec"] == {"loadBalancerClass": HAPROXY_LB_CLASS}
    assert fix.resource_version == "3"
    [ev] = w.events
    assert (ev.type, ev.reason, ev.kind, ev.name) == ("Warning", "Modified", "PoolService",
                                                      "web-eu-a")


def test_unmanaged_namesake_left_alone_and_no_pool_reported() -> None:
    theirs = {"metadata": {"name": "web-eu-a", "namespace": NS, "labels": {}}}
    w = desired(svc(), POOLS[:1], [theirs])
    assert not w.create and not w.repair and not w.delete
    assert [e.reason for e in w.events] == ["ManagedConflict"]
    none = desired(svc(selector="region=mars"), POOLS, [])
    assert [e.reason for e in none.events] == ["NoMatchNodePool"] and not none.create


def test_invalid_selector_keeps_the_poolservices_and_says_why() -> None:
    w = desired(svc(selector="region in (eu"), POOLS, [ours("eu-a")])
    assert not w.create and not w.delete and w.pools == ("eu-a",)
    [ev] = w.events
    assert ev.reason == "InvalidNodePoolSelector" and POOL_SELECTOR_ANNOTATION in ev.message
    assert "unbalanced" in ev.message


def test_aggregation_union_dedup_sorted_and_stale_keys_removed() -> None:
    a = ours("eu-a", {"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}, {"ip": "10.0.0.1"}]},
                      "aggregateToAnnotations": {"id": "b", "zone": "z"},
                      "aggregateToLabels": {"tier": "gold", "lb": "a"}})
    b = ours("eu-b", {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]},
                      "aggregateToAnnotations": {"id": "a"},
                      "aggregateToLabels": {"tier": "gold", "lb": "b"}})
    service = svc(annotations={"aggregated.old": "1", "aggregated.zone": "z", "x": "y"},
                  labels={"aggregated.gone": "1", "app": "web"},
                  ingress=[{"ip": "10.0.0.1"}])
    w = desired(service, POOLS, [a, b])
    assert w.service_ingress == [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]
    assert w.service_metadata is not None
    assert w.service_metadata["annotations"] == {"aggregated.id": "a,b", "aggregated.old": None}
    # "a,b" is no label value: left out with a warning (the API server would refuse it).
    assert w.service_metadata["labels"] == {"aggregated.tier": "gold", "aggregated.gone": None}
    assert [e.reason for e in w.events] == ["InvalidAggregatedLabel"]
    assert "aggregated.lb" in w.events[0].message


def test_missing_service_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name and metadata\.namespace"):
        desired({"metadata": {"name": "web"}}, POOLS, [])


@pytest.mark.parametrize(("text", "labels", "expected"), [
    ("region=eu", {"region": "eu"}, True),
    ("region==eu", {"region": "us"}, False),
    ("region!=eu", {}, True),
    ("region in (eu, us),tier", {"region": "us", "tier": "x"}, True),
    ("region in (eu, us),tier", {"region": "us"}, False),
    ("region notin (eu)", {}, True),
    ("!edge", {"edge": "true"}, False),
    ("example.com/site=a, env = prod", {"example.com/site": "a", "env": "prod"}, True),
    ("", {"anything": "x"}, True),
])
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert labelselector.parse(text).matches(labels) is expected


@pytest.mark.parametrize(("text", "message"), [
    ("region in (eu", "unbalanced"),
    ("region in ()", "at least one value"),
    ("region=e u", "not a requirement"),
    ("-bad=x", "not a label key"),
    ("a=b,,c", "empty requirement"),
    ("a=" + "x" * 64, "not a label value"),
])
def test_label_selector_errors_name_the_part(text: str, message: str) -> None:
    with pytest.raises(labelselector.SelectorError, match=message):
        labelselector.parse(text)


def _named(name: str, selector: str) -> dict[str, Any]:
    s = svc(selector)
    s["metadata"].update(name=name, uid=f"{name}-uid")
    return s


def test_two_services_whose_poolservice_names_collide_do_not_fight() -> None:
    """Service ``a`` in pool ``b-c`` and Service ``a-b`` in pool ``c`` both name their
    PoolService ``a-b-c``. The one that exists belongs to ``a-b`` (labels and controller
    owner agree): Service ``a`` leaves it alone with a warning instead of relabelling it,
    which ``a-b`` would relabel back, forever."""
    pools = [pool("b-c", region="x"), pool("c", region="y")]
    a, ab = _named("a", "region=x"), _named("a-b", "region=y")
    held = build(ab, pools[1])
    held["metadata"].update(uid="ps-abc", resourceVersion="3")
    assert held["metadata"]["name"] == build(a, pools[0])["metadata"]["name"] == "a-b-c"
    assert not desired(ab, pools, [held])  # its owner: nothing to do
    w = desired(a, pools, [held])
    assert not w.repair and not w.create and not w.delete
    assert w.pools == ()
    [ev] = [e for e in w.events if e.reason == "NameConflict"]
    assert ev.type == "Warning" and "a-b-c" in ev.message and "a-b" in ev.message
    # a manual edit of the service-name label alone (the owner still says Service a) is
    # still an edit of a's PoolService, repaired
    edited = build(a, pools[0])
    edited["metadata"].update(uid="ps-abc", resourceVersion="4")
    edited["metadata"]["labels"][SERVICE_NAME_LABEL] = "a-b"
    edited["metadata"]["labels"][POOL_NAME_LABEL] = "c"
    w = desired(a, pools, [edited])
    assert [r.name for r in w.repair] == ["a-b-c"] and w.pools == ("b-c",)


def test_aggregated_keys_that_are_no_label_or_annotation_key_are_left_out() -> None:
    """A PoolService status key that makes ``aggregated.<k>`` no qualified name would make
    the API server refuse the whole metadata write (finalizer included): left out with a
    warning, the rest is written."""
    a = ours("eu-a", {"aggregateToAnnotations": {"ok": "1", "a/b/c": "2", "sp ace": "3"},
                      "aggregateToLabels": {"tier": "gold", "x" * 60: "v", "a/b/c": "w"}})
    w = desired(svc(finalizers=()), POOLS[:1], [a])
    assert w.service_metadata is not None
    assert w.service_metadata["finalizers"] == [FINALIZER]
    assert w.service_metadata["annotations"] == {"aggregated.ok": "1"}
    assert w.service_metadata["labels"] == {"aggregated.tier": "gold"}
    bad = [e for e in w.events if e.reason == "InvalidAggregatedKey"]
    assert len(bad) == 4 and all(e.type == "Warning" and "fix" in e.message for e in bad)
