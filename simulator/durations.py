"""Durations as users write them: ``90``, ``"90s"``, ``"15m"``, ``"2h"``, ``"1d"``."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: float | int | str) -> float:
    """Seconds in ``value``; raise ValueError with the accepted forms otherwise."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30, '30s', '15m', '2h'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("durations cannot be negative")
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 30, '30s', '15m', '2h'")
    m = _RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a duration; use e.g. 30, '30s', '15m', '2h', '1d'")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]
