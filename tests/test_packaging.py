"""The names users install and configure by: distributions, the command, the pre-commit hook.

pre-commit's own validators read ``.pre-commit-hooks.yaml`` and the README's configuration, and
both must agree with the hook's entry point and with the distributions the ``pyproject.toml``
files declare, so that what the README tells a user to paste installs and runs.
"""

from __future__ import annotations

import importlib.metadata
import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolflow._cli import run
from toolflow._plugins import DISTRIBUTION

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
README = ROOT / "README.md"
CONFIG_BLOCK = re.compile(r"^```yaml\n(# \.pre-commit-config\.yaml\n.*?)^```$", re.MULTILINE | re.DOTALL)


def _project(path: Path) -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads((path / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return table


def _pre_commit(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def _documented_config() -> str:
    """The README's .pre-commit-config.yaml block (exactly one)."""
    blocks = CONFIG_BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) == 1
    return str(blocks[0])


def _hook() -> dict[str, Any]:
    hooks = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert [h["id"] for h in hooks] == ["toolflow-lint"]
    hook: dict[str, Any] = hooks[0]
    return hook


def test_the_distribution_is_named_toolflow_yaml_and_the_plugins_require_it() -> None:
    """toolflow's distribution is toolflow-yaml (also what the builtins report); each plugin requires it, bounded."""
    assert _project(ROOT)["name"] == DISTRIBUTION == "toolflow-yaml"
    for plugin in ("toolflow-http", "toolflow-assistant"):
        project = _project(ROOT / "plugins" / plugin)
        assert project["name"] == plugin
        assert "toolflow-yaml>=0.1,<0.2" in project["dependencies"]
        assert not [d for d in project["dependencies"] if re.match(r"toolflow\b(?!-)", d)]


def test_the_hook_manifest_is_valid_for_pre_commit() -> None:
    """``pre-commit validate-manifest`` accepts .pre-commit-hooks.yaml without a warning."""
    result = _pre_commit("validate-manifest", MANIFEST)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_hook_runs_the_toolflow_script_of_this_distribution() -> None:
    """The hook's entry is the ``toolflow`` console script that toolflow-yaml installs, and its ``lint`` command."""
    hook = _hook()
    assert hook["language"] == "python"  # pre-commit installs the repository, i.e. this pyproject.toml
    command, subcommand = hook["entry"].split()
    assert _project(ROOT)["scripts"] == {command: "toolflow._cli:main"}
    # A checkout may also hold the metadata of an older editable install (toolflow.egg-info): pick ours.
    (script,) = [
        e
        for e in importlib.metadata.entry_points(group="console_scripts", name=command)
        if e.dist is not None and e.dist.name.replace("_", "-") == DISTRIBUTION
    ]
    assert script.value == "toolflow._cli:main"
    assert callable(script.load())
    out = io.StringIO()
    assert run([subcommand, "--help"], stdout=out, stderr=io.StringIO()) == 0
    assert out.getvalue().startswith("usage: toolflow lint")


@pytest.mark.parametrize(("path", "matched"), [("specs/a.yaml", True), ("x.yml", True), ("a.yaml.py", False)])
def test_the_hook_runs_when_a_yaml_file_changes(path: str, matched: bool) -> None:
    """The hook's ``files`` pattern matches YAML files only (pre-commit searches it in each path)."""
    assert bool(re.search(_hook()["files"], path)) is matched


def test_the_documented_config_is_valid_for_pre_commit(tmp_path: Path) -> None:
    """``pre-commit validate-config`` accepts the README's configuration without a warning."""
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(_documented_config(), encoding="utf-8")
    result = _pre_commit("validate-config", config)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_documented_config_is_the_hook_with_the_distributions_to_install() -> None:
    """The README's local hook is the manifest's hook, installing toolflow-yaml and toolflow-http at their versions."""
    (repo,) = yaml.safe_load(_documented_config())["repos"]
    assert repo["repo"] == "local"
    (local,) = repo["hooks"]
    manifest = _hook()
    assert {k: v for k, v in local.items() if k != "additional_dependencies"} == {
        k: v for k, v in manifest.items() if k != "description"
    }
    http = _project(ROOT / "plugins" / "toolflow-http")
    assert local["additional_dependencies"] == [
        f"{DISTRIBUTION}=={_project(ROOT)['version']}",
        f"{http['name']}=={http['version']}",
    ]
