"""The pytest items of ``toolflow test``'s cases, collected by the ``toolflow.testing`` plugin.

:mod:`toolflow.testing` imports this module only when pytest visits a test file
(``*.toolflow.yaml``) or a spec file of the project, so that its fakes stay importable
without pytest. A test file is one item; a spec file is an item per example that declares an
expected outcome. Each item runs through :func:`toolflow._cli_test.run_cases`, as
``toolflow test`` runs it, with the plugins and specs the command would see from pytest's
root directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolflow._cli_test import Case, collect_examples, run_cases, session_cases
from toolflow._errors import ToolflowError
from toolflow._loader import SPEC_SUFFIXES, TEST_SUFFIXES, load_specs
from toolflow._model import LoadResult
from toolflow._plugins import Plugins, load_plugins
from toolflow._project import load_project

__all__ = ["ToolflowItem", "collect_file"]


@attrs.frozen(kw_only=True)
class _Project:
    """What every item of one pytest session shares: the project's spec paths, its plugins, its specs."""

    spec_paths: tuple[str, ...]
    plugins: Plugins
    specs: LoadResult


_PROJECT = pytest.StashKey[_Project]()


def _project(config: pytest.Config) -> _Project:
    """The project at pytest's root directory, loaded once per session."""
    if _PROJECT not in config.stash:
        project = load_project(config.rootpath)
        spec_paths = tuple(os.path.abspath(path) for path in project.specs)
        plugins = load_plugins(project_plugins=project.plugins, project_root=project.root)
        existing = [path for path in spec_paths if os.path.exists(path)]
        config.stash[_PROJECT] = _Project(
            spec_paths=tuple(existing), plugins=plugins, specs=load_specs(existing, kinds=plugins.kind_schemas())
        )
    return config.stash[_PROJECT]


def _is_spec_file(path: Path, spec_paths: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    return any(real == os.path.realpath(p) or real.startswith(os.path.realpath(p) + os.sep) for p in spec_paths)


def collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A collector for a test file, or for a YAML file under the project's spec paths; else ``None``."""
    if file_path.name.endswith(TEST_SUFFIXES):
        return ToolflowTestFile.from_parent(parent, path=file_path)
    if file_path.name.endswith(SPEC_SUFFIXES) and _is_spec_file(file_path, _project(parent.config).spec_paths):
        return ToolflowSpecFile.from_parent(parent, path=file_path)
    return None


class ToolflowTestFile(pytest.File):
    """A ``*.toolflow.yaml`` test file: an item per scripted session (one, or each of ``sessions``)."""

    def collect(self) -> Iterator[pytest.Item]:
        """The file's items: named after the file, or ``FILE[NAME]`` for each of its ``sessions``."""
        path = os.fspath(self.path)
        for case in session_cases(path):
            name = self.path.name + case.name.removeprefix(path).replace(" sessions[", "[")
            yield ToolflowItem.from_parent(self, name=name, case=case)


class ToolflowSpecFile(pytest.File):
    """A spec file of the project: an item per example that declares an expected outcome."""

    def collect(self) -> Iterator[pytest.Item]:
        """The items of the file's tested examples, named ``TOOL[N]``."""
        project = _project(self.config)
        for case in collect_examples(project.specs, [os.fspath(self.path)]):
            name = case.name.replace(" examples[", "[")
            yield ToolflowItem.from_parent(self, name=name, case=case)


class ToolflowItem(pytest.Item):
    """One case of ``toolflow test``: an example, or a test file's session."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        # pytest-trio's trio_mode reads the `obj` of every item, as if each were a function;
        # a synchronous one is left alone (the case calls trio.run itself).
        self.obj = self.runtest

    def runtest(self) -> None:
        """Run the case as ``toolflow test`` does; a failure is reported as ``FILE:LINE:COL: what differed``."""
        project = _project(self.config)
        try:
            (outcome,) = run_cases(
                [self.case],
                project.plugins,
                example_specs=project.spec_paths,
                session_specs=project.spec_paths,
                specs=project.specs,
            )
        except ToolflowError as exc:  # the project's specs do not build: said as the command says it
            pytest.fail(str(exc), pytrace=False)
        if not outcome.passed:
            case = self.case
            pytest.fail(f"{case.file}:{case.line}:{case.column}: {outcome.message}", pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        """Where the case is (0-based line, as pytest wants it) and its name."""
        return self.path, self.case.line - 1, self.case.name
