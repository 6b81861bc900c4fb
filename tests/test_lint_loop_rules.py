"""Lint of the loop's rules (issue 20): what the case files under tests/cases cannot say.

The configured limit of TF252 through ``toolflow lint`` and ``pyproject.toml``, remote tools in
rules and in the tool count (TF244, ``--connect``), the rules' documented examples, and TF249's
verdict against the runtime's own :class:`toolflow._rules.RuleBook` on every small rule set.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolflow._cli import run
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import ServerListing, lint_paths
from toolflow._lint.rules import builtin_rules
from toolflow._rules import RuleBook, ToolRule

MY_RULES = ("TF249", "TF250", "TF251", "TF252")


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"toolflow": 1, **document}, indent=2))
    return path


def _tools(*names: str) -> dict[str, Any]:
    return {name: {"description": f"Does {name}", "template": "done"} for name in names}


# --- TF252's limit in [tool.toolflow.lint] --------------------------------------------------------


def _lint_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["lint", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("limit", "expected"), [(None, ["TF252"]), (11, []), (12, []), (5, ["TF252"])])
def test_max_tools_in_pyproject_sets_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None, expected: list[str]
) -> None:
    """Eleven tools warn under the default of 10, not under max-tools = 11; the message names the limit."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    _write(tmp_path / "specs" / "tools.yaml", {"tools": _tools(*(f"tool_{n}" for n in range(11)))})
    if limit is not None:
        (tmp_path / "pyproject.toml").write_text(f"[tool.toolflow.lint]\nmax-tools = {limit}\n")
    code, out, err = _lint_cli("--output-format", "json", "specs")
    assert (code, err) == (0, "")
    diagnostics = json.loads(out)["diagnostics"]
    assert [d["code"] for d in diagnostics] == expected
    if expected:
        assert f"11 tools at once, more than {limit or 10}" in diagnostics[0]["message"]
        assert (diagnostics[0]["line"], diagnostics[0]["column"]) == (1, 1)


@pytest.mark.parametrize("value", ["0", "-3", "true", '"10"', "2.5"])
def test_bad_max_tools_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """A max-tools that is not a whole number of at least 1 is a configuration error: exit 2, nothing linted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f"[tool.toolflow.lint]\nmax-tools = {value}\n")
    code, out, err = _lint_cli("specs")
    assert (code, out) == (2, "")
    assert "'max-tools' must be a whole number of at least 1" in err
    assert "Traceback" not in err


# --- remote tools ------------------------------------------------------------------------------


def test_rule_naming_a_possibly_remote_tool_is_tf244_until_connect_says(tmp_path: Path) -> None:
    """A rule's tool a prefixed server may list is TF244's warning; once the server is asked, TF224 or nothing."""
    spec = _write(
        tmp_path / "s.yaml",
        {
            "mcp_servers": {"web": {"url": "http://127.0.0.1:9/mcp", "prefix": "web_"}},
            "tools": _tools("say"),
            "policy": {
                "rules": [{"before_exit": ["say", "web_fetch"]}, {"tool": "web_serch", "max_calls": {"per_run": 2}}]
            },
        },
    )
    found = lint_paths([spec], LintConfig()).diagnostics
    assert [d.code for d in found] == ["TF244", "TF244"]
    assert found[0].message.startswith("policy rule 'before_exit' names 'web_fetch', which no spec file declares")
    assert found[1].message.startswith("policy rule 'max_calls' names 'web_serch', which no spec file declares")
    listings = {"web": ServerListing(names=("fetch", "search"))}
    found = lint_paths([spec], LintConfig(), listings=listings).diagnostics
    assert [(d.code, d.line) for d in found] == [("TF224", found[0].line)]
    assert found[0].message == (
        "policy rule 'max_calls' names tool 'web_serch', which no spec file declares; did you mean 'web_search'?"
    )


def test_tool_count_counts_the_remote_tools_lint_knows(tmp_path: Path) -> None:
    """A server's tools: list counts; a server importing every tool counts once --connect lists them."""
    listed = _write(
        tmp_path / "listed.yaml",
        {"mcp_servers": {"a": {"url": "http://127.0.0.1:9/mcp", "prefix": "a_", "tools": [f"t{n}" for n in range(6)]}}},
    )
    _write(tmp_path / "own.yaml", {"tools": _tools(*(f"tool_{n}" for n in range(5)))})
    everything = _write(tmp_path / "everything.yaml", {"mcp_servers": {"b": {"url": "http://127.0.0.1:9/mcp"}}})
    found = lint_paths([listed, tmp_path / "own.yaml"], LintConfig(select=("TF252",))).diagnostics
    assert [d.message.split(" tools at once")[0] for d in found] == ["the project, without a policy, offers a model 11"]
    found = lint_paths([tmp_path / "own.yaml", everything], LintConfig(select=("TF252",))).diagnostics
    assert found == ()
    listings = {"b": ServerListing(names=tuple(f"x{n}" for n in range(6)))}
    found = lint_paths(
        [tmp_path / "own.yaml", everything], LintConfig(select=("TF252",)), listings=listings
    ).diagnostics
    assert [d.code for d in found] == ["TF252"]


