"""The watch cache's counters as Prometheus metrics (read at scrape time, never duplicated).

=====================================================  ==========================================
``intent_planner_watch_upstream_requests_total``       list/watch requests sent to the API server
``intent_planner_watch_upstream_bytes_total``          bytes received from the API server
``intent_planner_watch_upstream_objects_total``        objects received (list items, watch events)
``intent_planner_watch_served_objects_total``          objects handed to consumers
``intent_planner_watch_served_bytes_total``            upstream size of the objects handed out
``intent_planner_watch_relists_total``                 lists by reason (initial, gone, error)
``intent_planner_watch_resumes_total``                 watches resumed from the last version
``intent_planner_watch_errors_total``                  failed list/watch requests
``intent_planner_watch_objects``                       objects in the cache
``intent_planner_watch_subscribers``                   open subscriptions
``intent_planner_watch_ready``                         1 once the initial list is in
=====================================================  ==========================================

Every metric has a ``resource`` label (the plural); requests also have ``verb``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from planner.k8s.cachestats import ResourceStats

PREFIX = "intent_planner_watch"


class CacheCollector(Collector):
    """Collects :class:`~planner.k8s.cachestats.ResourceStats` from ``stats()`` at scrape time."""

    def __init__(self, stats: Callable[[], Mapping[str, ResourceStats]]) -> None:
        self._stats = stats

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        stats = self._stats()
        requests = CounterMetricFamily(f"{PREFIX}_upstream_requests",
                                       "List and watch requests sent to the API server.",
                                       labels=["resource", "verb"])
        up_bytes = CounterMetricFamily(f"{PREFIX}_upstream_bytes",
                                       "Bytes received from the API server.", labels=["resource"])
        up_objects = CounterMetricFamily(f"{PREFIX}_upstream_objects",
                                         "Objects received from the API server.",
                                         labels=["resource"])
        served_objects = CounterMetricFamily(f"{PREFIX}_served_objects",
                                             "Objects handed to consumers of the cache.",
                                             labels=["resource"])
        served_bytes = CounterMetricFamily(
            f"{PREFIX}_served_bytes",
            "Upstream wire size of the objects handed to consumers (what they would have "
            "downloaded without the cache).", labels=["resource"])
        relists = CounterMetricFamily(f"{PREFIX}_relists", "Lists by reason.",
                                      labels=["resource", "reason"])
        resumes = CounterMetricFamily(f"{PREFIX}_resumes",
                                      "Watches resumed from the last resource version.",
                                      labels=["resource"])
        errors = CounterMetricFamily(f"{PREFIX}_errors", "Failed list or watch requests.",
                                     labels=["resource"])
        objects = GaugeMetricFamily(f"{PREFIX}_objects", "Objects in the cache.",
                                    labels=["resource"])
        subscribers = GaugeMetricFamily(f"{PREFIX}_subscribers", "Open subscriptions.",
                                        labels=["resource"])
        ready = GaugeMetricFamily(f"{PREFIX}_ready", "1 once the initial list is in.",
                                  labels=["resource"])
        for name, s in sorted(stats.items()):
            requests.add_metric([name, "list"], s.list_requests)
            requests.add_metric([name, "watch"], s.watch_requests)
            up_bytes.add_metric([name], s.upstream_bytes)
            up_objects.add_metric([name], s.upstream_objects)
            served_objects.add_metric([name], s.served_objects)
            served_bytes.add_metric([name], s.served_bytes)
            for reason, n in sorted(s.relists.items()):
                relists.add_metric([name, reason], n)
            resumes.add_metric([name], s.resumes)
            errors.add_metric([name], s.errors)
            objects.add_metric([name], s.objects)
            subscribers.add_metric([name], s.subscribers)
            ready.add_metric([name], 1.0 if s.ready else 0.0)
        return [requests, up_bytes, up_objects, served_objects, served_bytes, relists, resumes,
                errors, objects, subscribers, ready]
