"""Offline checks of the Kubernetes manifests: crds/, deploy/ and examples/k8s/.

* Every object validates against the Kubernetes OpenAPI schemas shipped by kubernetes-validate
  (strict: unknown fields are errors); custom resources validate against our CRDs.
* The CRD schemas are structural, their list-map keys, defaults, CEL rules and printer columns
  are well-formed.
* The CRD schemas and the pydantic models in ``planner.domain.intents`` agree: same spec fields,
types,
  required sets, defaults, enums and bounds; a table of bad documents is rejected by both with
  an error naming the field.
* RBAC is least privilege and the controller Deployment is hardened.

CEL rules are evaluated with cel-python (``celpy``) when it is installed; those tests are
skipped otherwise.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
import types
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal, NamedTuple, Union, get_args, get_origin

import annotated_types
import jsonschema
import kubernetes_validate
import pydantic
import pytest
import yaml

from planner.domain import errors, intents, validation

ROOT = Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "crds"
DEPLOY_DIR = ROOT / "deploy"
EXAMPLES_DIR = ROOT / "examples" / "k8s"

# A recent release that kubernetes-validate ships schemas for (CEL fieldPath/reason need 1.28+).
K8S_VERSION = "1.33.0"
# Applied on its own once its CRD is established; see the file's header.
NOT_IN_KUSTOMIZATION = {"kopf-peering-default.yaml"}
PLANNER_NAMESPACE = "intent-planner"

Doc = dict[str, Any]


# --------------------------------------------------------------------------------------------
# Loading


def load_docs(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def manifest_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")


OPENYURT_CRD_FILES = manifest_files(CRD_DIR / "openyurt")
"""Applied on their own, only on clusters without OpenYurt: not in deploy/'s kustomization."""
CRD_FILES = manifest_files(CRD_DIR) + OPENYURT_CRD_FILES
DEPLOY_FILES = manifest_files(DEPLOY_DIR)
EXAMPLE_FILES = sorted(EXAMPLES_DIR.glob("*.yaml"))


def all_docs(files: list[Path]) -> list[tuple[Path, int, Doc]]:
    return [(f, i, d) for f in files for i, d in enumerate(load_docs(f))]


def doc_id(item: tuple[Path, int, Doc]) -> str:
    path, i, doc = item
    return f"{path.relative_to(ROOT)}#{i}:{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


CRD_DOCS = [
    d
    for _, _, d in all_docs(CRD_FILES + DEPLOY_FILES)
    if d.get("kind") == "CustomResourceDefinition"
]


class CRDVersion(NamedTuple):
    crd: Doc
    version: Doc

    @property
    def schema(self) -> Doc:
        """The openAPIV3Schema as written."""
        schema: Doc = self.version["schema"]["openAPIV3Schema"]
        return schema

    @property
    def resource_schema(self) -> Doc:
        """The schema a whole resource is checked against: apiVersion, kind and metadata are
        always allowed at the root, whether the CRD lists them or not."""
        implicit = {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
        }
        return {**self.schema, "properties": implicit | self.schema.get("properties", {})}


def crd_registry() -> dict[tuple[str, str], CRDVersion]:
    """``(apiVersion, kind)`` -> the CRD version serving it."""
    out: dict[tuple[str, str], CRDVersion] = {}
    for crd in CRD_DOCS:
        spec = crd["spec"]
        for version in spec["versions"]:
            out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = CRDVersion(
                crd, version
            )
    return out


REGISTRY = crd_registry()
INTENT_CRD = REGISTRY[(intents.API_VERSION, "Intent")]
PROFILE_CRD = REGISTRY[(intents.API_VERSION, "KPIProfile")]


def example_doc(path: Path, kind: str, name: str) -> Doc:
    for doc in load_docs(path):
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise LookupError(f"{kind}/{name} not in {path}")


# --------------------------------------------------------------------------------------------
# Kubernetes structural schema -> JSON Schema (draft 2020-12)


def _list_map_keys(
    validator: Any, keys: list[str], instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """``x-kubernetes-list-type: map``: the key fields identify an item (duplicates rejected)."""
    if not validator.is_type(instance, "array"):
        return
    seen: dict[tuple[Any, ...], int] = {}
    for i, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        key = tuple(item.get(k) for k in keys)
        if key in seen:
            yield jsonschema.ValidationError(
                f"duplicate value {dict(zip(keys, key, strict=True))} (also item {seen[key]})",
                path=(i,),
            )
        else:
            seen[key] = i


K8sValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"x-kubernetes-list-map-keys": _list_map_keys}
)

_ANNOTATIONS = {"description", "default", "example", "externalDocs", "nullable", "title"}


