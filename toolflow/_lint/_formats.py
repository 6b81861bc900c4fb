"""Output formats of ``toolflow lint``: text, full, json, github, sarif, junit, gitlab."""

from __future__ import annotations

import collections
import json
import os
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._engine import LintReport
from toolflow._lint._rule import DOCS_URL, Rule

__all__ = ["FORMATS", "JSON_FORMAT_VERSION", "render", "render_statistics"]

JSON_FORMAT_VERSION = 1
"""Version of the ``--output-format json`` envelope; bumped on incompatible changes."""


def _version() -> str:
    from toolflow import __version__  # noqa: PLC0415 - avoid an import cycle at module load

    return __version__


def _end(d: Diagnostic) -> tuple[int, int]:
    return (d.end_line or d.line, d.end_column or d.column)


def render_text(report: LintReport) -> str:
    """One ``path:line:col: CODE message`` line per problem, then a summary line."""
    return "".join(d.render() + "\n" for d in report.diagnostics) + _summary(report)


def _summary(report: LintReport) -> str:
    """The last line of the text formats: what was found, or that all checks passed."""
    if report.diagnostics:
        errors, warnings = report.count(Severity.ERROR), report.count(Severity.WARNING)
        files = _plural(len(report.files), "file")
        return f"Found {_plural(errors, 'error')} and {_plural(warnings, 'warning')} in {files}.\n"
    return f"All checks passed: {_plural(len(report.files), 'file')}, {_plural(report.tool_count, 'tool')}.\n"


def render_full(report: LintReport) -> str:
    """Each problem's line, then the source lines around it with a caret under the span, as ruff's ``full``.

    ::

        specs/search.yaml:4:5: TF503 parameter 'query' has no description
          |
        3 |     parameters:
        4 |       query: {type: string}
          |       ^^^^^ TF503
        5 |     template: "{{ query }}"
          |

    A file that cannot be read again (missing, a directory, not UTF-8) shows the line alone.
    """
    sources: dict[str, list[str] | None] = {}
    blocks = []
    for d in report.diagnostics:
        if d.file not in sources:
            sources[d.file] = _source_lines(d.file)
        lines = sources[d.file]
        blocks.append(d.render() + "\n" + (_snippet(d, lines) if lines and d.line <= len(lines) else ""))
    return "\n".join(blocks) + ("\n" if blocks else "") + _summary(report)


CONTEXT_LINES = 1
"""How many source lines ``--output-format full`` shows before and after a problem's line."""

