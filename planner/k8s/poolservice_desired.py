"""What the PoolService fan-out must write for one Service: a pure, level-based function.

:func:`desired` takes the world as it is - the Service, every NodePool, the PoolServices of the
Service's namespace - and returns the writes that bring it to the state OpenYurt's
``load-balancer-set`` controller keeps (``docs/poolservice.md``), as :class:`FanoutWrites`.
Applied to a world already in that state it returns no writes, so a reconcile of an unchanged
world writes nothing. :mod:`planner.k8s.poolservice_fanout` applies them.

**Selected** Service (``type: LoadBalancer``, a ``spec.loadBalancerClass`` and a non-blank
:data:`~planner.k8s.openyurt.POOL_SELECTOR_ANNOTATION`), not being deleted:

* the finalizer :data:`~planner.k8s.openyurt.FINALIZER` is added;
* one PoolService per NodePool whose labels match the selector (pools being deleted do not
  match), named ``<service>-<pool>``, labelled with the service and pool names and
  :data:`~planner.k8s.openyurt.MANAGED_BY`, owned by the Service (controller) and the NodePool,
  ``spec.loadBalancerClass`` the Service's; missing ones are created, ours whose labels, owners
  or class were edited are repaired (a ``Warning`` event ``Modified``), ours for pools no longer
  matching are deleted; one of that name without our managed-by label is left alone (a
  ``Warning`` event ``ManagedConflict``); one of that name that is ours but consistently
  another Service's (``a`` in pool ``b-c`` and ``a-b`` in pool ``c`` both give ``a-b-c``: its
  labels and controller owner name ``a-b``) is left alone too (``Warning`` ``NameConflict``)
  rather than relabelled, which its Service would undo, forever; no matching pool gives a
  ``Warning``
  ``NoMatchNodePool``; a selector that does not parse gives ``InvalidNodePoolSelector`` and
  leaves the PoolServices as they are (a typo does not withdraw the exposure);
* from the PoolServices kept: ``status.loadBalancer.ingress`` = the sorted, de-duplicated union
  of theirs; every key ``k`` of their ``status.aggregateToAnnotations`` / ``...Labels`` is
  ``aggregated.k`` on the Service (values de-duplicated, sorted, comma-joined), other
  ``aggregated.*`` keys are removed. A joined label value that is not a valid label value (a
  comma, more than 63 characters) is left out with a ``Warning`` ``InvalidAggregatedLabel``:
  the API server would reject the whole write; so is a key ``aggregated.k`` that is not a
  valid label or annotation key (``Warning`` ``InvalidAggregatedKey``).

**Not selected, or being deleted**: our PoolServices of it are deleted; once none is left the
finalizer is removed. ``aggregated.*`` keys and the ingress are left as they are then (as
OpenYurt does: the Service's own load balancer, if any, may own them).

"Ours" means: labelled :data:`~planner.k8s.openyurt.MANAGED_BY`, with the service-name label
of this Service and named ``<service-name label>-<pool-name label>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.k8s import labelselector
from planner.k8s.openyurt import (
    AGGREGATED_PREFIX,
    FINALIZER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NODEPOOL_GROUP,
    NODEPOOL_KIND,
    NODEPOOL_VERSION,
    POOL_NAME_LABEL,
    POOL_SELECTOR_ANNOTATION,
    POOLSERVICE_GROUP,
    POOLSERVICE_KIND,
    POOLSERVICE_VERSION,
    SERVICE_NAME_LABEL,
    poolservice_name,
)

Obj = Mapping[str, Any]
_LABEL_VALUE = re.compile(r"^(([a-zA-Z0-9][-a-zA-Z0-9_.]*)?[a-zA-Z0-9])?$")
_KEY_NAME = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")
_KEY_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
POOLSERVICE_API_VERSION = f"{POOLSERVICE_GROUP}/{POOLSERVICE_VERSION}"
NODEPOOL_API_VERSION = f"{NODEPOOL_GROUP}/{NODEPOOL_VERSION}"


@dataclass(frozen=True)
class EventNote:
    """A Kubernetes Event to post about one object."""

    type: str
    """``Normal`` or ``Warning``."""
    reason: str
    message: str
    kind: str
    namespace: str
    name: str
    uid: str | None = None
    api_version: str = "v1"


@dataclass(frozen=True)
class Repair:
    """A merge patch putting back what was edited on one of our PoolServices."""

    name: str
    patch: dict[str, Any]
    resource_version: str | None
    fields: tuple[str, ...] = ()
    """What was edited (``metadata.labels``, ``metadata.ownerReferences``, ...)."""


@dataclass(frozen=True)
class Delete:
    name: str
    uid: str | None


@dataclass(frozen=True)
class FanoutWrites:
    """Everything to write for one Service; empty when the world is as it should be."""

    namespace: str
    service: str
    service_resource_version: str | None = None
    service_metadata: dict[str, Any] | None = None
    """Merge patch of the Service's ``metadata`` (finalizers, ``aggregated.*`` annotations
    and labels; ``None`` values delete keys); ``None``: nothing to change."""
    service_ingress: list[dict[str, Any]] | None = None
    """The Service's new ``status.loadBalancer.ingress``; ``None``: unchanged."""
    create: tuple[dict[str, Any], ...] = ()
    repair: tuple[Repair, ...] = ()
    delete: tuple[Delete, ...] = ()
    events: tuple[EventNote, ...] = ()
    selected: bool = False
    pools: tuple[str, ...] = field(default=())
    """The pools the Service is exposed in once these writes are applied."""

    @property
    def writes(self) -> int:
        """API writes these take (events not counted)."""
        return (int(self.service_metadata is not None) + int(self.service_ingress is not None)
                + len(self.create) + len(self.repair) + len(self.delete))

    def __bool__(self) -> bool:
        return self.writes > 0


