"""The other subcommands in-process: ``rule``, ``list``, ``spec-schema``, ``--version``, ``--help``, no command."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import toolflow
from toolflow._cli import run

REPO = Path(__file__).parents[2]

SAY = """\
toolflow: 1
tools:
  say:
    description: Say something to the room
    category: terminal
    timeout: 500ms
    parameters:
      type: object
      properties:
        message:
          type: string
          description: What to say
        loud:
          type: boolean
          description: Shout it
      required: [message]
    template: "You say: {{ message }}"
  search_objects:
    description: Search the objects in a room
    implementation: search
    cache:
      scope: session
"""


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    monkeypatch.chdir(tmp_path)


def write(path: str, text: str) -> str:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text))
    return path


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# -- rule ---------------------------------------------------------------------------------------------------------


def test_rule_by_code_prints_its_documentation() -> None:
    """``toolflow rule TF201`` prints a heading with code, name and severity, then the rule's docs."""
    code, out, err = cli("rule", "TF201")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "# TF201 invalid-tool-name (error)"
    assert lines[1] == ""
    assert lines[2] == "A tool name that model providers reject."
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert section in lines


@pytest.mark.parametrize("name", ["invalid-tool-name", "tf201", "INVALID-TOOL-NAME"])
def test_rule_by_name_or_any_case_is_the_same(name: str) -> None:
    """A rule is found by its kebab name or its code, in any case."""
    assert cli("rule", name) == cli("rule", "TF201")


def test_rule_all_lists_every_rule_sorted() -> None:
    """``toolflow rule --all`` lists each rule once, by code, with its name, severity and summary."""
    code, out, err = cli("rule", "--all")
    assert (code, err) == (0, "")
    rows = [re.split(r"\s+", line, maxsplit=3) for line in out.splitlines()]
    codes = [row[0] for row in rows]
    assert codes == sorted(codes)
    assert len(codes) == len(set(codes))
    assert {"TF001", "TF002", "TF101", "TF201", "TF901", "TF902"} <= set(codes)
    by_code = {row[0]: row for row in rows}
    assert by_code["TF201"] == ["TF201", "invalid-tool-name", "error", "A tool name that model providers reject."]
    assert by_code["TF901"][1:3] == ["unused-suppression", "warning"]
    assert all(row[2] in {"error", "warning"} for row in rows)


def test_rule_without_argument_lists_every_rule() -> None:
    """``toolflow rule`` alone lists the rules like ``--all``."""
    assert cli("rule") == cli("rule", "--all")


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("invalid-tool-nam", "invalid-tool-name"), ("unused-supression", "unused-suppression")],
)
def test_unknown_rule_exits_2_with_did_you_mean(name: str, suggestion: str) -> None:
    """An unknown rule exits 2 and suggests the closest code or name."""
    code, out, err = cli("rule", name)
    assert code == 2
    assert out == ""
    assert err == f"toolflow: error: unknown rule {name!r}; did you mean {suggestion!r}?\n"


def test_unknown_rule_without_a_close_match() -> None:
    """A name like nothing known exits 2 without a suggestion."""
    code, _, err = cli("rule", "zzzzzz")
    assert code == 2
    assert err == "toolflow: error: unknown rule 'zzzzzz'\n"


# -- list ---------------------------------------------------------------------------------------------------------


def test_list_table() -> None:
    """``toolflow list`` prints a table of the declared tools and a count."""
    write("specs/room.yaml", SAY)
    code, out, err = cli("list", "specs")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["TOOL", "CATEGORY", "IMPLEMENTED", "BY", "TIMEOUT", "CACHE", "LOCATION"]
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert rows["say"] == ["say", "terminal", "template", "0.5s", "-", "specs/room.yaml:3:3"]
    assert rows["search_objects"] == [
        "search_objects",
        "safe_chain",
        "implementation",
        "30s",
        "session",
        "specs/room.yaml:18:3",
    ]
    assert lines[-1] == "2 tools in 1 file"


def test_list_columns_line_up() -> None:
    """Each column of the table starts at the same offset on every row."""
    write("specs/room.yaml", SAY)
    lines = cli("list", "specs")[1].splitlines()[:-1]
    start = lines[0].index("CATEGORY")
    assert [line[start:].split()[0] for line in lines[1:]] == ["terminal", "safe_chain"]


def test_list_json() -> None:
    """``toolflow list --output-format json`` prints every tool's facts as JSON."""
    write("specs/room.yaml", SAY)
    code, out, err = cli("list", "--output-format", "json", "specs")
    assert (code, err) == (0, "")
    tools: list[dict[str, Any]] = json.loads(out)["tools"]
    by_name = {tool["name"]: tool for tool in tools}
    assert by_name["say"] == {
        "name": "say",
        "category": "terminal",
        "implementation": "template",
        "timeout": 0.5,
        "retry_attempts": by_name["say"]["retry_attempts"],
        "cache": None,
        "parameters": ["loud", "message"],
        "description": "Say something to the room",
        "expose": True,
        "location": "specs/room.yaml:3:3",
    }
    assert by_name["search_objects"]["cache"] == "session"
    assert by_name["search_objects"]["parameters"] == []


