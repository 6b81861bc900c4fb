"""`toolflow test`: examples with expect*, `*.toolflow.yaml` sessions, reports, exit codes, paths.

In-process through `toolflow._cli.run` in a `ToolflowProject` with only the built-in plugins
(`TOOLFLOW_LOAD_PLUGINS=none`): the tools are templates and commands, each with a short
timeout, so no test can hang on a tool. The example specs of the repository run at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from toolflow._cli_test import contains, same
from toolflow.testing import CliResult, ToolflowProject

ROOT = Path(__file__).resolve().parent.parent.parent

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
        expect_contains: Bob
      - args: {}
        expect_error: Missing required parameter
  order:
    description: Look up an order.
    timeout: 5s
    parameters:
      type: object
      properties:
        id: {type: string, description: The order.}
      required: [id]
    template:
      source: '{"id": "{{ id }}", "items": ["nail", "hammer"], "total": 12.5, "paid": true}'
      output: json
    examples:
      - args: {id: A1}
        expect: {id: A1, items: [nail, hammer], total: 12.5, paid: true}
      - args: {id: A2}
        expect_contains: {items: [hammer], paid: true}
      - args: {id: A3}
        expect_contains: '"total": 12.5'
"""


def _test(project: ToolflowProject, *args: str) -> CliResult:
    return project.run("test", *args, env={"TOOLFLOW_LOAD_PLUGINS": "none"})


@pytest.fixture
def project(toolflow_project: ToolflowProject) -> ToolflowProject:
    """A project with the two tools above in specs/tools.yaml."""
    toolflow_project.write_spec("tools.yaml", SPECS)
    return toolflow_project


# --- examples ---------------------------------------------------------------------------------


def test_examples_with_expectations_pass(project: ToolflowProject) -> None:
    """Each example with expect, expect_contains or expect_error runs and passes: one line each, exit 0."""
    result = _test(project)
    assert result.exit_code == 0, result
    lines = result.stdout.splitlines()
    assert lines[:6] == [
        "PASS greet examples[0] (specs/tools.yaml:14:9)",
        "PASS greet examples[1] (specs/tools.yaml:16:9)",
        "PASS greet examples[2] (specs/tools.yaml:18:9)",
        "PASS order examples[0] (specs/tools.yaml:32:9)",
        "PASS order examples[1] (specs/tools.yaml:34:9)",
        "PASS order examples[2] (specs/tools.yaml:36:9)",
    ]
    assert lines[6].startswith("6 tests: 6 passed, 0 failed (")


def test_a_failed_expectation_says_what_differed(project: ToolflowProject) -> None:
    """A wrong expect, expect_contains or expect_error fails with file:line:col and both values; exit 1."""
    project.write_spec(
        "tools.yaml",
        SPECS.replace("expect: Hello, Ada!", "expect: Hi, Ada!")
        .replace("expect_contains: {items: [hammer], paid: true}", "expect_contains: {items: [saw]}")
        .replace("expect_error: Missing required parameter", "expect_error: timed out"),
    )
    result = _test(project)
    assert result.exit_code == 1
    assert "FAIL greet examples[0] (specs/tools.yaml:14:9)" in result.stdout
    assert 'specs/tools.yaml:14:9: greet examples[0]: expected "Hi, Ada!", got "Hello, Ada!"' in result.stdout
    assert 'specs/tools.yaml:34:9: order examples[1]: expected data containing {"items": ["saw"]}' in result.stdout
    assert "specs/tools.yaml:18:9: greet examples[2]: expected an error containing 'timed out', got " in result.stdout
    assert "6 tests: 3 passed, 3 failed" in result.stdout


def test_expect_on_a_failing_call_reports_the_error(project: ToolflowProject) -> None:
    """An example that expects data fails with the call's error when the call fails."""
    project.write_spec("tools.yaml", SPECS.replace("args: {name: Ada}", "args: {name: 3}"))
    result = _test(project, "--output-format", "json")
    assert result.exit_code == 1
    first = json.loads(result.stdout)["tests"][0]
    assert first["passed"] is False
    assert first["message"].startswith("the call failed: ")
    assert "name: Expected string" in first["message"]


