"""API settings, from the environment (prefix ``INTENT_PLANNER_``) or from arguments.

========================================  ==========================================================
``INTENT_PLANNER_API_TOKENS``             comma-separated bearer tokens that are accepted
``INTENT_PLANNER_API_TOKENS_FILE``        a file with one token per line (e.g. a Docker secret)
``INTENT_PLANNER_AUTH``                   ``true`` (default): protected endpoints need a token
``INTENT_PLANNER_AUTH_READS``             ``true`` (default): the ``GET /v1/...`` endpoints too
``INTENT_PLANNER_MAX_BODY_BYTES``         largest request body accepted (default 64 KiB) -> 413
``INTENT_PLANNER_PREVIEW_TIMEOUT_S``      time limit of one plan preview (default 10 s) -> 504
``INTENT_PLANNER_PREVIEW_WORKERS``        previews computed at the same time (default 2)
``INTENT_PLANNER_CLIENT_TIMEOUT_S``       time a client has to send a request head, and again its
                                          body (default 10 s): the connection is closed, -> 408
``INTENT_PLANNER_KB``                     knowledge base URI (``memory`` or ``mongodb://...``)
``INTENT_PLANNER_SCENARIO``               scenario of the embedded simulator (``serve``)
``INTENT_PLANNER_PLANNER``                planner override for the embedded simulator (``serve``)
``INTENT_PLANNER_WARMUP_S``               simulated seconds ``serve`` runs before it serves
``INTENT_PLANNER_HOST`` / ``_PORT``       where the API listens (default 127.0.0.1:8080)
========================================  ==========================================================

``/healthz``, ``/readyz`` and ``/metrics`` are always open (probes and Prometheus).
With ``auth`` on and no token configured every protected endpoint answers 401: the API fails
closed; the CLI generates a random token and prints it in that case.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from planner.domain.errors import SpecError

DEFAULT_SCENARIO = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / \
    "diurnal-shop.yaml"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENT_PLANNER_", extra="ignore",
                                      frozen=True)

    api_tokens: Annotated[tuple[str, ...], NoDecode] = ()
    api_tokens_file: Path | None = None
    auth: bool = True
    auth_reads: bool = True
    max_body_bytes: int = Field(default=64 * 1024, ge=1024, le=64 * 1024 * 1024)
    preview_timeout_s: float = Field(default=10.0, gt=0, le=600)
    preview_workers: int = Field(default=2, ge=1, le=32)
    client_timeout_s: float = Field(default=10.0, gt=0, le=600)
    kb: str = "memory"
    scenario: Path = DEFAULT_SCENARIO
    planner: str | None = None
    warmup_s: float = Field(default=600.0, ge=0)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)

    @field_validator("api_tokens", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(t.strip() for t in v.split(",") if t.strip())
        return v

    def tokens(self) -> frozenset[str]:
        """Every accepted token: ``api_tokens`` plus the lines of ``api_tokens_file``."""
        out = set(self.api_tokens)
        if self.api_tokens_file is not None:
            try:
                text = self.api_tokens_file.read_text()
            except OSError as exc:
                raise SpecError("", "INTENT_PLANNER_API_TOKENS_FILE", str(exc),
                                "give a readable file with one token per line") from None
            out.update(line.strip() for line in text.splitlines()
                       if line.strip() and not line.lstrip().startswith("#"))
        return frozenset(out)
