"""``toolflow lint`` in-process: exit codes, the text format, statistics, rule selection, targets, default paths.

Every test runs in its own ``tmp_path`` holding an empty ``pyproject.toml``, so
no configuration from the surrounding checkout leaks in. Assertions name
specific codes (TF0xx, TF1xx, TF201, TF9xx), never total counts, because new
rules are added all the time.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolflow._cli import run

CLEAN = """\
toolflow: 1
tools:
  say:
    description: Say something to the room
    category: terminal
    parameters:
      type: object
      properties:
        message:
          type: string
          description: What to say
      required: [message]
    template: "You say: {{ message }}"
"""

BAD_NAME = """\
toolflow: 1
tools:
  search objects:
    description: Search objects in the room
    implementation: search
"""

UNKNOWN_KEY = """\
toolflow: 1
tools:
  say:
    description: Say something to the room
    implementation: say
    colour: red
"""

SYNTAX_ERROR = """\
toolflow: 1
tools:
  say:
    description: "Say something
"""

BAD_NAME_LINE = (
    "specs/bad_name.yaml:3:3: TF201 tool name 'search objects' has characters other than a-z, A-Z, 0-9, '_' and '-'; "
    "rename it, e.g. to 'search_objects'"
)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    monkeypatch.chdir(tmp_path)


def write(path: str, text: str) -> str:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text))
    return path


def lint(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["lint", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def lint_json(*args: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, _ = lint("--output-format", "json", *args)
    diagnostics: list[dict[str, Any]] = json.loads(out)["diagnostics"]
    return code, diagnostics


def codes(diagnostics: list[dict[str, Any]]) -> set[str]:
    return {d["code"] for d in diagnostics}


# -- exit codes ---------------------------------------------------------------------------------------------------


def test_clean_spec_exits_0() -> None:
    """A spec without problems exits 0 and says all checks passed."""
    write("specs/say.yaml", CLEAN)
    code, out, err = lint("specs")
    assert (code, err) == (0, "")
    assert out == "All checks passed: 1 file, 1 tool.\n"


def test_warnings_only_exit_0() -> None:
    """Warnings alone (an empty file, TF006) do not fail the run."""
    write("specs/empty.yaml", "")
    code, out, _ = lint("specs")
    assert code == 0
    assert "specs/empty.yaml:1:1: TF006 " in out
    assert out.endswith("Found 0 errors and 1 warning in 1 file.\n")


def test_errors_exit_1() -> None:
    """An error diagnostic fails the run with exit code 1."""
    write("specs/bad_name.yaml", BAD_NAME)
    code, out, err = lint("specs")
    assert code == 1
    assert BAD_NAME_LINE in out.splitlines()
    assert err == ""


def test_fail_on_warning_turns_warnings_into_failure() -> None:
    """``--fail-on warning`` makes a warnings-only run exit 1; ``--fail-on error`` keeps it at 0."""
    write("specs/empty.yaml", "")
    assert lint("--fail-on", "warning", "specs")[0] == 1
    assert lint("--fail-on", "error", "specs")[0] == 0


def test_yaml_syntax_error_is_a_diagnostic_not_a_crash() -> None:
    """A YAML syntax error is reported as TF001 with exit 1, and nothing lands on stderr."""
    write("specs/broken.yaml", SYNTAX_ERROR)
    code, diagnostics = lint_json("specs")
    assert code == 1
    assert [(d["code"], d["file"]) for d in diagnostics] == [("TF001", "specs/broken.yaml")]
    code, out, err = lint("specs/broken.yaml")
    assert code == 1
    assert out.startswith("specs/broken.yaml:")
    assert err == ""


@pytest.mark.parametrize("depth", [500, 5000])
def test_deeply_nested_yaml_is_a_diagnostic_not_an_internal_error(depth: int) -> None:
    """Bad input never produces a traceback, however deeply it nests."""
    write("specs/deep.yaml", "toolflow: 1\ntools:\n  x:\n    description: " + "[" * depth + "]" * depth + "\n")
    code, out, err = lint("--select", "TF0", "specs")
    assert (code, err) == (1, "")
    assert re.match(r"specs/deep\.yaml:\d+:\d+: TF0\d\d ", out)


def test_missing_path_is_a_diagnostic() -> None:
    """A path that does not exist is TF005 at 1:1, exit 1."""
    code, out, _ = lint("nowhere.yaml")
    assert code == 1
    assert out.startswith("nowhere.yaml:1:1: TF005 ")


def test_unknown_option_is_a_usage_error() -> None:
    """An unknown option exits 2 with a message naming it, and writes no report."""
    write("specs/say.yaml", CLEAN)
    code, out, err = lint("--bogus", "specs")
    assert code == 2
    assert out == ""
    assert "--bogus" in err
    assert "Traceback" not in err


def test_unknown_output_format_is_a_usage_error() -> None:
    """``--output-format xml`` exits 2 and lists the valid choices."""
    code, _, err = lint("--output-format", "xml", "specs")
    assert code == 2
    assert "'sarif'" in err


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_unknown_rule_in_selection_is_a_usage_error(option: str) -> None:
    """An unknown rule in a selection exits 2 with a did-you-mean."""
    write("specs/say.yaml", CLEAN)
    code, out, err = lint(option, "invalid-tool-nam", "specs")
    assert code == 2
    assert out == ""
    assert err == "toolflow: error: unknown rule 'invalid-tool-nam'; did you mean 'invalid-tool-name'?\n"


def test_unknown_target_is_a_usage_error() -> None:
    """An unknown ``--target`` exits 2, lists the providers and suggests the closest."""
    write("specs/say.yaml", CLEAN)
    code, out, err = lint("--target", "openai", "--target", "openia", "specs")
    assert code == 2
    assert out == ""
    assert err == (
        "toolflow: error: unknown target 'openia'; choose from openai, anthropic, gemini, mcp; did you mean 'openai'?\n"
    )


def test_usage_error_message_names_the_program_once() -> None:
    """A usage error reads ``toolflow: error: ...`` without repeating the program name."""
    _, _, err = lint("--bogus")
    assert not err.startswith("toolflow: error: toolflow")


# -- text format and statistics -----------------------------------------------------------------------------------


def test_text_format_lines_are_path_line_col_code_message() -> None:
    """Each text line is ``path:line:col: CODE message``, sorted by file and position, then a summary."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("specs/unknown_key.yaml", UNKNOWN_KEY)
    code, out, _ = lint("--select", "TF201,TF101", "specs")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == BAD_NAME_LINE
    assert lines[1].startswith("specs/unknown_key.yaml:6:5: TF101 unknown key 'colour' in tool 'say'")
    assert lines[2:] == ["Found 2 errors and 0 warnings in 2 files."]