def test_expect_error_on_a_succeeding_call_fails(project: ToolflowProject) -> None:
    """expect_error fails when the call succeeds, and shows the data it returned."""
    project.write_spec("tools.yaml", SPECS.replace("      - args: {}\n", "      - args: {name: Cy}\n"))
    result = _test(project)
    assert result.exit_code == 1
    assert 'greet examples[2]: expected the call to fail, but it succeeded with "Hello, Cy!"' in result.stdout


def test_result_is_documentation_and_never_runs(project: ToolflowProject) -> None:
    """An example with only `result:` is not a test: its command does not run."""
    project.write_spec(
        "side_effect.yaml",
        """\
        toolflow: 1
        tools:
          touch:
            description: Make a file.
            timeout: 5s
            parameters: {type: object, properties: {}}
            command: [touch, touched]
            examples:
              - args: {}
                result: ""
        """,
    )
    result = _test(project)
    assert result.exit_code == 0
    assert "touch" not in result.stdout
    assert not (project.root / "touched").exists()


def test_each_example_gets_a_fresh_engine(project: ToolflowProject) -> None:
    """depends_on history does not carry from one example to the next: the dependent call is refused."""
    project.write_spec(
        "depends.yaml",
        """\
        toolflow: 1
        tools:
          first:
            description: Runs first.
            timeout: 5s
            parameters: {type: object, properties: {}}
            template: one
            examples: [{args: {}, expect: one}]
          second:
            description: Runs after first.
            timeout: 5s
            parameters: {type: object, properties: {}}
            template: two
            depends_on: [first]
            examples: [{args: {}, expect_error: first}]
        """,
    )
    result = _test(project, "specs/depends.yaml")
    assert result.exit_code == 0, result
    assert "2 tests: 2 passed" in result.stdout


def test_expect_error_with_expect_is_a_contradiction(project: ToolflowProject) -> None:
    """An example that expects an error and data fails, saying why."""
    project.write_spec(
        "tools.yaml", SPECS.replace("expect_contains: Bob", "expect_contains: Bob\n        expect_error: x")
    )
    result = _test(project)
    assert result.exit_code == 1
    assert "declares expect_error with expect or expect_contains" in result.stdout


# --- comparing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected", "equal"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (None, None, True),
        ({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]}, True),
        ({"a": 1, "b": 2}, {"a": 1}, False),
        (["a", "b"], ["b", "a"], False),
        ("1", 1, False),
    ],
)
def test_expect_compares_as_json(data: object, expected: object, equal: bool) -> None:
    """expect: JSON equality, with booleans apart from numbers and exact keys."""
    assert same(data, expected) is equal


@pytest.mark.parametrize(
    ("data", "expected", "found"),
    [
        ("Hello, Ada!", "Ada", True),
        ({"total": 12.5}, '"total": 12.5', True),
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"d": 3}}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"items": ["nail", "hammer"]}, {"items": ["hammer"]}, True),
        ({"items": [{"name": "saw", "price": 3}]}, {"items": [{"name": "saw"}]}, True),
        ({"items": ["nail"]}, {"items": ["saw"]}, False),
        ({"message": "the smithy is north"}, {"message": "smithy"}, True),
        ({"paid": 1}, {"paid": True}, False),
        ("text", {"a": 1}, False),
    ],
)
def test_expect_contains_rule(data: object, expected: object, found: bool) -> None:
    """expect_contains: substring of text or JSON, subset of a mapping, items of a list, else equality."""
    assert contains(data, expected) is found


# --- test files -------------------------------------------------------------------------------

SESSION = """\
description: Greet Ada.
prompt: Say hello to Ada.
turns:
  - text: Let me greet her.
    tool_calls:
      - {name: order, arguments: {id: A1}}
      - {name: greet, arguments: {name: Ada}}
expect:
  reason: terminal
  tools: [order, greet]
  turns: 1
  answer_contains: Hello, Ada!
"""


