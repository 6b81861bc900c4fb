"""TF226 argv-option-injection: which argv items and which parameter schemas let a value become an option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolflow._checking import CompiledSchema
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint.rules.tf226_argv_option_injection import SAFE_FORMATS, pattern_refuses_dash

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("pattern", "refuses"),
    [
        ("^[^-]", True),
        ("^[A-Za-z0-9_]", True),
        ("^[A-Za-z_][A-Za-z0-9_]*$", True),
        ("^(?!-)", True),
        ("^(?!-).*$", True),
        ("^(?![-.])", True),
        ("^(?=[a-z])", True),
        ("^(?:[a-z]+|[0-9]+)$", True),
        ("^a|^b", True),
        ("^\\d+$", True),
        ("^\\w", True),
        ("^[\\w.]", True),
        ("^#[0-9]+$", True),
        ("^a{1,3}", True),
        ("^[^]-]", True),
        ("^$", True),
        # Not refusing, or not understood (which counts as not refusing).
        ("^[^/]", False),
        ("^[^/].*\\.py$", False),
        ("[a-z]", False),
        ("^[a-z]*", False),
        ("^[a-z]?x", False),
        ("^a{0,3}-", False),
        ("^(a|-b)", False),
        ("^(?:[a-z]|)", False),
        ("^a|b", False),
        ("^\\S", False),
        ("^.", False),
        ("^\\-", False),
        ("^-", False),
        ("^[\\w-]", False),
        ("^[]-]", False),
        ("^(?![a-z])", False),
        ("^\\p{L}", False),
        ("^(?<name>a)", False),
        ("^", False),
        ("", False),
        ("^[abc", False),
        ("^(", False),
    ],
)
def test_patterns_that_refuse_a_leading_dash(pattern: str, refuses: bool) -> None:
    """A pattern counts only when every alternative is anchored and its first character cannot be '-'."""
    assert pattern_refuses_dash(pattern) is refuses


@pytest.mark.parametrize("pattern", ["^[^-]", "^[A-Za-z0-9_]", "^(?!-)", "^(?:[a-z]+|[0-9]+)$", "^a|^b", "^\\w"])
def test_refusing_patterns_refuse_at_run_time(pattern: str) -> None:
    """What the rule counts as refusing, the runtime validator does refuse."""
    schema = CompiledSchema.compile({"type": "string", "pattern": pattern})
    assert schema.fast is not None
    for value in ("-r", "--help", "--output=/etc/passwd", "-"):
        assert not schema.fast(value), (pattern, value)


@pytest.mark.parametrize("format_", sorted(SAFE_FORMATS))
def test_safe_formats_refuse_a_leading_dash_at_run_time(format_: str) -> None:
    """Each format the rule trusts is asserted by the runtime validator and refuses a leading '-'."""
    schema = CompiledSchema.compile({"type": "string", "format": format_})
    assert schema.fast is not None
    for value in ("-1", "-r", "--help", "-2024-01-01", "-12:00:00Z", "-a.example", "-a:b", "-::1"):
        assert not schema.fast(value), (format_, value)


def _lint_command(tmp_path: Path, argv: list[str], properties: dict[str, Any]) -> list[str]:
    spec = tmp_path / "tools.yaml"
    tool = {
        "description": "Run a program",
        "parameters": {"type": "object", "properties": properties},
        "command": argv,
    }
    spec.write_text(json.dumps({"toolflow": 1, "tools": {"run": tool}}))
    report = lint_paths([spec], LintConfig(select=("TF226",)))
    return [d.message for d in report.diagnostics]


def test_the_program_and_what_follows_a_double_dash_are_not_options(tmp_path: Path) -> None:
    """argv[0] is the program; after a literal '--' nothing is read as an option."""
    value = {"type": "string", "description": "anything"}
    assert _lint_command(tmp_path, ["{{ p }}", "--", "{{ v }}"], {"p": value, "v": value}) == []
    messages = _lint_command(tmp_path, ["prog", "{{ v }}", "--", "{{ v }}"], {"v": value})
    assert len(messages) == 1
    assert messages[0].startswith("command argv[1] of tool 'run' starts with a value of parameter 'v'")


@pytest.mark.parametrize(
    ("schema", "reported"),
    [
        ({"type": "string"}, True),
        ({"type": "string", "pattern": "^[^-]"}, False),
        ({"type": "string", "enum": ["a", "-b"]}, True),
        ({"type": "string", "enum": ["a", "b"]}, False),
        ({"const": "-x"}, True),
        ({"type": "integer"}, True),
        ({"type": "integer", "minimum": 0}, False),
        ({"type": "number", "exclusiveMinimum": 0}, False),
        ({"type": "number", "minimum": -1}, True),
        ({"type": ["string", "integer"], "pattern": "^[^-]"}, True),
        ({"type": ["string", "integer"], "pattern": "^[^-]", "minimum": 0}, False),
        ({"type": "boolean"}, False),
        ({"type": "array", "items": {"type": "string"}}, False),
        ({"type": "object"}, False),
        ({"allOf": [{"type": "string"}, {"pattern": "^[a-z]"}]}, False),
        ({"anyOf": [{"type": "string", "pattern": "^[a-z]"}, {"type": "integer", "minimum": 0}]}, False),
        ({"anyOf": [{"type": "string", "pattern": "^[a-z]"}, {"type": "string"}]}, True),
        ({"$ref": "#/$defs/safe"}, True),
        ({}, True),
    ],
)
def test_which_schemas_let_a_rendered_value_start_with_a_dash(
    tmp_path: Path, schema: dict[str, Any], reported: bool
) -> None:
    """Strings need a refusing pattern, format, enum or const; numbers a minimum of 0; a list renders as '[...]'."""
    messages = _lint_command(tmp_path, ["prog", "{{ v }}"], {"v": {**schema, "description": "v"}})
    assert bool(messages) is reported, messages


def test_a_loop_takes_a_list_apart(tmp_path: Path) -> None:
    """A list rendered whole starts with '['; iterated, its items come first and must refuse '-' themselves."""
    loop = "{% for f in files %}{{ f }} {% endfor %}"
    loose = {"files": {"type": "array", "items": {"type": "string"}, "description": "f"}}
    strict = {"files": {"type": "array", "items": {"type": "string", "pattern": "^[^-]"}, "description": "f"}}
    assert _lint_command(tmp_path, ["prog", "{{ files }}"], loose) == []
    assert len(_lint_command(tmp_path, ["prog", loop], loose)) == 1
    assert _lint_command(tmp_path, ["prog", loop], strict) == []


def test_a_value_that_chooses_the_option_needs_an_enum(tmp_path: Path) -> None:
    """`--{{ flag }}` lets the value pick any option (and its value, with '='), unless it is enumerated."""
    free = {"flag": {"type": "string", "pattern": "^[a-z]", "description": "f"}}
    enumerated = {"flag": {"type": "string", "enum": ["verbose", "quiet"], "description": "f"}}
    messages = _lint_command(tmp_path, ["prog", "--{{ flag }}"], free)
    expected = (
        "command argv[1] of tool 'run' lets parameter 'flag' choose the option itself ('--{{ flag }}');"
        " give it an 'enum' of the options allowed"
    )
    assert messages == [expected]
    assert _lint_command(tmp_path, ["prog", "--{{ flag }}"], enumerated) == []
    assert _lint_command(tmp_path, ["prog", "--level={{ flag }}", "-n{{ flag }}", "x{{ flag }}"], free) == []


def test_the_shipped_specs_and_examples_give_no_option_injection_warning() -> None:
    """Every spec under specs/ is an example to copy: none lets a value become an option."""
    report = lint_paths([ROOT / "specs"], LintConfig(select=("TF226",)))
    assert [d.render() for d in report.diagnostics] == []
