"""Data-driven spec cases: every file under tests/cases/ is linted and its diagnostics compared.

A case is a spec file, or a directory of spec files, under ``valid/`` (no
diagnostic expected) or ``invalid/``. Expectations live in the spec files as
``# expect: CODE LINE:COL`` comments, or, for files that cannot hold comments
(binary data), in a sidecar ``<file>.expect`` with ``CODE LINE:COL`` lines; the
problems of a directory case itself (it holds no spec file) go in its ``directory.expect``.
A ``# target: openai`` comment adds ``--target`` providers to the lint run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolflow._lint._config import LintConfig
from toolflow._lint._engine import CONNECT_RULES, lint_paths
from toolflow._lint.rules import builtin_rules

CASES = Path(__file__).parent / "cases"
_EXPECT = re.compile(r"^#\s*expect:\s*(\S+)\s+(\d+):(\d+)\s*$")
_SIDECAR = re.compile(r"^(\S+)\s+(\d+):(\d+)\s*$")
_TARGET = re.compile(r"^#\s*target:\s*(.+)$")

Expectation = tuple[str, str, int, int]


def _case_files(case: Path) -> list[Path]:
    if case.is_dir():
        return sorted(p for p in case.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml"))
    return [case]


def _expectations(case: Path) -> tuple[list[Expectation], tuple[str, ...]]:
    expected: list[Expectation] = []
    targets: list[str] = []
    own = case / "directory.expect"
    if own.exists():
        matches = (_SIDECAR.match(line.strip()) for line in own.read_text().splitlines())
        expected.extend((str(case), m[1], int(m[2]), int(m[3])) for m in matches if m)
    for path in _case_files(case):
        sidecar = path.with_name(path.name + ".expect")
        if sidecar.exists():
            matches = (_SIDECAR.match(line.strip()) for line in sidecar.read_text().splitlines())
            expected.extend((str(path), m[1], int(m[2]), int(m[3])) for m in matches if m)
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for line in text.splitlines():
            if match := _EXPECT.match(line.strip()):
                expected.append((str(path), match[1], int(match[2]), int(match[3])))
            elif match := _TARGET.match(line.strip()):
                targets.extend(t.strip() for t in match[1].split(","))
    return sorted(expected), tuple(targets)


def _cases(kind: str) -> list[Path]:
    folder = CASES / kind
    return sorted(p for p in folder.iterdir() if p.is_dir() or p.suffix in (".yaml", ".yml"))


def _lint(case: Path, targets: tuple[str, ...]) -> list[Expectation]:
    report = lint_paths([case], LintConfig(target=targets))
    return sorted((d.file, d.code, d.line, d.column) for d in report.diagnostics)


@pytest.mark.parametrize("case", _cases("valid"), ids=lambda p: p.name)
def test_valid_case(case: Path) -> None:
    """A valid case lints without a single diagnostic."""
    _, targets = _expectations(case)
    assert _lint(case, targets) == []


@pytest.mark.parametrize("case", _cases("invalid"), ids=lambda p: p.name)
def test_invalid_case(case: Path) -> None:
    """An invalid case yields exactly the diagnostics its comments expect."""
    expected, targets = _expectations(case)
    assert expected, f"{case} declares no '# expect:' diagnostics"
    assert _lint(case, targets) == expected


def test_every_rule_has_an_invalid_case() -> None:
    """Each built-in rule is exercised by at least one invalid case.

    The TF4xx binding rules need loaded plugins, which cases do not have; they are
    tested with real plugins in tests/lint/test_rules_bindings.py. The rules of
    ``toolflow lint --connect`` need MCP servers: tests/test_mcp_servers_spec_connect.py.
    """
    covered = {code for case in _cases("invalid") for _, code, _, _ in _expectations(case)[0]}
    missing = sorted(
        r.code
        for r in builtin_rules()
        if r.code not in covered and not r.code.startswith("TF4") and r.code not in CONNECT_RULES
    )
    assert missing == []
