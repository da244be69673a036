"""Which Prometheus servers a KPIProfile may name in ``spec.endpoint``.

A KPIProfile is written by a tenant; the operator runs its queries. Left open, ``spec.endpoint``
would make the operator send requests to any address a tenant writes (a request forgery from
inside the cluster). :class:`EndpointPolicy` allows only the operator's own Prometheus and the
servers the admin lists (``intent-planner operator --allow-kpi-endpoint URL``, repeatable).

URLs are compared after normalisation: scheme and host in lower case, the default port made
explicit, no trailing ``/``, no ``/api/v1/query`` suffix (the IDO-style form). A URL with user
information, a query or a fragment is never allowed: an admin lists plain server roots.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

QUERY_PATH = "/api/v1/query"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class EndpointRefused(ValueError):
    """An endpoint that is not allowed (or not a plain http(s) URL); ``str()`` says why."""


def base_url(url: str) -> str:
    """``url`` without surrounding blanks, trailing ``/`` and ``/api/v1/query``."""
    url = url.strip().rstrip("/")
    if url.endswith(QUERY_PATH):
        url = url[: -len(QUERY_PATH)].rstrip("/")
    return url


def normalise(url: str) -> str:
    """The comparable form of a Prometheus base URL; :class:`EndpointRefused` if it is not a
    plain ``http(s)://host[:port][/path]``."""
    try:
        parts = urllib.parse.urlsplit(base_url(url))
        port = parts.port
    except ValueError as exc:
        raise EndpointRefused(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise EndpointRefused("not an http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("user information in the URL is not allowed")
    if parts.query or parts.fragment:
        raise EndpointRefused("a query or fragment in the URL is not allowed")
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or _DEFAULT_PORTS[scheme]}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class EndpointPolicy:
    """The operator's Prometheus (``default``) plus the admin's allow-list (``allowed``)."""

    default: str
    allowed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for url in (self.default, *self.allowed):
            try:
                normalise(url)
            except EndpointRefused as exc:
                raise ValueError(f"KPI endpoint {url!r}: {exc}") from None

    @classmethod
    def of(cls, default: str, allowed: Iterable[str] = ()) -> EndpointPolicy:
        return cls(base_url(default), tuple(base_url(u) for u in allowed))

    def resolve(self, endpoint: str | None) -> str:
        """The base URL to query for a profile's ``spec.endpoint`` (``None``: the default).

        Raises :class:`EndpointRefused` for an endpoint that is neither the default nor on the
        allow-list; nothing is sent to it.
        """
        if endpoint is None:
            return self.default
        wanted = normalise(endpoint)
        for url in (self.default, *self.allowed):
            if normalise(url) == wanted:
                return url
        raise EndpointRefused(
            "spec.endpoint names a server that is neither the operator's Prometheus nor on "
            "the admin's allow-list; fix: remove spec.endpoint to use the operator's "
            "Prometheus, or ask the admin to allow it (--allow-kpi-endpoint)")