def test_a_session_test_file_passes(project: ToolflowProject) -> None:
    """A *.toolflow.yaml under tests/ runs its scripted session through the loop and checks expect."""
    project.write("tests/greet.toolflow.yaml", SESSION)
    result = _test(project)
    assert result.exit_code == 0, result
    assert "PASS tests/greet.toolflow.yaml (tests/greet.toolflow.yaml:8:1)" in result.stdout
    assert "7 tests: 7 passed" in result.stdout


def test_a_session_that_ends_otherwise_fails_with_every_difference(project: ToolflowProject) -> None:
    """Reason, tools, turns and answer are each compared; the failure lists every difference."""
    project.write(
        "tests/greet.toolflow.yaml",
        SESSION.replace("reason: terminal", "reason: final_answer")
        .replace("tools: [order, greet]", "tools: [greet]")
        .replace("turns: 1", "turns: 2")
        .replace("answer_contains: Hello, Ada!", "answer_contains: Goodbye"),
    )
    result = _test(project, "tests/greet.toolflow.yaml")
    assert result.exit_code == 1
    failure = next(line for line in result.stdout.splitlines() if line.startswith("tests/greet.toolflow.yaml:8:1: "))
    assert "expected the loop to end with 'final_answer', it ended with 'terminal'" in failure
    assert "expected the calls ['greet'], the model called ['order', 'greet']" in failure
    assert "expected 2 turns, the loop ran 1" in failure
    assert "expected the answer to contain 'Goodbye', it is 'Let me greet her.\\nHello, Ada!'" in failure


def test_a_session_file_named_by_session_and_specs_of_its_own(project: ToolflowProject) -> None:
    """`session:` names a transcript and `specs:` the specs, both relative to the test file."""
    project.write("elsewhere/specs/one.yaml", SPECS)
    project.write(
        "elsewhere/session.yaml",
        "prompt: Hi\nturns:\n  - tool_calls:\n      - {name: greet, arguments: {name: Ada}}\n",
    )
    project.write(
        "elsewhere/t.toolflow.yaml",
        "session: session.yaml\nspecs: [specs]\nexpect: {reason: terminal, tools: [greet]}\n",
    )
    project.write_spec("tools.yaml", "toolflow: 1\ntools: {}\n")  # the project's specs lack greet
    result = _test(project, "elsewhere/t.toolflow.yaml")
    assert result.exit_code == 0, result
    assert "1 test: 1 passed" in result.stdout


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("turns: [{text: hi}]\nexpect: {reason: terminal}\nextra: 1\n", "unknown keys ['extra']", 2),
        ("turns: [{text: hi}]\nexpect: {reasons: terminal}\n", "unknown keys ['reasons'] in 'expect'", 2),
        ("turns: [{text: hi}]\n", "'expect' must be a mapping", 1),
        ("prompt: hi\nexpect: {reason: terminal}\n", "give the session either inline", 2),
        ("turns: [{text: hi\nexpect: {}\n", "YAML syntax error: expected ',' or '}'", 2),
        ("turns: " + "[" * 2000 + "]" * 2000 + "\nexpect: {}\n", "the document nests more than 64 collections deep", 1),
        ("turns: [{text: hi}]\nexpect: {tools: greet}\n", "'expect: tools' must be a list of tool names", 2),
        ("turns: [{bad: 1}]\nprompt: hi\nexpect: {reason: terminal}\n", "unknown keys ['bad']; expected text", 3),
        ("turns: [{text: hi}]\nexpect: {reason: final_answer}\n", "the session has no 'prompt'", 2),
        ("- a list\n", "a test file is a mapping", 1),
        ("sessions: []\n", "'sessions' must be a list of sessions", 1),
        ("turns: [{text: hi}]\nsessions: [{name: a}]\n", "unknown keys ['turns'] beside 'sessions'", 2),
        ("sessions:\n  - {prompt: hi, turns: [{text: hi}], expect: {reason: final_answer}}\n", "needs a 'name'", 2),
        (
            (
                "sessions:\n  - {name: a, prompt: hi, turns: [{text: hi}], expect: {reason: final_answer}}\n"
                "  - {name: a, prompt: hi, turns: [{text: hi}], expect: {reason: final_answer}}\n"
            ),
            "two sessions are named 'a'",
            3,
        ),
        ("sessions:\n  - name: a\n    prompt: hi\n    expect: {reason: final_answer}\n", "give the session either", 4),
    ],
)
def test_a_malformed_test_file_fails_with_its_problem(
    project: ToolflowProject, text: str, message: str, line: int
) -> None:
    """A test file that cannot run fails (exit 1) with what is wrong, at its expect key or error position."""
    project.write("tests/bad.toolflow.yaml", text)
    result = _test(project, "tests/bad.toolflow.yaml")
    assert result.exit_code == 1, result
    assert f"tests/bad.toolflow.yaml:{line}:" in result.stdout
    assert message in result.stdout


