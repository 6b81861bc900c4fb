"""The provider-compatibility rules (TF301-TF304) and documentation rules (TF501-TF504)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import TARGETS, LintContext
from toolflow._lint.rules import builtin_rules
from toolflow._model import SpecFile, ToolSpec

TARGET_RULES = ("TF301", "TF302", "TF303", "TF304")
DOC_RULES = ("TF501", "TF502", "TF503", "TF504")
MY_RULES = TARGET_RULES + DOC_RULES


def _spec(path: Path, tools: dict[str, Any]) -> Path:
    """Write a spec file of *tools* (JSON is YAML) and return its path."""
    path.write_text(json.dumps({"toolflow": 1, "tools": tools}, indent=2))
    return path


def _tool(parameters: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"description": "Search the objects in the room", "implementation": "search", **fields}
    if parameters is not None:
        body["parameters"] = parameters
    return body


def _params(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


def _strict(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Parameters that OpenAI strict mode accepts, around *properties*."""
    return _params(properties, required=list(properties), additionalProperties=False, **extra)


def _lint(path: Path, *targets: str, select: tuple[str, ...] = MY_RULES) -> list[tuple[str, str, str]]:
    report = lint_paths([path], LintConfig(select=select, target=targets))
    return [(d.code, d.pointer, d.message) for d in report.diagnostics]


def _codes(path: Path, *targets: str, select: tuple[str, ...] = MY_RULES) -> list[tuple[str, str]]:
    return [(code, pointer) for code, pointer, _ in _lint(path, *targets, select=select)]


QUERY = {"type": "string", "description": "Words to look for"}


# --- TF3xx: only with a target -------------------------------------------------------------------------------------


def test_target_rules_are_silent_without_a_target(tmp_path: Path) -> None:
    """Without --target no TF3xx rule reports, however incompatible the tool is."""
    params = _params({"q": {**QUERY, "const": "x", "uniqueItems": True}}, anyOf=[{"required": ["q"]}])
    spec = _spec(tmp_path / "s.yaml", {"3d": _tool(params, description="x" * 1100)})
    assert [code for code, _ in _codes(spec, select=TARGET_RULES)] == []


def test_top_level_composition_reported_once_for_all_rejecting_targets(tmp_path: Path) -> None:
    """A top-level anyOf that openai and anthropic both reject is one diagnostic naming both."""
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_params({"q": QUERY}, anyOf=[{"required": ["q"]}]))})
    found = _lint(spec, "openai", "anthropic", "gemini", "mcp", select=("TF301",))
    assert found == [
        (
            "TF301",
            "/tools/search/parameters/anyOf",
            (
                "openai and anthropic reject 'anyOf' at the top level of 'parameters'; keep the top level one object "
                "of named parameters and move the alternatives into a parameter"
            ),
        )
    ]


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf", "allOf", "enum", "const", "not"])
def test_openai_rejects_each_top_level_keyword(tmp_path: Path, keyword: str) -> None:
    """Each keyword OpenAI refuses at the top level is reported at its key, naming openai."""
    value: Any = [{"required": ["q"]}] if keyword.endswith("Of") else ({} if keyword == "not" else ["x"])
    if keyword == "const":
        value = {"q": "x"}
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_strict({"q": QUERY}, **{keyword: value}))})
    found = _lint(spec, "openai", select=("TF301",))
    assert [(code, pointer) for code, pointer, _ in found] == [("TF301", f"/tools/search/parameters/{keyword}")]
    assert found[0][2].startswith(f"openai rejects {keyword!r} at the top level")


def test_nested_composition_is_fine_for_openai_and_anthropic(tmp_path: Path) -> None:
    """anyOf below the top level is not TF301's business for openai or anthropic."""
    params = _strict({"at": {"description": "Where", "anyOf": [{"type": "string"}, {"type": "number"}]}})
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _codes(spec, "openai", "anthropic", select=("TF301",)) == []


def test_mcp_accepts_any_json_schema(tmp_path: Path) -> None:
    """The mcp target reports nothing for keywords other providers refuse."""
    params = _params({"q": {**QUERY, "const": "x"}}, oneOf=[{"required": ["q"]}], additionalProperties=False)
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _codes(spec, "mcp", select=TARGET_RULES) == []