# ------------------------------------------------------------------ reading objects
def _meta(obj: Obj) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _labels(obj: Obj) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def load_balancer_class(service: Obj) -> str | None:
    cls = (service.get("spec") or {}).get("loadBalancerClass")
    return str(cls) if cls else None


def selector_text(service: Obj) -> str:
    return str((_meta(service).get("annotations") or {}).get(POOL_SELECTOR_ANNOTATION) or "")


def is_selected(service: Obj) -> bool:
    """``type: LoadBalancer``, a load balancer class and a non-blank pool selector."""
    spec = service.get("spec") or {}
    return (spec.get("type") == "LoadBalancer" and load_balancer_class(service) is not None
            and bool(selector_text(service).strip()))


def has_finalizer(service: Obj) -> bool:
    return FINALIZER in (_meta(service).get("finalizers") or ())


def is_ours(ps: Obj, service: str | None = None) -> bool:
    """Labelled by us (for ``service``, if given) and named from its labels."""
    labels = _labels(ps)
    svc, pool = labels.get(SERVICE_NAME_LABEL), labels.get(POOL_NAME_LABEL)
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY or not svc or not pool:
        return False
    if service is not None and svc != service:
        return False
    return str(_meta(ps).get("name")) == poolservice_name(svc, pool)


def _other_services(ps: Obj, service: str) -> str | None:
    """The other Service a PoolService of ours consistently belongs to: its labels name that
    Service and a pool giving its name, and its controller owner is that Service. (A manual
    edit of the labels alone leaves the owner; that is repaired, not this.) ``None``: it
    is ``service``'s, or edited."""
    svc = _labels(ps).get(SERVICE_NAME_LABEL)
    if not svc or svc == service or not is_ours(ps, svc):
        return None
    owner = next((o for o in _meta(ps).get("ownerReferences") or ()
                  if isinstance(o, Mapping) and o.get("controller")), None)
    if owner is None or owner.get("kind") != "Service" or owner.get("name") != svc:
        return None
    return svc


def _deleting(obj: Obj) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


