"""The tool-name and schema rules (TF202-TF210): what the case files under tests/cases cannot say."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from toolflow._lint import _schema_facts
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import LintContext
from toolflow._lint.rules import builtin_rules
from toolflow._model import Example, ParameterRule, SpecFile, ToolSpec

SCHEMA_RULES = ("TF202", "TF203", "TF204", "TF205", "TF206", "TF207", "TF208", "TF209", "TF210")


def _spec(path: Path, tools: dict[str, Any]) -> Path:
    """Write a spec file of *tools* (JSON is YAML) and return its path."""
    path.write_text(json.dumps({"toolflow": 1, "tools": tools}, indent=2))
    return path


def _tool(**fields: Any) -> dict[str, Any]:
    return {"description": "Search the objects in the room", "implementation": "search", **fields}


def _lint(*paths: Path) -> list[tuple[str, str]]:
    report = lint_paths(list(paths), LintConfig(select=SCHEMA_RULES))
    return [(d.code, d.message) for d in report.diagnostics]


def test_same_file_named_twice_is_not_a_duplicate(tmp_path: Path) -> None:
    """A file given twice on the command line does not declare its tools twice."""
    spec = _spec(tmp_path / "search.yaml", {"search": _tool()})
    assert lint_paths([spec, tmp_path, f"{tmp_path}/./search.yaml"]).diagnostics == ()


def test_duplicate_names_each_location_names_all_others(tmp_path: Path) -> None:
    """With three declarations, each diagnostic names the other two places."""
    paths = [_spec(tmp_path / f"{n}.yaml", {"search": _tool()}) for n in ("a", "b", "c")]
    found = _lint(*paths)
    assert [code for code, _ in found] == ["TF203"] * 3
    for path, (_, message) in zip(paths, found, strict=True):
        others = [f"{p}:4:5" for p in paths if p != path]
        assert message == f"tool 'search' is also declared at {', '.join(others)}"


def test_remote_ref_is_not_fetched_or_compiled(tmp_path: Path) -> None:
    """A remote $ref is only warned about; no rule tries to compile (fetch) it."""
    parameters = {
        "type": "object",
        "properties": {"q": {"$ref": "https://example.invalid/q.json", "description": "q", "default": 1}},
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters, examples=[{"args": {"q": 1}}])})
    assert [code for code, _ in _lint(spec)] == ["TF206"]


def test_default_checked_against_referenced_definition(tmp_path: Path) -> None:
    """A default under a local $ref is checked against the definition it points to."""
    parameters = {
        "type": "object",
        "$defs": {"count": {"type": "integer", "minimum": 1}},
        "properties": {"n": {"$ref": "#/$defs/count", "default": 0, "description": "How many"}},
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters)})
    assert _lint(spec) == [
        (
            "TF206",
            "'$ref' to '#/$defs/count' in 'parameters'; inline the definition, models and some providers do not follow references",
        ),
        ("TF208", "default 0 of parameter 'n' does not match its schema: must be at least 1"),
    ]


def test_default_checked_in_the_dialect_the_schema_names(tmp_path: Path) -> None:
    """A draft-07 schema's defaults are judged by draft-07 rules, off the one-validator fast path."""
    parameters = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "n": {"type": "integer", "exclusiveMinimum": 0, "default": 0, "description": "How many"},
            "m": {"type": "integer", "exclusiveMinimum": 0, "default": 1, "description": "How many more"},
        },
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters)})
    assert _lint(spec) == [
        ("TF208", "default 0 of parameter 'n' does not match its schema: must be greater than 0"),
    ]


def test_references_to_anchors_and_named_groups(tmp_path: Path) -> None:
    """A $ref to an existing $anchor and an ECMA named group are fine; a missing anchor is TF204."""
    parameters = {
        "type": "object",
        "$defs": {"id": {"$anchor": "object-id", "type": "string", "pattern": "^(?<kind>[a-z]+)-[0-9]+$"}},
        "properties": {
            "a": {"$ref": "#object-id", "description": "One object"},
            "b": {"$ref": "#objectid", "description": "Another object"},
        },
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters)})
    assert [(code, message) for code, message in _lint(spec) if code == "TF204"] == [
        ("TF204", "'$ref' target '#objectid' does not exist in 'parameters'"),
    ]


def test_required_skipped_when_a_ref_may_declare_it(tmp_path: Path) -> None:
    """An object schema that pulls in a $ref may get its properties from there, so TF207 stays silent."""
    parameters = {
        "type": "object",
        "$defs": {"base": {"properties": {"q": {"type": "string", "description": "q"}}}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "properties": {"limit": {"type": "integer", "description": "Most results"}},
        "required": ["q"],
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters)})
    assert [code for code, _ in _lint(spec)] == ["TF206"]


