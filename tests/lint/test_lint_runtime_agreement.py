"""Lint judges values as a real call does: TF208 and TF210 agree with ``ArgumentValidator``; TF223 with its rules.

TF210 runs each example's ``args`` through the tool's own ``ArgumentValidator`` and TF208 checks
defaults and enum values with the same engines (``format`` asserted, ECMA-262 patterns), so an
example or a default that lint passes is one that a call accepts, and the other way round.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from toolflow._diagnostics import Diagnostic
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import LintContext
from toolflow._loader import load_specs
from toolflow._model import ToolSpec
from toolflow._validation import ArgumentValidator, ResultValidator

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
_EXAMPLE = re.compile(r"^/tools/[^/]+/examples/(\d+)/args(?:/|$)")


def _write(path: Path, tools: dict[str, Any]) -> Path:
    """Write a spec file of *tools* (JSON is YAML) and return its path."""
    path.write_text(json.dumps({"toolflow": 1, "tools": tools}, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def _tool(parameters: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "description": "Search the objects in the room",
        "implementation": "search",
        "parameters": parameters,
        **fields,
    }


def _lint(path: Path, *codes: str) -> list[Diagnostic]:
    return list(lint_paths([path], LintConfig(select=codes)).diagnostics)


def _loaded(path: Path) -> ToolSpec:
    """The one tool of *path*, as the loader (and so the registry) builds it."""
    result = load_specs([path])
    assert [d for d in result.diagnostics if d.severity.value == "error"] == []
    (tool,) = result.tools
    return tool


# --- generated tools and examples -------------------------------------------------------

FORMAT_SAMPLES = {
    "email": ["ana@example.com", "nobody"],
    "date": ["2024-02-29", "2024-02-30"],
    "date-time": ["2024-02-29T12:30:00Z", "2024-02-29 12:30"],
    "uri": ["https://example.com/a?b=c", "example.com/a"],
    "ipv4": ["192.168.0.1", "256.0.0.1"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "123e4567"],
}
PATTERN_SAMPLES = {
    r"^\d+$": ["123", "١٢٣"],
    r"^\w+$": ["abc_1", "été"],
    r"^[a-z]+$": ["abc", "abc\n"],
    r"^\p{L}+$": ["Étagère", "abc1"],
    r"^(?<year>\d{4})-\d{2}$": ["2024-05", "24-05"],
}
"""Patterns, each with a text that ECMA-262 matches and one it does not (Python's re disagrees on most)."""
PATTERNS = sorted(PATTERN_SAMPLES)
STRINGS = sorted(
    {s for pair in [*FORMAT_SAMPLES.values(), *PATTERN_SAMPLES.values()] for s in pair}
    | {"", "five", "5", "-3", "2.5", "true", "TRUE", "[1, 2]", '{"x": 1}', "null"}
)
NAMES = ["a", "b", "c", "d"]

_string = st.sampled_from(STRINGS)
_value = st.recursive(
    _string | st.integers(-3, 12) | st.sampled_from([0.5, 2.0, -1.5]) | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "y"]), inner, max_size=2),
    max_leaves=4,
)


@st.composite
def _property(draw: st.DrawFn) -> dict[str, Any]:
    """A parameter schema: a type, its constraints (formats, ECMA patterns, enums), maybe a default."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "nullable"]))
    schema: dict[str, Any] = {"description": "A parameter"}
    if kind == "string":
        schema["type"] = "string"
        if draw(st.booleans()):
            schema["format"] = draw(st.sampled_from(sorted(FORMAT_SAMPLES)))
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(PATTERNS))
        if draw(st.integers(0, 3)) == 0:
            schema["enum"] = draw(st.lists(_string, min_size=1, max_size=3, unique=True))
        if draw(st.integers(0, 3)) == 0:
            schema["minLength"] = 1
    elif kind in ("integer", "number"):
        schema["type"] = kind
        if draw(st.booleans()):
            schema["minimum"] = draw(st.integers(-1, 3))
        if draw(st.integers(0, 3)) == 0:
            schema["enum"] = draw(st.lists(st.integers(-1, 5), min_size=1, max_size=3, unique=True))
    elif kind == "array":
        items: dict[str, Any] = {"type": "string"}
        if draw(st.booleans()):
            items["format"] = draw(st.sampled_from(sorted(FORMAT_SAMPLES)))
        schema.update(type="array", items=items, maxItems=2)
    elif kind == "object":
        schema.update(type="object", properties={"x": {"type": "integer"}}, required=["x"])
    elif kind == "nullable":
        schema["type"] = ["integer", "null"]
    else:
        schema["type"] = "boolean"
    if draw(st.integers(0, 2)) == 0:
        schema["default"] = draw(_plausible(schema))
    return schema


def _plausible(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for *schema*: mostly of its type (or a string a call coerces to it), half of them valid; or anything."""
    kind = schema.get("type")
    near: st.SearchStrategy[Any]
    if "enum" in schema:
        near = st.sampled_from(schema["enum"])
    elif kind == "string":
        samples = [
            *FORMAT_SAMPLES.get(schema.get("format", ""), []),
            *PATTERN_SAMPLES.get(schema.get("pattern", ""), []),
        ]
        near = st.sampled_from(samples) if samples else _string
    elif kind in ("integer", "number"):
        near = st.integers(-2, 6) | st.sampled_from(["5", "-1", "2.5", "five", 2.5])
    elif kind == "boolean":
        near = st.booleans() | st.sampled_from(["true", "FALSE", "yes"])
    elif kind == "array":
        near = st.lists(st.sampled_from(FORMAT_SAMPLES.get(schema["items"].get("format", ""), ["x", "y"])), max_size=3)
        near |= st.sampled_from(['["a"]', "[1]", "a"])
    elif kind == "object":
        near = st.fixed_dictionaries({"x": st.integers(0, 3) | st.just("1")}) | st.sampled_from([{}, '{"x": 1}'])
    else:
        near = st.none() | st.integers(0, 3) | st.just("3")
    return st.one_of(near, near, near, _value)


