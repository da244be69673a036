"""What the watch cache counts per resource type (read by :mod:`planner.k8s.cachemetrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass
class ResourceStats:
    """Counters of one resource type (summed over its namespaces)."""

    resource: str
    list_requests: int = 0
    watch_requests: int = 0
    upstream_bytes: int = 0
    upstream_objects: int = 0
    served_objects: int = 0
    served_bytes: int = 0
    relists: dict[str, int] = field(default_factory=dict)
    resumes: int = 0
    errors: int = 0
    objects: int = 0
    subscribers: int = 0
    ready: bool = False
    resource_version: str | None = None
    last_error: str | None = None

    @property
    def upstream_requests(self) -> int:
        return self.list_requests + self.watch_requests

    def merge(self, other: ResourceStats) -> ResourceStats:
        relists = dict(self.relists)
        for k, v in other.relists.items():
            relists[k] = relists.get(k, 0) + v
        return replace(
            self,
            list_requests=self.list_requests + other.list_requests,
            watch_requests=self.watch_requests + other.watch_requests,
            upstream_bytes=self.upstream_bytes + other.upstream_bytes,
            upstream_objects=self.upstream_objects + other.upstream_objects,
            served_objects=self.served_objects + other.served_objects,
            served_bytes=self.served_bytes + other.served_bytes,
            relists=relists, resumes=self.resumes + other.resumes,
            errors=self.errors + other.errors, objects=self.objects + other.objects,
            subscribers=self.subscribers + other.subscribers,
            ready=self.ready and other.ready,
            last_error=self.last_error or other.last_error)

    def as_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "list_requests": self.list_requests,
                "watch_requests": self.watch_requests, "upstream_bytes": self.upstream_bytes,
                "upstream_objects": self.upstream_objects,
                "served_objects": self.served_objects, "served_bytes": self.served_bytes,
                "relists": dict(self.relists), "resumes": self.resumes, "errors": self.errors,
                "objects": self.objects, "subscribers": self.subscribers, "ready": self.ready}