# ------------------------------------------------------------------ building objects
def owner_refs(service: Obj, pool: Obj) -> list[dict[str, Any]]:
    """The Service (the controller) and the NodePool, as OpenYurt sets them."""
    return [
        {"apiVersion": "v1", "kind": "Service", "name": str(_meta(service).get("name")),
         "uid": str(_meta(service).get("uid") or ""), "controller": True,
         "blockOwnerDeletion": True},
        {"apiVersion": NODEPOOL_API_VERSION, "kind": NODEPOOL_KIND,
         "name": str(_meta(pool).get("name")), "uid": str(_meta(pool).get("uid") or ""),
         "blockOwnerDeletion": True},
    ]


def managed_labels(service: str, pool: str) -> dict[str, str]:
    return {SERVICE_NAME_LABEL: service, POOL_NAME_LABEL: pool, MANAGED_BY_LABEL: MANAGED_BY}


def build(service: Obj, pool: Obj) -> dict[str, Any]:
    """The PoolService of ``service`` in ``pool``."""
    svc, np = str(_meta(service).get("name")), str(_meta(pool).get("name"))
    spec: dict[str, Any] = {}
    cls = load_balancer_class(service)
    if cls is not None:
        spec["loadBalancerClass"] = cls
    return {
        "apiVersion": POOLSERVICE_API_VERSION, "kind": POOLSERVICE_KIND,
        "metadata": {"name": poolservice_name(svc, np),
                     "namespace": str(_meta(service).get("namespace")),
                     "labels": managed_labels(svc, np),
                     "ownerReferences": owner_refs(service, pool)},
        "spec": spec,
    }


# ------------------------------------------------------------------ aggregation
def _canonical(entry: Any) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


def ingress_union(poolservices: Iterable[Obj]) -> list[dict[str, Any]]:
    """The sorted (by IP, then hostname), de-duplicated union of the pools' ingress."""
    seen: dict[str, dict[str, Any]] = {}
    for ps in poolservices:
        lb = (ps.get("status") or {}).get("loadBalancer") or {}
        for entry in lb.get("ingress") or ():
            if isinstance(entry, Mapping) and entry:
                seen.setdefault(_canonical(entry), dict(entry))
    return sorted(seen.values(), key=lambda e: (str(e.get("ip") or ""),
                                                str(e.get("hostname") or ""), _canonical(e)))


def aggregated(poolservices: Iterable[Obj], field_name: str) -> dict[str, str]:
    """``aggregated.k`` -> the de-duplicated, sorted, comma-joined values of ``k`` in the
    pools' ``status.<field_name>``."""
    values: dict[str, set[str]] = {}
    for ps in poolservices:
        for key, value in _str_map((ps.get("status") or {}).get(field_name)).items():
            values.setdefault(AGGREGATED_PREFIX + key, set()).add(value)
    return {k: ",".join(sorted(v)) for k, v in sorted(values.items())}


def qualified_key(key: str) -> bool:
    """A label or annotation key the API server takes: ``[prefix/]name``, the prefix a DNS
    subdomain of at most 253 characters, the name at most 63."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not _KEY_PREFIX.match(prefix) or len(prefix) > 253):
        return False
    return bool(_KEY_NAME.match(name)) and len(name) <= 63


def _map_patch(current: Mapping[str, str], want: Mapping[str, str]) -> dict[str, str | None]:
    """Merge patch turning the ``aggregated.*`` keys of ``current`` into ``want``."""
    patch: dict[str, str | None] = {k: v for k, v in want.items() if current.get(k) != v}
    for key in current:
        if key.startswith(AGGREGATED_PREFIX) and key not in want:
            patch[key] = None
    return patch


# ------------------------------------------------------------------ the function
def desired(service: Obj, pools: Sequence[Obj], poolservices: Sequence[Obj]) -> FanoutWrites:
    """The writes for ``service``; ``pools``: every NodePool; ``poolservices``: the
    PoolServices of the Service's namespace (others are ignored)."""
    meta = _meta(service)
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if not ns or not name:
        raise ValueError("service: metadata.name and metadata.namespace are required")
    rv = meta.get("resourceVersion")
    here = [ps for ps in poolservices if str(_meta(ps).get("namespace") or ns) == ns]
    ours = [ps for ps in here if is_ours(ps, name)]
    if _deleting(service) or not is_selected(service):
        return _withdraw(service, ns, name, rv, ours)
    return _expose(service, ns, name, rv, pools, here, ours)


