"""Safe (de)serialisation of effect models: JSON, never pickle.

A model is stored as its class name (from an allowlist), its constructor parameters and its
fitted attributes (numbers and arrays of numbers). Loading looks the class up in the allowlist,
checks every parameter and attribute against what the class declares, and sets them: no code
named by the document is ever imported or run. Anything else is refused with a reason.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from planner.domain.errors import PermanentError
from planner.models.availability import AvailabilityRegressor
from planner.models.latency import QueueingLatencyRegressor

FORMAT = "intent-planner/estimator-json"
FORMAT_VERSION = 3
"""2: latency models learn per-node-class speeds and a dispatch exponent; 3: and note the node
classes each device ran on."""

# class name -> (class, fitted attribute -> kind); kinds: float, int, bool, array, list
ALLOWED: dict[str, tuple[type[BaseEstimator], dict[str, str]]] = {
    "QueueingLatencyRegressor": (QueueingLatencyRegressor, {
        "theta_": "array", "bootstrap_thetas_": "array", "residual_scale_": "float",
        "n_samples_": "int", "n_classes_": "int", "share_columns_": "int", "seen_gpu_": "bool",
        "seen_cpu_device_": "bool", "seen_classes_": "list", "cpu_range_": "list",
        "cpu_sizes_": "list", "cpu_classes_": "list", "gpu_classes_": "list",
    }),
    "AvailabilityRegressor": (AvailabilityRegressor, {
        "loss_": "array", "spread_": "array", "counts_": "array", "n_samples_": "int",
    }),
}


class ModelRefused(PermanentError):
    """A stored model document cannot be used; ``str()`` says why."""


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        out = {"__array__": value.tolist(), "dtype": str(value.dtype)}
        if value.size == 0:  # a nested list cannot say (0, 9) from (0,)
            out["shape"] = list(value.shape)
        return out
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def dumps(model: BaseEstimator) -> bytes:
    name = type(model).__name__
    if name not in ALLOWED or ALLOWED[name][0] is not type(model):
        raise ModelRefused(f"{name} is not a serialisable effect model")
    fitted = {k: _plain(getattr(model, k)) for k in ALLOWED[name][1]}
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "class": name,
           "params": model.get_params(deep=False), "fitted": fitted}
    return json.dumps(doc, allow_nan=True, separators=(",", ":")).encode()


def _check_number(key: str, v: Any, kind: str) -> Any:
    if kind == "bool":
        if not isinstance(v, bool):
            raise ModelRefused(f"attribute {key} must be a bool")
        return v
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ModelRefused(f"attribute {key} must be a number")
    return int(v) if kind == "int" else float(v)


def _array(key: str, v: Any) -> np.ndarray:
    if not isinstance(v, dict) or set(v) - {"shape"} != {"__array__", "dtype"}:
        raise ModelRefused(f"attribute {key} must be an encoded array")
    if v["dtype"] not in ("float64", "int64", "bool"):
        raise ModelRefused(f"attribute {key}: dtype {v['dtype']!r} not allowed")
    try:
        arr = np.asarray(v["__array__"], dtype=v["dtype"])
    except (TypeError, ValueError) as exc:
        raise ModelRefused(f"attribute {key}: {exc}") from None
    if arr.dtype == object:
        raise ModelRefused(f"attribute {key}: not numeric")
    shape = v.get("shape")
    if shape is not None:
        if (not isinstance(shape, list) or len(shape) > 4 or arr.size != 0
                or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 4096
                           for n in shape) or 0 not in shape):
            raise ModelRefused(f"attribute {key}: shape {shape!r} is not that of an empty array")
        arr = arr.reshape(shape)
    return arr


def loads(blob: bytes) -> BaseEstimator:
    """Rebuild a model from :func:`dumps` output; :class:`ModelRefused` if anything is off."""
    try:
        doc = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise ModelRefused(f"not a JSON model document: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelRefused(f"unknown format {doc.get('format') if isinstance(doc, dict) else ''!r}"
                           f"; expected {FORMAT!r}")
    if doc.get("version") != FORMAT_VERSION:
        raise ModelRefused(f"format version {doc.get('version')!r} is not {FORMAT_VERSION}; "
                           "retrain the model")
    name = doc.get("class")
    if name not in ALLOWED:
        raise ModelRefused(f"class {name!r} is not an allowed effect model")
    cls, attrs = ALLOWED[name]
    params = doc.get("params")
    allowed_params = set(cls().get_params(deep=False))
    if not isinstance(params, dict) or not set(params) <= allowed_params:
        raise ModelRefused(f"unexpected parameters for {name}: "
                           f"{sorted(set(params or {}) - allowed_params)}")
    for k, v in params.items():
        if not isinstance(v, int | float | str | bool) and v is not None:
            raise ModelRefused(f"parameter {k} must be a scalar")
    fitted = doc.get("fitted")
    if not isinstance(fitted, dict) or set(fitted) != set(attrs):
        raise ModelRefused(f"fitted attributes of {name} do not match")
    model = cls(**params)
    for key, kind in attrs.items():
        v = fitted[key]
        if kind == "array":
            setattr(model, key, _array(key, v))
        elif kind == "list":
            if not isinstance(v, list) or not all(isinstance(x, int | float) and
                                                  not isinstance(x, bool) for x in v):
                raise ModelRefused(f"attribute {key} must be a list of numbers")
            setattr(model, key, tuple(v) if key.endswith("range_") else list(v))
        else:
            setattr(model, key, _check_number(key, v, kind))
    try:
        model.check_fitted()
    except (ValueError, TypeError, IndexError) as exc:
        raise ModelRefused(f"inconsistent {name}: {exc}") from None
    return model
