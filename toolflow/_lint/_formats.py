"""Output formats of ``toolflow lint``: text, json, github, sarif, junit, gitlab."""

from __future__ import annotations

import collections
import json
import os
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
    lines = [d.render() for d in report.diagnostics]
    errors, warnings = report.count(Severity.ERROR), report.count(Severity.WARNING)
    if report.diagnostics:
        files = _plural(len(report.files), "file")
        lines.append(f"Found {_plural(errors, 'error')} and {_plural(warnings, 'warning')} in {files}.")
    else:
        lines.append(f"All checks passed: {_plural(len(report.files), 'file')}, {_plural(report.tool_count, 'tool')}.")
    return "\n".join(lines) + "\n"


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
    for d in report.diagnostics:
        end_line, end_column = _end(d)
        level = "error" if d.severity is Severity.ERROR else "warning"
        # Columns are only allowed on single-line annotations.
        single = end_line == d.line
        props = (
            f"file={_escape_property(d.file)},line={d.line}{f',col={d.column}' if single else ''},"
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
                        "artifactLocation": {"uri": quote(d.file.replace("\\", "/"))},
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
                "location": {"path": _repo_path(d.file), "positions": {"begin": {"line": d.line, "column": d.column}}},
            }
        )
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"


def _repo_path(path: str) -> str:
    """*path* relative to the working directory (GitLab wants repository-relative paths) when inside it."""
    relative = os.path.relpath(os.path.abspath(path))
    return path if relative.startswith("..") else relative.replace(os.sep, "/")


FORMATS: dict[str, Callable[[LintReport], str]] = {
    "text": render_text,
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
