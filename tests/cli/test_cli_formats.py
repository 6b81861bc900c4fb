"""Every ``toolflow lint --output-format``: text, json, github, sarif, junit, gitlab (full: test_cli_lint_habits.py).

The SARIF output is validated against the official OASIS SARIF 2.1.0 schema,
vendored in ``tests/data/`` (see ``tests/data/README.md`` for where it comes from).
Runs select ``TF0,TF1,TF201,TF9`` so that rules added later cannot change the output.
"""

from __future__ import annotations

import io
import json
import re
import textwrap
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import toolflow
from toolflow._cli import run
from toolflow._diagnostics import Diagnostic
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import LintReport
from toolflow._lint._formats import JSON_FORMAT_VERSION, render_github
from toolflow._lint._rule import DOCS_URL

SARIF_SCHEMA = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"
SELECT = ("--select", "TF0,TF1,TF201,TF9")

CLEAN = """\
toolflow: 1
tools:
  say:
    description: Say something to the room
    category: terminal
    parameters:
      type: object
      properties:
        message:
          type: string
          description: What to say
      required: [message]
    template: "You say: {{ message }}"
"""

BAD_NAME = """\
toolflow: 1
tools:
  search objects:
    description: Search objects in the room
    implementation: search
"""

MULTI_LINE = """\
toolflow: 1
tools:
  x:
    description:
      a: 1
      b: 2
    implementation: x
"""

BAD_NAME_MESSAGE = (
    "tool name 'search objects' has characters other than a-z, A-Z, 0-9, '_' and '-'; "
    "rename it, e.g. to 'search_objects'"
)
EMPTY_MESSAGE = "the file is empty; a spec file starts with 'toolflow: 1'"


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def problems() -> None:
    """Three files: an error (TF201 at 3:3-3:17), a warning (TF006 at 1:1) and a clean file."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("specs/empty.yaml", "")
    write("specs/say.yaml", CLEAN)


def write(path: str, text: str) -> str:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(textwrap.dedent(text))
    return path


def lint(output_format: str, *args: str, select: tuple[str, ...] = SELECT) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["lint", "--output-format", output_format, *select, *args], stdout=out, stderr=err)
    assert err.getvalue() == ""
    return code, out.getvalue()


def text_report(*args: str) -> str:
    return lint("text", *args)[1]


# -- json ---------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("problems")
def test_json_envelope() -> None:
    """The JSON report is a versioned envelope: version, tool, summary and diagnostics."""
    code, out = lint("json", "specs")
    document = json.loads(out)
    assert code == 1
    assert list(document) == ["version", "tool", "summary", "diagnostics"]
    assert document["version"] == JSON_FORMAT_VERSION == 1
    assert document["tool"] == {"name": "toolflow", "version": toolflow.__version__}
    assert document["summary"] == {"files": 3, "tools": 2, "errors": 1, "warnings": 1}


@pytest.mark.usefixtures("problems")
def test_json_diagnostics_carry_every_field() -> None:
    """Each diagnostic has code, name, severity, message, file, line, column, end, pointer and url."""
    diagnostics = json.loads(lint("json", "specs")[1])["diagnostics"]
    assert diagnostics == [
        {
            "code": "TF201",
            "name": "invalid-tool-name",
            "severity": "error",
            "message": BAD_NAME_MESSAGE,
            "file": "specs/bad_name.yaml",
            "line": 3,
            "column": 3,
            "end": {"line": 3, "column": 17},
            "pointer": "/tools/search objects",
            "url": f"{DOCS_URL}#tf201",
        },
        {
            "code": "TF006",
            "name": "empty-file",
            "severity": "warning",
            "message": EMPTY_MESSAGE,
            "file": "specs/empty.yaml",
            "line": 1,
            "column": 1,
            "end": {"line": 1, "column": 1},
            "pointer": "",
            "url": f"{DOCS_URL}#tf006",
        },
    ]


def test_json_of_a_clean_run() -> None:
    """A clean run is an envelope with no diagnostics and exit code 0."""
    write("specs/say.yaml", CLEAN)
    code, out = lint("json", "specs")
    document = json.loads(out)
    assert code == 0
    assert document["summary"] == {"files": 1, "tools": 1, "errors": 0, "warnings": 0}
    assert document["diagnostics"] == []


def test_json_end_of_a_multi_line_span() -> None:
    """A problem spanning lines reports where it ends."""
    write("specs/multi.yaml", MULTI_LINE)
    (diagnostic,) = json.loads(lint("json", "specs")[1])["diagnostics"]
    assert (diagnostic["code"], diagnostic["line"], diagnostic["column"]) == ("TF103", 5, 7)
    assert diagnostic["end"] == {"line": 7, "column": 5}
    assert diagnostic["pointer"] == "/tools/x/description"


# -- github -------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("problems")
def test_github_annotations_then_plain_lines() -> None:
    """Workflow-command annotations come first, one per problem, then the plain text report."""
    code, out = lint("github", "specs")
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == [
        (
            "::error file=specs/bad_name.yaml,line=3,col=3,endLine=3,endColumn=17,"
            f"title=TF201 invalid-tool-name::{BAD_NAME_MESSAGE}"
        ),
        f"::warning file=specs/empty.yaml,line=1,col=1,endLine=1,endColumn=1,title=TF006 empty-file::{EMPTY_MESSAGE}",
    ]
    assert "\n".join(lines[2:]) + "\n" == text_report("specs")


def test_github_of_a_clean_run_is_the_plain_report() -> None:
    """Without problems there is no annotation, only the all-clear line."""
    write("specs/say.yaml", CLEAN)
    assert lint("github", "specs") == (0, "All checks passed: 1 file, 1 tool.\n")


def test_github_escapes_properties_and_message() -> None:
    """``%``, CR, LF, ``:`` and ``,`` are escaped in properties; only ``%``, CR and LF in the message."""
    write("specs/50%, a:b\r\nc.yaml", BAD_NAME.replace("search objects", '"50% off: a,b"'))
    _, out = lint("github", "--select", "TF201", "specs")
    annotation = out.split("\n", 1)[0]
    assert annotation == (
        "::error file=specs/50%25%2C a%3Ab%0D%0Ac.yaml,line=3,col=3,endLine=3,endColumn=17,"
        "title=TF201 invalid-tool-name::"
        "tool name '50%25 off: a,b' has characters other than a-z, A-Z, 0-9, '_' and '-'; "
        "rename it, e.g. to '50_off_a_b'"
    )


def test_github_escapes_line_breaks_in_messages() -> None:
    """A message with CR and LF stays on one annotation line (``%0D``, ``%0A``), and ``%`` becomes ``%25``."""
    diagnostic = Diagnostic(
        code="TF201", name="invalid-tool-name", message="100% wrong:\r\nsee, here", file="a.yaml", line=2, column=3
    )
    report = LintReport(diagnostics=(diagnostic,), files=(), tool_count=0, rules=(), config=LintConfig())
    first = render_github(report).split("\n", 1)[0]
    assert first == (
        "::error file=a.yaml,line=2,col=3,endLine=2,endColumn=3,title=TF201 invalid-tool-name::"
        "100%25 wrong:%0D%0Asee, here"
    )


def test_github_multi_line_annotation_has_no_columns() -> None:
    """For a span over several lines the annotation gives lines only, as GitHub's toolkit documents."""
    write("specs/multi.yaml", MULTI_LINE)
    annotation = lint("github", "specs")[1].split("\n", 1)[0]
    match = re.fullmatch(r"::error (?P<properties>[^:]*)::(?P<message>.*)", annotation)
    assert match is not None
    properties = dict(item.split("=", 1) for item in match["properties"].split(","))
    assert properties == {"file": "specs/multi.yaml", "line": "5", "endLine": "7", "title": "TF103 wrong-type"}