SESSIONS = """\
description: Greetings, two ways.
approve: no
sessions:
  - name: greets
    prompt: Say hello to Ada.
    turns:
      - tool_calls: [{name: greet, arguments: {name: Ada}}]
    expect: {reason: terminal, tools: [greet]}
  - name: answers without tools
    prompt: Say nothing.
    turns:
      - text: Nothing to do.
    expect: {reason: final_answer, answer_contains: Goodbye}
"""


def test_a_test_file_may_hold_several_named_sessions(project: ToolflowProject) -> None:
    """`sessions:` is a list of sessions, each with a name, a test each, pointed at by its own expect."""
    project.write("tests/two.toolflow.yaml", SESSIONS)
    result = _test(project, "tests/two.toolflow.yaml")
    assert result.exit_code == 1, result
    lines = result.stdout.splitlines()
    assert "PASS tests/two.toolflow.yaml sessions[greets] (tests/two.toolflow.yaml:8:5)" in lines
    assert "FAIL tests/two.toolflow.yaml sessions[answers without tools] (tests/two.toolflow.yaml:13:5)" in lines
    failure = (
        "tests/two.toolflow.yaml:13:5: tests/two.toolflow.yaml sessions[answers without tools]: expected the answer"
    )
    assert any(line.startswith(failure) for line in lines)
    assert "2 tests: 1 passed, 1 failed" in result.stdout


def test_the_file_keys_beside_sessions_are_each_sessions_defaults(project: ToolflowProject) -> None:
    """`approve`, `specs` and `format` beside `sessions` hold for each session, unless it says otherwise."""
    project.write_spec("policy.yaml", "toolflow: 1\npolicy:\n  categories:\n    terminal: {approval: true}\n")
    calls = "turns:\n      - tool_calls: [{name: greet, arguments: {name: Ada}}]\n      - text: done\n"
    project.write(
        "tests/approvals.toolflow.yaml",
        "approve: no\nsessions:\n"
        f"  - name: refused\n    prompt: Hi\n    {calls}    expect: {{reason: final_answer}}\n"
        f"  - name: approved\n    approve: yes\n    prompt: Hi\n    {calls}    expect: {{reason: terminal}}\n",
    )
    result = _test(project, "tests/approvals.toolflow.yaml")
    assert result.exit_code == 0, result
    assert "2 tests: 2 passed" in result.stdout


def test_approve_in_a_test_file_answers_the_policy(project: ToolflowProject) -> None:
    """`approve: no` refuses a call whose category needs approval; the calls still count as made."""
    project.write_spec("policy.yaml", "toolflow: 1\npolicy:\n  categories:\n    terminal: {approval: true}\n")
    project.write(
        "tests/refused.toolflow.yaml",
        "prompt: Hi\napprove: no\nturns:\n  - tool_calls: [{name: greet, arguments: {name: Ada}}]\n"
        "  - text: I may not greet.\nexpect: {reason: final_answer, tools: [greet], answer_contains: may not}\n",
    )
    result = _test(project, "tests/refused.toolflow.yaml")
    assert result.exit_code == 0, result