def test_list_defaults_to_specs() -> None:
    """Without PATH, ``toolflow list`` reads ``specs/``."""
    write("specs/room.yaml", SAY)
    assert cli("list") == cli("list", "specs")


def test_list_reports_load_errors_on_stderr_and_exits_1() -> None:
    """Problems found while loading go to stderr and make ``list`` exit 1; the valid tools are still listed."""
    write("specs/room.yaml", SAY)
    write("specs/broken.yaml", 'toolflow: 1\ntools:\n  x:\n    description: "oops\n')
    code, out, err = cli("list", "--output-format", "json", "specs")
    assert code == 1
    assert err.startswith("specs/broken.yaml:")
    assert " TF001 " in err
    assert {tool["name"] for tool in json.loads(out)["tools"]} == {"say", "search_objects"}


def test_list_count_is_pluralised() -> None:
    """One tool in one file reads ``1 tool in 1 file``."""
    write("specs/one.yaml", SAY.split("  search_objects:", maxsplit=1)[0])
    assert cli("list", "specs")[1].splitlines()[-1] == "1 tool in 1 file"


# -- call ---------------------------------------------------------------------------------------------------------


def test_call_of_a_tool_whose_schema_is_invalid_says_why_and_points_at_lint() -> None:
    """A parameter schema pasted from another ecosystem stops `call` with the problem, where it is, and lint."""
    write("specs/say.yaml", SAY.replace("type: boolean", "type: bool").split("  search_objects:")[0])
    code, out, err = cli("call", "say", '{"message": "hi"}')
    assert (code, out) == (1, "")
    assert err == (
        "toolflow: error: specs/say.yaml:7:5: tool 'say': its parameters cannot be used: the schema is not valid "
        "JSON Schema: 'bool' is not a JSON Schema type; did you mean 'boolean'? (at 'properties.loud.type'); "
        "'toolflow lint' lists every problem of the specs\n"
    )


# -- spec-schema --------------------------------------------------------------------------------------------------


def test_spec_schema_is_a_draft_07_schema() -> None:
    """``toolflow spec-schema`` prints valid JSON: a draft-07 JSON Schema."""
    code, out, err = cli("spec-schema")
    assert (code, err) == (0, "")
    schema = json.loads(out)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_spec_schema_accepts_a_good_spec_and_refuses_a_bad_one() -> None:
    """The printed schema validates a spec that lints clean, and refuses an unknown key."""
    schema = json.loads(cli("spec-schema")[1])
    validator = jsonschema.Draft7Validator(schema)
    good = yaml.safe_load(SAY)
    assert list(validator.iter_errors(good)) == []
    bad = yaml.safe_load(SAY.replace("    category: terminal\n", "    categroy: terminal\n"))
    assert list(validator.iter_errors(bad)) != []


def test_spec_schema_is_the_shipped_file() -> None:
    """Without plugins, the printed schema is the one shipped as package data."""
    shipped = json.loads((Path(toolflow.__file__).parent / "data" / "spec-v1.schema.json").read_text())
    assert json.loads(cli("spec-schema", "--no-plugins")[1]) == shipped


# -- version, help, no command ------------------------------------------------------------------------------------


def test_no_command_prints_help_and_exits_2() -> None:
    """``toolflow`` alone prints the usage with every command and exits 2."""
    code, out, err = cli()
    assert (code, err) == (2, "")
    assert out.startswith("usage: toolflow")
    for command in ("lint", "rule", "list", "spec-schema"):
        assert command in out


def test_version_and_help_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` and ``--help`` exit 0 and print the version and the usage (wherever they print it)."""
    results = [cli("--version"), cli("--help"), cli("lint", "--help")]
    assert [code for code, _, _ in results] == [0, 0, 0]
    printed = capsys.readouterr().out + "".join(out for _, out, _ in results)
    assert f"toolflow {toolflow.__version__}\n" in printed
    assert "usage: toolflow lint" in printed


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["lint", "--help"]])
def test_version_and_help_write_to_the_given_stdout(args: list[str]) -> None:
    """``run(["--version"], stdout=...)`` writes to that stream, like every other command."""
    code, out, _ = cli(*args)
    assert code == 0
    assert out != ""


def test_unknown_command_exits_2() -> None:
    """An unknown command exits 2 and names the valid choices."""
    code, out, err = cli("lnit")
    assert code == 2
    assert out == ""
    assert "'lint'" in err


# -- pre-commit -----------------------------------------------------------------------------------------------------


def test_pre_commit_hook_definition() -> None:
    """``.pre-commit-hooks.yaml`` is valid YAML declaring a ``toolflow-lint`` hook that runs ``toolflow lint``."""
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list)
    by_id = {hook["id"]: hook for hook in hooks}
    hook = by_id["toolflow-lint"]
    assert hook["entry"] == "toolflow lint"
    assert hook["language"] == "python"
    assert {"id", "name", "entry", "language"} <= hook.keys()
    files = re.compile(hook.get("files", ""))
    assert files.search("specs/room.yaml")
    assert files.search("specs/room.yml")
    assert not files.search("README.md")