def test_remote_tool_hidden_by_its_override_is_never_offered(tmp_path: Path) -> None:
    """An override's expose: false takes a remote tool out of what the policy offers (TF249 says why)."""
    spec = _write(
        tmp_path / "s.yaml",
        {
            "mcp_servers": {
                "web": {"url": "http://127.0.0.1:9/mcp", "tools": ["fetch"], "overrides": {"fetch": {"expose": False}}}
            },
            "tools": _tools("say"),
            "policy": {"rules": [{"first": ["fetch"]}]},
        },
    )
    found = lint_paths([spec], LintConfig()).diagnostics
    assert [(d.code, d.message) for d in found] == [
        ("TF249", "no first call is possible: the policy never offers 'fetch' ('expose: false')")
    ]


# --- the rules' documentation --------------------------------------------------------------------


@pytest.mark.parametrize("code", MY_RULES)
def test_rule_examples_do_what_they_say(tmp_path: Path, code: str) -> None:
    """A rule's Example triggers it and nothing else; its Use instead lints clean."""
    doc = next(r.doc for r in builtin_rules() if r.code == code)
    assert re.search(
        r"\A[^\n]+\n\n## What it does\n.+\n## Why is this bad\?\n.+\n## Example\n```yaml\n.+```\n\n"
        r"## Use instead\n```yaml\n.+```\n\Z",
        doc,
        re.DOTALL,
    )
    example, use_instead = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    for label, block in (("example", example), ("instead", use_instead)):
        document = yaml.safe_load(block)
        for body in document["tools"].values():
            body.setdefault("template", "done")
        found = {d.code for d in lint_paths([_write(tmp_path / f"{label}.yaml", document)]).diagnostics}
        assert found == ({code} if label == "example" else set()), (label, found)


# --- TF249 agrees with the runtime ---------------------------------------------------------------

TOOLS = ("a", "b", "c", "d")
_NAMES = st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3, unique=True)
_RULE = st.one_of(
    st.builds(lambda names: {"first": names}, _NAMES),
    st.builds(lambda tool, names: {"after": tool, "only": names}, st.sampled_from(TOOLS), _NAMES),
)


def _sequences(book_rules: tuple[ToolRule, ...], offered: frozenset[str]) -> set[str]:
    """Every tool some sequence of calls the runtime admits can call (each sequence, at most five calls)."""
    called: set[str] = set()
    for length in range(1, 6):
        for calls in itertools.product(sorted(offered), repeat=length):
            book = RuleBook(book_rules)
            admitted = all(book.admit(name, offered) is None for name in calls)
            if admitted:
                called.add(calls[-1])
    return called


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=st.lists(_RULE, max_size=5),
    exits=_NAMES,
    deny=st.lists(st.sampled_from(TOOLS), max_size=2, unique=True),
)
def test_tf249_agrees_with_the_rule_book(rules: list[dict[str, Any]], exits: list[str], deny: list[str]) -> None:
    """TF249 reports a before_exit rule exactly when no sequence of calls the RuleBook admits reaches its tools.

    Unless no sequence starts at all: then it reports that no first call is possible, and only then.
    """
    policy_rules = [*rules, {"before_exit": exits}]
    offered = frozenset(TOOLS) - frozenset(deny)
    book_rules = tuple(ToolRule.from_mapping(rule) for rule in policy_rules)
    reachable = _sequences(book_rules, offered)
    with tempfile.TemporaryDirectory() as folder:
        spec = _write(
            Path(folder) / "s.yaml", {"tools": _tools(*TOOLS), "policy": {"deny": deny, "rules": policy_rules}}
        )
        found = lint_paths([spec], LintConfig(select=("TF249",))).diagnostics
        exit_line = next(n for n, line in enumerate(spec.read_text().splitlines(), 1) if '"before_exit"' in line)
    reported_at_exit = any(d.line == exit_line for d in found)
    no_first_call = any(d.message.startswith("no first call is possible") for d in found)
    if reachable.isdisjoint(exits):
        assert reported_at_exit or no_first_call, (policy_rules, deny, found)
    else:
        assert not reported_at_exit, (policy_rules, deny, found)
        assert all("no call is possible" in d.message for d in found), found
    assert bool(reachable) != no_first_call, (policy_rules, deny, found)
