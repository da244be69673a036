"""Settings of the reference load balancer (``intent-planner operator --haproxy-lb FILE``).

One YAML document, checked strictly (an unknown key, a wrong type or a bad value is a
:class:`~planner.domain.errors.SpecError` naming the field and the fix)::

    enabled: true                  # false: the operator does not serve the class
    resyncSeconds: 5               # every PoolService of the class is reconciled this often
    backend: "{namespace}.{name}"  # the HAProxy backend of a Service (template: {namespace},
                                   # {name} of the Service, {pool})
    pools:                         # one HAProxy per pool, by NodePool name
      pool-a:
        runtimeAPI: 10.0.1.5:9999  # its runtime API (stats socket ... level admin): host:port
                                   # or the absolute path of a unix socket
        address: 203.0.113.10      # its frontend: an IP (ingress ip) or a DNS name (hostname)
        timeoutSeconds: 1          # per runtime-API command
      pool-b:
        runtimeAPI: /run/haproxy-b/admin.sock
        address: lb-b.example.com

The HAProxy of a pool must be configured with a frontend on ``address`` listening on the
Service's ports and a backend named as ``backend`` says (dynamic algorithm: ``roundrobin``
or ``leastconn``), with no static servers: the load balancer adds and removes them.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from actuators.dataplanes import haproxy_servers
from planner.domain.validation import validate_strict

_HOSTNAME = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
                       r"(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$")
TEMPLATE_FIELDS = ("namespace", "name", "pool")


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True,
                              allow_inf_nan=False)


class PoolHAProxy(_Cfg):
    """The HAProxy that serves one pool."""

    runtime_api: str = Field(min_length=1, alias="runtimeAPI")
    address: str = Field(min_length=1)
    timeout_s: float = Field(default=1.0, gt=0, le=30, alias="timeoutSeconds")

    @field_validator("runtime_api")
    @classmethod
    def _runtime_api(cls, v: str) -> str:
        if v.startswith("/"):
            return v
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise PydanticCustomError(
                "runtime_api", "'{value}' is neither host:port nor an absolute path",
                {"value": v, "fix": "give the stats socket as host:port (e.g. 10.0.1.5:9999) "
                                    "or an absolute unix socket path"})
        return v

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        try:
            ipaddress.ip_address(v)
        except ValueError:
            if not _HOSTNAME.match(v):
                raise PydanticCustomError(
                    "address", "'{value}' is neither an IP address nor a DNS name",
                    {"value": v, "fix": "give the frontend's IP (203.0.113.10) or DNS name "
                                        "(lb-a.example.com)"}) from None
        return v

    def parsed_runtime_api(self) -> tuple[str, int] | str:
        if self.runtime_api.startswith("/"):
            return self.runtime_api
        host, _, port = self.runtime_api.rpartition(":")
        return host.strip("[]"), int(port)

    def ingress(self, ports: list[dict[str, Any]]) -> dict[str, Any]:
        """This frontend as one ``status.loadBalancer.ingress`` entry."""
        try:
            ipaddress.ip_address(self.address)
            entry: dict[str, Any] = {"ip": self.address}
        except ValueError:
            entry = {"hostname": self.address}
        if ports:
            entry["ports"] = ports
        return entry


class HAProxyLBSettings(_Cfg):
    """See the module docstring."""

    enabled: bool = True
    resync_s: float = Field(default=5.0, gt=0, le=3600, alias="resyncSeconds")
    backend: str = "{namespace}.{name}"
    pools: dict[str, PoolHAProxy] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _backend(self) -> HAProxyLBSettings:
        try:
            rendered = self.backend_of("shop", "web", "pool-a")
        except (KeyError, IndexError, ValueError) as exc:
            raise PydanticCustomError(
                "template", "backend: bad template '{value}' ({problem})",
                {"value": self.backend, "problem": str(exc),
                 "fix": "use only {namespace}, {name} and {pool}"}) from None
        if not haproxy_servers.NAME.match(rendered):
            raise PydanticCustomError(
                "template", "backend: '{value}' renders to '{rendered}', not an HAProxy name",
                {"value": self.backend, "rendered": rendered,
                 "fix": "keep to letters, digits and _.:- around the fields"})
        return self

    def backend_of(self, namespace: str, name: str, pool: str) -> str:
        return self.backend.format(namespace=namespace, name=name, pool=pool)


DISABLED = HAProxyLBSettings(enabled=False)


def parse_lb_settings(doc: Any, source: str = "", prefix: str = "haproxyLB"
                      ) -> HAProxyLBSettings:
    """The settings of a document (``None`` or empty: disabled)."""
    if not doc:
        return DISABLED
    return validate_strict(HAProxyLBSettings, doc, source, prefix)
