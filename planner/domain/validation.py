"""Validate user documents strictly and turn pydantic's errors into one :class:`SpecError`
naming the field and the fix."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pydantic

from planner.domain.errors import SpecError
from planner.domain.safeload import check_data, short

M = TypeVar("M", bound=pydantic.BaseModel)


def field_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """Render a pydantic ``loc`` tuple as ``spec.objectives[0].value``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


_TYPE_FIX = {
    "float": "give a number",
    "int": "give a whole number",
    "bool": "give true or false (not 0, 1 or a string)",
    "string": "give a string (quote it)",
    "dict": "give a mapping",
    "model": "give a mapping",
    "list": "give a list",
    "tuple": "give a list",
}


def _type_fix(kind: str, given: Any) -> str:
    fix = _TYPE_FIX.get(kind.split("_")[0], f"give a {kind.split('_')[0]} value")
    if kind in ("float_type", "int_type") and isinstance(given, str):
        return fix + " without quotes"
    if kind in ("float_type", "int_type") and isinstance(given, bool):
        return fix + ", not true or false"
    if kind == "int_type" and isinstance(given, float):
        return fix + " (no decimal point or exponent)"
    return fix


def _num(bound: Any) -> str:
    if isinstance(bound, float):
        return str(int(bound)) if bound.is_integer() and abs(bound) < 1e15 else f"{bound:g}"
    return str(bound)


def _fix_for(err: Mapping[str, Any], allowed: Sequence[str]) -> str:
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if "fix" in ctx:   # a validator that knows the fix says it (PydanticCustomError)
        return str(ctx["fix"])
    if kind == "finite_number":
        return "give a finite number"
    if kind == "string_pattern_mismatch":
        return f"give a value matching {ctx.get('pattern', 'the documented pattern')}"
    if kind == "extra_forbidden":
        hint = f" (allowed here: {', '.join(sorted(allowed))})" if allowed else ""
        return f"remove this key or fix its spelling{hint}"
    if kind == "missing":
        return "add this required field"
    if kind in ("greater_than_equal", "greater_than"):
        bound = _num(ctx.get("ge", ctx.get("gt")))
        return f"use a value {'>=' if kind.endswith('equal') else '>'} {bound}"
    if kind in ("less_than_equal", "less_than"):
        bound = _num(ctx.get("le", ctx.get("lt")))
        return f"use a value {'<=' if kind.endswith('equal') else '<'} {bound}"
    if kind in ("enum", "literal_error"):
        return f"use one of {ctx.get('expected', 'the documented values')}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return _type_fix(kind, err.get("input"))
    if kind in ("too_short", "too_long"):
        return f"give between {ctx.get('min_length', 0)} and {ctx.get('max_length', 'any')} items"
    return "see the schema in crds/ or docs/"


def spec_error(
    exc: pydantic.ValidationError,
    source: str,
    prefix: str = "",
    allowed_keys: Mapping[str, Sequence[str]] | None = None,
) -> SpecError:
    """The first error of ``exc`` as a :class:`SpecError`."""
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    path = field_path(loc, prefix)
    parent = field_path([p for p in loc[:-1] if not isinstance(p, int)], prefix) if loc else prefix
    allowed = (allowed_keys or {}).get(parent, ())
    problem = str(err.get("msg", "invalid value"))
    if err.get("type") == "extra_forbidden":
        problem = "unknown key"
    elif "input" in err and err.get("type") != "missing":
        problem = f"{problem} (got {short(err['input'])})"
    return SpecError(source, path, problem, _fix_for(err, allowed))


def validate_strict(model: type[M], doc: Any, source: str = "", prefix: str = "",
                    allowed_keys: Mapping[str, Sequence[str]] | None = None) -> M:
    """``doc`` validated as the JSON a Kubernetes API server would take: plain, bounded data
    (:func:`planner.domain.safeload.check_data`) and strict types (no number given as a
    string, no 0 or 1 as a boolean, no 2.5 as an integer), as the CRDs' schemas enforce."""
    check_data(doc, source, prefix)
    try:
        return model.model_validate_json(json.dumps(doc), strict=True)
    except pydantic.ValidationError as exc:
        raise spec_error(exc, source, prefix, allowed_keys) from None
