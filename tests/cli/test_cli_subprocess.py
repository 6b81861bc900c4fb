"""The installed ``toolflow`` console script and ``python -m toolflow``, run as real processes.

Also the import budget of the command line: ``toolflow lint`` must not import
trio or plugin machinery, and ``toolflow --help`` must not import the heavy
libraries that only the subcommands need. These are module-set checks, not timings.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import toolflow

SCRIPT = Path(sys.executable).parent / ("toolflow.exe" if os.name == "nt" else "toolflow")

BAD_NAME = """\
toolflow: 1
tools:
  search objects:
    description: Search objects in the room
    implementation: search
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


def toolflow_script(*args: str) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}")
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False)


def python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


def test_console_script_version() -> None:
    """``toolflow --version`` prints the package version and exits 0."""
    result = toolflow_script("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"toolflow {toolflow.__version__}\n", "")


def test_console_script_lint_exit_codes() -> None:
    """The console script exits 1 on errors, 0 when clean or warnings only, 2 on a usage error."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("specs/empty.yaml", "")
    failed = toolflow_script("lint", "--select", "TF0,TF1,TF201,TF9")
    assert failed.returncode == 1
    assert failed.stdout.splitlines()[0].startswith("specs/bad_name.yaml:3:3: TF201 tool name 'search objects'")
    assert failed.stderr == ""
    warned = toolflow_script("lint", "--select", "TF0", "specs")
    assert (warned.returncode, warned.stderr) == (0, "")
    assert warned.stdout.startswith("specs/empty.yaml:1:1: TF006 ")
    usage = toolflow_script("lint", "--select", "no-such-rule", "specs")
    assert (usage.returncode, usage.stdout) == (2, "")
    assert "unknown rule 'no-such-rule'" in usage.stderr


def test_console_script_yaml_syntax_error_has_no_traceback() -> None:
    """A YAML syntax error is a TF001 line and exit 1 in a real process, with nothing on stderr."""
    write("specs/broken.yaml", 'toolflow: 1\ntools:\n  say:\n    description: "Say something\n')
    result = toolflow_script("lint", "--select", "TF0", "specs")
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith("specs/broken.yaml:")
    assert " TF001 " in result.stdout


def test_console_script_config_error_exits_2() -> None:
    """A bad ``[tool.toolflow.lint]`` exits 2 with one clean error line in a real process."""
    write("pyproject.toml", "[tool.toolflow.lint]\nselec = []\n")
    write("specs/bad_name.yaml", BAD_NAME)
    result = toolflow_script("lint")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1
    assert "unknown key 'selec'" in result.stderr


def test_console_script_sarif_is_json_on_stdout() -> None:
    """Machine formats reach stdout whole, parseable by the next step of a CI job."""
    write("specs/bad_name.yaml", BAD_NAME)
    result = toolflow_script("lint", "--output-format", "sarif", "--statistics", "--select", "TF201", "specs")
    assert result.returncode == 1
    log = json.loads(result.stdout)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["TF201"]
    assert result.stderr == "    1  TF201  invalid-tool-name\n"


def test_python_dash_m_toolflow() -> None:
    """``python -m toolflow`` is the same command line."""
    write("specs/bad_name.yaml", BAD_NAME)
    result = python("-m", "toolflow", "lint", "--select", "TF201", "specs")
    assert result.returncode == 1
    assert result.stdout.startswith("specs/bad_name.yaml:3:3: TF201 ")
    assert python("-m", "toolflow", "--help").returncode == 0


def test_lint_does_not_import_trio_or_implementations() -> None:
    """A full ``toolflow lint`` run loads plugins but leaves trio, httpx and lazy implementations unimported."""
    write("specs/bad_name.yaml", BAD_NAME)
    script = textwrap.dedent(
        """\
        import io, json, sys
        from toolflow._cli import run
        out, err = io.StringIO(), io.StringIO()
        code = run(["lint", "specs"], stdout=out, stderr=err)
        print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
        """
    )
    result = python("-c", script)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["code"] == 1
    top_level = {name.split(".")[0] for name in report["modules"]}
    assert "toolflow" in top_level
    assert "trio" not in top_level
    assert "httpx" not in top_level
    assert "toolflow_assistant.tools" not in report["modules"]


@functools.cache
def _imported_by_help() -> frozenset[str]:
    """Top-level modules that ``python -X importtime -m toolflow --help`` imports."""
    result = python("-X", "importtime", "-m", "toolflow", "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: toolflow")
    modules = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name.split(".")[0])
    assert "toolflow" in modules
    return frozenset(modules)


@pytest.mark.parametrize("heavy", ["yaml", "jsonschema", "jsonschema_rs", "jinja2", "trio", "pluggy"])
def test_help_does_not_import_heavy_libraries(heavy: str) -> None:
    """``toolflow --help`` imports none of the libraries that only the subcommands need."""
    assert heavy not in _imported_by_help()


def test_help_does_not_import_attrs() -> None:
    """``toolflow --help`` does not import attrs either."""
    assert "attrs" not in _imported_by_help()
