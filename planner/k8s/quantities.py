"""Kubernetes quantities, timestamps and label selectors, as the backend needs them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
           "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
           "P": Decimal("1e15"), "E": Decimal("1e18"),
           "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
           "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity(value: Any) -> float:
    """``"500m"`` -> 0.5, ``"2"`` -> 2.0, ``"1Gi"`` -> 1073741824.0; ``ValueError`` otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        return float(Decimal(m.group(1)) * _SUFFIX[m.group(2) or ""])
    except InvalidOperation:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from None


def cpu_quantity(cores: float) -> str:
    """Cores as a CPU quantity: whole cores plain (``"2"``), otherwise millicores (``"250m"``)."""
    milli = round(cores * 1000)
    if milli <= 0:
        raise ValueError(f"cpu must be > 0, got {cores!r}")
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; ``None`` if absent or malformed."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a ``LabelSelector`` (matchLabels and matchExpressions).

    An empty selector matches nothing here (a workload without a selector owns no pods).
    """
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or ()
    if not match_labels and not expressions:
        return False
    for k, v in match_labels.items():
        if labels.get(k) != v:
            return False
    for expr in expressions:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or ()
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
