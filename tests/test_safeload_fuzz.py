"""Property-based fuzzing of the safe loader and the validators behind it: whatever the text or
the document, the only exception is the project's own (:class:`LoadError`, a
:class:`SpecError`), one line; never a traceback from PyYAML, json, pydantic or the parsers."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.domain.errors import SpecError
from planner.domain.intents import parse_documents
from planner.domain.safeload import Limits, LoadError, check_data, load_json, load_yaml
from simulator.scenario import is_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = list(yaml.safe_load_all((ROOT / "examples/k8s/checkout.yaml").read_text()))
FLASH = yaml.safe_load((ROOT / "examples/scenarios/flash-sale.yaml").read_text())
SMALL = Limits(max_bytes=4096, max_nodes=300, max_depth=12)
FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_DOCUMENTS = settings(FUZZ, max_examples=60)
"""Fewer for whole documents (validated in full, about 30 ms each)."""

# YAML's own punctuation, anchors, aliases, tags and the scalars that resolve specially.
TOKENS = st.sampled_from([
    "a", "b", ":", ": ", "- ", "-", "[", "]", "{", "}", ",", "\n", "  ", "&x ", "*x", "&y ",
    "*y", "!!set ", "!!binary ", "!!python/object ", "!foo ", "<<: ", "? ", "|", ">", "'",
    '"', "#", "---\n", "...\n", "1", "1e9", "-1.5e+3", ".inf", "-.inf", ".nan", "0x1F", "0o7",
    "1_000", "12:30:45", "2024-01-01", "yes", "~", "null", "true", "9" * 30, "\t", "%YAML 1.1",
    "\\u0000", "\x00", "\x85", "é",
])
YAML_TEXT = st.lists(TOKENS, max_size=60).map("".join)

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
JSON_DATA = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)


def _only_ours(call: Any) -> Any:
    try:
        return call()
    except SpecError as exc:
        assert "\n" not in exc.line()
        return None


@FUZZ
@given(YAML_TEXT)
def test_yaml_text_loads_or_is_refused(text: str) -> None:
    docs = _only_ours(lambda: load_yaml(text, "fuzz.yaml", SMALL))
    if docs is not None:
        for doc in docs:
            check_data(doc, limits=SMALL)  # what it returns is plain, bounded data
            json.dumps(doc, allow_nan=False)


@FUZZ
@given(st.binary(max_size=200))
def test_any_bytes_load_or_are_refused(data: bytes) -> None:
    _only_ours(lambda: load_yaml(data, "fuzz.yaml", SMALL))
    _only_ours(lambda: load_json(data, "fuzz.json", SMALL))


@FUZZ
@given(JSON_DATA)
def test_json_text_loads_or_is_refused(doc: Any) -> None:
    text = json.dumps(doc)
    loaded = _only_ours(lambda: load_json(text, "fuzz.json", SMALL))
    if loaded is not None:
        assert json.dumps(loaded, allow_nan=False)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


@FUZZ_DOCUMENTS
@given(st.data())
def test_a_manifest_with_any_value_anywhere_is_valid_or_refused(data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(CHECKOUT) - 1))
    path = data.draw(st.sampled_from(_paths(CHECKOUT[i])))
    docs = [*CHECKOUT[:i], _replaced(CHECKOUT[i], path, data.draw(JSON_DATA)), *CHECKOUT[i + 1:]]
    _only_ours(lambda: parse_documents(docs, "fuzz.yaml"))
    # ... and the same through the YAML text a user would write
    text = yaml.safe_dump_all(docs, allow_unicode=True)
    _only_ours(lambda: parse_documents(load_yaml(text, "fuzz.yaml"), "fuzz.yaml"))


@FUZZ_DOCUMENTS
@given(data=st.data())
def test_a_scenario_with_any_value_anywhere_is_valid_or_refused(data: st.DataObject,
                                                                tmp_path_factory: Any) -> None:
    path = data.draw(st.sampled_from(_paths(FLASH)))
    doc = _replaced(FLASH, path, data.draw(JSON_DATA))
    base = tmp_path_factory.getbasetemp()
    if is_scenario(doc):
        _only_ours(lambda: parse_scenario(doc, "fuzz.yaml", base))


def test_the_fuzzed_loaders_refuse_with_their_own_error() -> None:
    """The properties above are not vacuous: the loaders do refuse some of this."""
    for text in ("a: &x [*x]", "a: .nan", "a: 1\na: 2", "[" * 20 + "]" * 20):
        try:
            load_yaml(text, "t.yaml", SMALL)
        except LoadError:
            continue
        raise AssertionError(f"accepted {text!r}")