# --- paths, formats, exit codes ---------------------------------------------------------------


def test_no_tests_is_a_warning(toolflow_project: ToolflowProject) -> None:
    """Specs without tested examples and no test files: a warning on stderr, exit 0."""
    toolflow_project.write_spec("tools.yaml", SPECS.split("    examples:", maxsplit=1)[0])
    result = _test(toolflow_project)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "toolflow: warning: no tests found" in result.stderr


def test_a_missing_path_is_a_usage_error(project: ToolflowProject) -> None:
    """A PATH that does not exist: exit 2."""
    result = _test(project, "nope.yaml")
    assert result.exit_code == 2
    assert "test: no such file or directory: 'nope.yaml'" in result.stderr


def test_an_unbound_implementation_stops_the_run_once(project: ToolflowProject) -> None:
    """Specs that do not build a registry: the error once on stderr, nothing runs, exit 1."""
    project.write_spec(
        "unbound.yaml",
        "toolflow: 1\ntools:\n  ghost:\n    description: x\n    parameters: {type: object, properties: {}}\n"
        "    implementation: nobody.ghost\n",
    )
    result = _test(project)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.count("which no plugin binds") == 1


def test_specs_with_errors_exit_1(project: ToolflowProject) -> None:
    """Specs that do not load stop the run as `toolflow call` does: the diagnostics, exit 1."""
    project.write_spec("broken.yaml", "toolflow: 1\ntools:\n  broken:\n    descriptio: x\n")
    result = _test(project)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "specs/broken.yaml:4:5: TF101 unknown key 'descriptio'" in result.stderr


def test_test_files_in_a_spec_directory_are_not_specs(project: ToolflowProject) -> None:
    """A *.toolflow.yaml beside the specs runs as a test, and lint does not read it as a spec."""
    project.write("specs/greet.toolflow.yaml", SESSION)
    assert _test(project).stdout.count("PASS specs/greet.toolflow.yaml") == 1
    lint = project.lint(env={"TOOLFLOW_LOAD_PLUGINS": "none"})
    assert lint.exit_code == 0, lint
    assert "1 file" in lint.stdout


def test_a_spec_file_path_runs_only_its_examples(project: ToolflowProject) -> None:
    """`toolflow test specs/FILE` runs the examples of that file, and no test file."""
    project.write_spec(
        "more.yaml",
        "toolflow: 1\ntools:\n  hi:\n    description: Hi.\n    timeout: 5s\n"
        "    parameters: {type: object, properties: {}}\n    template: hi\n"
        "    examples: [{args: {}, expect: hi}]\n",
    )
    project.write("tests/greet.toolflow.yaml", SESSION)
    result = _test(project, "specs/more.yaml")
    assert result.exit_code == 0, result
    assert "PASS hi examples[0] (specs/more.yaml:8:16)" in result.stdout
    assert "1 test: 1 passed" in result.stdout


def test_json_report(project: ToolflowProject) -> None:
    """--output-format json: every test with its place and outcome, and the counts."""
    project.write("tests/greet.toolflow.yaml", SESSION)
    result = _test(project, "--output-format", "json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert (document["passed"], document["failed"]) == (7, 0)
    assert document["tests"][0] == {
        "name": "greet examples[0]",
        "kind": "example",
        "file": "specs/tools.yaml",
        "line": 14,
        "column": 9,
        "passed": True,
        "message": "",
        "duration": document["tests"][0]["duration"],
    }
    assert document["tests"][-1]["kind"] == "session"


def test_github_report_annotates_failures_only(project: ToolflowProject) -> None:
    """--output-format github: one ::error per failed test, escaped, at its position."""
    project.write_spec("tools.yaml", SPECS.replace("expect: Hello, Ada!", "expect: Hi, Ada!"))
    result = _test(project, "--output-format", "github")
    assert result.exit_code == 1
    assert result.stdout == (
        "::error file=specs/tools.yaml,line=14,col=9,title=toolflow test::"
        'greet examples[0]: expected "Hi, Ada!", got "Hello, Ada!"\n'
    )


def test_junit_report(project: ToolflowProject) -> None:
    """--output-format junit: a testcase per test, a failure element for each that failed."""
    project.write_spec("tools.yaml", SPECS.replace("expect: Hello, Ada!", "expect: Hi, Ada!"))
    result = _test(project, "--output-format", "junit")
    assert result.exit_code == 1
    suite = ET.fromstring(result.stdout).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("6", "1")
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases][:2] == ["greet examples[0]", "greet examples[1]"]
    failure = cases[0].find("failure")
    assert failure is not None
    assert failure.get("message") == 'expected "Hi, Ada!", got "Hello, Ada!"'
    assert cases[1].find("failure") is None


