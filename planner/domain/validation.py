"""Turn pydantic validation errors into one :class:`SpecError` naming the field and the fix."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from planner.domain.errors import SpecError


def field_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """Render a pydantic ``loc`` tuple as ``spec.objectives[0].value``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(document)"


def _fix_for(err: Mapping[str, Any], allowed: Sequence[str]) -> str:
    kind = str(err.get("type", ""))
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        hint = f" (allowed here: {', '.join(sorted(allowed))})" if allowed else ""
        return f"remove this key or fix its spelling{hint}"
    if kind == "missing":
        return "add this required field"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        return f"use a value {'>=' if kind.endswith('equal') else '>'} {bound}"
    if kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        return f"use a value {'<=' if kind.endswith('equal') else '<'} {bound}"
    if kind in ("enum", "literal_error"):
        return f"use one of {ctx.get('expected', 'the documented values')}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"give a {kind.split('_')[0]} value"
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
        problem = f"{problem} (got {err['input']!r})"
    return SpecError(source, path, problem, _fix_for(err, allowed))
