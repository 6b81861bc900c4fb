"""`toolflow lint` as CI and editor users expect it: an empty spec directory is a warning, not success."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest

from toolflow._cli import run

EMPTY_DIR = "empty:1:1: TF008 no spec files (*.yaml, *.yml) in directory 'empty'\n"


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project (a pyproject.toml, no plugins), the working directory."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    return tmp_path


def write(path: str | Path, text: str) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text), encoding="utf-8")
    return target


def toolflow(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# -- an empty spec directory --------------------------------------------------------------------------------------


def test_an_empty_spec_directory_is_a_warning_not_success() -> None:
    """A directory without spec files is TF008, a warning: exit 0, and no 'All checks passed'."""
    write("empty/tools.json", "{}")
    assert toolflow("lint", "empty") == (0, EMPTY_DIR + "Found 0 errors and 1 warning in 0 files.\n", "")


def test_an_empty_spec_directory_fails_with_fail_on_warning() -> None:
    """`--fail-on warning` makes the empty directory fail the run, as any warning does."""
    Path("empty").mkdir()
    assert toolflow("lint", "--fail-on", "warning", "empty")[0] == 1


def test_the_default_specs_directory_when_empty() -> None:
    """Without a PATH, an empty `specs/` (the default) is reported by its name."""
    Path("specs").mkdir()
    code, out, _ = toolflow("lint")
    assert (code, out.splitlines()[0]) == (0, "specs:1:1: TF008 no spec files (*.yaml, *.yml) in directory 'specs'")


def test_a_directory_with_spec_files_and_an_empty_one() -> None:
    """Each directory named counts on its own: one with specs is linted, the empty one warned about."""
    write("specs/say.yaml", "toolflow: 1\ntools: {}\n")
    Path("empty").mkdir()
    code, out, _ = toolflow("lint", "specs", "empty")
    assert (code, out) == (0, EMPTY_DIR + "Found 0 errors and 1 warning in 1 file.\n")


def test_the_warning_can_be_ignored() -> None:
    """TF008 is a rule like any other: `--ignore TF008` leaves the all-clear."""
    Path("empty").mkdir()
    assert toolflow("lint", "--ignore", "TF008", "empty") == (0, "All checks passed: 0 files, 0 tools.\n", "")


def test_list_of_an_empty_directory_warns_on_stderr() -> None:
    """`toolflow list` loads through the same path: the warning goes to stderr, the exit code stays 0."""
    Path("empty").mkdir()
    code, out, err = toolflow("list", "empty")
    assert (code, err) == (0, EMPTY_DIR)
    assert out.splitlines()[-1] == "0 tools in 0 files"
