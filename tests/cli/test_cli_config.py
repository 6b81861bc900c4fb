"""``[tool.toolflow.lint]`` in pyproject.toml, ``--config`` and ``--isolated``, through ``toolflow lint``."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolflow._cli import run

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


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write("specs/bad_name.yaml", BAD_NAME)  # TF201 at 3:3
    write("specs/unknown_key.yaml", UNKNOWN_KEY)  # TF101 at 6:5
    write("specs/empty.yaml", "")  # TF006 (warning) at 1:1


def write(path: str, text: str) -> str:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text))
    return path


def pyproject(table: str, path: str = "pyproject.toml") -> None:
    write(path, "[tool.toolflow.lint]\n" + textwrap.dedent(table))


def lint(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["lint", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def lint_json(*args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """Exit code and the diagnostics keyed by code (each code occurs once in these tests)."""
    code, out, err = lint("--output-format", "json", *args)
    assert err == ""
    return code, {d["code"]: d for d in json.loads(out)["diagnostics"]}


# -- selection --------------------------------------------------------------------------------------------------


def test_select_in_config() -> None:
    """``select`` limits the run to the named rules."""
    pyproject('select = ["TF2"]\n')
    _, found = lint_json("specs")
    assert "TF201" in found
    assert not {"TF101", "TF006"} & found.keys()


def test_ignore_in_config_by_name() -> None:
    """``ignore`` takes kebab names as well as codes."""
    pyproject('ignore = ["invalid-tool-name", "TF006"]\n')
    code, found = lint_json("specs")
    assert code == 1
    assert "TF101" in found
    assert not {"TF201", "TF006"} & found.keys()


def test_extend_select_in_config() -> None:
    """``extend-select`` adds rules on top of ``select``."""
    pyproject('select = ["TF1"]\nextend-select = ["TF006"]\n')
    _, found = lint_json("specs")
    assert {"TF101", "TF006"} <= found.keys()
    assert "TF201" not in found


def test_command_line_select_replaces_config_select() -> None:
    """``--select`` replaces the configured ``select``; ``--ignore`` adds to the configured ``ignore``."""
    pyproject('select = ["TF1"]\nignore = ["TF006"]\n')
    _, found = lint_json("--select", "TF0,TF201", "--ignore", "TF201", "specs")
    assert not {"TF101", "TF201", "TF006"} & found.keys()
    _, found = lint_json("--select", "TF0,TF201", "specs")
    assert "TF201" in found
    assert not {"TF101", "TF006"} & found.keys()


def test_keys_may_use_underscores() -> None:
    """``fail_on`` and ``per_file_ignores`` are accepted like their kebab forms."""
    pyproject('fail_on = "warning"\nper_file_ignores = {"specs/*.yaml" = ["TF1", "TF2"]}\n')
    code, found = lint_json("specs")
    assert code == 1  # the TF006 warning fails the run
    assert not {"TF101", "TF201"} & found.keys()


# -- per-file ignores -------------------------------------------------------------------------------------------


def test_per_file_ignores_match_globs_relative_to_the_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    """A glob is matched against the file's path relative to pyproject.toml's folder, from any working folder."""
    pyproject('per-file-ignores = {"specs/bad_*.yaml" = ["invalid-tool-name"], "specs/unknown_key.yaml" = ["TF1"]}\n')
    _, found = lint_json("specs")
    assert "TF006" in found
    assert not {"TF101", "TF201"} & found.keys()
    monkeypatch.chdir("specs")
    _, found = lint_json("--no-plugins", "bad_name.yaml", "unknown_key.yaml")
    assert found == {}


def test_per_file_ignores_do_not_touch_other_files() -> None:
    """Files that match no glob keep every diagnostic."""
    pyproject('per-file-ignores = {"legacy/*.yaml" = ["ALL"]}\n')
    write("legacy/old.yaml", BAD_NAME)
    code, out, _ = lint("--select", "TF201", "specs", "legacy")
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()[:-1]] == ["specs/bad_name.yaml"]


def test_per_file_ignores_follow_the_config_file_given_with_config(tmp_path: Path) -> None:
    """With ``--config``, globs are relative to that file's folder."""
    pyproject('per-file-ignores = {"../specs/bad_name.yaml" = ["TF201"]}\n', path="conf/pyproject.toml")
    _, found = lint_json("--config", "conf/pyproject.toml", "specs")
    assert "TF201" not in found
    _, found = lint_json("--config", str(tmp_path / "conf" / "pyproject.toml"), "specs")
    assert "TF201" not in found