def to_jsonschema(node: Mapping[str, Any], strict: bool = True) -> Doc:
    """Convert one OpenAPI v3 (Kubernetes flavour) schema node to JSON Schema 2020-12.

    ``nullable`` becomes a ``null`` type, boolean ``exclusiveMinimum/Maximum`` become numeric
    bounds, int-or-string becomes ``anyOf``, list-map keys keep a custom keyword, other
    ``x-kubernetes-*`` keys are dropped. ``strict`` models server-side field validation
    (``kubectl apply --validate=strict``, the default): unknown fields are errors, except
    under ``x-kubernetes-preserve-unknown-fields``.
    """
    out: Doc = {}
    for key, value in node.items():
        if key in _ANNOTATIONS or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {k: to_jsonschema(v, strict) for k, v in value.items()}
        elif key in ("items", "not"):
            out[key] = to_jsonschema(value, strict)
        elif key == "additionalProperties":
            out[key] = value if isinstance(value, bool) else to_jsonschema(value, strict)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_jsonschema(v, strict) for v in value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            continue
        else:
            out[key] = value
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if node.get(flag) is True and bound in out:
            out[flag] = out.pop(bound)
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("x-kubernetes-list-type") == "map":
        out["x-kubernetes-list-map-keys"] = list(node.get("x-kubernetes-list-map-keys", []))
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if strict and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def schema_errors(schema: Mapping[str, Any], doc: Any) -> list[jsonschema.ValidationError]:
    validator = K8sValidator(
        to_jsonschema(schema), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))


def error_fields(errs: list[jsonschema.ValidationError]) -> set[str]:
    """The dotted field paths the errors name (``spec.objectives[0].value``)."""
    out: set[str] = set()
    for e in errs:
        loc = list(e.absolute_path)
        if e.validator == "required" and isinstance(e.instance, dict):
            out |= {
                validation.field_path([*loc, k]) for k in e.validator_value if k not in e.instance
            }
        elif e.validator == "additionalProperties" and isinstance(e.instance, dict):
            known = set(e.schema.get("properties", {}))
            out |= {validation.field_path([*loc, k]) for k in e.instance if k not in known}
        else:
            out.add(validation.field_path(loc))
    return out


# --------------------------------------------------------------------------------------------
# CEL (x-kubernetes-validations), evaluated with cel-python when installed


def _celpy() -> Any:
    return pytest.importorskip("celpy", reason="pip install cel-python to evaluate CEL rules")


@functools.cache
def _cel_program(rule: str) -> Any:
    celpy = _celpy()
    env = celpy.Environment()
    return env.program(env.compile(rule))


def _typed(node: Mapping[str, Any], value: Any) -> Any:
    """The value as the API server hands it to CEL: numbers per schema type, unknown fields
    (preserve-unknown-fields) invisible."""
    kind = node.get("type")
    if value is None:
        return None
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "object" and isinstance(value, dict):
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props is not None:
            return {k: _typed(props[k], v) for k, v in value.items() if k in props}
        if isinstance(extra, Mapping):
            return {k: _typed(extra, v) for k, v in value.items()}
        return {}
    if kind == "array" and isinstance(value, list):
        return [_typed(node.get("items", {}), v) for v in value]
    return value


def cel_failures(node: Mapping[str, Any], value: Any, loc: str = "") -> list[tuple[str, str]]:
    """``(field, message)`` for each CEL rule the value breaks; transition rules are skipped."""
    celpy = _celpy()
    out: list[tuple[str, str]] = []
    if value is None:
        return out
    for rule in node.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue
        try:
            result = _cel_program(rule["rule"]).evaluate(
                {"self": celpy.json_to_cel(_typed(node, value))}
            )
            ok = isinstance(result, celpy.celtypes.BoolType) and bool(result)
        except celpy.CELEvalError:
            ok = False
        if not ok:
            out.append((loc + rule.get("fieldPath", ""), rule.get("message", rule["rule"])))
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            if key in value:
                out += cel_failures(sub, value[key], f"{loc}.{key}" if loc else key)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, item in value.items():
                out += cel_failures(extra, item, f"{loc}[{key}]")
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            out += cel_failures(node["items"], item, f"{loc}[{i}]")
    return out


