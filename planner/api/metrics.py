"""Prometheus metrics of the API and the controller, in a registry of their own (one per app,
so that several apps in one process - tests - do not collide)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.api.runtime import Runtime
from planner.control.outcome import IntentOutcome
from planner.domain.state import ClusterSnapshot

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)
PREVIEW_OUTCOMES = ("ok", "invalid", "not_found", "timeout", "unavailable", "error")


class _RuntimeCollector(Collector):
    """Values read from the runtime at scrape time."""

    def __init__(self, runtime: Callable[[], Runtime | None],
                 kb_check: Callable[[], tuple[bool, str]]) -> None:
        self._runtime = runtime
        self._kb_check = kb_check

    def collect(self) -> Iterator[Metric]:
        rt = self._runtime()
        cycles = CounterMetricFamily("intent_planner_cycles",
                                     "Controller cycles completed.")
        kb_up = GaugeMetricFamily("intent_planner_knowledge_base_up",
                                  "1 if the knowledge base answers, else 0.")
        intents = GaugeMetricFamily("intent_planner_intents",
                                    "Intents the controller's last cycle reconciled.")
        if rt is not None:
            cycles.add_metric([], float(rt.cycles))
            ok, _ = self._kb_check()
            kb_up.add_metric([], 1.0 if ok else 0.0)
            # From the last cycle: a scrape must not re-list (and re-parse) every intent.
            intents.add_metric([], float(rt.controller.intents_seen))
            counters = getattr(rt.knowledge, "counters", None)
            if callable(counters):
                buf = GaugeMetricFamily("intent_planner_knowledge_base_buffer",
                                        "Knowledge-base write buffer counters.",
                                        labels=["counter"])
                for name, value in counters().items():
                    buf.add_metric([name], float(value))
                yield buf
        yield cycles
        yield kb_up
        yield intents

    def describe(self) -> Iterable[Metric]:
        return []


@dataclass
class ApiMetrics:
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(
        auto_describe=True))
    plan_latency: Histogram = field(init=False)
    previews: Counter = field(init=False)
    auth_failures: Counter = field(init=False)

    def __post_init__(self) -> None:
        self.plan_latency = Histogram(
            "intent_planner_plan_latency_seconds",
            "Planning time of one intent (source=cycle: the controller; preview: the API).",
            ["source"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.previews = Counter("intent_planner_preview_requests",
                                "Plan preview requests by outcome.", ["outcome"],
                                registry=self.registry)
        for outcome in PREVIEW_OUTCOMES:
            self.previews.labels(outcome)
        self.auth_failures = Counter("intent_planner_api_auth_failures",
                                     "Requests refused for a missing or wrong token.",
                                     registry=self.registry)

    def watch(self, runtime: Callable[[], Runtime | None],
              kb_check: Callable[[], tuple[bool, str]]) -> None:
        self.registry.register(_RuntimeCollector(runtime, kb_check))

    def cycle_hook(self, snapshot: ClusterSnapshot, outcomes: list[IntentOutcome]) -> None:
        """A controller hook: observe the planning time of every plan of the cycle."""
        for o in outcomes:
            if o.plan is not None:
                self.plan_latency.labels("cycle").observe(o.plan.planning_ms / 1000.0)
