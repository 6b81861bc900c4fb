"""`toolflow lint` as CI and editor users expect it: an empty spec directory is a warning, not success."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _cli_project import toolflow

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


# -- --exit-zero --------------------------------------------------------------------------------------------------

BAD = """\
toolflow: 1
tools:
  search objects:
    description: Search objects in the room.
    category: terminal
    template: found
"""


def test_exit_zero_exits_0_with_errors_and_still_reports_them() -> None:
    """`--exit-zero` exits 0 although an error was found; the report is the same."""
    write("specs/bad.yaml", BAD)
    code, report, _ = toolflow("lint", "specs")
    assert code == 1
    assert toolflow("lint", "--exit-zero", "specs") == (0, report, "")
    assert toolflow("lint", "--exit-zero", "--fail-on", "warning", "--output-format", "json", "specs")[0] == 0


def test_exit_zero_leaves_usage_errors_at_2() -> None:
    """A usage error is no lint result: it still exits 2."""
    assert toolflow("lint", "--exit-zero", "--select", "TF999x")[0] == 2


# -- --output-format full -----------------------------------------------------------------------------------------


def test_full_shows_the_source_lines_with_a_caret_under_the_span() -> None:
    """Each problem: its line, then the line before, its own with carets under the span and the rule's code,
    and the line after; a blank line between problems; the summary last. An empty file shows no source."""
    write("specs/bad.yaml", BAD)
    write("specs/empty.yaml", "")
    code, out, err = toolflow("lint", "--output-format", "full", "--select", "TF201,TF006", "specs")
    assert (code, err) == (1, "")
    assert out == (
        "specs/bad.yaml:3:3: TF201 tool name 'search objects' has characters other than a-z, A-Z, 0-9, '_' and '-';"
        " rename it, e.g. to 'search_objects'\n"
        "  |\n"
        "2 | tools:\n"
        "3 |   search objects:\n"
        "  |   ^^^^^^^^^^^^^^ TF201\n"
        "4 |     description: Search objects in the room.\n"
        "  |\n"
        "\n"
        "specs/empty.yaml:1:1: TF006 the file is empty; a spec file starts with 'toolflow: 1'\n"
        "\n"
        "Found 1 error and 1 warning in 2 files.\n"
    )


def test_full_at_the_first_and_the_tenth_line() -> None:
    """No context line before line 1; the gutter widens to the largest line number shown."""
    write("specs/a.yaml", "toolflow: 2\ntools: {}\n")
    write("specs/b.yaml", "toolflow: 1\n" + "# a comment\n" * 7 + "tools:\n  bad name:\n    template: x\n")
    out = toolflow("lint", "--output-format", "full", "--select", "TF105,TF201", "specs")[1]
    assert out.split("\n\n")[:2] == [
        (
            "specs/a.yaml:1:11: TF105 unsupported spec format version 2; this toolflow reads format 1\n"
            "  |\n"
            "1 | toolflow: 2\n"
            "  |           ^ TF105\n"
            "2 | tools: {}\n"
            "  |"
        ),
        (
            "specs/b.yaml:10:3: TF201 tool name 'bad name' has characters other than a-z, A-Z, 0-9, '_' and '-';"
            " rename it, e.g. to 'bad_name'\n"
            "   |\n"
            " 9 | tools:\n"
            "10 |   bad name:\n"
            "   |   ^^^^^^^^ TF201\n"
            "11 |     template: x\n"
            "   |"
        ),
    ]


def _full(text: str, *, line: int, column: int, end_line: int, end_column: int) -> str:
    """`full`'s rendering of one TF201 problem at *position* in a file holding *text*."""
    from toolflow._diagnostics import Diagnostic
    from toolflow._lint._config import LintConfig
    from toolflow._lint._engine import LintReport
    from toolflow._lint._formats import render

    path = write("a.yaml", "")
    path.write_bytes(text.encode())
    diagnostic = Diagnostic(
        code="TF201",
        name="invalid-tool-name",
        message="m",
        file="a.yaml",
        line=line,
        column=column,
        end_line=end_line,
        end_column=end_column,
    )
    report = LintReport(diagnostics=(diagnostic,), files=("a.yaml",), tool_count=0, rules=(), config=LintConfig())
    return render(report, "full")


def test_full_lines_carets_up_under_tabs_and_wide_characters() -> None:
    """A tab before the span stays a tab and a wide character takes two cells, so the carets stay under the
    span in any terminal; a control character is shown as U+FFFD, never sent to the terminal."""
    out = _full("key:\t\u65e5\u672c value\x1b[31m\n", line=1, column=9, end_line=1, end_column=14)
    assert out.splitlines()[1:5] == [
        "  |",
        "1 | key:\t\u65e5\u672c value\ufffd[31m",
        "  |     \t     ^^^^^ TF201",
        "  |",
    ]


