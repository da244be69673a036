"""Two Services whose HAProxy backend names collide in one pool (the reference load balancer).

The backend template ``{namespace}-{name}`` (not the default) names Service ``a-b/c`` and Service
``a/b-c`` both ``a-b-c``. Syncing both would make the pool's backend flap between their
servers and send one tenant's clients to the other's pods: the older PoolService keeps the
backend, the other is ``Ready=False BackendConflict`` and nothing of it reaches HAProxy; and
deleting a PoolService does not empty a backend another live PoolService still holds.

HAProxy here is an unreachable unix socket: any attempt to talk to it shows as
``HAProxyUnreachable`` (or ``retry`` on release), so an outcome without it sent nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.k8s import openyurt
from planner.k8s.poolservice_lb import HAProxyPoolLB
from planner.k8s.poolservice_lb_settings import HAProxyLBSettings
from planner.k8s.resources import POOLSERVICES, SERVICES, ResourceType


def ps(ns: str, service: str, pool: str, created: str) -> dict[str, Any]:
    return {"apiVersion": "network.openyurt.io/v1alpha1", "kind": "PoolService",
            "metadata": {"name": openyurt.poolservice_name(service, pool), "namespace": ns,
                         "creationTimestamp": created, "generation": 1,
                         "labels": {openyurt.SERVICE_NAME_LABEL: service,
                                    openyurt.POOL_NAME_LABEL: pool}},
            "spec": {"loadBalancerClass": openyurt.HAPROXY_LB_CLASS}}


def svc(ns: str, name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}}


class Reader:
    def __init__(self, objs: dict[str, list[dict[str, Any]]]) -> None:
        self.objs = objs

    def list(self, rtype: ResourceType, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self.objs.get(rtype.plural, [])
                if namespace is None or o["metadata"].get("namespace") == namespace]

    def get(self, rtype: ResourceType, namespace: str | None, name: str
            ) -> dict[str, Any] | None:
        return next((o for o in self.list(rtype, namespace) if o["metadata"]["name"] == name),
                    None)


def make_lb(pss: list[dict[str, Any]], tmp_path: Any) -> tuple[HAProxyPoolLB, list[Any]]:
    settings = HAProxyLBSettings.model_validate({"backend": "{namespace}-{name}", "pools": {"p1": {
        "runtimeAPI": str(tmp_path / "no-haproxy.sock"), "address": "203.0.113.1"}}})
    reader = Reader({POOLSERVICES.plural: pss,
                     SERVICES.plural: [svc("a-b", "c"), svc("a", "b-c"), svc("x", "c")]})
    writes: list[Any] = []
    lb = HAProxyPoolLB(settings, reader, lambda ns, n, patch: writes.append((ns, n, patch)),
                       lambda ns: {})
    return lb, writes


def test_colliding_backend_names_the_older_keeps_the_backend(tmp_path: Any) -> None:
    older = ps("a-b", "c", "p1", "2026-01-01T00:00:00Z")
    newer = ps("a", "b-c", "p1", "2026-01-02T00:00:00Z")
    lb, writes = make_lb([newer, older], tmp_path)
    assert lb.settings.backend_of("a-b", "c", "p1") == lb.settings.backend_of("a", "b-c", "p1")
    out = {o.namespace: o for o in lb.reconcile_all()}
    assert out["a"].reason == "BackendConflict" and not out["a"].ready
    assert out["a"].commands == () and not out["a"].retry
    # the older one goes on to HAProxy (here unreachable)
    assert out["a-b"].reason == "HAProxyUnreachable"
    status = next(p for ns, _, p in writes if ns == "a")
    cond = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert cond["status"] == "False" and cond["reason"] == "BackendConflict"
    # another namespace's objects are not named
    assert "another namespace" in cond["message"] and "a-b/" not in cond["message"]
    assert "c-p1" not in cond["message"]
    assert "fix" in cond["message"]
    assert status["loadBalancer"] == {}  # no ingress advertised for a backend it cannot have


def test_release_leaves_a_backend_another_poolservice_holds(tmp_path: Any) -> None:
    older = ps("a-b", "c", "p1", "2026-01-01T00:00:00Z")
    newer = ps("a", "b-c", "p1", "2026-01-02T00:00:00Z")
    lb, _ = make_lb([older, newer], tmp_path)
    out = lb.release(newer)
    assert out.reason == "BackendInUse" and not out.retry and out.commands == ()
    # the last one holding it empties it (HAProxy unreachable here: retried)
    lb_alone, _ = make_lb([older], tmp_path)
    assert lb_alone.release(older).retry


def test_the_default_backend_names_cannot_collide() -> None:
    default = HAProxyLBSettings.model_validate({"pools": {}})
    assert default.backend_of("a-b", "c", "p1") != default.backend_of("a", "b-c", "p1")


def test_distinct_backends_are_no_conflict(tmp_path: Any) -> None:
    lb, _ = make_lb([ps("a-b", "c", "p1", "2026-01-01T00:00:00Z"),
                     ps("x", "c", "p1", "2026-01-02T00:00:00Z")], tmp_path)
    assert {o.reason for o in lb.reconcile_all()} == {"HAProxyUnreachable"}


_COLUMNS = ("be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
            "srv_iweight srv_time_since_last_change srv_check_status srv_check_result "
            "srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id "
            "srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr "
            "srv_agent_addr srv_agent_port")
STATIC = (f"1\n# {_COLUMNS}\n"
          "2 a-b-c 1 s1 - 0 32 1 1 0 1 0 0 0 0 0 0 doesnotexist.invalid 80 - 0 0 - - 0\n")
"""What HAProxy 2.x answers for a backend with a static server whose name is unresolved
(``server s1 doesnotexist.invalid:80 init-addr none``)."""


def test_a_backend_with_a_server_the_lb_cannot_hold_is_a_condition(
        tmp_path: Any, monkeypatch: Any) -> None:
    """A static server in the backend (an unresolved name: address ``-``) is not a crash of
    every reconcile but ``HAProxyBackendUnusable`` naming the server and the fix."""
    from actuators.dataplanes import haproxy, haproxy_servers

    with pytest.raises(haproxy_servers.UnusableBackend, match=r"s1.*static"):
        haproxy_servers.parse_servers_state(STATIC, "a-b-c")
    monkeypatch.setattr(haproxy.RuntimeAPI, "execute", lambda self, command: STATIC)
    lb, writes = make_lb([ps("a-b", "c", "p1", "2026-01-01T00:00:00Z"),
                          ps("x", "c", "p1", "2026-01-02T00:00:00Z")], tmp_path)
    out = {o.namespace: o for o in lb.reconcile_all()}  # no exception, every one reconciled
    assert set(out) == {"a-b", "x"}
    assert out["a-b"].reason == "HAProxyBackendUnusable" and out["a-b"].retry
    cond = next(c for ns, _, p in writes if ns == "a-b" for c in p["conditions"])
    assert "s1" in cond["message"] and "fix" in cond["message"]