_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
"""The line breaks of YAML 1.1, by which diagnostics count lines (see ``toolflow._yaml.position_of``)."""

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters (a tab aside), which a terminal would obey rather than show."""


def _source_lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError):
        return None
    return [_CONTROL.sub("\ufffd", line) for line in _LINE_BREAK.split(text)] if text else None


def _snippet(d: Diagnostic, lines: list[str]) -> str:
    # The empty string after a file's last line break is no line, unless the problem is on it.
    count = len(lines) - (lines[-1] == "")
    first, last = max(1, d.line - CONTEXT_LINES), max(d.line, min(count, d.line + CONTEXT_LINES))
    width = len(str(last))
    gutter = " " * width + " |"
    out = [gutter]
    for number in range(first, last + 1):
        text = lines[number - 1]
        out.append(f"{number:>{width}} | {text}".rstrip())
        if number == d.line:
            out.append(f"{gutter} {_caret(text, d)} {d.code}")
    out.append(gutter)
    return "\n".join(out) + "\n"


def _caret(text: str, d: Diagnostic) -> str:
    """Carets under the span of *d* on its line *text*: up to its end, or to the end of the line."""
    start = min(d.column - 1, len(text))
    end_line, end_column = _end(d)
    end = end_column - 1 if end_line == d.line and end_column > d.column else len(text.rstrip())
    # A tab stays a tab, and a wide character takes two cells, so that the carets line up in any terminal.
    pad = "".join("\t" if c == "\t" else " " * _cells(c) for c in text[:start])
    return pad + "^" * max(1, sum(_cells(c) for c in text[start:end]))


def _cells(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _as_json(d: Diagnostic) -> dict[str, Any]:
    end_line, end_column = _end(d)
    return {
        "code": d.code,
        "name": d.name,
        "severity": d.severity.value,
        "message": d.message,
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "end": {"line": end_line, "column": end_column},
        "pointer": d.pointer,
        "url": f"{DOCS_URL}#{d.code.lower()}",
    }


def render_json(report: LintReport) -> str:
    """A versioned JSON envelope with a summary and every diagnostic."""
    document = {
        "version": JSON_FORMAT_VERSION,
        "tool": {"name": "toolflow", "version": _version()},
        "summary": {
            "files": len(report.files),
            "tools": report.tool_count,
            "errors": report.count(Severity.ERROR),
            "warnings": report.count(Severity.WARNING),
        },
        "diagnostics": [_as_json(d) for d in report.diagnostics],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: LintReport) -> str:
    """GitHub Actions workflow commands (annotations), followed by the plain lines."""
    lines = []
    paths = _RepositoryPaths()
    for d in report.diagnostics:
        end_line, end_column = _end(d)
        level = "error" if d.severity is Severity.ERROR else "warning"
        # Columns are only allowed on single-line annotations.
        single = end_line == d.line
        props = (
            f"file={_escape_property(paths(d.file))},line={d.line}{f',col={d.column}' if single else ''},"
            f"endLine={end_line}{f',endColumn={end_column}' if single else ''},"
            f"title={_escape_property(f'{d.code} {d.name}')}"
        )
        lines.append(f"::{level} {props}::{_escape_data(d.message)}")
    return "\n".join(lines) + ("\n" if lines else "") + render_text(report)


def render_sarif(report: LintReport) -> str:
    """A SARIF 2.1.0 log with one run, the enabled rules, and one result per diagnostic."""
    from urllib.parse import quote  # noqa: PLC0415 - only this format needs it

    rules: list[Rule] = list(report.rules)
    index = {r.code: i for i, r in enumerate(rules)}
    results = []
    paths = _RepositoryPaths()
    for d in report.diagnostics:
        end_line, end_column = _end(d)
        region = {"startLine": d.line, "startColumn": d.column}
        if (end_line, end_column) > (d.line, d.column):
            region |= {"endLine": end_line, "endColumn": end_column}
        result: dict[str, Any] = {
            "ruleId": d.code,
            "level": "error" if d.severity is Severity.ERROR else "warning",
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": quote(paths(d.file))},
                        "region": region,
                    }
                }
            ],
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        if d.pointer:
            result["properties"] = {"pointer": d.pointer}
        results.append(result)
    driver = {
        "name": "toolflow",
        "version": _version(),
        "informationUri": DOCS_URL,
        "rules": [
            {
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": r.doc.strip()},
                "helpUri": r.url,
                "defaultConfiguration": {"level": "error" if r.severity is Severity.ERROR else "warning"},
            }
            for r in rules
        ],
    }
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def render_junit(report: LintReport) -> str:
    """JUnit XML: one test case per file, one failure per diagnostic."""
    from xml.sax.saxutils import quoteattr  # noqa: PLC0415 - only this format needs it (and it is slow to import)

    by_file: dict[str, list[Diagnostic]] = collections.defaultdict(list)
    for d in report.diagnostics:
        by_file[d.file].append(d)
    files = [*report.files, *(p for p in by_file if p not in set(report.files))]
    failures = sum(1 for p in files if by_file.get(p))
    cases = []
    for path in files:
        problems = by_file.get(path, [])
        body = "".join(
            f"\n      <failure type={quoteattr(d.code)} message={quoteattr(f'{d.code} {d.message}')}>"
            f"{_xml_text(d.render())}</failure>"
            for d in problems
        )
        closing = "\n    </testcase>" if problems else "</testcase>"
        cases.append(f'    <testcase classname="toolflow.lint" name={quoteattr(path)}>{body}{closing}')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="toolflow lint" tests="{len(files)}" failures="{failures}">\n'
        f'  <testsuite name="toolflow lint" tests="{len(files)}" failures="{failures}" errors="0">\n'
        + "\n".join(cases)
        + ("\n" if cases else "")
        + "  </testsuite>\n</testsuites>\n"
    )


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_gitlab(report: LintReport) -> str:
    """GitLab Code Quality report: a JSON list of issues with stable fingerprints."""
    import hashlib  # noqa: PLC0415 - only this format needs it

    issues = []
    paths = _RepositoryPaths()
    seen: collections.Counter[str] = collections.Counter()
    for d in report.diagnostics:
        # Identical problems in one file are told apart by their order, which survives lines moving.
        identity = f"{d.file}\0{d.code}\0{d.pointer}\0{d.message}"
        seen[identity] += 1
        fingerprint = hashlib.sha256(f"{identity}\0{seen[identity]}".encode()).hexdigest()
        issues.append(
            {
                "description": f"{d.code} {d.message}",
                "check_name": f"{d.code} {d.name}",
                "fingerprint": fingerprint,
                "severity": "major" if d.severity is Severity.ERROR else "minor",
                "location": {"path": paths(d.file), "positions": {"begin": {"line": d.line, "column": d.column}}},
            }
        )
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"


class _RepositoryPaths:
    """Paths relative to the root of the repository that holds them, as GitHub, GitLab and SARIF viewers want.

    The root is the nearest directory above the file with a ``.git`` (a directory, or the file of
    a worktree), else the nearest with a ``pyproject.toml``, else the working directory: so the
    paths are the same whether lint runs at the root, in a subdirectory or on absolute paths. A
    path outside its root stays as given, with ``/`` separators.
    """

    def __init__(self) -> None:
        self._roots: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        absolute = os.path.abspath(path)
        start = absolute if os.path.isdir(absolute) else os.path.dirname(absolute)
        relative = os.path.relpath(absolute, self._root(start))
        return (path if relative.startswith("..") else relative).replace(os.sep, "/")

    def _root(self, directory: str) -> str:
        if directory not in self._roots:
            project = None
            here = directory
            while True:
                if os.path.exists(os.path.join(here, ".git")):
                    project = here
                    break
                if project is None and os.path.isfile(os.path.join(here, "pyproject.toml")):
                    project = here
                parent = os.path.dirname(here)
                if parent == here:
                    break
                here = parent
            self._roots[directory] = project or os.getcwd()
        return self._roots[directory]


FORMATS: dict[str, Callable[[LintReport], str]] = {
    "text": render_text,
    "full": render_full,
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
    "gitlab": render_gitlab,
}


def render(report: LintReport, output_format: str) -> str:
    """Render *report* in *output_format* (a key of :data:`FORMATS`)."""
    return FORMATS[output_format](report)


def render_statistics(report: LintReport) -> str:
    """A table of diagnostic counts per rule, most frequent first."""
    counts = collections.Counter((d.code, d.name) for d in report.diagnostics)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    return "".join(f"{count:>5}  {code}  {name}\n" for (code, name), count in rows)
