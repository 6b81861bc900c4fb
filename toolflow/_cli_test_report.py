"""The cases and outcomes of ``toolflow test``, and its reports: text, JSON, GitHub annotations, JUnit XML.

Kept apart from :mod:`toolflow._cli_test` (which runs the tests) so that each stays small;
it imports nothing that runs tools, and only ``toolflow test`` imports it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from xml.sax.saxutils import quoteattr

import attrs

from toolflow._model import Example

__all__ = ["TEST_FORMATS", "Case", "Outcome", "outcome_line", "render"]

TEST_FORMATS = ("text", "json", "github", "junit")
"""The ``--output-format`` choices of ``toolflow test`` (lint's SARIF and GitLab formats report code, not tests)."""


@attrs.frozen(kw_only=True)
class Case:
    """One test: an example of a tool, or a test file's session.

    Attributes:
        kind: ``example`` or ``session``.
        name: ``TOOL examples[N]`` or the test file's path.
        file: The file to point at (the spec file, or the test file).
        line: 1-based line of the example, or of the test file's ``expect``.
        column: 1-based column.
        tool_name: The tool an example calls, as the registry names it.
        example: The example.
        document: A test file's YAML document (``None`` when it could not be read).
        problem: Why a test file cannot run (it then fails with this message).
    """

    kind: Literal["example", "session"]
    name: str
    file: str
    line: int = 1
    column: int = 1
    tool_name: str = ""
    example: Example | None = None
    document: Mapping[str, Any] | None = None
    problem: str | None = None


@attrs.frozen(kw_only=True)
class Outcome:
    """How one :class:`Case` ended: passed, or failed with a message saying what differed."""

    case: Case
    passed: bool
    message: str = ""
    duration: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The outcome as ``--output-format json`` prints it."""
        case = self.case
        return {
            "name": case.name,
            "kind": case.kind,
            "file": case.file,
            "line": case.line,
            "column": case.column,
            "passed": self.passed,
            "message": self.message,
            "duration": round(self.duration, 6),
        }


def _where(outcome: Outcome) -> str:
    case = outcome.case
    return f"{case.file}:{case.line}:{case.column}"


def _label(outcome: Outcome) -> str:
    """``NAME: `` before a failure's message, or nothing when the name is the file (a test file)."""
    case = outcome.case
    return "" if case.name == case.file else f"{case.name}: "


def outcome_line(outcome: Outcome) -> str:
    """The text format's line of one test: ``PASS log_story_event examples[0] (specs/story.yaml:32:9)``."""
    status = "PASS" if outcome.passed else "FAIL"
    return f"{status} {outcome.case.name} ({_where(outcome)})\n"


def _summary(outcomes: Sequence[Outcome], elapsed: float) -> str:
    failed = sum(not outcome.passed for outcome in outcomes)
    tests = "test" if len(outcomes) == 1 else "tests"
    return f"{len(outcomes)} {tests}: {len(outcomes) - failed} passed, {failed} failed ({elapsed:.2f}s)\n"


def _text(outcomes: Sequence[Outcome], elapsed: float) -> str:
    """The failures with what differed (the line per test is written as each ends), then the counts."""
    failures = [o for o in outcomes if not o.passed]
    lines = ["\n"] if failures else []
    lines.extend(f"{_where(o)}: {_label(o)}{o.message}\n" for o in failures)
    return "".join(lines) + _summary(outcomes, elapsed)


def _json(outcomes: Sequence[Outcome], elapsed: float) -> str:
    failed = sum(not outcome.passed for outcome in outcomes)
    document = {
        "tests": [outcome.to_dict() for outcome in outcomes],
        "passed": len(outcomes) - failed,
        "failed": failed,
        "duration": round(elapsed, 6),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _escape(text: str, *, property_value: bool = False) -> str:
    """GitHub's workflow-command escaping (``%``, line breaks; ``:`` and ``,`` in properties)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


def _github(outcomes: Sequence[Outcome], elapsed: float) -> str:
    """An ``::error`` annotation per failed test, at the example or the test file's ``expect``."""
    return "".join(
        f"::error file={_escape(o.case.file, property_value=True)},line={o.case.line},col={o.case.column},"
        f"title={_escape('toolflow test', property_value=True)}::{_escape(_label(o) + o.message)}\n"
        for o in outcomes
        if not o.passed
    )


def _junit(outcomes: Sequence[Outcome], elapsed: float) -> str:
    """A JUnit XML ``testsuite``: a ``testcase`` per test, with a ``failure`` for each that failed."""
    failed = sum(not outcome.passed for outcome in outcomes)
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="toolflow test" tests="{len(outcomes)}" failures="{failed}" time="{elapsed:.3f}">',
        f'  <testsuite name="toolflow test" tests="{len(outcomes)}" failures="{failed}" time="{elapsed:.3f}">',
    ]
    for outcome in outcomes:
        case = outcome.case
        attributes = (
            f"name={quoteattr(case.name)} classname={quoteattr(case.file)} "
            f'file={quoteattr(case.file)} line="{case.line}" time="{outcome.duration:.3f}"'
        )
        if outcome.passed:
            lines.append(f"    <testcase {attributes}/>")
        else:
            lines.extend(
                (
                    f"    <testcase {attributes}>",
                    f"      <failure message={quoteattr(outcome.message)}>{_where(outcome)}</failure>",
                    "    </testcase>",
                )
            )
    lines.extend(("  </testsuite>", "</testsuites>"))
    return "\n".join(lines) + "\n"


_RENDERERS = {"text": _text, "json": _json, "github": _github, "junit": _junit}


def render(outcomes: Sequence[Outcome], output_format: str, *, elapsed: float) -> str:
    """The report of *outcomes* in *output_format* (one of :data:`TEST_FORMATS`)."""
    return _RENDERERS[output_format](outcomes, elapsed)