def test_text_lines_match_the_json_diagnostics() -> None:
    """The text lines and the JSON diagnostics describe the same problems in the same order."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("specs/unknown_key.yaml", UNKNOWN_KEY)
    write("specs/empty.yaml", "")
    _, out, _ = lint("specs")
    _, diagnostics = lint_json("specs")
    expected = [f"{d['file']}:{d['line']}:{d['column']}: {d['code']} {d['message']}" for d in diagnostics]
    assert out.splitlines()[:-1] == expected


def test_statistics_in_text_mode_follow_the_report() -> None:
    """``--statistics`` appends a count per rule, most frequent first, to the text report."""
    write("specs/a.yaml", BAD_NAME)
    write("specs/b.yaml", BAD_NAME.replace("search objects", "find things"))
    write("specs/c.yaml", UNKNOWN_KEY)
    code, out, err = lint("--statistics", "--select", "TF201,TF101", "specs")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[-3] == "Found 3 errors and 0 warnings in 3 files."
    assert lines[-2:] == ["    2  TF201  invalid-tool-name", "    1  TF101  unknown-key"]


def test_statistics_with_a_machine_format_go_to_stderr() -> None:
    """With ``--output-format json``, statistics go to stderr and stdout stays valid JSON."""
    write("specs/a.yaml", BAD_NAME)
    code, out, err = lint("--statistics", "--output-format", "json", "--select", "TF201", "specs")
    assert code == 1
    assert json.loads(out)["summary"]["errors"] == 1
    assert err == "    1  TF201  invalid-tool-name\n"


def test_statistics_of_a_clean_run_are_empty() -> None:
    """A clean run with ``--statistics`` prints only the all-clear line."""
    write("specs/say.yaml", CLEAN)
    assert lint("--statistics", "specs") == (0, "All checks passed: 1 file, 1 tool.\n", "")


# -- rule selection -----------------------------------------------------------------------------------------------


@pytest.fixture
def three_problems() -> None:
    write("specs/bad_name.yaml", BAD_NAME)  # TF201
    write("specs/unknown_key.yaml", UNKNOWN_KEY)  # TF101
    write("specs/empty.yaml", "")  # TF006


@pytest.mark.usefixtures("three_problems")
@pytest.mark.parametrize(
    ("args", "present", "absent"),
    [
        (["--select", "TF201"], {"TF201"}, {"TF101", "TF006"}),
        (["--select", "tf201"], {"TF201"}, {"TF101", "TF006"}),
        (["--select", "invalid-tool-name"], {"TF201"}, {"TF101", "TF006"}),
        (["--select", "TF1"], {"TF101"}, {"TF201", "TF006"}),
        (["--select", "TF0,TF1"], {"TF006", "TF101"}, {"TF201"}),
        (["--select", "TF0", "--select", "unknown-key"], {"TF006", "TF101"}, {"TF201"}),
        (["--select", "ALL"], {"TF006", "TF101", "TF201"}, set()),
        (["--ignore", "TF201"], {"TF006", "TF101"}, {"TF201"}),
        (["--ignore", "invalid-tool-name,empty-file"], {"TF101"}, {"TF201", "TF006"}),
        (["--ignore", "TF0", "--ignore", "TF1"], {"TF201"}, {"TF006", "TF101"}),
        (["--select", "TF1", "--extend-select", "TF201"], {"TF101", "TF201"}, {"TF006"}),
        (["--extend-select", "TF201"], {"TF006", "TF101", "TF201"}, set()),
        (["--select", "TF0,TF1,TF2", "--ignore", "TF20"], {"TF006", "TF101"}, {"TF201"}),
    ],
)
def test_selection_by_code_prefix_and_name(args: list[str], present: set[str], absent: set[str]) -> None:
    """``--select``, ``--ignore`` and ``--extend-select`` accept codes, prefixes and kebab names."""
    _, diagnostics = lint_json(*args, "specs")
    found = codes(diagnostics)
    assert present <= found
    assert not absent & found


@pytest.mark.usefixtures("three_problems")
def test_ignoring_every_error_makes_the_run_pass() -> None:
    """Ignoring the rules that found errors turns exit 1 into exit 0."""
    assert lint("--select", "TF0,TF1,TF201", "specs")[0] == 1
    assert lint("--select", "TF0,TF1,TF201", "--ignore", "TF101,TF201", "specs")[0] == 0


# -- targets ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--target", "openai"],
        ["--target", "openai", "--target", "anthropic"],
        ["--target", "gemini,mcp"],
        ["--target", "openai", "--target", "anthropic", "--target", "gemini", "--target", "mcp"],
    ],
)
def test_target_is_repeatable_and_comma_separated(args: list[str]) -> None:
    """``--target`` accepts every provider, repeated or comma-separated."""
    write("specs/bad_name.yaml", BAD_NAME)
    code, diagnostics = lint_json(*args, "specs")
    assert code == 1
    assert "TF201" in codes(diagnostics)


TARGETED = """\
toolflow: 1
tools:
  3d_render:
    description: Render a scene in 3D
    implementation: render
  pick:
    description: Pick one of two things
    implementation: pick
    parameters:
      type: object
      properties:
        a: {type: string, description: The first thing}
        b: {type: string, description: The second thing}
      anyOf:
        - required: [a]
        - required: [b]
