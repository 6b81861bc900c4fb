"""`toolflow init`: a project that works at once, written without overwriting anything."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from toolflow._cli import run

ENV = {key: value for key, value in os.environ.items() if not key.startswith("TOOLFLOW_")}


def _toolflow(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolflow", *arguments],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=ENV,
    )


def test_the_new_project_lints_calls_and_runs(tmp_path: Path) -> None:
    """Lint passes, each kind's tool answers, the pipeline runs, and the scripted session ends the loop."""
    out, err = io.StringIO(), io.StringIO()
    assert run(["init", str(tmp_path / "shop"), "--name", "shop"], stdout=out, stderr=err) == 0
    project = tmp_path / "shop"
    assert "Created project 'shop'" in out.getvalue()
    lint = _toolflow(project, "lint")
    assert (lint.returncode, lint.stdout.strip()) == (0, "All checks passed: 1 file, 4 tools.")
    welcome = _toolflow(project, "call", "welcome", '{"name": "Ada Lovelace"}')
    assert welcome.returncode == 0, welcome.stderr
    assert json.loads(welcome.stdout)["data"] == "Hello, Ada Lovelace! (Your name has 2 words.)"
    version = _toolflow(project, "call", "python_version", "{}")
    assert json.loads(version.stdout)["data"]["stdout"].startswith("Python 3.")
    loop = _toolflow(project, "run", "--model", "scripted:sessions/hello.yaml")
    assert loop.returncode == 0, loop.stderr
    assert loop.stdout.splitlines()[-1] == "loop ended: terminal ('welcome' ended the loop) after 2 turns, 2 tool calls"


def test_the_ci_files_are_valid_yaml_that_run_lint(tmp_path: Path) -> None:
    """The pre-commit hook and the workflow parse, and both run `toolflow lint`."""
    assert run(["init", str(tmp_path)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    hooks = yaml.safe_load((tmp_path / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert hooks["repos"][0]["hooks"][0]["entry"] == "toolflow lint"
    workflow = yaml.safe_load((tmp_path / ".github" / "workflows" / "toolflow.yml").read_text(encoding="utf-8"))
    steps = [step.get("run", "") for step in workflow["jobs"]["specs"]["steps"]]
    assert "toolflow lint --output-format github" in steps
    schema = json.loads((tmp_path / ".toolflow" / "spec-v1.schema.json").read_text(encoding="utf-8"))
    assert "tools" in schema["properties"]


def test_init_never_overwrites(tmp_path: Path) -> None:
    """A directory that has one of the files gets a usage error, and nothing is written."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n", encoding="utf-8")
    err = io.StringIO()
    assert run(["init", str(tmp_path)], stdout=io.StringIO(), stderr=err) == 2
    assert "already has pyproject.toml; nothing was written" in err.getvalue()
    assert not (tmp_path / "specs").exists()
    assert (tmp_path / "pyproject.toml").read_text(encoding="utf-8") == "[project]\nname = 'mine'\n"


def test_a_directory_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    """A target under a regular file: one line naming the file that failed, and that nothing was written."""
    (tmp_path / "notes").write_text("mine\n", encoding="utf-8")
    err = io.StringIO()
    assert run(["init", str(tmp_path / "notes" / "shop"), "--name", "shop"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == (
        f"toolflow: error: init: cannot write {tmp_path / 'notes' / 'shop' / 'pyproject.toml'}: Not a directory;"
        " nothing was written\n"
    )
    assert (tmp_path / "notes").read_text(encoding="utf-8") == "mine\n"


def test_a_name_that_is_no_project_name_is_refused(tmp_path: Path) -> None:
    """`--name` must be letters, digits, '-' and '_'."""
    err = io.StringIO()
    assert run(["init", str(tmp_path), "--name", "my shop!"], stdout=io.StringIO(), stderr=err) == 2
    assert "is not a name" in err.getvalue()


def test_a_new_plugin_passes_its_own_tests(tmp_path: Path) -> None:
    """`init --plugin`: a kind, a rule and tests that pass with toolflow's pytest plugin, as generated."""
    plugin = tmp_path / "greeting"
    out = io.StringIO()
    assert run(["init", str(plugin), "--plugin", "greeting"], stdout=out, stderr=io.StringIO()) == 0
    assert "Created plugin 'greeting'" in out.getvalue()
    pyproject = (plugin / "pyproject.toml").read_text(encoding="utf-8")
    assert 'greeting = "toolflow_greeting.plugin"' in pyproject
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=plugin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**ENV, "PYTHONPATH": str(plugin)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
