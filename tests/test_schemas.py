"""Tests of toolflow._schemas: spec-schema mapping, the two validators' agreement, rule compilation."""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._model import ParameterRule
from toolflow._schemas import (
    close_matches,
    compile_parameter_rules,
    describe_type,
    did_you_mean,
    edit_distance,
    fast_validator,
    iter_spec_problems,
    json_pointer,
    spec_schema,
    validation_schema,
)

PARAMS = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}},
}


def _valid(rules: list[ParameterRule], instance: dict[str, Any]) -> bool:
    schema = validation_schema(PARAMS, rules)
    verdict = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert jsonschema_rs.Draft202012Validator(schema).is_valid(instance) is verdict
    return verdict


def test_requires_rule_compiles_to_dependent_required() -> None:
    """`when: a, require: [b]` makes b required only when a is given."""
    rules = [ParameterRule(kind="requires", when="a", params=("b",))]
    assert compile_parameter_rules(rules) == [{"dependentRequired": {"a": ["b"]}}]
    assert _valid(rules, {})
    assert _valid(rules, {"a": "x", "b": "y"})
    assert not _valid(rules, {"a": "x"})
    assert _valid(rules, {"b": "y"})


def test_requires_rule_with_values_applies_only_to_those_values() -> None:
    """`when: {a: full}` requires b only when a equals 'full'."""
    rules = [ParameterRule(kind="requires", when_values={"a": "full"}, params=("b",))]
    assert _valid(rules, {"a": "brief"})
    assert not _valid(rules, {"a": "full"})
    assert _valid(rules, {"a": "full", "b": "y"})


def test_exclusive_rule_allows_at_most_one() -> None:
    """`exclusive: [a, b, c]` rejects any two of them."""
    rules = [ParameterRule(kind="exclusive", params=("a", "b", "c"))]
    assert _valid(rules, {})
    assert _valid(rules, {"c": "z"})
    assert not _valid(rules, {"a": "x", "c": "z"})
    assert not _valid(rules, {"b": "x", "c": "z"})


def test_at_least_one_and_exactly_one() -> None:
    """`at_least_one` needs one or more; `exactly_one` needs one and only one."""
    at_least = [ParameterRule(kind="at_least_one", params=("a", "b"))]
    exactly = [ParameterRule(kind="exactly_one", params=("a", "b"))]
    assert not _valid(at_least, {})
    assert _valid(at_least, {"a": "x", "b": "y"})
    assert not _valid(exactly, {})
    assert _valid(exactly, {"b": "y"})
    assert not _valid(exactly, {"a": "x", "b": "y"})


def test_validation_schema_keeps_existing_all_of() -> None:
    """Compiled rules are appended to an allOf the parameters already have."""
    params = {**PARAMS, "allOf": [{"required": ["c"]}]}
    schema = validation_schema(params, [ParameterRule(kind="at_least_one", params=("a", "b"))])
    assert schema["allOf"][0] == {"required": ["c"]}
    assert len(schema["allOf"]) == 2
    assert "allOf" not in validation_schema(PARAMS, [])


def test_helpers() -> None:
    """Pointers escape '~' and '/', types use YAML words, suggestions come from close matches."""
    assert json_pointer(["tools", "a/b", "x~y", 0]) == "/tools/a~1b/x~0y/0"
    values: tuple[object, ...] = (None, True, 1, 1.5, "s", [], {})
    assert [describe_type(v) for v in values] == [
        "null",
        "boolean",
        "integer",
        "number",
        "string",
        "list",
        "mapping",
    ]
    assert did_you_mean("timout", ["timeout", "retry"]) == "; did you mean 'timeout'?"
    assert did_you_mean("zzz", ["timeout"]) == ""


def test_edit_distance_counts_a_transposition_as_one_edit() -> None:
    """Optimal string alignment: swaps of neighbours cost one, and no substring is edited twice."""
    assert edit_distance("numbe1r", "number1") == 1
    assert edit_distance("numbe1r", "number2") == 2
    assert edit_distance("ca", "abc") == 3  # OSA, not unrestricted Damerau-Levenshtein (2)
    assert edit_distance("", "abc") == edit_distance("abc", "") == 3
    assert edit_distance("kitten", "sitting") == 3


def test_did_you_mean_prefers_a_transposition_and_breaks_ties_the_same_way_every_time() -> None:
    """The smaller distance wins, then the longer common prefix, then the alphabetically first name."""
    assert did_you_mean("numbe1r", ["number2", "number1"]) == "; did you mean 'number1'?"
    assert did_you_mean("numbe1r", ["number1", "number2"]) == "; did you mean 'number1'?"
    assert close_matches("shayt", ["say", "shout"], n=3) == ["shout", "say"]  # both 2 edits; 'sh' is shared
    assert close_matches("cat", ["cut", "cap", "bat"], n=3) == ["cap", "cut", "bat"]  # 'ca' > 'c' > ''
    assert close_matches("cat", ["cot", "cut"], n=3) == ["cot", "cut"]  # alphabetical last


