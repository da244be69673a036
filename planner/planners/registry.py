"""The planner registry (entry-point group ``intent_planner.planners``; built-ins are declared
in the project's ``pyproject.toml`` like any third party's, see :mod:`planner.domain.plugins`).

A planner is configured by the admin's ``plannerOptions.<name>`` (validated here against the
planner's :attr:`~planner.planners.base.Planner.options`). On the command line and in benches a
planner *spec* ``name@value`` sets the planner's shorthand option (``hpa@60``: HPA at 60 % CPU);
:func:`parse_spec` is the one place that syntax is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from planner.domain.admin import AdminConfig
from planner.domain.errors import SpecError
from planner.domain.plugins import Registry
from planner.domain.validation import spec_error
from planner.planners.base import Planner, PlannerOptions

ENTRY_POINT_GROUP = "intent_planner.planners"
REGISTRY: Registry[Planner] = Registry(ENTRY_POINT_GROUP, Planner, "planner")
register_planner = REGISTRY.register
available = REGISTRY.available
SPEC_SEPARATOR = "@"


def create(name: str, options: Mapping[str, Any] | None = None) -> Planner:
    """A new instance of the planner ``name`` configured by ``options`` (its
    ``plannerOptions`` entry); an unknown name or a bad option is a :class:`SpecError`."""
    cls = REGISTRY.get(name, "planner", "admin")
    validated = _validate(cls, name, options or {})
    try:
        return cls.from_options(validated)
    except (ValueError, TypeError) as exc:
        raise SpecError("admin", f"plannerOptions.{name}", str(exc),
                        "see the planner's documentation") from None


def _validate(cls: type[Planner], name: str, options: Mapping[str, Any]) -> PlannerOptions:
    prefix = f"plannerOptions.{name}"
    model = cls.options
    try:
        return model.model_validate(dict(options))
    except pydantic.ValidationError as exc:
        keys = [f.alias or n for n, f in model.model_fields.items()]
        if not keys:
            raise SpecError("admin", prefix, f"planner {name!r} takes no options",
                            f"remove {prefix}") from None
        raise spec_error(exc, "admin", prefix, {prefix: keys}) from None


def options_for(admin: AdminConfig, name: str) -> dict[str, Any]:
    """The admin's options of planner ``name`` (empty when none are set)."""
    return dict(admin.planner_options.get(name) or {})


def create_for(admin: AdminConfig, name: str) -> Planner:
    """The planner ``name`` as the admin configured it."""
    return create(name, options_for(admin, name))


def check_admin(admin: AdminConfig) -> None:
    """Every planner the admin names, and every ``plannerOptions`` entry, must create."""
    names = {admin.planner, *admin.planners_by_namespace.values(), *admin.planner_options}
    for name in sorted(names):
        create_for(admin, name)


def parse_spec(spec: str, field: str = "planner") -> tuple[str, dict[str, Any]]:
    """``name`` or ``name@value`` as (planner name, options). ``value`` sets the planner's
    shorthand option; the result is checked by creating the planner, and an error names
    ``field`` (the command-line option the spec came from)."""
    name, sep, value = spec.partition(SPEC_SEPARATOR)
    cls = REGISTRY.get(name, field)
    if not sep:
        return name, {}
    if cls.shorthand is None:
        raise SpecError("", field, f"planner {name!r} takes no {SPEC_SEPARATOR}value",
                        f"give the plain name {name!r}")
    if not value:
        raise SpecError("", field, f"{spec!r} has no value after {SPEC_SEPARATOR!r}",
                        f"give e.g. {name}{SPEC_SEPARATOR}60 ({cls.shorthand})")
    try:
        validated = _validate(cls, name, {cls.shorthand: value})
        create(name, validated.model_dump(by_alias=True, exclude_unset=True))
    except SpecError as exc:
        raise SpecError("", field, f"{spec!r}: {exc.field}: {exc.problem}",
                        f"{exc.fix} after {SPEC_SEPARATOR!r}") from None
    return name, validated.model_dump(by_alias=True, exclude_unset=True)


def with_spec(admin: AdminConfig, spec: str, field: str = "planner") -> AdminConfig:
    """``admin`` with the planner of ``spec`` as its planner; the spec's option overrides the
    same option in ``plannerOptions``."""
    name, options = parse_spec(spec, field)
    update: dict[str, Any] = {"planner": name}
    if options:
        update["planner_options"] = {**admin.planner_options,
                                     name: {**options_for(admin, name), **options}}
    return admin.model_copy(update=update)