@pytest.mark.parametrize(
    ("type_", "hint"),
    [
        ("dict", "; did you mean 'object'?"),
        ("Map", "; did you mean 'object'?"),
        ("float", "; did you mean 'number'?"),
        ("int", "; did you mean 'integer'?"),
        ("tuple", "; did you mean 'array'?"),
        ("str", "; did you mean 'string'?"),
        ("bool", "; did you mean 'boolean'?"),
        ("None", "; did you mean 'null'?"),
        ("any", "; leave 'type' out to accept any value"),
        ("strnig", "; did you mean 'string'?"),
        ("color", " (one of array, boolean, integer, null, number, object, string)"),
    ],
)
def test_a_type_from_another_language_gets_the_json_schema_name(tmp_path: Path, type_: str, hint: str) -> None:
    """Type names of Python, TypeScript or SQL are reported once (TF204), with the JSON Schema type they mean."""
    parameters = {"type": "object", "properties": {"q": {"type": type_, "description": "q"}}}
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters)})
    message = f"invalid JSON Schema at 'parameters.properties.q.type': {type_!r} is not a JSON Schema type{hint}"
    assert _lint(spec) == [("TF204", message)]


def test_a_foreign_top_level_type_is_reported_once(tmp_path: Path) -> None:
    """`type: dict` on the parameters is TF204's (with 'object'); TF205 does not report the same token."""
    for type_, hint in (
        ("dict", "; did you mean 'object'?"),
        ("any", "; leave 'type' out to accept any value (the parameters of a tool need 'type: object')"),
    ):
        spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters={"type": type_})})
        message = f"invalid JSON Schema at 'parameters.type': {type_!r} is not a JSON Schema type{hint}"
        assert _lint(spec) == [("TF204", message)]
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters={"type": "string"})})
    assert [code for code, _ in _lint(spec)] == ["TF205"]


def test_invalid_parameters_skip_default_and_example_checks(tmp_path: Path) -> None:
    """When parameters are not valid JSON Schema, only TF204 speaks; defaults and examples wait for the fix."""
    parameters = {
        "type": "object",
        "properties": {"q": {"type": "text", "default": 1, "description": "q"}},
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(parameters=parameters, examples=[{"args": {"q": 1}}])})
    assert [code for code, _ in _lint(spec)] == ["TF204"]


def test_example_with_unknown_argument_under_rules_names_the_rule(tmp_path: Path) -> None:
    """An example that breaks a 'require' rule with 'when' is explained by the rule it breaks."""
    parameters = {
        "type": "object",
        "properties": {
            "since": {"type": "string", "description": "From"},
            "until": {"type": "string", "description": "To"},
        },
    }
    tool = _tool(
        parameters=parameters,
        parameter_rules=[{"when": "since", "require": ["until"]}],
        examples=[{"args": {"since": "monday"}}],
    )
    spec = _spec(tmp_path / "s.yaml", {"search": tool})
    assert _lint(spec) == [
        ("TF210", "examples[0] args are rejected: until: 'until' is required when 'since' is given"),
    ]


def test_walk_is_per_tool_not_per_id() -> None:
    """A tool created after another is gone never sees the earlier tool's cached walk."""
    first = ToolSpec(name="a", parameters={"type": "object", "properties": {"x": {"type": "string"}}})
    assert len(_schema_facts.subschemas(first)) == 2
    del first
    gc.collect()
    for _ in range(50):
        later = ToolSpec(name="b", parameters={"type": "object"})
        assert len(_schema_facts.subschemas(later)) == 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "q", "object", "#", "#/$defs/a", "("]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["q", "a", "$defs"]), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "enum", "default", "const", "$ref", "$dynamicRef",
    "$defs", "allOf", "anyOf", "oneOf", "not", "if", "then", "additionalProperties", "patternProperties",
    "minimum", "pattern", "dependentSchemas",
]  # fmt: skip
_SCHEMA = st.recursive(
    st.dictionaries(st.sampled_from(_KEYWORDS), _JSON, max_size=4),
    lambda inner: st.dictionaries(
        st.sampled_from(_KEYWORDS),
        inner | st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["q", "a", "^x"]), inner, max_size=2),
        max_size=4,
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parameters=_SCHEMA, output=st.none() | _SCHEMA, args=st.dictionaries(st.sampled_from(["q", "a"]), _JSON))
def test_rules_never_raise_on_odd_schemas(
    parameters: dict[str, Any], output: dict[str, Any] | None, args: dict[str, Any]
) -> None:
    """Whatever a schema-valid tool puts in its schemas, the rules report and never raise."""
    tool = ToolSpec(
        name="search",
        parameters=parameters,
        output_schema=output,
        parameter_rules=(ParameterRule(kind="exclusive", params=("q", "a")),),
        examples=(Example(args=args, result=args, has_result=True),),
        file="s.yaml",
        pointer="/tools/search",
    )
    context = LintContext(files=(SpecFile(path="s.yaml", tools=(tool,)),))
    for rule in builtin_rules():
        if rule.code in SCHEMA_RULES and rule.check is not None:
            for diagnostic in rule.check(context):
                assert diagnostic.code == rule.code
