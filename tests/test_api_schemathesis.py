"""Schemathesis against the API's own OpenAPI document, bounded: no 5xx, and every response
matches the schema (status code documented, content type, body, headers)."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from planner.api.app import create_app
from planner.api.settings import Settings
from planner.cli.embedded import serve_runtime

SHOP = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "diurnal-shop.yaml"
TOKEN = "schemathesis-token"


# The runtime is built by the app's lifespan (the ``serve`` path): the scenario's simulated
# cluster, warmed up for 12 simulated minutes (learned models, events, statuses), then held
# still. Schemathesis starts the lifespan on the first call and keeps it for the session.
APP = create_app(Settings(api_tokens=(TOKEN,), scenario=SHOP, planner="grid", kb="memory",
                          warmup_s=12 * 60, preview_timeout_s=20.0),
                 runtime_factory=serve_runtime)
schema = schemathesis.openapi.from_dict(APP.openapi())
schema.app = APP


@schema.auth()
class BearerToken:
    """Every case carries the token (schemathesis then does not mutate the header)."""

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        return TOKEN

    def set(self, case: schemathesis.Case, data: str,
            context: schemathesis.AuthContext) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture
def app() -> FastAPI:
    return APP


@schema.parametrize()
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    excluded = []
    if case.operation.path == "/v1/plans:preview":
        # A schema-valid Intent may still be refused with a 422 naming the field: its
        # objectives must reference existing KPIProfiles and it must target an existing
        # workload, which no schema can say. Every other check applies.
        excluded.append(positive_data_acceptance)
    case.call_and_validate(excluded_checks=excluded)


def test_openapi_document_has_examples(app: FastAPI) -> None:
    doc = app.openapi()
    op = doc["paths"]["/v1/plans:preview"]["post"]
    examples = op["requestBody"]["content"]["application/json"]["examples"]
    assert {"inline", "by-name-what-if"} <= set(examples)
    assert {"401", "404", "413", "422", "504"} <= set(op["responses"])
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for path, ops in doc["paths"].items():
        for method, spec in ops.items():
            ok = spec["responses"].get("200", {})
            assert ok.get("content"), f"{method.upper()} {path}: no response schema"