def test_gemini_does_not_look_inside_a_rejected_keyword(tmp_path: Path) -> None:
    """A rejected $defs is reported once; the keywords inside it are not reported again."""
    params = _params({"q": QUERY}, **{"$defs": {"d": {"const": 1, "oneOf": []}}})
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    found = _lint(spec, "gemini", select=("TF301",))
    assert [(code, pointer) for code, pointer, _ in found] == [("TF301", "/tools/search/parameters/$defs")]
    assert found[0][2] == (
        "gemini rejects '$defs' at the top level of 'parameters'; inline the definitions where they are used"
    )


def test_gemini_names_the_parameter_and_points_at_the_bad_enum_value(tmp_path: Path) -> None:
    """A non-string enum value is reported at the value, and the message names the parameter path."""
    inner = {
        "type": "object",
        "description": "Settings",
        "properties": {"level": {"type": "integer", "enum": ["a", 3]}},
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_params({"options": inner}))})
    assert _lint(spec, "gemini", select=("TF301",)) == [
        (
            "TF301",
            "/tools/search/parameters/properties/options/properties/level/enum/1",
            (
                "gemini accepts only strings in 'enum', not 3 in parameter 'options.level'; "
                "quote the values, or use 'minimum' and 'maximum' for a range of numbers"
            ),
        )
    ]


def test_gemini_leaves_a_top_level_type_list_to_tf205(tmp_path: Path) -> None:
    """A list in the top-level type is TF205's; TF301 reports lists only below the top level."""
    params = {"type": ["object", "null"], "properties": {"q": {"type": ["string", "null"], "description": "Q"}}}
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _codes(spec, "gemini", select=("TF301",)) == [("TF301", "/tools/search/parameters/properties/q/type")]


def test_repeated_target_counts_once(tmp_path: Path) -> None:
    """--target openai given twice yields each diagnostic once."""
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_strict({"q": QUERY}, enum=["x"]))})
    assert len(_codes(spec, "openai", "openai", select=("TF301",))) == 1


def test_strict_mode_needs_closed_objects_and_every_property_required(tmp_path: Path) -> None:
    """Open objects and optional properties are reported at any depth: items, anyOf, nested properties."""
    params = {
        "type": "object",
        "properties": {
            "q": QUERY,
            "rows": {"type": "array", "description": "Rows", "items": {"type": "object", "properties": {"a": QUERY}}},
            "at": {"description": "Where", "anyOf": [{"type": "object", "properties": {}, "additionalProperties": {}}]},
        },
        "required": "q",
        "additionalProperties": False,
    }
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    base = "/tools/search/parameters"
    assert _codes(spec, "openai", select=("TF302",)) == [
        ("TF302", f"{base}/properties/q"),
        ("TF302", f"{base}/properties/rows"),
        ("TF302", f"{base}/properties/rows/items"),
        ("TF302", f"{base}/properties/rows/items/properties/a"),
        ("TF302", f"{base}/properties/at"),
        ("TF302", f"{base}/properties/at/anyOf/0/additionalProperties"),
    ]
    messages = [message for _, _, message in _lint(spec, "openai", select=("TF302",))]
    assert "parameter 'rows[]' has no 'additionalProperties: false'" in messages[2]
    assert "must be false for OpenAI strict mode, not a schema" in messages[5]


def test_strict_mode_is_checked_only_for_openai(tmp_path: Path) -> None:
    """TF302 is silent for the other targets."""
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_params({"q": QUERY}))})
    assert _codes(spec, "anthropic", "gemini", "mcp", select=("TF302",)) == []


def test_strict_mode_skips_tools_without_declared_parameters(tmp_path: Path) -> None:
    """A tool that declares no parameters leaves the schema to the exporter and is not reported."""
    spec = _spec(tmp_path / "s.yaml", {"list_alerts": _tool()})
    assert _codes(spec, "openai", select=("TF302",)) == []


