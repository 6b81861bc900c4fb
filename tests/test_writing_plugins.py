"""docs/writing-plugins.md is true: its plugin, assembled from the page, installs, loads and passes its tests.

Each code block of the guide whose first line is ``# <path>`` is a complete file of
the example plugin. The test writes them into a temporary directory, "installs" the
plugin the way pip does for an editable install (a ``.dist-info`` directory holding
the entry points of its pyproject.toml, on ``sys.path``), then runs the plugin's own
tests and ``toolflow plugins --strict`` in fresh interpreters.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "writing-plugins.md"
HOOKS = ROOT / "docs" / "plugin-hooks.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"^# ([\w./-]+\.(?:py|toml))\n")


def _blocks(path: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block of a Markdown file."""
    return BLOCK.findall(path.read_text(encoding="utf-8"))


def _files() -> dict[str, str]:
    """The example plugin's files: relative path to content, from the blocks that start with ``# path``."""
    files: dict[str, str] = {}
    for _, body in _blocks(GUIDE):
        match = FILE_HEADER.match(body)
        if match:
            assert match[1] not in files, f"{match[1]} appears twice in the guide"
            files[match[1]] = body
    return files


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The example plugin written out and made importable with its entry points: (project, environment)."""
    project = tmp_path / "toolflow-sqlite"
    for relpath, text in _files().items():
        target = project / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    meta = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    site = tmp_path / "site"
    dist_info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n", encoding="utf-8"
    )
    groups = "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items())
        for group, entries in meta["entry-points"].items()
    )
    (dist_info / "entry_points.txt").write_text(groups, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(project)]),
        # Only this plugin: whatever else is installed in the test environment stays out.
        "TOOLFLOW_LOAD_PLUGINS": "sqlite",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("TOOLFLOW_DISABLE_PLUGINS", None)
    return project, env


def test_guide_holds_the_whole_plugin() -> None:
    """The guide gives every file of its layout, and the pyproject declares the entry point it explains."""
    files = _files()
    assert sorted(files) == [
        "pyproject.toml",
        "tests/conftest.py",
        "tests/test_plugin.py",
        "toolflow_sqlite/__init__.py",
        "toolflow_sqlite/catalog.py",
        "toolflow_sqlite/kind.py",
        "toolflow_sqlite/plugin.py",
        "toolflow_sqlite/rules.py",
    ]
    pyproject = tomllib.loads(files["pyproject.toml"])
    assert pyproject["project"]["entry-points"]["toolflow"] == {"sqlite": "toolflow_sqlite.plugin"}
    layout = next(body for language, body in _blocks(GUIDE) if language == "text")
    for relpath in files:
        assert Path(relpath).name in layout, relpath


@pytest.mark.parametrize("page", [GUIDE, HOOKS], ids=lambda p: p.name)
def test_python_and_toml_blocks_parse(page: Path) -> None:
    """Every Python and TOML block of the plugin pages is valid syntax."""
    for language, body in _blocks(page):
        if language == "python":
            ast.parse(body)
        elif language == "toml":
            tomllib.loads(body)


def test_example_plugin_passes_its_own_tests(installed: tuple[Path, dict[str, str]]) -> None:
    """The guide's tests/test_plugin.py passes against the guide's plugin, with toolflow.testing."""
    project, env = installed
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\b4 passed\b", result.stdout), result.stdout


def test_example_plugin_loads_as_the_guide_shows(installed: tuple[Path, dict[str, str]]) -> None:
    """`toolflow plugins --strict` loads the plugin and prints the rows the guide shows."""
    project, env = installed
    result = subprocess.run(
        [sys.executable, "-m", "toolflow", "plugins", "--strict"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shown = next(body for language, body in _blocks(GUIDE) if language == "console" and "$ toolflow plugins\n" in body)
    expected_rows = [re.split(r"\s{2,}", line.strip()) for line in shown.splitlines()[1:-1]]
    actual_rows = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()]
    for row in expected_rows:
        assert row in actual_rows, f"{row} not in:\n{result.stdout}"
    assert any(row[0] == "sqlite" and "loaded" in row for row in actual_rows)