@st.composite
def _rule(draw: st.DrawFn, names: list[str]) -> dict[str, Any]:
    form = draw(st.sampled_from(["exclusive", "at_least_one", "exactly_one", "when", "when_values"]))
    # A name repeated in one rule is rare but allowed: the runtime then cannot use the schema at all.
    unique = len(names) > 1 and draw(st.integers(0, 9)) > 0
    first, second = draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=unique))
    if form == "when":
        return {"when": first, "require": [second]}
    if form == "when_values":
        return {"when": {first: draw(st.sampled_from(["a", 1, True]) | _value)}, "require": [second]}
    return {form: [first, second]}


@st.composite
def _generated_tool(draw: st.DrawFn) -> dict[str, Any]:
    """A tool with generated parameters, parameter rules, strictness, dialect and example args."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    parameters: dict[str, Any] = {"type": "object", "properties": {name: draw(_property()) for name in names}}
    if draw(st.booleans()):
        parameters["required"] = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
    if draw(st.booleans()):
        parameters["additionalProperties"] = False
    if draw(st.integers(0, 3)) == 0:
        parameters["$schema"] = DRAFT_07
    properties = parameters["properties"]
    examples = []
    for _ in range(draw(st.integers(0, 4))):
        keys = draw(st.lists(st.sampled_from([*names, "zz"]), max_size=4, unique=True))
        args = {key: draw(_plausible(properties[key]) if key in properties else _value) for key in keys}
        examples.append({"args": args})
    return _tool(
        parameters,
        parameter_rules=draw(st.lists(_rule(names), max_size=3)),
        strict=draw(st.booleans()),
        examples=examples,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=_generated_tool())
def test_tf210_reports_exactly_the_examples_the_validator_rejects(tool: dict[str, Any]) -> None:
    """For generated tools, TF210 reports an example iff ArgumentValidator.validate rejects its args."""
    with tempfile.TemporaryDirectory() as scratch:
        path = _write(Path(scratch) / "search.yaml", {"search": tool})
        loaded = _loaded(path)
        validator = ArgumentValidator.for_spec(loaded)
        outcomes = [validator.validate(example.args) for example in loaded.examples]
        found = _lint(path, "TF210")
    rejected = [i for i, outcome in enumerate(outcomes) if not outcome.valid]
    reported = []
    for diagnostic in found:
        match = _EXAMPLE.match(diagnostic.pointer)
        assert match is not None, diagnostic.pointer
        index = int(match[1])
        reported.append(index)
        first = outcomes[index].errors[0]
        assert diagnostic.message.startswith(f"examples[{index}] args are rejected: {first.describe()}")
    assert reported == rejected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_property(), dialect=st.sampled_from([None, DRAFT_07]))
def test_tf208_reports_exactly_the_defaults_a_call_rejects(schema: dict[str, Any], dialect: str | None) -> None:
    """TF208 reports a parameter's default iff a call that leaves the parameter out is rejected."""
    schema.setdefault("default", "five")
    parameters: dict[str, Any] = {"type": "object", "properties": {"a": schema}}
    if dialect is not None:
        parameters["$schema"] = dialect
    with tempfile.TemporaryDirectory() as scratch:
        path = _write(Path(scratch) / "search.yaml", {"search": _tool(parameters)})
        accepted = ArgumentValidator.for_spec(_loaded(path)).validate({}).valid
        found = [d for d in _lint(path, "TF208") if d.pointer.endswith("/default")]
    assert len(found) == (0 if accepted else 1)


