"""Raw list and watch requests for the watch cache.

:class:`Transport` is what the cache needs from the API server: one ``GET`` returning a list
body, and one streaming ``GET ?watch=true`` returning JSON lines. :class:`ApiClientTransport`
does both through the official client's :class:`kubernetes.client.ApiClient` (so kubeconfig,
in-cluster service-account tokens and TLS settings are the client's), skipping its model
deserialisation: the cache parses the JSON itself and keeps only a projection. Tests can inject
any other :class:`Transport`.

Errors: an HTTP error status raises :class:`UpstreamError` with the ``Status`` reason and
message (:class:`Gone` for 410); no answer at all (connection refused or reset, timeout, TLS)
raises :class:`UpstreamError` with ``status=None``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException


class UpstreamError(Exception):
    """The API server answered with an error (``status``) or did not answer (``None``)."""

    def __init__(self, status: int | None, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        where = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{where} {reason}: {message}".strip())


class Gone(UpstreamError):
    """410 Gone: the resource version is too old (compacted); list again."""


def error_from(status: int, body: bytes | str | None) -> UpstreamError:
    """An :class:`UpstreamError` from an error response and its ``Status`` body."""
    reason, message = "", ""
    try:
        data = json.loads(body or b"")
        if isinstance(data, Mapping):
            reason = str(data.get("reason") or "")
            message = str(data.get("message") or "")
    except ValueError:
        message = (body.decode(errors="replace") if isinstance(body, bytes) else str(body))[:300]
    cls = Gone if status == 410 else UpstreamError
    return cls(status, reason, message)


class WatchStream(ABC):
    """An open watch response: iterate raw JSON lines; :meth:`close` from any thread."""

    @abstractmethod
    def __iter__(self) -> Iterator[bytes]: ...

    @abstractmethod
    def close(self) -> None: ...


class Transport(ABC):
    """List and watch over HTTP. Implementations must be thread-safe."""

    @abstractmethod
    def list(self, path: str, params: Mapping[str, str], timeout: float) -> bytes:
        """The body of ``GET path?params``; :class:`UpstreamError` on failure."""

    @abstractmethod
    def watch(self, path: str, params: Mapping[str, str], timeout: float) -> WatchStream:
        """An open ``GET path?watch=true&params`` stream; ``timeout`` bounds each read."""


class _Urllib3Stream(WatchStream):
    def __init__(self, resp: urllib3.HTTPResponse) -> None:
        self._resp = resp
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        buf = b""
        try:
            for chunk in self._resp.stream(amt=None, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield line + b"\n"
            if buf.strip():
                yield buf
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self._closed:
                return
            raise UpstreamError(None, type(exc).__name__, str(exc)) from None

    def close(self) -> None:
        self._closed = True
        try:
            shutdown = getattr(self._resp, "shutdown", None)
            if callable(shutdown):
                shutdown()
            self._resp.release_conn()
        except Exception:  # closing a dead connection must not fail
            pass


class ApiClientTransport(Transport):
    """:class:`Transport` over an official-client :class:`ApiClient` (raw HTTP, no models)."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client

    def _get(self, path: str, params: Mapping[str, str], timeout: Any) -> urllib3.HTTPResponse:
        method, url, headers, _body, _post = self.api_client.param_serialize(
            "GET", path, query_params=list(params.items()),
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        try:
            rest = self.api_client.call_api(method, url, headers, _request_timeout=timeout)
        except ApiException as exc:
            raise UpstreamError(exc.status or None, str(exc.reason or "ApiException"),
                                str(exc.body or "")) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UpstreamError(None, type(exc).__name__, str(exc)) from None
        resp: urllib3.HTTPResponse = rest.response
        if not 200 <= resp.status <= 299:
            try:
                body = resp.data
            except (urllib3.exceptions.HTTPError, OSError):
                body = b""
            finally:
                resp.release_conn()
            raise error_from(resp.status, body)
        return resp

    def list(self, path: str, params: Mapping[str, str], timeout: float) -> bytes:
        resp = self._get(path, params, timeout)
        try:
            return bytes(resp.data)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise UpstreamError(None, type(exc).__name__, str(exc)) from None
        finally:
            resp.release_conn()

    def watch(self, path: str, params: Mapping[str, str], timeout: float) -> WatchStream:
        resp = self._get(path, {**params, "watch": "true"}, (min(timeout, 30.0), timeout))
        return _Urllib3Stream(resp)