# -- sarif --------------------------------------------------------------------------------------------------------


def sarif(*args: str) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(lint("sarif", *args)[1])
    return log


def validate_sarif(log: dict[str, Any]) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


_URI_PATH = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
"""An RFC 3986 path (pchar and ``/``): what a file path must become in SARIF's ``uri``, a URI reference."""


def test_vendored_sarif_schema_is_the_oasis_one() -> None:
    """The vendored file is the OASIS SARIF 2.1.0 schema, and a valid draft-04 schema."""
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    assert schema["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    jsonschema.Draft4Validator.check_schema(schema)


def test_sarif_schema_rejects_a_broken_log() -> None:
    """The validation has teeth: a result without a message is refused."""
    write("specs/bad_name.yaml", BAD_NAME)
    log = sarif("specs")
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(AssertionError):
        validate_sarif(log)


@pytest.mark.usefixtures("problems")
def test_sarif_is_valid_against_the_official_schema() -> None:
    """A report with errors and warnings validates against SARIF 2.1.0."""
    write("specs/multi.yaml", MULTI_LINE)
    log = sarif("specs")
    validate_sarif(log)
    assert log["version"] == "2.1.0"


def test_sarif_of_a_clean_run_is_valid() -> None:
    """A clean run is a valid log with one run and no results."""
    write("specs/say.yaml", CLEAN)
    log = sarif("specs")
    validate_sarif(log)
    assert log["runs"][0]["results"] == []


def test_sarif_of_a_missing_file_is_valid() -> None:
    """A file-level problem (a missing path) is a valid result too."""
    log = sarif("missing.yaml")
    validate_sarif(log)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["TF005"]


@pytest.mark.usefixtures("problems")
def test_sarif_results_and_rules() -> None:
    """Each result names its rule, level, message and region; ``ruleIndex`` points into the driver's rules."""
    write("specs/multi.yaml", MULTI_LINE)
    (the_run,) = sarif("specs")["runs"]
    driver = the_run["tool"]["driver"]
    assert driver["name"] == "toolflow"
    assert driver["version"] == toolflow.__version__
    rule_ids = [r["id"] for r in driver["rules"]]
    assert {"TF001", "TF101", "TF201", "TF901"} <= set(rule_ids)
    assert all(re.fullmatch(r"TF(0|1|201|9)\d*", rule_id) for rule_id in rule_ids)
    by_id = {r["ruleId"]: r for r in the_run["results"]}
    assert set(by_id) == {"TF201", "TF006", "TF103"}
    for result in the_run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
    assert by_id["TF201"]["level"] == "error"
    assert by_id["TF006"]["level"] == "warning"
    assert by_id["TF201"]["message"] == {"text": BAD_NAME_MESSAGE}
    location = by_id["TF201"]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "specs/bad_name.yaml"}
    assert location["region"] == {"startLine": 3, "startColumn": 3, "endLine": 3, "endColumn": 17}
    region = by_id["TF103"]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 5, "startColumn": 7, "endLine": 7, "endColumn": 5}
    assert by_id["TF201"]["properties"] == {"pointer": "/tools/search objects"}
    rule = driver["rules"][rule_ids.index("TF201")]
    assert rule["name"] == "invalid-tool-name"
    assert rule["helpUri"] == f"{DOCS_URL}#tf201"
    assert rule["defaultConfiguration"] == {"level": "error"}


