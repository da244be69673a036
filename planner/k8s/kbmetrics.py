"""The knowledge base's write-queue counters as Prometheus metrics of the operator's
``/metrics`` (read at scrape time): the same gauge the REST API serves,
``intent_planner_knowledge_base_buffer{counter}`` (``buffered``, ``dropped``, ``unconfirmed``,
``flushed``, ``batches``, ``failures``... see :meth:`knowledge.resilient.
ResilientKnowledgeBase.counters`), and ``intent_planner_knowledge_base_healthy``."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from knowledge.base import KnowledgeBase


class KnowledgeBaseCollector(Collector):
    def __init__(self, knowledge: KnowledgeBase) -> None:
        self._knowledge = knowledge

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        counters = getattr(self._knowledge, "counters", None)
        if callable(counters):
            buf = GaugeMetricFamily("intent_planner_knowledge_base_buffer",
                                    "Knowledge-base write queue counters.", labels=["counter"])
            for name, value in counters().items():
                buf.add_metric([name], float(value))
            yield buf
        healthy = getattr(self._knowledge, "healthy", None)
        if isinstance(healthy, bool):
            yield GaugeMetricFamily("intent_planner_knowledge_base_healthy",
                                    "1 until a knowledge-base call fails, again after one "
                                    "succeeds.", value=1.0 if healthy else 0.0)


def registry(knowledge: KnowledgeBase) -> CollectorRegistry:
    """A registry holding the knowledge base's metrics (for the health server)."""
    reg = CollectorRegistry()
    reg.register(KnowledgeBaseCollector(knowledge))
    return reg