def test_strict_mode_unsupported_keyword_not_doubled_with_tf301(tmp_path: Path) -> None:
    """A top-level not is TF301's error only; a nested not is TF302's warning."""
    params = _strict({"q": {**QUERY, "not": {"const": ""}}}, **{"not": {"required": ["x"]}})
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _codes(spec, "openai", select=("TF301", "TF302")) == [
        ("TF302", "/tools/search/parameters/properties/q/not"),
        ("TF301", "/tools/search/parameters/not"),
    ]


def test_gemini_rejects_a_name_starting_with_a_digit(tmp_path: Path) -> None:
    """TF303 reports '3d_render' for gemini only, and leaves names TF201 rejects to TF201."""
    spec = _spec(tmp_path / "s.yaml", {"3d_render": _tool(), "3d render": _tool(), "_ok": _tool()})
    assert _lint(spec, "openai", "anthropic", "gemini", "mcp", select=("TF201", "TF303")) == [
        (
            "TF303",
            "/tools/3d_render",
            (
                "gemini rejects tool name '3d_render': a Gemini function name must start with a "
                "letter or an underscore; rename the tool"
            ),
        ),
        (
            "TF201",
            "/tools/3d render",
            (
                "tool name '3d render' has characters other than a-z, A-Z, 0-9, '_' and '-'; rename it, e.g. to "
                "'3d_render' (another tool has that name already)"
            ),
        ),
    ]


def test_openai_limits_on_properties_and_enum_values(tmp_path: Path) -> None:
    """Over 5000 object properties or 1000 enum values in total is reported at 'parameters'."""
    many = {f"p{i}": {"type": "string", "description": "P", "enum": ["a"]} for i in range(5001)}
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(_strict(many))})
    found = _lint(spec, "openai", select=("TF304",))
    assert [(code, pointer) for code, pointer, _ in found] == [
        ("TF304", "/tools/search/parameters"),
        ("TF304", "/tools/search/parameters"),
    ]
    assert "5001 object properties in total" in found[0][2]
    assert "5001 enum values in total" in found[1][2]


def test_openai_limits_at_the_boundary(tmp_path: Path) -> None:
    """1024 characters of description and 10 levels of objects are still within the limits."""
    deep: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    for _ in range(9):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(deep, description="d" * 1024)})
    assert _codes(spec, "openai", select=("TF304",)) == []
    deeper = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    spec = _spec(tmp_path / "t.yaml", {"search": _tool(deeper, description="d" * 1025)})
    assert _codes(spec, "openai", select=("TF304",)) == [
        ("TF304", "/tools/search/description"),
        ("TF304", "/tools/search/parameters" + "/properties/x" * 10),
    ]


# --- TF5xx ----------------------------------------------------------------------------------------------------------


def test_missing_and_blank_descriptions(tmp_path: Path) -> None:
    """No description points at the tool; a blank one points at the description key."""
    spec = _spec(
        tmp_path / "s.yaml",
        {"a": {"implementation": "x"}, "b": {"description": " \n", "implementation": "x"}, "c": _tool()},
    )
    assert _lint(spec, select=("TF501",)) == [
        ("TF501", "/tools/a", "tool 'a' has no description; say what the tool does and when to call it"),
        (
            "TF501",
            "/tools/b/description",
            "tool 'b' has a blank description; say what the tool does and when to call it",
        ),
    ]


def test_description_length_boundary(tmp_path: Path) -> None:
    """200 characters pass, 201 are reported; surrounding whitespace does not count."""
    spec = _spec(
        tmp_path / "s.yaml",
        {"ok": _tool(description=" " + "d" * 200 + "\n"), "long": _tool(description="d" * 201)},
    )
    assert _codes(spec, select=("TF502",)) == [("TF502", "/tools/long/description")]


def test_parameter_description_only_for_top_level_mapping_properties(tmp_path: Path) -> None:
    """Nested properties and boolean schemas are not reported; a whitespace description is."""
    params = _params(
        {
            "a": {"type": "object", "description": "A", "properties": {"inner": {"type": "string"}}},
            "b": True,
            "c": {"type": "string", "description": "\t"},
        }
    )
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _lint(spec, select=("TF503",)) == [
        (
            "TF503",
            "/tools/search/parameters/properties/c",
            "parameter 'c' of tool 'search' has no description; say what to pass and in what form",
        )
    ]


