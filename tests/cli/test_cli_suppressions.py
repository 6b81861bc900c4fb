"""``# toolflow: ignore[...]`` suppression comments, through ``toolflow lint``.

The specs here trigger TF201 (invalid-tool-name, on the tool's key), TF101
(unknown-key, on the key) and TF007 (undefined-variable, a warning); every run selects ``TF0,TF1,TF201,TF9`` so that rules
added later cannot change what these tests see.
"""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from toolflow._cli import run

SELECT = ("--select", "TF0,TF1,TF201,TF9")


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLFLOW_TEST_UNSET", raising=False)  # its ${...} reference is a TF007 warning


def lint_spec(text: str, *args: str) -> tuple[int, list[tuple[str, int, int]], list[dict[str, Any]]]:
    """Lint *text* as ``spec.yaml``; return the exit code, ``(code, line, column)`` triples and the raw diagnostics."""
    Path("spec.yaml").write_text(textwrap.dedent(text))
    out, err = io.StringIO(), io.StringIO()
    code = run(["lint", "--output-format", "json", *SELECT, *args, "spec.yaml"], stdout=out, stderr=err)
    assert err.getvalue() == ""
    diagnostics: list[dict[str, Any]] = json.loads(out.getvalue())["diagnostics"]
    return code, [(d["code"], d["line"], d["column"]) for d in diagnostics], diagnostics


def test_unsuppressed_problem_is_reported() -> None:
    """Without a comment, the invalid name is reported (the baseline for the other tests)."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name:
            description: Bad name
            implementation: bad
        """
    )
    assert (code, found) == (1, [("TF201", 3, 3)])


@pytest.mark.parametrize("selector", ["TF201", "invalid-tool-name", "tf201", "TF2", "TF20"])
def test_trailing_comment_suppresses_its_own_line(selector: str) -> None:
    """A comment after content suppresses the named rule on that line, by code, name or prefix."""
    code, found, _ = lint_spec(
        f"""\
        toolflow: 1
        tools:
          bad name:  # toolflow: ignore[{selector}]
            description: Bad name
            implementation: bad
        """
    )
    assert (code, found) == (0, [])


def test_comment_on_its_own_line_suppresses_the_next_line() -> None:
    """A comment alone on a line covers the line below it."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          # toolflow: ignore[TF201]
          bad name:
            description: Bad name
            implementation: bad
        """
    )
    assert (code, found) == (0, [])


def test_comment_on_its_own_line_does_not_cover_its_own_line_or_two_below() -> None:
    """A comment two lines above the problem suppresses nothing and is itself unused."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        # toolflow: ignore[TF201]
        tools:
          bad name:
            description: Bad name
            implementation: bad
        """
    )
    assert code == 1
    assert found == [("TF901", 2, 1), ("TF201", 4, 3)]


def test_bare_ignore_suppresses_every_rule_on_the_line() -> None:
    """``# toolflow: ignore`` without brackets suppresses every rule on the covered line."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name: {description: "${TOOLFLOW_TEST_UNSET}", implementation: bad}  # toolflow: ignore
        """
    )
    assert (code, found) == (0, [])


def test_multiple_codes_in_one_comment() -> None:
    """A comment can name several rules; each suppresses its own problem on the line."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name: {description: "${TOOLFLOW_TEST_UNSET}", implementation: bad}  # toolflow: ignore[TF201, TF007]
        """
    )
    assert (code, found) == (0, [])


def test_comment_suppresses_only_the_rules_it_names() -> None:
    """Rules a comment does not name are still reported on its line."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name: {description: "${TOOLFLOW_TEST_UNSET}", implementation: bad}  # toolflow: ignore[TF201]
        """
    )
    assert code == 0
    assert [c for c, _, _ in found] == ["TF007"]


def test_unused_suppression_is_reported_as_tf901() -> None:
    """A comment that suppresses nothing is TF901 (a warning) at the comment's position."""
    code, found, diagnostics = lint_spec(
        """\
        toolflow: 1
        tools:
          good_name:  # toolflow: ignore[TF201]
            description: Good name
            implementation: good
        """
    )
    assert (code, found) == (0, [("TF901", 3, 15)])
    assert diagnostics[0]["severity"] == "warning"
    assert diagnostics[0]["message"] == "unused suppression of 'TF201'"