def test_per_file_ignores_do_not_match_paths_relative_to_the_working_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """A glob names files relative to pyproject.toml's folder only, not to wherever lint runs from."""
    pyproject('per-file-ignores = {"legacy/*.yaml" = ["ALL"]}\n')
    write("legacy/old.yaml", BAD_NAME)
    write("specs/legacy/new.yaml", BAD_NAME)
    monkeypatch.chdir("specs")
    _, found = lint_json("--select", "TF201", "legacy/new.yaml", "../legacy/old.yaml")
    assert found["TF201"]["file"] == "legacy/new.yaml"


# -- severity ---------------------------------------------------------------------------------------------------


def test_severity_override_by_code_turns_an_error_into_a_warning() -> None:
    """``severity = {TF201 = "warning"}`` reports TF201 as a warning, so it no longer fails the run."""
    pyproject('select = ["TF201"]\nseverity = {TF201 = "warning"}\n')
    code, found = lint_json("specs")
    assert code == 0
    assert found["TF201"]["severity"] == "warning"


def test_severity_override_by_name() -> None:
    """Severity overrides accept kebab names, and can raise a warning to an error."""
    pyproject('severity = {invalid-tool-name = "warning", empty-file = "error"}\n')
    _, found = lint_json("specs")
    assert found["TF201"]["severity"] == "warning"
    assert found["TF006"]["severity"] == "error"


def test_most_specific_severity_override_wins() -> None:
    """An exact code beats a prefix, a longer prefix beats a shorter one, and ``ALL`` is weakest."""
    pyproject('severity = {ALL = "warning", TF = "error", TF2 = "warning", TF201 = "error", TF1 = "warning"}\n')
    code, found = lint_json("specs")
    assert code == 1
    assert found["TF201"]["severity"] == "error"
    assert found["TF101"]["severity"] == "warning"
    assert found["TF006"]["severity"] == "error"


def test_severity_override_shows_in_text_summary() -> None:
    """The text summary counts diagnostics by their overridden severity."""
    pyproject('select = ["TF201", "TF101"]\nseverity = {TF1 = "warning"}\n')
    code, out, _ = lint("specs")
    assert code == 1
    assert out.splitlines()[-1] == "Found 1 error and 1 warning in 3 files."


# -- fail-on and target -----------------------------------------------------------------------------------------


def test_fail_on_warning_in_config_and_command_line_override() -> None:
    """``fail-on = "warning"`` fails on warnings; ``--fail-on error`` on the command line wins over it."""
    pyproject('select = ["TF006"]\nfail-on = "warning"\n')
    assert lint("specs")[0] == 1
    assert lint("--fail-on", "error", "specs")[0] == 0


@pytest.mark.parametrize("value", ['"openai"', '["openai", "mcp"]', '["anthropic", "gemini"]'])
def test_target_in_config(value: str) -> None:
    """``target`` takes a provider or a list of providers."""
    pyproject(f'select = ["TF201"]\ntarget = {value}\n')
    code, found = lint_json("specs")
    assert code == 1
    assert "TF201" in found


def test_target_in_config_enables_provider_rules_and_command_line_replaces_it() -> None:
    """``target`` in the config turns on that provider's checks; ``--target`` replaces the configured list."""
    write(
        "specs/bad_name.yaml",
        "toolflow: 1\ntools:\n  3d_render:\n    description: Render in 3D\n    implementation: render\n",
    )
    pyproject('select = ["TF3"]\n')
    assert lint_json("specs")[1] == {}
    pyproject('select = ["TF3"]\ntarget = ["gemini"]\n')
    _, found = lint_json("specs")
    assert found.keys() == {"TF303"}
    assert lint_json("--target", "openai", "specs")[1] == {}


