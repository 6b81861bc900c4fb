"""The ``toolflow`` command line: thin subcommands over the public API.

Heavy modules are imported inside the subcommands, so that ``toolflow --help``
starts quickly and ``toolflow lint`` never imports the executor.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TextIO

__all__ = ["main", "run"]

OUTPUT_FORMATS = ("text", "json", "github", "sarif", "junit", "gitlab")
DEFAULT_SPECS = "specs"


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of exiting, so ``run`` can return exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from toolflow._errors import UsageError  # noqa: PLC0415

        command = self.prog.removeprefix("toolflow").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def _parser() -> argparse.ArgumentParser:
    from toolflow import __version__  # noqa: PLC0415

    parser = _Parser(
        prog="toolflow",
        description="Declarative YAML tool pipelines for LLM tool calling.",
    )
    parser.add_argument("--version", action="version", version=f"toolflow {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    lint = commands.add_parser("lint", help="check spec files and report problems with file:line:col")
    lint.add_argument("paths", nargs="*", metavar="PATH", help="spec files or directories (default: specs/)")
    lint.add_argument("--output-format", choices=OUTPUT_FORMATS, default="text", help="report format (default: text)")
    lint.add_argument("--statistics", action="store_true", help="print a count of problems per rule")
    lint.add_argument(
        "--select", action="append", metavar="RULES", help="only these rules (codes, prefixes, names; comma-separated)"
    )
    lint.add_argument(
        "--extend-select", action="append", metavar="RULES", help="enable these rules on top of the selection"
    )
    lint.add_argument("--ignore", action="append", metavar="RULES", help="skip these rules")
    lint.add_argument(
        "--target",
        action="append",
        metavar="PROVIDER",
        help="also check compatibility with openai, anthropic, gemini or mcp (repeatable)",
    )
    lint.add_argument(
        "--fail-on", choices=("error", "warning"), help="lowest severity that fails the run (default: error)"
    )
    lint.add_argument("--config", metavar="PYPROJECT", help="read [tool.toolflow.lint] from this file")
    lint.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    lint.set_defaults(handler=_cmd_lint)

    rule = commands.add_parser("rule", help="explain a lint rule, or list them all")
    rule.add_argument("rule", nargs="?", metavar="CODE", help="a rule code or name (e.g. TF201 or invalid-tool-name)")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(handler=_cmd_rule)

    show = commands.add_parser("list", help="show the tools that spec files declare")
    show.add_argument("paths", nargs="*", metavar="PATH", help="spec files or directories (default: specs/)")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    show.set_defaults(handler=_cmd_list)

    schema = commands.add_parser("spec-schema", help="print the JSON Schema of spec files (for editors)")
    schema.set_defaults(handler=_cmd_spec_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run and exit with the command's exit code."""
    sys.exit(run(sys.argv[1:] if argv is None else argv, stdout=sys.stdout, stderr=sys.stderr))


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO) -> int:
    """Run the command line *argv*; return its exit code (0 ok, 1 problems found, 2 usage error)."""
    from toolflow._errors import ToolflowError  # noqa: PLC0415

    try:
        parser = _parser()
        try:
            with contextlib.redirect_stdout(stdout):
                args = parser.parse_args(list(argv))
        except SystemExit as exc:  # --help and --version
            return int(exc.code or 0)
        if getattr(args, "handler", None) is None:
            parser.print_help(stdout)
            return 2
        return int(args.handler(args, stdout, stderr))
    except ToolflowError as exc:
        print(f"toolflow: error: {exc}", file=stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 1
    except Exception:  # noqa: BLE001 - a bug must still exit 2, apart from "problems found"
        import traceback  # noqa: PLC0415

        print("toolflow: internal error (please report it with the traceback below)", file=stderr)
        traceback.print_exc(file=stderr)
        return 2


def _split(values: Sequence[str] | None) -> list[str]:
    return [item.strip() for value in values or () for item in value.split(",") if item.strip()]


def _spec_paths(paths: Sequence[str]) -> list[str]:
    """The PATH arguments, or ``[tool.toolflow] specs`` from pyproject.toml, or ``specs/``."""
    if paths:
        return list(paths)
    from toolflow._lint._config import find_pyproject  # noqa: PLC0415

    pyproject = find_pyproject()
    if pyproject is not None:
        import tomllib  # noqa: PLC0415

        try:
            with open(pyproject, "rb") as stream:
                document = tomllib.load(stream)
        except (OSError, tomllib.TOMLDecodeError):
            document = {}
        table = _table(_table(document, "tool"), "toolflow")
        specs = table.get("specs")
        if isinstance(specs, str):
            specs = [specs]
        if isinstance(specs, list) and specs:
            return [os.path.relpath(pyproject.parent / s) for s in specs]
    return [DEFAULT_SPECS]


def _table(mapping: object, key: str) -> dict[str, object]:
    """``mapping[key]`` when both are tables, else an empty table."""
    value = mapping.get(key, {}) if isinstance(mapping, dict) else {}
    return value if isinstance(value, dict) else {}


def _cmd_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    import attrs  # noqa: PLC0415

    from toolflow._diagnostics import Severity  # noqa: PLC0415
    from toolflow._lint._config import LintConfig, RuleSet, check_target, load_config  # noqa: PLC0415
    from toolflow._lint._engine import lint_paths  # noqa: PLC0415
    from toolflow._lint._formats import render, render_statistics  # noqa: PLC0415
    from toolflow._lint.rules import builtin_rules  # noqa: PLC0415

    rules = builtin_rules()
    config = LintConfig() if args.isolated else load_config(args.config, rules=rules)
    ruleset = RuleSet(rules)
    select, extend, ignore = _split(args.select), _split(args.extend_select), _split(args.ignore)
    for selector in (*select, *extend, *ignore):
        ruleset.check_selector(selector)
    changes: dict[str, object] = {}
    if select or extend:
        changes["select"] = (*(select or config.select), *extend)
    if ignore:
        changes["ignore"] = (*config.ignore, *ignore)
    if args.target:
        changes["target"] = tuple(check_target(t) for t in _split(args.target))
    if args.fail_on:
        changes["fail_on"] = Severity(args.fail_on)
    config = attrs.evolve(config, **changes)  # type: ignore[arg-type]
    paths = _spec_paths(args.paths)
    report = lint_paths(paths, config, rules=rules)
    stdout.write(render(report, args.output_format))
    if args.statistics:
        stream = stdout if args.output_format == "text" else stderr
        stream.write(render_statistics(report))
    return report.exit_code


def _cmd_rule(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._errors import UsageError  # noqa: PLC0415
    from toolflow._lint._config import RuleSet  # noqa: PLC0415
    from toolflow._lint.rules import builtin_rules  # noqa: PLC0415
    from toolflow._schemas import did_you_mean  # noqa: PLC0415

    ruleset = RuleSet(builtin_rules())
    if args.all or not args.rule:
        stdout.writelines(f"{r.code}  {r.name:<34} {r.severity.value:<8} {r.summary}\n" for r in ruleset.rules)
        return 0
    found = ruleset.lookup(args.rule)
    if found is None:
        choices = [r.code for r in ruleset.rules] + [r.name for r in ruleset.rules]
        msg = f"unknown rule {args.rule!r}{did_you_mean(args.rule, choices)}"
        raise UsageError(msg)
    stdout.write(f"# {found.code} {found.name} ({found.severity.value})\n\n{found.doc.strip()}\n")
    return 0


def _cmd_list(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._loader import load_specs  # noqa: PLC0415

    result = load_specs(_spec_paths(args.paths))
    for diagnostic in result.diagnostics:
        print(diagnostic.render(), file=stderr)
    rows = []
    for tool in result.tools:
        span = tool.locator.locate(tool.pointer, key=True) if tool.locator else None
        rows.append(
            {
                "name": tool.name,
                "category": tool.category,
                "implementation": tool.implementation.kind if tool.implementation else None,
                "timeout": tool.timeout,
                "retry_attempts": tool.retry.attempts,
                "cache": tool.cache.scope.value if tool.cache else None,
                "parameters": sorted((tool.parameters.get("properties") or {}).keys()),
                "description": tool.description,
                "location": f"{tool.file}:{span.line}:{span.column}" if span else tool.file,
            }
        )
    if args.json:
        stdout.write(json.dumps({"tools": rows}, indent=2) + "\n")
    else:
        header = ("TOOL", "CATEGORY", "IMPLEMENTED BY", "TIMEOUT", "CACHE", "LOCATION")
        table = [header] + [
            (
                r["name"],
                r["category"],
                r["implementation"] or "-",
                f"{r['timeout']:g}s",
                r["cache"] or "-",
                r["location"],
            )
            for r in rows
        ]
        widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
        for row in table:
            cells = (str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
            stdout.write("  ".join(cells).rstrip() + "\n")
        tools = "tool" if len(rows) == 1 else "tools"
        files = "file" if len(result.files) == 1 else "files"
        stdout.write(f"{len(rows)} {tools} in {len(result.files)} {files}\n")
    return 0 if result.ok else 1


def _cmd_spec_schema(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._schemas import spec_schema  # noqa: PLC0415

    stdout.write(json.dumps(spec_schema(), indent=2) + "\n")
    return 0
