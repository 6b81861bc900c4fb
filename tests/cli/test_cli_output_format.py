"""`--output-format`, the one spelling of machine output: lint, list, plugins, run and call.

The old spellings (`list --json`, `plugins --json`, `run --output json`) still work for one release,
print the same, and say on standard error which spelling replaces them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from _cli_project import make_project, toolflow

from toolflow._cli import _parser

SPECS = """\
toolflow: 1
tools:
  say:
    description: Say something to the room.
    category: terminal
    parameters:
      type: object
      properties:
        message: {type: string, description: What to say.}
      required: [message]
    template: "You say: {{ message }}"
"""


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with one terminal tool and a scripted session that calls it; the working directory."""
    project = make_project(tmp_path, monkeypatch, SPECS)
    turns = [{"tool_calls": [{"name": "say", "arguments": {"message": "hi"}}]}]
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    return project


def _deprecated(spelling: str, value: str = "json") -> str:
    return (
        f"toolflow: warning: {spelling} is deprecated and will be removed in the next release; "
        f"use --output-format {value}\n"
    )


def _timeless(value: Any) -> Any:
    """*value* without its ``duration_ms`` keys, which differ from run to run."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "duration_ms"}
    if isinstance(value, list):
        return [_timeless(item) for item in value]
    return value


def _choices(command: str) -> tuple[str, ...]:
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = subparsers.choices[command]
    (option,) = (a for a in sub._actions if "--output-format" in a.option_strings)
    return tuple(option.choices or ())


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        ("lint", ("text", "full", "json", "github", "sarif", "junit", "gitlab")),
        ("list", ("text", "json")),
        ("plugins", ("text", "json")),
        ("run", ("text", "json")),
        ("call", ("json",)),
    ],
)
def test_every_command_with_machine_output_spells_it_output_format(command: str, choices: tuple[str, ...]) -> None:
    """Each command with a JSON form takes `--output-format`, with these choices (the first is the default)."""
    assert _choices(command) == choices


def test_list_json_old_and_new_spelling_print_the_same() -> None:
    """`list --json` prints what `list --output-format json` prints, and warns once on stderr."""
    code, new, err = toolflow("list", "--output-format", "json")
    assert (code, err) == (0, "")
    assert [tool["name"] for tool in json.loads(new)["tools"]] == ["say"]
    assert toolflow("list", "--json") == (0, new, _deprecated("--json"))


def test_plugins_json_old_and_new_spelling_print_the_same() -> None:
    """`plugins --json` prints what `plugins --output-format json` prints, and warns once on stderr."""
    code, new, err = toolflow("plugins", "--output-format", "json")
    assert (code, err) == (0, "")
    assert "plugins" in json.loads(new)
    assert toolflow("plugins", "--json") == (0, new, _deprecated("--json"))


def test_run_output_old_and_new_spelling_print_the_same() -> None:
    """`run --output json` prints what `run --output-format json` prints, and names the new spelling on stderr."""
    code, new, err = toolflow("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert (code, err) == (0, "")
    assert json.loads(new)["reason"] == "terminal"
    code, old, err = toolflow("run", "--model", "scripted:session.yaml", "--output", "json")
    assert (code, err) == (0, _deprecated("--output json"))
    assert _timeless(json.loads(old)) == _timeless(json.loads(new))
    assert toolflow("run", "--model", "scripted:session.yaml", "--output", "text")[2] == _deprecated(
        "--output text", "text"
    )


def test_the_last_spelling_given_wins() -> None:
    """As with any repeated option, the last of `--json` and `--output-format` decides."""
    code, out, err = toolflow("list", "--json", "--output-format", "text")
    assert (code, err) == (0, _deprecated("--json"))
    assert out.splitlines()[0].startswith("TOOL ")


def test_call_takes_output_format_json() -> None:
    """`call --output-format json` prints the result as `call` always has; another format is a usage error."""
    plain = toolflow("call", "say", '{"message": "hi"}')
    assert plain[0] == 0
    assert toolflow("call", "--output-format", "json", "say", '{"message": "hi"}') == plain
    code, out, err = toolflow("call", "--output-format", "text", "say", "{}")
    assert (code, out) == (2, "")
    assert "invalid choice: 'text'" in err


@pytest.mark.parametrize("command", ["list", "plugins", "lint"])
def test_an_unknown_format_is_a_usage_error(command: str) -> None:
    """A format the command does not have exits 2 with the choices."""
    code, out, err = toolflow(command, "--output-format", "yaml")
    assert (code, out) == (2, "")
    assert err.startswith(f"toolflow: error: {command}: argument --output-format: invalid choice: 'yaml'")


def test_help_marks_the_old_spellings_deprecated() -> None:
    """`--help` lists the old spelling as deprecated, next to `--output-format`."""
    code, out, _ = toolflow("list", "--help")
    assert code == 0
    assert "--output-format {text,json}" in out
    assert "deprecated: use --output-format json" in out


@pytest.mark.parametrize("abbreviation", ["--out", "--outp", "--output-f"])
def test_an_abbreviation_of_output_format_is_not_ambiguous(abbreviation: str) -> None:
    """`run --out json` is `--output-format json`: the old spelling `--output` it also matches means the same."""
    code, out, err = toolflow("run", "--model", "scripted:session.yaml", abbreviation, "json")
    assert (code, err) == (0, "")
    assert json.loads(out)["reason"] == "terminal"


def test_an_abbreviation_still_fails_between_different_options() -> None:
    """Only the deprecated spellings step aside: `--s` matches `--specs`, `--system` and `--shutdown-grace`."""
    code, out, err = toolflow("run", "--model", "scripted:session.yaml", "--s", "x")
    assert (code, out) == (2, "")
    assert "ambiguous option: --s could match" in err