def test_did_you_mean_stays_quiet_for_names_that_are_not_close() -> None:
    """Short names need their one edit to leave something in common; long ones allow 40% edits."""
    assert did_you_mean("x", ["y"]) == ""
    assert did_you_mean("bb", ["b"]) == "; did you mean 'b'?"
    assert did_you_mean("shelve", ["shelf"]) == "; did you mean 'shelf'?"
    assert did_you_mean("zzz", ["retry", "timeout"]) == ""


def test_spec_schema_is_valid_draft_07() -> None:
    """The shipped spec schema is itself a valid draft-07 schema."""
    jsonschema.Draft7Validator.check_schema(spec_schema())


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "30s", "0s", "5x", "500ms", "tick", "session", "forever", "safe_chain", "x"]),
)
_keys = st.sampled_from(
    [
        "toolflow",
        "tools",
        "defaults",
        "policy",
        "description",
        "category",
        "timeout",
        "retry",
        "cache",
        "attempts",
        "scope",
        "ttl",
        "template",
        "command",
        "argv",
        "source",
        "examples",
        "args",
        "depends_on",
        "tool",
        "parameter_rules",
        "when",
        "require",
        "exclusive",
        "search",
    ]
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_documents = st.fixed_dictionaries(
    {"toolflow": st.sampled_from([1, 2, "1"])},
    optional={
        "tools": st.dictionaries(st.sampled_from(["search", "say"]), _values, max_size=2),
        "defaults": _values,
        "policy": _values,
    },
)


@settings(max_examples=300, deadline=None)
@given(_documents)
def test_fast_and_explaining_validators_agree_on_spec_documents(document: dict[str, Any]) -> None:
    """jsonschema_rs and jsonschema give the same verdict, so every invalid file gets explained."""
    fast = jsonschema_rs.Draft7Validator(spec_schema()).is_valid(document)
    slow = jsonschema.Draft7Validator(spec_schema()).is_valid(document)
    assert fast is slow
    problems = list(iter_spec_problems(document))
    assert (problems == []) is fast
    for problem in problems:
        assert problem.code in {"TF101", "TF102", "TF103", "TF104", "TF105"}
        assert problem.pointer == "" or problem.pointer.startswith("/")


@pytest.mark.parametrize(
    ("document", "code", "pointer", "message"),
    [
        ({"toolflow": 1, "tool": {}}, "TF101", "/tool", "unknown key 'tool' in the spec file; did you mean 'tools'?"),
        ({}, "TF102", "", "the spec file is missing required key 'toolflow' (the format version; add 'toolflow: 1')"),
        ([], "TF103", "", "a spec file must be a mapping, got list"),
        ({"toolflow": 3}, "TF105", "/toolflow", "unsupported spec format version 3; this toolflow reads format 1"),
        (
            {"toolflow": 1, "tools": {"s": {"cache": {"scope": "sesion"}}}},
            "TF104",
            "/tools/s/cache/scope",
            (
                "'scope' in 'cache' of tool 's' must be one of 'tick', 'session', 'persistent', got \"sesion\""
                "; did you mean 'session'?"
            ),
        ),
        (
            {"toolflow": 1, "tools": {"s": {"examples": [{"description": "x"}]}}},
            "TF102",
            "/tools/s/examples/0",
            "'examples[0]' of tool 's' is missing required key 'args'",
        ),
    ],
)
def test_spec_problems_are_mapped_to_codes_and_pointers(document: Any, code: str, pointer: str, message: str) -> None:
    """Each kind of schema violation maps to its code, pointer and message."""
    problems = list(iter_spec_problems(document))
    assert [(p.code, p.pointer, p.message) for p in problems] == [(code, pointer, message)]


def test_draft_07_parameters_get_dependencies_not_dependent_required() -> None:
    """Parameters that name draft-07 get `dependencies`, which that dialect enforces."""
    params = {**PARAMS, "$schema": "http://json-schema.org/draft-07/schema#"}
    schema = validation_schema(params, [ParameterRule(kind="requires", when="a", params=("b",))])
    assert schema["allOf"] == [{"dependencies": {"a": ["b"]}}]
    assert not jsonschema_rs.validator_for(schema).is_valid({"a": "x"})
    assert not jsonschema.Draft7Validator(schema).is_valid({"a": "x"})


def test_remote_refs_are_never_fetched() -> None:
    """Compiling a schema with a remote $ref fails instead of fetching it."""
    with pytest.raises(jsonschema_rs.ValidationError, match="Retrieval is disabled"):
        fast_validator({"$ref": "https://example.invalid/schema.json"})