def test_unused_bare_suppression_is_reported() -> None:
    """A bare ``# toolflow: ignore`` on a clean line is TF901 too."""
    code, found, diagnostics = lint_spec(
        """\
        toolflow: 1
        tools:
          # toolflow: ignore
          good_name:
            description: Good name
            implementation: good
        """
    )
    assert (code, found) == (0, [("TF901", 3, 3)])
    assert diagnostics[0]["message"] == "unused suppression: no problem on the covered line"


def test_partly_used_suppression_reports_the_unused_code() -> None:
    """Of ``ignore[TF201, TF101]`` on a line with only TF201, the TF101 part is reported unused."""
    code, found, diagnostics = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name:  # toolflow: ignore[TF201, TF101]
            description: Bad name
            implementation: bad
        """
    )
    assert (code, found) == (0, [("TF901", 3, 14)])
    assert diagnostics[0]["message"] == "unused suppression of 'TF101'"


def test_unknown_rule_in_suppression_is_tf902() -> None:
    """A suppression naming a rule that does not exist is TF902, an error, and suppresses nothing."""
    code, found, diagnostics = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name:  # toolflow: ignore[TF777]
            description: Bad name
            implementation: bad
        """
    )
    assert code == 1
    assert found == [("TF201", 3, 3), ("TF902", 3, 14)]
    assert diagnostics[1]["message"] == "suppression names unknown rule 'TF777'"
    assert diagnostics[1]["severity"] == "error"


def test_suppression_of_a_rule_that_is_not_selected_is_not_unused() -> None:
    """A suppression of a rule left out by ``--ignore`` is not reported as unused."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name:  # toolflow: ignore[TF201]
            description: Bad name
            implementation: bad
        """,
        "--ignore",
        "TF201",
    )
    assert (code, found) == (0, [])


def test_unused_suppressions_can_be_ignored() -> None:
    """``--ignore TF901`` silences unused-suppression reports."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          good_name:  # toolflow: ignore[TF201]
            description: Good name
            implementation: good
        """,
        "--ignore",
        "unused-suppression",
    )
    assert (code, found) == (0, [])


def test_suppression_works_for_loader_diagnostics() -> None:
    """Loader-reported problems (here TF101, an unknown key) can be suppressed too."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          say:
            description: Say something
            implementation: say
            colour: red  # toolflow: ignore[unknown-key]
        """
    )
    assert (code, found) == (0, [])


def test_hash_without_space_inside_a_plain_value_is_not_a_comment() -> None:
    """``a#toolflow: ignore`` (no space before ``#``) is part of the value, so the problem stays."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          bad name:
            description: Bad name
            implementation: bad#toolflow:ignore
        """
    )
    assert (code, found) == (1, [("TF201", 3, 3)])


def test_suppression_inside_a_quoted_key_is_not_a_comment() -> None:
    """Text inside a quoted string is not a comment, so it suppresses nothing."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          "bad # toolflow: ignore[TF201]":
            description: Bad name
            implementation: bad
        """
    )
    assert (code, found) == (1, [("TF201", 3, 3)])


def test_suppression_inside_a_quoted_value_is_not_reported_unused() -> None:
    """A quoted value that mentions a suppression is text, not an unused suppression."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          say:
            description: "write # toolflow: ignore[TF201] to silence TF201"
            implementation: say
        """
    )
    assert (code, found) == (0, [])


def test_suppression_inside_a_block_scalar_is_not_a_comment() -> None:
    """A line of a ``|`` block scalar that looks like a comment is text, not a suppression."""
    code, found, _ = lint_spec(
        """\
        toolflow: 1
        tools:
          say:
            description: |
              How to silence a rule:
              # toolflow: ignore[TF201]
            implementation: say
        """
    )
    assert (code, found) == (0, [])
