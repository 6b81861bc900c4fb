"""A project directory for in-process `toolflow` command tests, and the command run in it."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolflow._cli import run


def make_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, specs: str) -> Path:
    """*tmp_path* as a project with *specs* in specs/tools.yaml, made the working directory; only the default plugins."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(specs, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    return tmp_path


@contextlib.contextmanager
def plugin_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, specs: str, module: str, plugin: str
) -> Iterator[Path]:
    """*tmp_path* as a project with *specs* and the plugin *module* (its source *plugin*), made the working directory.

    The plugin is the project's (``plugins = [module]``) and the only one loaded
    (``TOOLFLOW_LOAD_PLUGINS``); a subprocess started there finds it too. Forgotten on exit.
    """
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(specs, encoding="utf-8")
    (tmp_path / f"{module}.py").write_text(plugin, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "demo"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["{module}"]\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", module)
    try:
        yield tmp_path
    finally:
        sys.modules.pop(module, None)


def toolflow(*args: str) -> tuple[int, str, str]:
    """Run `toolflow ARGS` in-process: the exit code, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()