# -- configuration errors exit 2 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('selec = ["TF2"]\n', "unknown key 'selec' in [tool.toolflow.lint]; did you mean 'select'?"),
        ('severity = {TF201 = "fatal"}\n', "severity must be 'error' or 'warning', got 'fatal'"),
        ('fail-on = "info"\n', "severity must be 'error' or 'warning', got 'info'"),
        ('select = ["invalid-tool-nam"]\n', "unknown rule 'invalid-tool-nam'; did you mean 'invalid-tool-name'?"),
        ('ignore = ["no-such-rule"]\n', "unknown rule 'no-such-rule'"),
        ('severity = {no-such-rule = "error"}\n', "unknown rule 'no-such-rule'"),
        ('per-file-ignores = {"*.yaml" = ["TF9999"]}\n', "unknown rule 'TF9999'"),
        ('per-file-ignores = {"*.yaml" = "TF201"}\n', "'per-file-ignores' entry '*.yaml' must be a list"),
        ('select = "TF201"\n', "'select' must be a list of rule codes or names"),
        ('target = ["openia"]\n', "unknown target 'openia'; choose from openai, anthropic, gemini, mcp"),
    ],
)
def test_bad_configuration_exits_2(table: str, message: str) -> None:
    """A bad key, rule, severity or target in ``[tool.toolflow.lint]`` exits 2 naming the file and the problem."""
    pyproject(table)
    code, out, err = lint("specs")
    assert code == 2
    assert out == ""
    assert err.startswith(f"toolflow: error: {Path('pyproject.toml').resolve()}: {message}")
    assert "Traceback" not in err


def test_invalid_toml_exits_2() -> None:
    """A pyproject.toml that is not TOML exits 2 with the parser's position."""
    write("pyproject.toml", "[tool.toolflow.lint\nselect = [\n")
    code, out, err = lint("specs")
    assert code == 2
    assert out == ""
    assert err.startswith(f"toolflow: error: {Path('pyproject.toml').resolve()}: invalid TOML: ")
    assert "line 1" in err


def test_lint_table_that_is_not_a_table_exits_2() -> None:
    """``[tool.toolflow] lint = 3`` is a configuration error."""
    write("pyproject.toml", "[tool.toolflow]\nlint = 3\n")
    code, _, err = lint("specs")
    assert code == 2
    assert "[tool.toolflow.lint] must be a table" in err


def test_toolflow_table_that_is_not_a_table_is_a_configuration_error() -> None:
    """``[tool] toolflow = 3`` exits 2 with a configuration message, not an internal error."""
    write("pyproject.toml", "[tool]\ntoolflow = 3\n")
    code, _, err = lint("specs")
    assert code == 2
    assert "internal error" not in err


def test_missing_config_file_exits_2() -> None:
    """``--config`` naming a file that does not exist exits 2."""
    code, out, err = lint("--config", "nope/pyproject.toml", "specs")
    assert code == 2
    assert out == ""
    assert err.startswith("toolflow: error: nope/pyproject.toml: cannot read: ")


# -- --config and --isolated ------------------------------------------------------------------------------------


def test_config_option_reads_that_file_instead_of_the_nearest() -> None:
    """``--config`` replaces the pyproject.toml of the working folder."""
    pyproject('ignore = ["TF101"]\n')
    pyproject('ignore = ["TF201"]\n', path="elsewhere/pyproject.toml")
    _, found = lint_json("specs")
    assert "TF201" in found
    assert "TF101" not in found
    _, found = lint_json("--config", "elsewhere/pyproject.toml", "specs")
    assert "TF101" in found
    assert "TF201" not in found


def test_nearest_pyproject_is_found_from_a_subfolder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a subfolder, the pyproject.toml of a parent folder configures the run."""
    pyproject('ignore = ["TF201"]\n')
    monkeypatch.chdir("specs")
    _, found = lint_json(".")
    assert "TF101" in found
    assert "TF201" not in found


def test_isolated_ignores_the_configuration() -> None:
    """``--isolated`` ignores pyproject.toml: its ignores, and even its errors."""
    pyproject('ignore = ["TF201"]\n')
    _, found = lint_json("--isolated", "specs")
    assert "TF201" in found
    write("pyproject.toml", "[tool.toolflow.lint]\nbogus = 1\n")
    code, found = lint_json("--isolated", "specs")
    assert code == 1
    assert {"TF101", "TF201", "TF006"} <= found.keys()


def test_isolated_still_honours_the_command_line() -> None:
    """With ``--isolated``, ``--select`` and ``--fail-on`` still apply."""
    pyproject('select = ["TF201"]\n')
    code, found = lint_json("--isolated", "--select", "TF006", "--fail-on", "warning", "specs")
    assert code == 1
    assert found.keys() == {"TF006"}