def test_enum_value_count_boundary(tmp_path: Path) -> None:
    """Ten enum values pass, eleven are reported at the enum key, at any depth."""
    params = _params(
        {
            "ten": {"type": "integer", "description": "T", "enum": list(range(10))},
            "list": {"type": "array", "description": "L", "items": {"enum": list(range(11))}},
        }
    )
    spec = _spec(tmp_path / "s.yaml", {"search": _tool(params)})
    assert _codes(spec, select=("TF504",)) == [("TF504", "/tools/search/parameters/properties/list/items/enum")]


# --- every rule -----------------------------------------------------------------------------------------------------


def test_rules_are_documented_in_the_house_style() -> None:
    """Each rule's docstring has the summary and the four sections, with yaml examples."""
    rules = {r.code: r for r in builtin_rules()}
    for code in MY_RULES:
        doc = rules[code].doc
        assert re.search(
            r"\A[^\n]+\n\n## What it does\n.+\n## Why is this bad\?\n.+\n## Example\n```yaml\n.+```\n\n"
            r"## Use instead\n```yaml\n.+```\n\Z",
            doc,
            re.DOTALL,
        ), code


@pytest.mark.parametrize("code", [c for c in MY_RULES if c != "TF304"])  # TF304's example elides its long text
def test_rule_examples_do_what_they_say(tmp_path: Path, code: str) -> None:
    """A rule's Example triggers it (with the target it names) and its Use instead lints clean."""
    doc = next(r.doc for r in builtin_rules() if r.code == code)
    example, use_instead = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    named = re.search(r"--target (\w+)", example)
    targets = (named[1],) if named else ()
    for label, block in (("example", example), ("instead", use_instead)):
        tools = yaml.safe_load(block)["tools"]
        for body in tools.values():
            body.setdefault("template", "done")
        spec = _spec(tmp_path / f"{label}.yaml", tools)
        found = {c for c, _ in _codes(spec, *targets, select=("ALL",))}
        assert (code in found) == (label == "example"), (label, found)
        assert found <= {code, "TF202"}, (label, found)


def test_self_containing_parameters_do_not_hang() -> None:
    """A parameter mapping that contains itself (the loader refuses such files) is still walked to an end."""
    parameters: dict[str, Any] = {"type": "object", "description": "Loop", "properties": {}}
    parameters["properties"]["again"] = parameters
    tool = ToolSpec(name="t", description="Loop", parameters=parameters, file="s.yaml", pointer="/tools/t")
    spec_file = SpecFile(path="s.yaml", tools=(tool,), data={"tools": {"t": {"parameters": parameters}}})
    context = LintContext(files=(spec_file,), targets=TARGETS)
    found = [d.code for rule in builtin_rules() if rule.code in MY_RULES and rule.check for d in rule.check(context)]
    assert "TF302" in found


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)
_KEYWORDS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "anyOf",
        "oneOf",
        "not",
        "additionalProperties",
        "description",
        "$defs",
        "const",
        "prefixItems",
    ]
)
_SCHEMA = st.recursive(
    st.dictionaries(_KEYWORDS, _JSON, max_size=4),
    lambda inner: st.dictionaries(
        _KEYWORDS,
        inner | _JSON | st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
        max_size=4,
    ),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parameters=_SCHEMA, description=st.text(max_size=300))
def test_rules_never_raise_on_odd_parameters(parameters: dict[str, Any], description: str) -> None:
    """Every TF3xx and TF5xx rule runs to completion, with every target, on arbitrary parameter mappings."""
    tool = ToolSpec(name="t", description=description, parameters=parameters, file="s.yaml", pointer="/tools/t")
    spec_file = SpecFile(path="s.yaml", tools=(tool,), data={"tools": {"t": {"parameters": parameters}}})
    context = LintContext(files=(spec_file,), targets=TARGETS)
    for rule in builtin_rules():
        if rule.code in MY_RULES and rule.check is not None:
            for diagnostic in rule.check(context):
                assert diagnostic.code == rule.code