"""
"""A name Gemini refuses (TF303 with gemini) and a top-level ``anyOf`` Anthropic refuses (TF301 with anthropic)."""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], set()),
        (["--target", "mcp"], set()),
        (["--target", "gemini"], {"TF303"}),
        (["--target", "anthropic"], {"TF301"}),
        (["--target", "gemini", "--target", "anthropic"], {"TF301", "TF303"}),
        (["--target", "anthropic,gemini"], {"TF301", "TF303"}),
    ],
)
def test_every_target_given_is_checked(args: list[str], expected: set[str]) -> None:
    """Provider rules run only for the chosen targets, and every repeated ``--target`` counts."""
    write("specs/targeted.yaml", TARGETED)
    _, diagnostics = lint_json("--select", "TF3", *args, "specs")
    assert codes(diagnostics) == expected


def test_every_repeated_target_is_checked() -> None:
    """A bad value is refused wherever it appears among repeated ``--target`` options."""
    write("specs/say.yaml", CLEAN)
    code, _, err = lint("--target", "mcp", "--target", "gemini,claude", "specs")
    assert code == 2
    assert "unknown target 'claude'" in err


# -- which files are linted ---------------------------------------------------------------------------------------


def test_default_path_is_specs() -> None:
    """Without PATH arguments, ``specs/`` is linted."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("elsewhere/unknown_key.yaml", UNKNOWN_KEY)
    code, diagnostics = lint_json()
    assert code == 1
    assert {d["file"] for d in diagnostics} == {"specs/bad_name.yaml"}