def test_full_underlines_a_span_over_several_lines_to_the_end_of_its_first() -> None:
    """A span that goes on to later lines is underlined from its column to the end of its first line."""
    out = _full("a:\n  b: [1,  \n    2]\n", line=2, column=6, end_line=3, end_column=7)
    assert "  |      ^^^ TF201" in out.splitlines()


def test_full_counts_lines_as_yaml_does() -> None:
    """Lines end at CRLF, CR, NEL and U+2028 too, as the positions of diagnostics count them."""
    out = _full("a: 1\r\nb: 2\x85c: 3\u2028d: 4\re: 5\n", line=4, column=1, end_line=4, end_column=2)
    assert out.splitlines()[1:6] == ["  |", "3 | c: 3", "4 | d: 4", "  | ^ TF201", "5 | e: 5"]


def test_full_of_a_file_that_cannot_be_read_shows_the_line_alone() -> None:
    """A missing file (TF005) has no source to show."""
    code, out, _ = toolflow("lint", "--output-format", "full", "missing.yaml")
    assert (code, out) == (
        1,
        "missing.yaml:1:1: TF005 no such file or directory: 'missing.yaml'\n\nFound 1 error and 0 warnings in 0 files.\n",
    )


# -- paths of the CI formats --------------------------------------------------------------------------------------


def _annotated_file(*args: str) -> str:
    out = toolflow("lint", "--output-format", "github", "--select", "TF201", *args)[1]
    return out.split("::", 2)[1].split(",")[0].removeprefix("error file=")


@pytest.fixture
def repository(project: Path) -> Path:
    """A repository (a `.git` directory) whose subproject `sub/` has its own pyproject.toml and a bad spec."""
    (project / ".git").mkdir()
    write(project / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')
    write(project / "sub" / "specs" / "bad.yaml", BAD)
    return project


def test_github_paths_are_relative_to_the_repository_from_a_subdirectory(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run in a subdirectory, lint still annotates the file by its path from the repository root."""
    monkeypatch.chdir(repository / "sub" / "specs")
    assert _annotated_file("bad.yaml") == "sub/specs/bad.yaml"
    monkeypatch.chdir(repository / "sub")
    assert _annotated_file() == "sub/specs/bad.yaml"


def test_github_paths_are_relative_to_the_repository_for_an_absolute_path(
    repository: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An absolute PATH, from a working directory outside the repository, gives the same path."""
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    assert _annotated_file(str(repository / "sub" / "specs")) == "sub/specs/bad.yaml"


def test_a_worktree_git_file_marks_the_root_too(repository: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a git worktree `.git` is a file; it marks the root all the same."""
    (repository / ".git").rmdir()
    write(repository / ".git", "gitdir: /somewhere/else\n")
    monkeypatch.chdir(repository / "sub" / "specs")
    assert _annotated_file("bad.yaml") == "sub/specs/bad.yaml"


def test_without_git_paths_are_relative_to_the_nearest_project(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a git repository the nearest directory with a pyproject.toml is the root."""
    (repository / ".git").rmdir()
    monkeypatch.chdir(repository / "sub" / "specs")
    assert _annotated_file("bad.yaml") == "specs/bad.yaml"


def test_gitlab_and_sarif_paths_are_relative_to_the_repository(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitLab's Code Quality report and SARIF locate the file the same way as the annotations."""
    import json

    monkeypatch.chdir(repository / "sub" / "specs")
    gitlab = json.loads(toolflow("lint", "--output-format", "gitlab", "--select", "TF201", "bad.yaml")[1])
    assert gitlab[0]["location"]["path"] == "sub/specs/bad.yaml"
    sarif = json.loads(toolflow("lint", "--output-format", "sarif", "--select", "TF201", "bad.yaml")[1])
    location = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "sub/specs/bad.yaml"


def test_the_plain_lines_after_the_annotations_keep_the_path_as_given(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The text lines that follow the annotations are for people: the path as they typed it."""
    monkeypatch.chdir(repository / "sub" / "specs")
    out = toolflow("lint", "--output-format", "github", "--select", "TF201", "bad.yaml")[1]
    assert out.splitlines()[1].startswith("bad.yaml:3:3: TF201 ")


def test_full_prints_statistics_on_stdout_as_text_does() -> None:
    """`full` is for people, like `text`: `--statistics` follows the report on stdout."""
    write("specs/bad.yaml", BAD)
    code, out, err = toolflow("lint", "--output-format", "full", "--statistics", "--select", "TF201", "specs")
    assert (code, err) == (1, "")
    assert out.endswith("Found 1 error and 0 warnings in 1 file.\n    1  TF201  invalid-tool-name\n")
