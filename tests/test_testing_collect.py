"""``toolflow.testing`` collects what ``toolflow test`` runs: test files and tested examples.

Each test runs a separate pytest process (``pytester.runpytest_subprocess``, with a timeout) in
a project of its own, with only the built-in plugins, as a team would run ``pytest``.
"""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

PYPROJECT = '[tool.toolflow]\nspecs = ["specs"]\n'

SPECS = """\
toolflow: 1
tools:
  greet:
    description: Greet someone.
    category: terminal
    timeout: 5s
    parameters:
      type: object
      properties:
        name: {type: string, description: Who.}
      required: [name]
    template: "Hello, {{ name }}!"
    examples:
      - args: {name: Ada}
        expect: Hello, Ada!
      - args: {name: Bob}
      - args: {name: Cy}
        expect_contains: Cy
"""

SESSION = """\
prompt: Greet Ada.
turns:
  - tool_calls: [{name: greet, arguments: {name: Ada}}]
expect:
  reason: terminal
  tools: [greet]
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with specs/tools.yaml, tests/greet.toolflow.yaml and the plugin enabled in conftest.py."""
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    pytester.makefile(".toml", pyproject=PYPROJECT)
    pytester.makeconftest('pytest_plugins = ["toolflow.testing"]\n')
    (pytester.path / "specs").mkdir()
    (pytester.path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "greet.toolflow.yaml").write_text(SESSION, encoding="utf-8")
    return pytester


def test_collects_a_test_file_and_each_tested_example(project: pytest.Pytester) -> None:
    """One item per test file and one per example that declares an expected outcome (not the others)."""
    result = project.runpytest_subprocess("--collect-only", "-q", "specs", "tests", timeout=120)
    result.stdout.fnmatch_lines(
        [
            "specs/tools.yaml::greet[0]",
            "specs/tools.yaml::greet[2]",
            "tests/greet.toolflow.yaml::greet.toolflow.yaml",
            "3 tests collected*",
        ]
    )


def test_a_test_file_with_sessions_is_an_item_per_session(project: pytest.Pytester) -> None:
    """Each entry of `sessions:` is an item named FILE[NAME], and runs as `toolflow test` runs it."""
    entries = "\n".join("  - name: " + name + "\n" + textwrap.indent(SESSION, "    ") for name in ("first", "second"))
    (project.path / "tests" / "greet.toolflow.yaml").write_text(f"sessions:\n{entries}", encoding="utf-8")
    result = project.runpytest_subprocess("-v", "tests", timeout=120)
    result.stdout.fnmatch_lines(
        [
            "tests/greet.toolflow.yaml::greet.toolflow.yaml[[]first[]] PASSED*",
            "*greet.toolflow.yaml[[]second[]] PASSED*",
        ]
    )
    result.assert_outcomes(passed=2)


def test_the_items_pass(project: pytest.Pytester) -> None:
    """The items run through the engine and the loop, as `toolflow test` runs them."""
    result = project.runpytest_subprocess("specs", "tests", timeout=120)
    result.assert_outcomes(passed=3)


def test_a_failed_item_reads_like_the_command(project: pytest.Pytester) -> None:
    """A failure is `FILE:LINE:COL: what differed`, without a traceback."""
    (project.path / "specs" / "tools.yaml").write_text(SPECS.replace("expect: Hello, Ada!", "expect: Hi"), "utf-8")
    (project.path / "tests" / "greet.toolflow.yaml").write_text(SESSION.replace("terminal", "final_answer"), "utf-8")
    result = project.runpytest_subprocess("specs", "tests", timeout=120)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            '*specs/tools.yaml:14:9: expected "Hi", got "Hello, Ada!"',
            "*tests/greet.toolflow.yaml:4:1: expected the loop to end with 'final_answer', it ended with 'terminal'",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_spec_files_outside_the_project_specs_are_not_collected(project: pytest.Pytester) -> None:
    """A YAML file outside [tool.toolflow] specs is left alone, whatever it holds."""
    (project.path / "tests" / "data.yaml").write_text(SPECS, encoding="utf-8")
    result = project.runpytest_subprocess("--collect-only", "-q", "tests", timeout=120)
    result.stdout.fnmatch_lines(["tests/greet.toolflow.yaml::greet.toolflow.yaml", "1 test collected*"])


def test_specs_that_do_not_build_fail_each_example_item(project: pytest.Pytester) -> None:
    """An unbound implementation in the project's specs fails the example items with the registry's error."""
    (project.path / "specs" / "ghost.yaml").write_text(
        "toolflow: 1\ntools:\n  ghost:\n    description: x\n    parameters: {type: object, properties: {}}\n"
        "    implementation: nobody.ghost\n",
        encoding="utf-8",
    )
    result = project.runpytest_subprocess("specs", timeout=120)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*which no plugin binds*"])