def test_default_path_without_a_specs_folder_is_reported() -> None:
    """Without PATH arguments and without ``specs/``, the missing folder is a TF005 diagnostic."""
    code, diagnostics = lint_json()
    assert code == 1
    assert [(d["code"], d["file"]) for d in diagnostics] == [("TF005", "specs")]


def test_directories_are_searched_recursively_for_yaml_and_yml() -> None:
    """A directory contributes its ``.yaml`` and ``.yml`` files at any depth, and nothing else."""
    write("specs/a/deep/one.yaml", BAD_NAME)
    write("specs/two.yml", BAD_NAME)
    write("specs/notes.txt", "not a spec: [")
    _, diagnostics = lint_json("--select", "TF0,TF1,TF201", "specs")
    assert sorted(d["file"] for d in diagnostics) == ["specs/a/deep/one.yaml", "specs/two.yml"]


def test_pyproject_specs_setting_replaces_the_default() -> None:
    """``[tool.toolflow] specs`` in pyproject.toml names the folders linted by default."""
    Path("pyproject.toml").write_text('[tool.toolflow]\nspecs = ["tools", "more/x.yaml"]\n')
    write("specs/ignored.yaml", UNKNOWN_KEY)
    write("tools/bad_name.yaml", BAD_NAME)
    write("more/x.yaml", BAD_NAME.replace("search objects", "find things"))
    _, diagnostics = lint_json("--select", "TF0,TF1,TF201")
    assert sorted(d["file"] for d in diagnostics) == ["more/x.yaml", "tools/bad_name.yaml"]


def test_pyproject_specs_setting_may_be_a_string() -> None:
    """``specs = "tools"`` works like a one-item list."""
    Path("pyproject.toml").write_text('[tool.toolflow]\nspecs = "tools"\n')
    write("tools/bad_name.yaml", BAD_NAME)
    _, diagnostics = lint_json("--select", "TF201")
    assert [d["file"] for d in diagnostics] == ["tools/bad_name.yaml"]


def test_pyproject_specs_are_relative_to_the_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a subfolder, the configured specs are found relative to the pyproject.toml above it."""
    Path("pyproject.toml").write_text('[tool.toolflow]\nspecs = ["tools"]\n')
    write("tools/bad_name.yaml", BAD_NAME)
    Path("sub").mkdir()
    monkeypatch.chdir("sub")
    _, diagnostics = lint_json("--select", "TF201")
    assert [d["file"] for d in diagnostics] == ["../tools/bad_name.yaml"]


def test_explicit_paths_win_over_the_pyproject_setting() -> None:
    """PATH arguments replace ``[tool.toolflow] specs``."""
    Path("pyproject.toml").write_text('[tool.toolflow]\nspecs = ["tools"]\n')
    write("tools/bad_name.yaml", BAD_NAME)
    write("other/say.yaml", CLEAN)
    assert lint("other") == (0, "All checks passed: 1 file, 1 tool.\n", "")