def test_sarif_rules_follow_the_selection() -> None:
    """The driver lists exactly the selected rules."""
    write("specs/bad_name.yaml", BAD_NAME)
    (the_run,) = json.loads(lint("sarif", "specs", select=("--select", "TF201,TF006"))[1])["runs"]
    assert [r["id"] for r in the_run["tool"]["driver"]["rules"]] == ["TF006", "TF201"]


def test_sarif_uri_is_a_valid_uri_reference() -> None:
    """A path with a space or non-ASCII letters becomes a percent-encoded URI reference that decodes back."""
    write("my specs/caf\u00e9.yaml", BAD_NAME)
    log = sarif("my specs")
    validate_sarif(log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert _URI_PATH.fullmatch(uri), uri
    assert urllib.parse.unquote(uri) == "my specs/caf\u00e9.yaml"


# -- junit --------------------------------------------------------------------------------------------------------


def junit(*args: str) -> ET.Element:
    return ET.fromstring(lint("junit", *args)[1])


@pytest.mark.usefixtures("problems")
def test_junit_counts_and_failures_per_file() -> None:
    """One test case per file, one failure per problem, counts on the suites."""
    write("specs/two_bad.yaml", BAD_NAME + "  find things:\n    description: Find\n    implementation: find\n")
    root = junit("specs")
    assert root.tag == "testsuites"
    (suite,) = root
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures")) == ("4", "3")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"specs/bad_name.yaml", "specs/empty.yaml", "specs/say.yaml", "specs/two_bad.yaml"}
    assert [f.get("type") for f in cases["specs/two_bad.yaml"].iter("failure")] == ["TF201", "TF201"]
    assert [f.get("type") for f in cases["specs/empty.yaml"].iter("failure")] == ["TF006"]
    assert list(cases["specs/say.yaml"]) == []
    (failure,) = cases["specs/bad_name.yaml"].iter("failure")
    assert failure.get("message") == f"TF201 {BAD_NAME_MESSAGE}"
    assert failure.text == f"specs/bad_name.yaml:3:3: TF201 {BAD_NAME_MESSAGE}"


def test_junit_of_a_clean_run() -> None:
    """A clean run is one passing test case per file."""
    write("specs/say.yaml", CLEAN)
    write("specs/again.yaml", CLEAN.replace("say:", "say_again:"))
    root = junit("specs")
    assert (root.get("tests"), root.get("failures")) == ("2", "0")
    assert [list(case) for case in root.iter("testcase")] == [[], []]


def test_junit_escapes_markup_in_messages() -> None:
    """``<``, ``>``, ``&`` and quotes in a message survive as text, in attributes and bodies."""
    write("specs/odd.yaml", BAD_NAME.replace("search objects", "\"a<b> & 'c'\""))
    (failure,) = junit("specs").iter("failure")
    assert failure.get("message", "").startswith("TF201 tool name \"a<b> & 'c'\" has characters")
    assert failure.text is not None
    assert failure.text.startswith("specs/odd.yaml:3:3: TF201 tool name \"a<b> & 'c'\"")


def test_junit_reports_a_missing_file_as_a_failing_case() -> None:
    """A path that does not exist gets a failing test case of its own."""
    root = junit("missing.yaml")
    (case,) = root.iter("testcase")
    assert case.get("name") == "missing.yaml"
    assert [f.get("type") for f in case.iter("failure")] == ["TF005"]


# -- gitlab -------------------------------------------------------------------------------------------------------


def gitlab(*args: str) -> list[dict[str, Any]]:
    out = lint("gitlab", *args)[1]
    assert not out.startswith("\ufeff")  # GitLab's parser refuses a byte order mark
    issues: list[dict[str, Any]] = json.loads(out)
    return issues


def begin_line(issue: dict[str, Any]) -> int:
    location = issue["location"]
    line: int = location["lines"]["begin"] if "lines" in location else location["positions"]["begin"]["line"]
    return line


@pytest.mark.usefixtures("problems")
def test_gitlab_code_quality_fields() -> None:
    """Each issue has description, check_name, fingerprint, severity, location.path and a begin line."""
    issues = gitlab("specs")
    by_path = {issue["location"]["path"]: issue for issue in issues}
    assert set(by_path) == {"specs/bad_name.yaml", "specs/empty.yaml"}
    for issue in issues:
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= issue.keys()
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert isinstance(issue["fingerprint"], str)
        assert issue["fingerprint"]
    bad = by_path["specs/bad_name.yaml"]
    assert BAD_NAME_MESSAGE in bad["description"]
    assert "TF201" in bad["check_name"]
    assert begin_line(bad) == 3
    assert bad["severity"] == "major"
    assert by_path["specs/empty.yaml"]["severity"] == "minor"


def test_gitlab_of_a_clean_run_is_an_empty_list() -> None:
    """A clean run is ``[]``."""
    write("specs/say.yaml", CLEAN)
    assert gitlab("specs") == []


def test_gitlab_fingerprints_are_unique_and_stable() -> None:
    """Fingerprints differ between problems, repeat across runs, and survive lines added above."""
    write("specs/a.yaml", BAD_NAME + "  find things:\n    description: Find\n    implementation: find\n")
    write("specs/b.yaml", BAD_NAME)
    first = [issue["fingerprint"] for issue in gitlab("specs")]
    assert len(first) == 3
    assert len(set(first)) == 3
    assert [issue["fingerprint"] for issue in gitlab("specs")] == first
    write("specs/b.yaml", "# a comment that moves every line down\n" + BAD_NAME)
    moved = gitlab("specs")
    assert begin_line(moved[2]) == 4
    assert [issue["fingerprint"] for issue in moved] == first


def test_gitlab_fingerprints_of_identical_problems_differ() -> None:
    """Two unused suppressions with the same message in one file still get distinct fingerprints."""
    write(
        "specs/say.yaml",
        CLEAN.replace("tools:\n", "# toolflow: ignore\ntools:\n").replace("  say:\n", "  # toolflow: ignore\n  say:\n"),
    )
    issues = gitlab("specs")
    assert [begin_line(issue) for issue in issues] == [2, 4]
    assert issues[0]["fingerprint"] != issues[1]["fingerprint"]


# -- every format -------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("problems")
@pytest.mark.parametrize("output_format", ["text", "full", "json", "github", "sarif", "junit", "gitlab"])
def test_every_format_keeps_the_exit_code(output_format: str) -> None:
    """The output format never changes the exit code."""
    assert lint(output_format, "specs")[0] == 1
    assert lint(output_format, "specs/say.yaml")[0] == 0
    assert lint(output_format, "--fail-on", "warning", "specs/empty.yaml")[0] == 1


def test_severity_override_reaches_every_format() -> None:
    """A severity override shows in JSON, GitHub, SARIF and GitLab alike."""
    write("specs/bad_name.yaml", BAD_NAME)
    write("pyproject.toml", '[tool.toolflow.lint]\nseverity = {TF201 = "warning"}\n')
    assert json.loads(lint("json", "specs")[1])["diagnostics"][0]["severity"] == "warning"
    assert lint("github", "specs")[1].startswith("::warning ")
    assert sarif("specs")["runs"][0]["results"][0]["level"] == "warning"
    assert gitlab("specs")[0]["severity"] == "minor"