def test_unknown_format_is_a_usage_error(project: ToolflowProject) -> None:
    """lint's sarif is not a test report: exit 2."""
    assert _test(project, "--output-format", "sarif").exit_code == 2


def test_the_example_specs_pass() -> None:
    """`toolflow test` at the repository's root: the example specs' tested examples and tests/specs pass."""
    completed = subprocess.run(
        [sys.executable, "-m", "toolflow", "test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in {"TOOLFLOW_LOAD_PLUGINS", "TOOLFLOW_DISABLE_PLUGINS"}},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "PASS tests/specs/assistant-session.toolflow.yaml" in completed.stdout
    assert "PASS get_attributes examples[2]" in completed.stdout
    assert " 0 failed" in completed.stdout


def test_the_loader_keeps_each_expectation(project: ToolflowProject) -> None:
    """Example.expect, expect_contains and expect_error as written; `expect: null` is declared, `result:` is no test."""
    project.write_spec(
        "nulls.yaml",
        """\
        toolflow: 1
        tools:
          nothing:
            description: Nothing.
            parameters: {type: object, properties: {}}
            template: ""
            examples:
              - {args: {}, expect: null}
              - {args: {}, result: x}
        """,
    )
    tools = {tool.name: tool for tool in project.load().tools}
    ada, bob, missing = tools["greet"].examples
    assert (ada.expect, ada.has_expect, ada.is_test) == ("Hello, Ada!", True, True)
    assert (bob.expect_contains, bob.has_expect) == ("Bob", False)
    assert missing.expect_error == "Missing required parameter"
    null, documented = tools["nothing"].examples
    assert (null.expect, null.expect_null, null.has_expect, null.is_test) == (None, True, True, True)
    assert (documented.has_result, documented.is_test) == (True, False)


def test_lint_accepts_rejected_args_of_an_example_that_expects_an_error(project: ToolflowProject) -> None:
    """TF210 skips the args of an example with expect_error (its call is meant to fail) and checks the others."""
    lint = project.lint("--select", "TF210", env={"TOOLFLOW_LOAD_PLUGINS": "none"})
    assert lint.exit_code == 0, lint
    project.write_spec("tools.yaml", SPECS.replace("        expect_error: Missing required parameter\n", ""))
    lint = project.lint("--select", "TF210", env={"TOOLFLOW_LOAD_PLUGINS": "none"})
    assert lint.exit_code == 1
    assert "specs/tools.yaml:18:9: TF210 examples[2] args are rejected" in lint.stdout


def test_approvals_are_refused_unless_approve_yes(project: ToolflowProject) -> None:
    """Without --approve nobody approves (never a prompt): a call that needs approval is refused; --approve yes runs it."""
    project.write_spec("policy.yaml", "toolflow: 1\npolicy:\n  categories:\n    terminal: {approval: true}\n")
    refused = _test(project, "specs/")
    assert refused.exit_code == 1
    assert "greet examples[0]: the call failed: " in refused.stdout
    assert "so it did not run" in refused.stdout
    assert _test(project, "--approve", "yes").exit_code == 0