# --- formats and ECMA-262 patterns ----------------------------------------------------------


@pytest.mark.parametrize(("fmt", "good", "bad"), [(f, *pair) for f, pair in FORMAT_SAMPLES.items()])
def test_formats_are_asserted_by_lint_as_at_run_time(tmp_path: Path, fmt: str, good: str, bad: str) -> None:
    """A value of the wrong format fails a call, and lint reports it as an example and as a default."""
    parameters = {
        "type": "object",
        "properties": {
            "v": {"type": "string", "format": fmt, "description": "A value"},
            "ok": {"type": "string", "format": fmt, "default": good, "description": "A good default"},
            "ko": {"type": "string", "format": fmt, "default": bad, "description": "A bad default"},
        },
    }
    tool = _tool(parameters, examples=[{"args": {"v": good, "ko": good}}, {"args": {"v": bad, "ko": good}}])
    path = _write(tmp_path / "search.yaml", {"search": tool})
    validator = ArgumentValidator.for_spec(_loaded(path))
    assert validator.validate({"v": good, "ko": good}).valid
    assert not validator.validate({"v": bad, "ko": good}).valid
    assert [(d.code, d.pointer, d.message) for d in _lint(path, "TF208", "TF210")] == [
        (
            "TF208",
            "/tools/search/parameters/properties/ko/default",
            f"default {json.dumps(bad)} of parameter 'ko' does not match its schema: must be a valid {fmt}",
        ),
        (
            "TF210",
            "/tools/search/examples/1/args/v",
            f"examples[1] args are rejected: v: Must be a valid {fmt} (expected: format: {fmt}) (got: {json.dumps(bad)})",
        ),
    ]


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        (r"^\d+$", "123", True),
        (r"^\d+$", "١٢٣", False),  # Python's \d matches any Unicode digit; ECMA-262's only 0-9
        (r"^\w+$", "abc_1", True),
        (r"^\w+$", "été", False),  # Python's \w is Unicode; ECMA-262's is ASCII
        (r"^[a-z]+$", "abc", True),
        (r"^[a-z]+$", "abc\n", False),  # Python's $ matches before a trailing newline
        (r"^\p{L}+$", "Étagère", True),  # Python's re has no \p{...}
        (r"^\p{L}+$", "abc1", False),
        (r"^(?<year>\d{4})-\d{2}$", "2024-05", True),  # an ECMA-262 named group; Python spells it (?P<...>)
        (r"^(?<year>\d{4})-\d{2}$", "24-05", False),
    ],
)
def test_patterns_are_ecma_regular_expressions(tmp_path: Path, pattern: str, text: str, *, matches: bool) -> None:
    """Lint matches patterns as ECMA-262 does, as the runtime validator does, not as Python's re."""
    parameters = {
        "type": "object",
        "properties": {
            "v": {"type": "string", "pattern": pattern, "description": "A value"},
            "w": {"type": "string", "pattern": pattern, "default": text, "description": "A default"},
        },
    }
    path = _write(tmp_path / "search.yaml", {"search": _tool(parameters, examples=[{"args": {"v": text}}])})
    outcome = ArgumentValidator.for_spec(_loaded(path)).validate({"v": text})
    assert outcome.valid is matches
    found = [(d.code, d.pointer) for d in _lint(path, "TF208", "TF210")]
    expected = [
        ("TF208", "/tools/search/parameters/properties/w/default"),
        ("TF210", "/tools/search/examples/0/args/v"),
    ]
    assert found == ([] if matches else expected)


def test_strict_tools_get_no_coercion_in_examples(tmp_path: Path) -> None:
    """An example that sends "5" for an integer is fine for a tool that coerces and rejected by a strict one."""
    parameters = {"type": "object", "properties": {"n": {"type": "integer", "description": "How many"}}}
    tools = {
        "lenient": _tool(parameters, examples=[{"args": {"n": "5"}}]),
        "strict": _tool(parameters, strict=True, examples=[{"args": {"n": "5"}}]),
    }
    path = _write(tmp_path / "search.yaml", tools)
    assert [(d.code, d.pointer) for d in _lint(path, "TF210")] == [("TF210", "/tools/strict/examples/0/args/n")]