def _withdraw(service: Obj, ns: str, name: str, rv: str | None,
              ours: Sequence[Obj]) -> FanoutWrites:
    live = [ps for ps in ours if not _deleting(ps)]
    deletes = tuple(Delete(str(_meta(ps)["name"]), _meta(ps).get("uid")) for ps in live)
    metadata = None
    if not ours and has_finalizer(service):
        finalizers = [f for f in _meta(service).get("finalizers") or () if f != FINALIZER]
        metadata = {"finalizers": finalizers}
    return FanoutWrites(ns, name, rv, service_metadata=metadata, delete=deletes)


def _expose(service: Obj, ns: str, name: str, rv: str | None, pools: Sequence[Obj],
            here: Sequence[Obj], ours: Sequence[Obj]) -> FanoutWrites:
    events: list[EventNote] = []
    uid = _meta(service).get("uid")

    def warn(reason: str, message: str, kind: str = "Service", obj_name: str = name,
             obj_uid: Any = uid, api_version: str = "v1") -> None:
        events.append(EventNote("Warning", reason, message, kind, ns, obj_name,
                                 str(obj_uid) if obj_uid else None, api_version))

    by_name = {str(_meta(ps).get("name")): ps for ps in here}
    text = selector_text(service)
    try:
        selector: labelselector.Selector | None = labelselector.parse(text)
    except labelselector.SelectorError as exc:
        selector = None
        warn("InvalidNodePoolSelector",
             f"annotation {POOL_SELECTOR_ANNOTATION}: {exc}; the PoolServices are left as "
             f"they are until it is a valid label selector (e.g. region in (eu,us))")

    create: list[dict[str, Any]] = []
    repair: list[Repair] = []
    delete: list[Delete] = []
    kept: list[Obj] = []
    exposed: list[str] = []
    if selector is None:
        kept = [ps for ps in ours if not _deleting(ps)]
        exposed = sorted(_labels(ps)[POOL_NAME_LABEL] for ps in kept)
    else:
        matching = sorted((p for p in pools if not _deleting(p)
                           and selector.matches(_labels(p))),
                          key=lambda p: str(_meta(p).get("name")))
        if not matching:
            warn("NoMatchNodePool", f"no NodePool matches {POOL_SELECTOR_ANNOTATION} "
                                    f"{text!r}: the Service is exposed in no pool")
        wanted: set[str] = set()
        for pool in matching:
            pool_name = str(_meta(pool).get("name"))
            ps_name = poolservice_name(name, pool_name)
            wanted.add(ps_name)
            want = build(service, pool)
            have = by_name.get(ps_name)
            if have is None:
                create.append(want)
                exposed.append(pool_name)
                continue
            if _labels(have).get(MANAGED_BY_LABEL) != MANAGED_BY:
                warn("ManagedConflict",
                     f"PoolService {ns}/{ps_name} is not managed by {MANAGED_BY} (no label "
                     f"{MANAGED_BY_LABEL}={MANAGED_BY}) but the pool selector of Service "
                     f"{ns}/{name} includes pool {pool_name}: it is left alone",
                     POOLSERVICE_KIND, ps_name, _meta(have).get("uid"), POOLSERVICE_API_VERSION)
                continue
            other = _other_services(have, name)
            if other is not None:
                warn("NameConflict",
                     f"PoolService {ns}/{ps_name} belongs to Service {ns}/{other} (its labels "
                     f"and controller owner say so), whose pool {_labels(have)[POOL_NAME_LABEL]} "
                     f"gives the same name as pool {pool_name} of Service {ns}/{name}: it is "
                     f"left alone, and {name} is not exposed in {pool_name} while it exists; "
                     "fix: rename the Service or the pool so that <service>-<pool> differ")
                continue
            if _deleting(have):
                continue  # made again once it is gone
            exposed.append(pool_name)
            kept.append(have)
            fix = _repair(have, want)
            if fix is not None:
                repair.append(fix)
                warn("Modified", f"PoolService {ns}/{ps_name} was edited "
                                 f"({', '.join(fix.fields)} changed); the fan-out "
                                 "put back its managed labels, owners and class",
                     POOLSERVICE_KIND, ps_name, _meta(have).get("uid"), POOLSERVICE_API_VERSION)
        for ps in ours:
            ps_name = str(_meta(ps).get("name"))
            if ps_name not in wanted and not _deleting(ps):
                delete.append(Delete(ps_name, _meta(ps).get("uid")))

    metadata: dict[str, Any] = {}
    if not has_finalizer(service):
        metadata["finalizers"] = [*(_meta(service).get("finalizers") or ()), FINALIZER]
    want_annotations = aggregated(kept, "aggregateToAnnotations")
    want_labels = aggregated(kept, "aggregateToLabels")
    for what, want_map in (("annotation", want_annotations), ("label", want_labels)):
        for key in [k for k in want_map if not qualified_key(k)]:
            del want_map[key]
            warn("InvalidAggregatedKey",
                 f"{what} key {key!r} (from a PoolService's status.aggregateTo{what.title()}s) "
                 "is not a valid key: left out, the API server would refuse the whole write; "
                 "fix: the load balancer must give keys k for which aggregated.k is "
                 "[prefix/]name (a DNS prefix, a name of at most 63 characters)")
    annotations = _map_patch(_str_map(_meta(service).get("annotations")), want_annotations)
    for key, value in list(want_labels.items()):
        if not _LABEL_VALUE.match(value) or len(value) > 63:
            del want_labels[key]
            warn("InvalidAggregatedLabel",
                 f"label {key}={value!r} is not a valid label value (several pools' values, "
                 f"or over 63 characters): left out; aggregate it to annotations instead")
    labels = _map_patch(_str_map(_meta(service).get("labels")), want_labels)
    if annotations:
        metadata["annotations"] = annotations
    if labels:
        metadata["labels"] = labels

    ingress = ingress_union(kept)
    current = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    new_ingress = ingress if [_canonical(e) for e in current] != \
        [_canonical(e) for e in ingress] else None
    return FanoutWrites(ns, name, rv, service_metadata=metadata or None,
                        service_ingress=new_ingress, create=tuple(create),
                        repair=tuple(repair), delete=tuple(delete), events=tuple(events),
                        selected=True, pools=tuple(sorted(exposed)))


def _repair(have: Obj, want: Obj) -> Repair | None:
    meta, want_meta = _meta(have), _meta(want)
    patch: dict[str, Any] = {}
    labels = _labels(have)
    fixed = {k: v for k, v in want_meta["labels"].items() if labels.get(k) != v}
    if fixed:
        patch.setdefault("metadata", {})["labels"] = fixed
    if list(meta.get("ownerReferences") or []) != want_meta["ownerReferences"]:
        patch.setdefault("metadata", {})["ownerReferences"] = want_meta["ownerReferences"]
    want_cls = (want.get("spec") or {}).get("loadBalancerClass")
    if (have.get("spec") or {}).get("loadBalancerClass") != want_cls:
        patch["spec"] = {"loadBalancerClass": want_cls}
    if not patch:
        return None
    fields = [f"metadata.{k}" for k in patch.get("metadata", {})]
    if "spec" in patch:
        fields.append("spec.loadBalancerClass")
    return Repair(str(meta.get("name")), patch, meta.get("resourceVersion"), tuple(fields))