def walk(node: Mapping[str, Any], loc: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node with its dotted path (array items share their array's path + [])."""
    yield loc or "(root)", node
    for key, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{loc}.{key}" if loc else key)
    if isinstance(node.get("items"), Mapping):
        yield from walk(node["items"], f"{loc}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from walk(node["additionalProperties"], f"{loc}{{}}")


# --------------------------------------------------------------------------------------------
# Every manifest validates


@pytest.mark.parametrize("item", all_docs(CRD_FILES + DEPLOY_FILES), ids=doc_id)
def test_manifest_validates(item: tuple[Path, int, Doc]) -> None:
    _, _, doc = item
    assert {"apiVersion", "kind", "metadata"} <= set(doc)
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        # Not a core kind: a custom resource of one of the CRDs shipped here.
        crd = REGISTRY.get((doc["apiVersion"], doc["kind"]))
        assert crd is not None, f"no schema for {doc['apiVersion']} {doc['kind']}"
        assert not schema_errors(crd.resource_schema, doc)
        if crd.crd["spec"]["scope"] == "Cluster":
            assert "namespace" not in doc["metadata"]
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(map(str, exc.path))
        pytest.fail(f"{where}: {exc.message}")


def test_every_directory_has_manifests() -> None:
    assert [p.name for p in CRD_FILES] == [
        "intents.intent-planner.io.yaml",
        "kpiprofiles.intent-planner.io.yaml",
        "nodepools.apps.openyurt.io.yaml",
        "poolservices.network.openyurt.io.yaml",
    ]
    names = {p.name for p in DEPLOY_FILES}
    assert {
        "namespace.yaml",
        "serviceaccount.yaml",
        "clusterrole.yaml",
        "clusterrolebinding.yaml",
        "deployment.yaml",
        "kopf-peering.yaml",
    } <= names
    assert {p.name for p in EXAMPLE_FILES} >= {"checkout.yaml", "shadow.yaml"}


# --------------------------------------------------------------------------------------------
# CRDs: structural, well-formed


def structural_problems(schema: Mapping[str, Any]) -> list[str]:
    scalar = {"string", "number", "integer", "boolean"}
    problems: list[str] = []
    for loc, node in walk(schema):
        kind = node.get("type")
        open_ = node.get("x-kubernetes-preserve-unknown-fields") is True
        if kind is None and not (open_ or node.get("x-kubernetes-int-or-string") is True):
            problems.append(f"{loc}: no type")
        if kind is not None and kind not in scalar | {"object", "array"}:
            problems.append(f"{loc}: unknown type {kind!r}")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{loc}: properties and additionalProperties are exclusive")
        if kind == "array" and not isinstance(node.get("items"), Mapping):
            problems.append(f"{loc}: array needs one items schema")
        for junctor in ("allOf", "anyOf", "oneOf", "not"):
            if junctor in node:
                problems.append(f"{loc}: {junctor} is not covered by these checks; avoid it")
        list_type = node.get("x-kubernetes-list-type")
        if list_type is not None and kind != "array":
            problems.append(f"{loc}: x-kubernetes-list-type on a non-array")
        keys = node.get("x-kubernetes-list-map-keys")
        if (list_type == "map") != (keys is not None):
            problems.append(f"{loc}: list-type map and list-map-keys go together")
        if keys:
            items = node.get("items", {})
            for key in keys:
                prop = items.get("properties", {}).get(key, {})
                if prop.get("type") not in scalar:
                    problems.append(f"{loc}: map key {key} must be a scalar property")
                if key not in items.get("required", []) and "default" not in prop:
                    problems.append(f"{loc}: map key {key} must be required or defaulted")
        for name in node.get("required", []):
            if name not in node.get("properties", {}):
                problems.append(f"{loc}: required {name} is not a property")
        if "default" in node and schema_errors(node, node["default"]):
            problems.append(f"{loc}: default {node['default']!r} breaks its own schema")
        untyped = {k: v for k, v in node.items() if k != "enum"}
        if any(schema_errors(untyped, v) for v in node.get("enum", [])):
            problems.append(f"{loc}: enum value of the wrong type")
    metadata = schema.get("properties", {}).get("metadata", {})
    restricted = set(metadata.get("properties", {}))
    if set(metadata) - {"type", "description", "properties"} or restricted - {
        "name",
        "generateName",
    }:
        problems.append("metadata: only name/generateName may be restricted")
    return problems


@pytest.mark.parametrize("key", sorted(REGISTRY), ids="/".join)
def test_crd_schema_is_structural(key: tuple[str, str]) -> None:
    assert structural_problems(REGISTRY[key].schema) == []


@pytest.mark.parametrize("crd", CRD_DOCS, ids=lambda d: d["metadata"]["name"])
def test_crd_names_and_versions(crd: Doc) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
    assert sum(1 for v in spec["versions"] if v["storage"]) == 1
    assert all(v["served"] for v in spec["versions"])


def _schema_at(schema: Mapping[str, Any], dotted: str) -> Mapping[str, Any] | None:
    node: Mapping[str, Any] | None = schema
    for part in dotted.strip(".").split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node


@pytest.mark.parametrize("key", sorted(REGISTRY), ids="/".join)
def test_cel_rules_well_formed(key: tuple[str, str]) -> None:
    reasons = {
        "FieldValueInvalid",
        "FieldValueForbidden",
        "FieldValueRequired",
        "FieldValueDuplicate",
    }
    for loc, node in walk(REGISTRY[key].schema):
        for rule in node.get("x-kubernetes-validations", []):
            assert rule.get("message") and "\n" not in rule["message"], loc
            assert rule.get("reason", "FieldValueInvalid") in reasons, loc
            if "fieldPath" in rule:
                assert _schema_at(node, rule["fieldPath"]) is not None, (loc, rule)


@pytest.mark.parametrize("key", sorted(REGISTRY), ids="/".join)
def test_cel_rules_compile(key: tuple[str, str]) -> None:
    _celpy()
    for _, node in walk(REGISTRY[key].schema):
        for rule in node.get("x-kubernetes-validations", []):
            _cel_program(rule["rule"])


@pytest.mark.parametrize("key", sorted(REGISTRY), ids="/".join)
def test_printer_columns_point_at_fields(key: tuple[str, str]) -> None:
    crd = REGISTRY[key]
    types_ = {
        "string": {"string"},
        "boolean": {"boolean"},
        "number": {"number", "integer"},
        "integer": {"integer"},
    }
    for column in crd.version.get("additionalPrinterColumns", []):
        path = column["jsonPath"]
        if path == ".metadata.creationTimestamp":
            assert column["type"] == "date"
            continue
        node = _schema_at(crd.schema, path)
        assert node is not None, f"{column['name']}: {path} is not in the schema"
        assert node["type"] in types_[column["type"]], column["name"]


def _columns(crd: CRDVersion) -> list[tuple[str, str]]:
    return [
        (c["name"], c["jsonPath"])
        for c in crd.version["additionalPrinterColumns"]
        if not c.get("priority")
    ]


def test_intent_crd_shape() -> None:
    crd = INTENT_CRD
    names = crd.crd["spec"]["names"]
    assert (crd.crd["spec"]["scope"], names["plural"], names["singular"]) == (
        "Namespaced",
        "intents",
        "intent",
    )
    assert names["shortNames"] == ["int"] and names["categories"] == ["intent-planner"]
    assert crd.version["subresources"] == {"status": {}}
    assert _columns(crd) == [
        ("Target", ".spec.targetRef.name"),
        ("Objectives Met", ".status.objectivesMet"),
        ("Last Action", ".status.lastAction"),
        ("Active", ".spec.active"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    status = crd.schema["properties"]["status"]["properties"]
    assert {
        "conditions",
        "observedGeneration",
        "objectivesMet",
        "lastAction",
        "currentObjectives",
        "desiredObjectives",
        "lastPlan",
    } <= set(status)
    condition = status["conditions"]["items"]["properties"]
    assert set(condition) == {
        "type",
        "status",
        "reason",
        "message",
        "observedGeneration",
        "lastTransitionTime",
    }
    assert condition["status"]["enum"] == ["True", "False", "Unknown"]
    plan = status["lastPlan"]["properties"]
    assert set(plan) == {"time", "planner", "reason", "target", "actions", "predicted"}
    assert (
        plan["actions"]["items"]["properties"]["params"]["x-kubernetes-preserve-unknown-fields"]
        is True
    )


def test_kpiprofile_crd_shape() -> None:
    crd = PROFILE_CRD
    names = crd.crd["spec"]["names"]
    assert (names["plural"], names["shortNames"], names["categories"]) == (
        "kpiprofiles",
        ["kpi"],
        ["intent-planner"],
    )
    assert crd.version["subresources"] == {"status": {}}
    assert _columns(crd) == [
        ("Type", ".spec.type"),
        ("Resolved", ".status.resolved"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    assert {"resolved", "reason", "query"} <= set(crd.schema["properties"]["status"]["properties"])


# --------------------------------------------------------------------------------------------
# CRD schema <-> pydantic model


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _facts_of_type(annotation: Any) -> Doc:
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is str:
        return {"type": "string"}
    if get_origin(annotation) is Literal:
        return {"type": "string", "enum": sorted(get_args(annotation))}
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return {"type": "string", "enum": sorted(m.value for m in annotation)}
    if get_origin(annotation) is list:
        return {"type": "array"}
    if get_origin(annotation) is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return {"type": "object"}
    raise TypeError(f"no CRD type for {annotation!r}")


_BOUNDS: dict[type, tuple[str, str]] = {
    annotated_types.Ge: ("ge", "ge"),
    annotated_types.Gt: ("gt", "gt"),
    annotated_types.Le: ("le", "le"),
    annotated_types.Lt: ("lt", "lt"),
    annotated_types.MinLen: ("min_len", "min_length"),
    annotated_types.MaxLen: ("max_len", "max_length"),
}


def model_facts(model: type[pydantic.BaseModel], prefix: str = "") -> dict[str, Doc]:
    """Dotted field path (YAML names; list items share the list's path) -> type facts."""
    out: dict[str, Doc] = {}
    for name, field in model.model_fields.items():
        path = f"{prefix}.{field.alias or name}" if prefix else (field.alias or name)
        annotation, _ = _strip_optional(field.annotation)
        facts = _facts_of_type(annotation)
        facts["required"] = field.is_required()
        if not field.is_required() and field.default_factory is None \
                and field.default is not None:
            default = field.default
            facts["default"] = default.value if isinstance(default, Enum) else default
        for meta in field.metadata:
            for cls, (key, attr) in _BOUNDS.items():
                if isinstance(meta, cls):
                    facts[key] = getattr(meta, attr)
        out[path] = facts
        inner = get_args(annotation)[0] if get_origin(annotation) is list else annotation
        if isinstance(inner, type) and issubclass(inner, pydantic.BaseModel):
            out.update(model_facts(inner, path))
    return out


def schema_facts(node: Mapping[str, Any], prefix: str = "") -> dict[str, Doc]:
    out: dict[str, Doc] = {}
    required = set(node.get("required", []))
    for name, sub in node.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        facts: Doc = {"type": sub["type"], "required": name in required}
        if "enum" in sub:
            facts["enum"] = sorted(sub["enum"])
        if "default" in sub:
            facts["default"] = sub["default"]
        if "minimum" in sub:
            facts["gt" if sub.get("exclusiveMinimum") else "ge"] = sub["minimum"]
        if "maximum" in sub:
            facts["lt" if sub.get("exclusiveMaximum") else "le"] = sub["maximum"]
        for src in ("minLength", "minItems"):
            if src in sub:
                facts["min_len"] = sub[src]
        for src in ("maxLength", "maxItems"):
            if src in sub:
                facts["max_len"] = sub[src]
        out[path] = facts
        out.update(schema_facts(sub.get("items", sub), path))
    return out


SPEC_PAIRS = [
    pytest.param(INTENT_CRD, intents.IntentSpec, id="Intent"),
    pytest.param(PROFILE_CRD, intents.KPIProfileSpec, id="KPIProfile"),
]


@pytest.mark.parametrize(("crd", "model"), SPEC_PAIRS)
def test_crd_and_model_have_the_same_spec_fields(
    crd: CRDVersion, model: type[pydantic.BaseModel]
) -> None:
    spec = crd.schema["properties"]["spec"]
    assert set(schema_facts(spec)) == set(model_facts(model))


@pytest.mark.parametrize(("crd", "model"), SPEC_PAIRS)
def test_crd_and_model_agree_on_types_bounds_and_defaults(
    crd: CRDVersion, model: type[pydantic.BaseModel]
) -> None:
    from_schema = schema_facts(crd.schema["properties"]["spec"])
    from_model = model_facts(model)
    for path in sorted(from_model):
        assert from_schema.get(path) == from_model[path], path


def test_crd_and_model_agree_on_top_level_fields() -> None:
    for crd, model in ((INTENT_CRD, intents.Intent), (PROFILE_CRD, intents.KPIProfile)):
        top = set(crd.schema["properties"])
        assert top == {f.alias or n for n, f in model.model_fields.items()}


# --------------------------------------------------------------------------------------------
# Examples


def _python_parse(doc: Doc) -> Any:
    if doc["kind"] == "Intent":
        return intents.parse_intent(doc)
    if doc["kind"] == "KPIProfile":
        return intents.parse_profile(doc)
    raise AssertionError(f"unexpected kind {doc['kind']}")


@pytest.mark.parametrize("item", all_docs(EXAMPLE_FILES), ids=doc_id)
def test_example_validates_against_crd(item: tuple[Path, int, Doc]) -> None:
    _, _, doc = item
    crd = REGISTRY[(doc["apiVersion"], doc["kind"])]
    assert not schema_errors(crd.resource_schema, doc)
    assert doc["metadata"].get("namespace"), "examples name their namespace"


@pytest.mark.parametrize("item", all_docs(EXAMPLE_FILES), ids=doc_id)
def test_example_passes_cel_rules(item: tuple[Path, int, Doc]) -> None:
    _, _, doc = item
    crd = REGISTRY[(doc["apiVersion"], doc["kind"])]
    assert cel_failures(crd.schema, doc) == []


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_example_loads_with_the_planner(path: Path) -> None:
    found, profiles = intents.load_manifests(path)
    assert found and profiles


def test_checkout_example() -> None:
    found, profiles = intents.load_manifests(EXAMPLES_DIR / "checkout.yaml")
    assert [i.key for i in found] == ["shop/checkout"]
    assert {p.spec.type for p in profiles} == {
        intents.KPIType.LATENCY,
        intents.KPIType.THROUGHPUT,
        intents.KPIType.AVAILABILITY,
    }
    by_key = {p.key: p for p in profiles}
    checkout = found[0]
    assert checkout.spec.active
    objectives = {
        by_key[o.profile_key("shop")].spec.type: (o, by_key[o.profile_key("shop")])
        for o in checkout.spec.objectives
    }
    latency, latency_profile = objectives[intents.KPIType.LATENCY]
    assert (latency.value, latency_profile.spec.latency_percentile) == (50, 95)
    assert latency_profile.spec.minimizes
    assert intents.objective_met(50.0, latency, latency_profile)
    assert not intents.objective_met(60.0, latency, latency_profile)
    availability, availability_profile = objectives[intents.KPIType.AVAILABILITY]
    assert availability.value == 0.999 and not availability_profile.spec.minimizes
    assert intents.objective_met(0.9995, availability, availability_profile)


def test_shadow_example_is_inactive() -> None:
    found, _ = intents.load_manifests(EXAMPLES_DIR / "shadow.yaml")
    assert found and all(not i.spec.active for i in found)


def test_status_shape_accepts_what_the_controller_writes() -> None:
    doc = copy.deepcopy(example_doc(EXAMPLES_DIR / "checkout.yaml", "Intent", "checkout"))
    doc["status"] = {
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Planned",
                "message": "",
                "observedGeneration": 3,
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            },
            {
                "type": "ObjectivesMet",
                "status": "False",
                "reason": "LatencyAboveTarget",
                "message": "p95latency 61 > 50",
                "observedGeneration": 3,
                "lastTransitionTime": "2025-01-01T00:00:00Z",
            },
        ],
        "objectivesMet": "1/2",
        "lastAction": "scale checkout 3 -> 4",
        "currentObjectives": {"p95latency": 61.2, "availability": None},
        "desiredObjectives": {"p95latency": 50, "availability": 0.999},
        "lastPlan": {
            "time": "2025-01-01T00:00:00Z",
            "planner": "grid",
            "reason": "latency",
            "actions": [
                {
                    "actuator": "scale",
                    "workload": "shop/checkout",
                    "params": {"replicas": 4, "nested": {"any": ["thing"]}},
                    "reason": "p95 61 ms > 50 ms",
                }
            ],
            "predicted": {"p95latency": 44.0},
        },
        "kopf": {"progress": {}},
    }
    assert not schema_errors(INTENT_CRD.resource_schema, doc)
    bad = copy.deepcopy(doc)
    bad["status"]["conditions"][0]["status"] = "Yes"
    bad["status"]["conditions"][1]["type"] = "Ready"
    assert error_fields(schema_errors(INTENT_CRD.resource_schema, bad)) == {
        "status.conditions[0].status",
        "status.conditions[1]",
    }
    profile = copy.deepcopy(
        example_doc(EXAMPLES_DIR / "checkout.yaml", "KPIProfile", "checkout-throughput")
    )
    profile["status"] = {"resolved": True, "reason": "QueryOK", "query": "sum(rate(x[1m]))"}
    assert not schema_errors(PROFILE_CRD.resource_schema, profile)


# --------------------------------------------------------------------------------------------
# Bad documents: rejected by the CRD (schema or CEL) and by planner.domain.intents, naming the field

DELETE = object()


def _intent() -> Doc:
    return copy.deepcopy(example_doc(EXAMPLES_DIR / "checkout.yaml", "Intent", "checkout"))


def _profile() -> Doc:
    return copy.deepcopy(
        example_doc(EXAMPLES_DIR / "checkout.yaml", "KPIProfile", "checkout-p95-latency")
    )


def _set(doc: Doc, path: tuple[str | int, ...], value: Any) -> Doc:
    node: Any = doc
    for part in path[:-1]:
        node = node[part]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def _six_objectives() -> list[Doc]:
    return [{"name": f"o{i}", "value": 1, "measuredBy": "checkout-p95-latency"} for i in range(6)]


class BadCase(NamedTuple):
    name: str
    make: Callable[[], Doc]
    field: str  # the field the CRD names
    by: Literal["schema", "cel"]  # which part of the CRD rejects it
    py_field: str | None = None  # the field planner.domain.intents names, if not `field`
    py_word: str | None = None  # then a word its message must contain


BAD_CASES = [
    BadCase(
        "missing targetRef",
        lambda: _set(_intent(), ("spec", "targetRef"), DELETE),
        "spec.targetRef",
        "schema",
    ),
    BadCase(
        "objective without value",
        lambda: _set(_intent(), ("spec", "objectives", 0, "value"), DELETE),
        "spec.objectives[0].value",
        "schema",
    ),
    BadCase(
        "objective without measuredBy",
        lambda: _set(_intent(), ("spec", "objectives", 1, "measuredBy"), DELETE),
        "spec.objectives[1].measuredBy",
        "schema",
    ),
    BadCase(
        "percentile 150",
        lambda: _set(_profile(), ("spec", "percentile"), 150),
        "spec.percentile",
        "schema",
    ),
    BadCase(
        "percentile 0",
        lambda: _set(_profile(), ("spec", "percentile"), 0),
        "spec.percentile",
        "schema",
    ),
    BadCase(
        "unknown targetRef kind",
        lambda: _set(_intent(), ("spec", "targetRef", "kind"), "CronJob"),
        "spec.targetRef.kind",
        "schema",
    ),
    BadCase(
        "empty targetRef name",
        lambda: _set(_intent(), ("spec", "targetRef", "name"), ""),
        "spec.targetRef.name",
        "schema",
    ),
    BadCase(
        "priority 0", lambda: _set(_intent(), ("spec", "priority"), 0), "spec.priority", "schema"
    ),
    BadCase(
        "priority above 1",
        lambda: _set(_intent(), ("spec", "priority"), 1.5),
        "spec.priority",
        "schema",
    ),
    BadCase(
        "6 objectives",
        lambda: _set(_intent(), ("spec", "objectives"), _six_objectives()),
        "spec.objectives",
        "schema",
    ),
    BadCase(
        "no objectives",
        lambda: _set(_intent(), ("spec", "objectives"), []),
        "spec.objectives",
        "schema",
    ),
    BadCase(
        "negative objective value",
        lambda: _set(_intent(), ("spec", "objectives", 0, "value"), -1),
        "spec.objectives[0].value",
        "schema",
    ),
    BadCase(
        "tolerance above 1",
        lambda: _set(_intent(), ("spec", "objectives", 1, "tolerance"), 1.5),
        "spec.objectives[1].tolerance",
        "schema",
    ),
    BadCase(
        "unknown key", lambda: _set(_intent(), ("spec", "colour"), "blue"), "spec.colour", "schema"
    ),
    BadCase(
        "unknown nested key",
        lambda: _set(_intent(), ("spec", "targetRef", "namespace"), "other"),
        "spec.targetRef.namespace",
        "schema",
    ),
    BadCase(
        "unknown key in profile",
        lambda: _set(_profile(), ("spec", "promql"), "up"),
        "spec.promql",
        "schema",
    ),
    BadCase(
        "unknown KPI type",
        lambda: _set(_profile(), ("spec", "type"), "memory"),
        "spec.type",
        "schema",
    ),
    BadCase(
        "profile without type",
        lambda: _set(_profile(), ("spec", "type"), DELETE),
        "spec.type",
        "schema",
    ),
    BadCase("empty query", lambda: _set(_profile(), ("spec", "query"), ""), "spec.query", "schema"),
    BadCase(
        "duplicate objective names",
        lambda: _set(_intent(), ("spec", "objectives", 1, "name"), "p95latency"),
        "spec.objectives[1]",
        "schema",
        py_field="spec.objectives",
        py_word="unique",
    ),
    BadCase(
        "percentile on a throughput profile",
        lambda: _set(_profile(), ("spec", "type"), "throughput"),
        "spec.percentile",
        "cel",
        py_field="spec.percentile",
        py_word="percentile",
    ),
]


@pytest.mark.parametrize("case", BAD_CASES, ids=lambda c: c.name)
def test_bad_document_rejected_by_planner(case: BadCase) -> None:
    with pytest.raises(errors.SpecError) as info:
        _python_parse(case.make())
    err = info.value
    assert err.field == (case.py_field or case.field), str(err)
    if case.py_word:
        assert case.py_word in err.problem, str(err)
    assert err.fix


@pytest.mark.parametrize("case", [c for c in BAD_CASES if c.by == "schema"], ids=lambda c: c.name)
def test_bad_document_rejected_by_crd_schema(case: BadCase) -> None:
    doc = case.make()
    crd = REGISTRY[(doc["apiVersion"], doc["kind"])]
    assert error_fields(schema_errors(crd.resource_schema, doc)) == {case.field}


@pytest.mark.parametrize("case", [c for c in BAD_CASES if c.by == "cel"], ids=lambda c: c.name)
def test_bad_document_rejected_by_crd_cel_rules(case: BadCase) -> None:
    doc = case.make()
    crd = REGISTRY[(doc["apiVersion"], doc["kind"])]
    assert not schema_errors(crd.resource_schema, doc), "the schema alone cannot express this rule"
    assert [field for field, _ in cel_failures(crd.schema, doc)] == [case.field]


def test_percentile_rule_allows_latency_and_absent_percentile() -> None:
    profile = _profile()
    assert cel_failures(PROFILE_CRD.schema, profile) == []
    _set(profile, ("spec", "percentile"), DELETE)
    _set(profile, ("spec", "type"), "throughput")
    assert cel_failures(PROFILE_CRD.schema, profile) == []
    intents.parse_profile(profile)


# --------------------------------------------------------------------------------------------
# deploy/: RBAC least privilege, hardened controller, kustomization


def deploy_objects() -> list[Doc]:
    return [d for _, _, d in all_docs(DEPLOY_FILES)]


def _one(kind: str, namespaced: bool | None = None) -> list[Doc]:
    found = [d for d in deploy_objects() if d["kind"] == kind]
    if namespaced is not None:
        found = [d for d in found if ("namespace" in d["metadata"]) == namespaced]
    return found


def allows(rules: list[Doc], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r.get("apiGroups", [])
        and resource in r.get("resources", [])
        and verb in r.get("verbs", [])
        for r in rules
    )


def test_namespaced_objects_live_in_the_planner_namespace() -> None:
    assert [d["metadata"]["name"] for d in _one("Namespace")] == [PLANNER_NAMESPACE]
    cluster_kinds = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "ClusterKopfPeering",
    }
    for doc in deploy_objects():
        if doc["kind"] in cluster_kinds:
            assert "namespace" not in doc["metadata"], doc["kind"]
        else:
            assert doc["metadata"].get("namespace") == PLANNER_NAMESPACE, doc["kind"]


def test_rbac_has_no_wildcards_or_dangerous_verbs() -> None:
    dangerous = {"delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
    for role in _one("ClusterRole") + _one("Role"):
        for rule in role["rules"]:
            assert "*" not in rule["apiGroups"] and "*" not in rule["resources"], rule
            assert not dangerous & set(rule["verbs"]), rule
            assert "secrets" not in rule["resources"], rule
            assert "resourceNames" not in rule or rule["resourceNames"], rule


def test_clusterrole_grants_what_the_controller_needs() -> None:
    (cluster_role,) = _one("ClusterRole")
    rules = cluster_role["rules"]
    read = [
        ("", "pods"),
        ("", "nodes"),
        ("", "services"),
        ("discovery.k8s.io", "endpointslices"),
        ("apps", "deployments"),
        ("apps", "statefulsets"),
        ("apps", "replicasets"),
        ("intent-planner.io", "intents"),
        ("intent-planner.io", "kpiprofiles"),
    ]
    for group, resource in read:
        for verb in ("get", "list", "watch"):
            assert allows(rules, group, resource, verb), (group, resource, verb)
    for resource in ("deployments/scale", "statefulsets/scale"):
        assert allows(rules, "apps", resource, "patch") and allows(
            rules, "apps", resource, "update"
        )
    assert allows(rules, "apps", "deployments", "patch")
    assert allows(rules, "apps", "statefulsets", "patch")  # resize/placement of StatefulSets
    for resource in ("intents/status", "kpiprofiles/status"):
        assert allows(rules, "intent-planner.io", resource, "patch")
    assert allows(rules, "", "events", "create")
    assert allows(rules, "kopf.dev", "clusterkopfpeerings", "patch")
    # ... and nothing beyond: no direct writes to replicasets/pods/nodes (pod deletion for
    # remove-pod is the opt-in deploy/optional/remove-pod-rbac.yaml), no updates of specs of
    # our CRs, no cluster-wide configmaps.
    for group, resource, verb in [
        ("apps", "replicasets", "patch"),
        ("", "pods", "patch"),
        ("", "nodes", "patch"),
        ("apps", "deployments", "update"),
        ("", "pods", "create"),
        ("intent-planner.io", "intents", "update"),
        ("", "configmaps", "get"),
    ]:
        assert not allows(rules, group, resource, verb), (group, resource, verb)


def test_rbac_resources_match_the_crds() -> None:
    plurals = {(c["spec"]["group"], c["spec"]["names"]["plural"]) for c in CRD_DOCS}
    (cluster_role,) = _one("ClusterRole")
    for rule in cluster_role["rules"]:
        for group in rule["apiGroups"]:
            if group in ("intent-planner.io", "kopf.dev"):
                for resource in rule["resources"]:
                    assert (group, resource.split("/")[0]) in plurals, resource


def test_role_grants_configmaps_in_the_planner_namespace_only() -> None:
    (role,) = _one("Role")
    assert role["metadata"]["namespace"] == PLANNER_NAMESPACE
    for verb in ("get", "create", "patch"):
        assert allows(role["rules"], "", "configmaps", verb)
    assert not allows(role["rules"], "", "configmaps", "delete")


def test_optional_canary_role_creates_and_deletes_deployments_only() -> None:
    docs = load_docs(DEPLOY_DIR / "optional" / "canary-rbac.yaml")
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    role, binding = docs
    assert role["rules"] == [{"apiGroups": ["apps"], "resources": ["deployments"],
                              "verbs": ["create", "delete"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (account,) = _one("ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_optional_poolservice_fanout_role_writes_only_what_the_fanout_needs() -> None:
    docs = load_docs(DEPLOY_DIR / "optional" / "poolservice-fanout-rbac.yaml")
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    role, binding = docs
    rules = role["rules"]
    for verb in ("get", "list", "watch", "create", "patch", "delete"):
        assert allows(rules, "network.openyurt.io", "poolservices", verb)
    for verb in ("get", "list", "watch"):
        assert allows(rules, "apps.openyurt.io", "nodepools", verb)
    assert allows(rules, "", "services", "patch") and allows(rules, "", "services/status",
                                                             "patch")
    for group, resource, verb in [("apps.openyurt.io", "nodepools", "patch"),
                                  ("", "services", "delete"), ("", "services", "create"),
                                  ("network.openyurt.io", "poolservices/status", "patch")]:
        assert not allows(rules, group, resource, verb), (group, resource, verb)
    plurals = {(c["spec"]["group"], c["spec"]["names"]["plural"]) for c in CRD_DOCS}
    for rule in rules:
        for group in rule["apiGroups"]:
            if group.endswith("openyurt.io"):
                for resource in rule["resources"]:
                    assert (group, resource.split("/")[0]) in plurals, resource
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    (account,) = _one("ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_bindings_tie_the_service_account_to_the_roles() -> None:
    (account,) = _one("ServiceAccount")
    subject = {
        "kind": "ServiceAccount",
        "name": account["metadata"]["name"],
        "namespace": account["metadata"]["namespace"],
    }
    roles = {(r["kind"], r["metadata"]["name"]) for r in _one("ClusterRole") + _one("Role")}
    bindings = _one("ClusterRoleBinding") + _one("RoleBinding")
    assert {b["roleRef"]["kind"] for b in bindings} == {"ClusterRole", "Role"}
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [subject]
        if binding["kind"] == "RoleBinding":
            assert binding["metadata"]["namespace"] == PLANNER_NAMESPACE


def test_controller_deployment_is_hardened() -> None:
    (deployment,) = _one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (account,) = _one("ServiceAccount")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["image"] == "intent-planner:latest"
    assert container["command"] == ["intent-planner", "operator"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == 8080
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert "/tmp" in mounts, "a writable /tmp on a read-only root filesystem"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def _kustomize_files(directory: Path) -> list[Path]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    out: list[Path] = []
    for resource in kustomization["resources"]:
        path = (directory / resource).resolve()
        assert path.exists(), resource
        out += _kustomize_files(path) if path.is_dir() else [path]
    return out


def test_kustomization_lists_crds_and_deploy_files() -> None:
    listed = {p.relative_to(ROOT) for p in _kustomize_files(DEPLOY_DIR)}
    expected = {
        p.relative_to(ROOT) for p in CRD_FILES + DEPLOY_FILES
        if p.name not in NOT_IN_KUSTOMIZATION and p not in OPENYURT_CRD_FILES
    }
    assert listed == expected


def test_openyurt_crds_are_their_own_kustomization() -> None:
    """``kubectl apply -k deploy/`` must not replace the CRDs of a cluster running OpenYurt."""
    assert set(_kustomize_files(CRD_DIR / "openyurt")) == set(OPENYURT_CRD_FILES)
    assert not set(_kustomize_files(DEPLOY_DIR)) & set(OPENYURT_CRD_FILES)


def test_kustomize_build_renders_every_object() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY_DIR)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    rendered = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out.stdout) if d}
    expected = {
        (d["kind"], d["metadata"]["name"])
        for p in CRD_FILES + DEPLOY_FILES
        if p.name not in NOT_IN_KUSTOMIZATION and p not in OPENYURT_CRD_FILES
        for d in load_docs(p)
    }
    assert rendered == expected