def test_unknown_argument_is_reported_at_its_key_only_where_calls_reject_it(tmp_path: Path) -> None:
    """An undeclared argument is dropped by a call (fine), unless additionalProperties is false (at the key)."""
    properties = {"query": {"type": "string", "description": "What to look for"}}
    tools = {
        "open": _tool({"type": "object", "properties": properties}, examples=[{"args": {"qeury": "x"}}]),
        "closed": _tool(
            {"type": "object", "properties": properties, "additionalProperties": False},
            examples=[{"args": {"qeury": "x"}}],
        ),
    }
    path = _write(tmp_path / "search.yaml", tools)
    found = _lint(path, "TF210")
    assert [(d.pointer, d.message) for d in found] == [
        (
            "/tools/closed/examples/0/args/qeury",
            (
                "examples[0] args are rejected: qeury: Unknown parameter; did you mean 'query'? "
                '(expected: additionalProperties: false) (got: "x")'
            ),
        ),
    ]
    lines = path.read_text(encoding="utf-8").splitlines()
    line = max(i for i, text in enumerate(lines, start=1) if '"qeury"' in text)
    assert (found[0].line, found[0].column) == (line, lines[line - 1].index('"qeury"') + 1)  # the key, not its value


def test_result_examples_are_judged_as_call_results(tmp_path: Path) -> None:
    """An example result is checked as a call's data: formats asserted, the first problem in the runtime's words."""
    output = {"type": "object", "properties": {"owner": {"type": "string", "format": "email"}}}
    examples = [{"args": {}, "result": {"owner": "ana@example.com"}}, {"args": {}, "result": {"owner": "ana"}}]
    tool = _tool({"type": "object"}, output_schema=output, examples=examples)
    path = _write(tmp_path / "search.yaml", {"search": tool})
    loaded = _loaded(path)
    results = ResultValidator.for_spec(loaded)
    assert results.normalize({"owner": "ana@example.com"}).success
    assert not results.normalize({"owner": "ana"}).success
    assert [(d.pointer, d.message) for d in _lint(path, "TF210")] == [
        (
            "/tools/search/examples/1/result/owner",
            (
                "examples[1] result does not match 'output_schema': "
                'data.owner: Must be a valid email (expected: format: email) (got: "ana")'
            ),
        ),
    ]


def test_context_shares_the_runtime_validators(tmp_path: Path) -> None:
    """ctx.validator compiles each tool's runtime validators once per lint run, and None for unusable schemas."""
    tools = {
        "search": _tool({"type": "object"}, output_schema={"type": "string"}),
        "broken": _tool({"type": "object", "properties": {"q": {"type": "text"}}}),
    }
    path = _write(tmp_path / "search.yaml", tools)
    ctx = LintContext(files=load_specs([path]).files)
    search, broken = ctx.tools
    arguments = ctx.validator(search)
    assert isinstance(arguments, ArgumentValidator)
    assert ctx.validator(search, "parameters") is arguments
    assert isinstance(ctx.validator(search, "output_schema"), ResultValidator)
    assert ctx.validator(broken) is None
    assert ctx.validator(broken, "output_schema") is None


# --- TF223: defaults that turn a parameter rule against its callers ---------------------


@pytest.mark.parametrize(
    ("rule", "defaults", "call"),
    [
        ({"exclusive": ["limit", "room"]}, {"limit": 10}, {"room": "hall"}),
        ({"exactly_one": ["limit", "room"]}, {"limit": 10}, {"room": "hall"}),
        ({"when": "room", "require": ["mode"]}, {"room": "hall"}, {}),
        ({"when": {"mode": "advanced"}, "require": ["limit"]}, {"mode": "advanced"}, {}),
    ],
)
def test_tf223_warns_of_defaults_that_make_calls_fail(
    tmp_path: Path, rule: dict[str, Any], defaults: dict[str, Any], call: dict[str, Any]
) -> None:
    """Each TF223 warning names a default that makes a call the rule allows fail; without it, the call passes."""
    properties: dict[str, Any] = {
        "limit": {"type": "integer", "description": "Most results"},
        "room": {"type": "string", "description": "Only this room"},
        "mode": {"type": "string", "description": "How to search"},
    }
    plain = _write(
        tmp_path / "plain.yaml", {"search": _tool({"type": "object", "properties": properties}, parameter_rules=[rule])}
    )
    assert ArgumentValidator.for_spec(_loaded(plain)).validate(call).valid
    assert _lint(plain, "TF223") == []
    for name, value in defaults.items():
        properties[name] = {**properties[name], "default": value}
    with_defaults = _write(
        tmp_path / "defaults.yaml",
        {"search": _tool({"type": "object", "properties": properties}, parameter_rules=[rule])},
    )
    assert not ArgumentValidator.for_spec(_loaded(with_defaults)).validate(call).valid
    found = _lint(with_defaults, "TF223")
    assert [(d.pointer, d.severity.value) for d in found] == [
        (f"/tools/search/parameters/properties/{name}/default", "warning") for name in defaults
    ]
