"""``intent-planner operator``: run the planner in a cluster (kopf operator).

Only ``typer`` and ``typing`` are imported at module level: kopf, the Kubernetes client and
the planner are imported when the command runs, so the CLI starts fast.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer


def operator(
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", "-n", help="Namespace to serve (repeatable; default: all).")] = None,
    kb: Annotated[str, typer.Option(
        "--kb", help="Knowledge base: 'memory' or a mongodb:// URI.")] = "memory",
    prometheus_url: Annotated[str, typer.Option(
        "--prometheus-url", help="Prometheus base URL for KPIs and load metrics.")]
        = "http://prometheus:9090",
    allow_kpi_endpoint: Annotated[list[str] | None, typer.Option(
        "--allow-kpi-endpoint", help="Another Prometheus base URL a KPIProfile's spec.endpoint "
        "may name (repeatable); any other spec.endpoint is refused, never fetched.")] = None,
    kpi_deadline: Annotated[float, typer.Option(
        "--kpi-deadline", help="Seconds one cycle's KPI queries may take together (they run "
        "concurrently); later answers count as unknown.")] = 10.0,
    peering: Annotated[str | None, typer.Option(
        "--peering", help="kopf peering name: only the highest-priority replica plans.")]
        = None,
    standalone: Annotated[bool, typer.Option(
        "--standalone", help="No peering: this replica plans regardless of others.")] = False,
    health_port: Annotated[int, typer.Option(
        "--health-port", help="Port of /healthz, /readyz and /metrics.")] = 8080,
    planner: Annotated[str | None, typer.Option(
        "--planner", "-p", help="Planner plugin, optionally with its main option (hpa@60); "
        "default: the admin config's.")] = None,
    admin: Annotated[str | None, typer.Option(
        "--admin", help="Admin config YAML (guardrails, cycleSeconds, planner).")] = None,
    backend_settings: Annotated[str | None, typer.Option(
        "--backend-settings", help="Kubernetes backend settings YAML: GPU resource, node "
        "selector and tolerations; in-place resize; DCGM metric names "
        "(planner/k8s/settings.py).")] = None,
    poolservice_fanout: Annotated[str, typer.Option(
        "--poolservice-fanout", help="on: run the PoolService fan-out (one PoolService per "
        "NodePool a LoadBalancer Service selects; docs/poolservice.md); off: leave it to "
        "OpenYurt's yurt-manager.")] = "on",
    haproxy_lb: Annotated[str | None, typer.Option(
        "--haproxy-lb", help="Settings YAML of the reference load balancer for PoolServices "
        "of class intent-planner.io/haproxy: one HAProxy per pool (runtime API, frontend "
        "address) (planner/k8s/poolservice_lb_settings.py, docs/poolservice-lb.md).")] = None,
) -> None:
    """Run the operator: plan every Intent in the cluster, act, and report status."""
    import logging
    import sys

    from planner.domain.admin import parse_admin
    from planner.domain.errors import SpecError
    from planner.k8s.operator import OperatorConfig, run
    from planner.k8s.poolservice_lb_settings import parse_lb_settings
    from planner.k8s.settings import parse_settings
    from planner.planners import registry as planner_registry

    if poolservice_fanout not in ("on", "off"):
        typer.echo(f"error: --poolservice-fanout {poolservice_fanout!r}: give on or off",
                   err=True)
        raise typer.Exit(code=2)
    if peering and standalone:
        typer.echo("error: --peering and --standalone exclude each other", err=True)
        raise typer.Exit(code=2)
    from planner.kpi.endpoints import EndpointPolicy

    try:
        EndpointPolicy.of(prometheus_url, allow_kpi_endpoint or ())
    except ValueError as exc:
        typer.echo(f"error: --prometheus-url/--allow-kpi-endpoint: {exc}; fix: give "
                   "http(s)://HOST[:PORT][/PATH] without user, query or fragment", err=True)
        raise typer.Exit(code=2) from None
    try:
        cfg = parse_admin(_one_doc(admin, "admin config"), admin or "")
        if planner:
            cfg = planner_registry.with_spec(cfg, planner, "--planner")
        planner_registry.check_admin(cfg)
        if not 0 < kpi_deadline <= cfg.cycle_s:
            raise SpecError("", "--kpi-deadline", f"{kpi_deadline:g} s is not within the "
                            f"cycle (0, {cfg.cycle_s:g} s]",
                            "give a positive number of seconds at most cycleSeconds")
        settings = parse_settings(_one_doc(backend_settings, "backend settings"),
                                  backend_settings or "")
        lb_settings = parse_lb_settings(_one_doc(haproxy_lb, "haproxy-lb settings"),
                                        haproxy_lb or "")
    except SpecError as exc:
        typer.echo(f"error: {exc.line()}", err=True)
        raise typer.Exit(code=2) from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(OperatorConfig(namespaces=tuple(namespace or ()), kb=kb, prometheus_url=prometheus_url,
                       kpi_endpoints=tuple(allow_kpi_endpoint or ()), kpi_deadline_s=kpi_deadline,
                       peering=peering, standalone=standalone, health_port=health_port,
                       admin=cfg, kubernetes=settings, haproxy_lb=lb_settings,
                       poolservice_fanout=poolservice_fanout == "on"))


def _one_doc(path: str | None, what: str) -> Any:
    """The one YAML document in ``path`` (``None``: no file, or an empty one)."""
    from planner.domain.safeload import LoadError, load_file

    if not path:
        return None
    docs = load_file(path)
    if len(docs) > 1:
        raise LoadError(path, "(document)", f"{len(docs)} YAML documents",
                        f"give the {what} as one document")
    return docs[0] if docs else None
