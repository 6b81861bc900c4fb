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
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from toolflow._cli_parsers import add_call_parser, add_run_parser, add_serve_parser
from toolflow._cli_support import (
    add_output_format,
    current_spellings,
    deprecated_spellings,
    open_tools,
    project_cache_settings,
    registry_to_read,
    remote_tools,
    serve_state_settings,
    shutdown_grace,
    spec_paths,
    with_caps,
)

if TYPE_CHECKING:
    from toolflow._lint._config import LintConfig
    from toolflow._lint._rule import Rule
    from toolflow._plugins import Plugins
    from toolflow._serve_http import HTTPSettings
    from toolflow._serve_tasks import TaskLimits
    from toolflow._state import StateBackend

__all__ = ["main", "run"]

OUTPUT_FORMATS = ("text", "full", "json", "github", "sarif", "junit", "gitlab")
SCHEMA_FORMATS = ("openai", "anthropic", "mcp", "gemini")
TEST_FORMATS = ("text", "json", "github", "junit")
"""``toolflow test``'s formats (``toolflow._cli_test_report``'s; lint's SARIF and GitLab report code, not tests)."""

HISTORY_FORMATS = ("openai", "anthropic", "fallback", "text", "gemini")
"""The history formats of ``toolflow run`` (``toolflow._providers.HISTORY_FORMATS``, without importing it)."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises instead of exiting, so ``run`` can return exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        from toolflow._errors import UsageError  # noqa: PLC0415

        command = self.prog.removeprefix("toolflow").strip()
        raise UsageError(f"{command}: {message}" if command else message)

    def _get_option_tuples(self, option_string: str) -> Any:  # argparse's hook for abbreviations
        return current_spellings(super()._get_option_tuples(option_string))


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
    add_output_format(lint, OUTPUT_FORMATS, what="report format; full: with the source lines")
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
    lint.add_argument("--exit-zero", action="store_true", help="exit 0 even when problems are found")
    lint.add_argument("--config", metavar="PYPROJECT", help="read [tool.toolflow.lint] from this file")
    lint.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    lint.add_argument(
        "--no-plugins",
        action="store_true",
        help="do not load plugins (their rules and kinds, and the TF4xx binding checks, are skipped)",
    )
    lint.add_argument(
        "--connect", action="store_true", help="start or reach each MCP server of the specs and lint the tools it lists"
    )
    lint.set_defaults(handler=_cmd_lint)

    rule = commands.add_parser("rule", help="explain a lint rule, or list them all")
    rule.add_argument("rule", nargs="?", metavar="CODE", help="a rule code or name (e.g. TF201 or invalid-tool-name)")
    rule.add_argument("--all", action="store_true", help="list every rule")
    rule.set_defaults(handler=_cmd_rule)

    show = commands.add_parser("list", help="show the tools that spec files declare")
    show.add_argument("paths", nargs="*", metavar="PATH", help="spec files or directories (default: specs/)")
    add_output_format(show, ("text", "json"), what="a table or JSON", old="--json")
    show.set_defaults(handler=_cmd_list)

    _add_graph(commands)
    _add_init(commands)
    schema = commands.add_parser(
        "spec-schema", help="print the JSON Schema of spec files (for editors), with the installed plugins' kinds"
    )
    schema.add_argument(
        "--no-plugins", action="store_true", help="load no plugins: the schema as shipped, without plugin kinds"
    )
    schema.set_defaults(handler=_cmd_spec_schema)

    export = commands.add_parser(
        "schema", help="print the tools as OpenAI, Anthropic or MCP tool definitions (JSON); --all: hidden ones too"
    )
    export.add_argument("--format", required=True, choices=SCHEMA_FORMATS, help="the tool definition format")
    export.add_argument(
        "--specs", action="append", metavar="PATH", help="spec file or directory (repeatable; default: specs/)"
    )
    export.add_argument("--toolset", metavar="NAME", help="only the tools of this toolset")
    export.add_argument(
        "--all",
        action="store_true",
        help="also the tools hidden from models (expose: false), which are otherwise left out",
    )
    export.set_defaults(handler=_cmd_schema)

    plugins = commands.add_parser("plugins", help="list plugins: source, version, hooks, tools bound, load status")
    add_output_format(plugins, ("text", "json"), what="a table or JSON", old="--json")
    plugins.add_argument("--strict", action="store_true", help="stop with an error at the first plugin that fails")
    plugins.set_defaults(handler=_cmd_plugins)

    add_call_parser(commands).set_defaults(handler=_cmd_call)

    add_run_parser(commands, HISTORY_FORMATS).set_defaults(handler=_cmd_run)

    _add_test_parser(commands)

    add_serve_parser(commands).set_defaults(handler=_cmd_serve)

    completion = commands.add_parser("completion", help="print the shell completion script (bash, zsh or fish)")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    completion.set_defaults(handler=_cmd_completion)
    return parser


def _add_test_parser(commands: Any) -> None:
    """Add ``toolflow test`` (its handler imports the engine and the loop only when it runs)."""
    test = commands.add_parser(
        "test", help="run the examples that declare an expected outcome, and the *.toolflow.yaml test files"
    )
    test.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="spec files or directories (their examples), *.toolflow.yaml test files or directories of them "
        "(default: the project's specs, and the test files under them and under tests/)",
    )
    test.add_argument("--output-format", choices=TEST_FORMATS, default="text", help="report format (default: text)")
    test.add_argument(
        "--approve",
        choices=("yes", "no"),
        help="answer every approval the policy asks for (default: the plugins decide, else the call is refused)",
    )
    test.set_defaults(handler=_cmd_test)


EXIT_BROKEN_PIPE = 141
"""The exit code when the output is closed early (``toolflow run | head -1``): 128 + SIGPIPE, as a shell shows it."""


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: run and exit with the command's exit code.

    When the reader of standard output goes away (a pipe into ``head``), the command ends quietly
    with :data:`EXIT_BROKEN_PIPE`, as the Python documentation's recipe for SIGPIPE does: the
    unwritten output is dropped rather than reported at exit.
    """
    if sys.stdout.errors in ("strict", "surrogateescape"):
        # Text the encoding cannot carry (a lone surrogate in a model's answer) is written as a
        # backslash escape instead of ending the command, as Python writes it on standard error.
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    code = run(sys.argv[1:] if argv is None else argv, stdout=sys.stdout, stderr=sys.stderr)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    if code == EXIT_BROKEN_PIPE:
        _drop_output(sys.stdout)
    sys.exit(code)


def _drop_output(stream: TextIO) -> None:
    """Point *stream*'s file descriptor at the null device, so that nothing more fails to reach a closed pipe."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file: nothing is flushed at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


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
        for note in deprecated_spellings(args):
            print(f"toolflow: warning: {note}", file=stderr)
        return int(args.handler(args, stdout, stderr))
    except ToolflowError as exc:
        print(f"toolflow: error: {exc}", file=stderr)
        return exc.exit_code
    except BrokenPipeError:
        _drop_output(stdout)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("toolflow: interrupted", file=stderr)
        return 130
    except BaseExceptionGroup as group:  # trio wraps what a task raises inside a nursery
        for kind, code in ((BrokenPipeError, EXIT_BROKEN_PIPE), (KeyboardInterrupt, 130)):
            matched, others = group.split(kind)
            if matched is not None and others is None:
                if code == EXIT_BROKEN_PIPE:
                    _drop_output(stdout)
                else:
                    print("toolflow: interrupted", file=stderr)
                return code
        raise
    except Exception:  # noqa: BLE001 - a bug must still exit 2, apart from "problems found"
        import traceback  # noqa: PLC0415

        print("toolflow: internal error (please report it with the traceback below)", file=stderr)
        traceback.print_exc(file=stderr)
        return 2


def _split(values: Sequence[str] | None) -> list[str]:
    return [item.strip() for value in values or () for item in value.split(",") if item.strip()]


def _cmd_lint(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._lint._engine import lint_paths  # noqa: PLC0415
    from toolflow._lint._formats import render, render_statistics  # noqa: PLC0415
    from toolflow._lint.rules import builtin_rules  # noqa: PLC0415

    plugins = None if args.no_plugins else _load_plugins(stderr)
    rules = (*builtin_rules(), *(rule for _, rule in plugins.lint_rules())) if plugins else builtin_rules()
    config = _lint_config(args, rules)
    listings = None
    if args.connect:  # its own path: plain lint imports neither trio nor mcp
        from toolflow._cli_lint_connect import server_listings  # noqa: PLC0415

        listings = server_listings(spec_paths(args.paths), plugins)
    report = lint_paths(
        spec_paths(args.paths),
        config,
        rules=rules,
        plugins=plugins.lint_facts() if plugins else None,
        kinds=plugins.kind_schemas() if plugins else None,
        packs=plugins.loader_options()["packs"] if plugins else None,
        listings=listings,
    )
    for crash in report.crashed:
        print(f"toolflow: warning: {crash}", file=stderr)
    stdout.write(render(report, args.output_format))
    if args.statistics:
        stream = stdout if args.output_format in {"text", "full"} else stderr
        stream.write(render_statistics(report))
    return 0 if args.exit_zero else report.exit_code


def _lint_config(args: argparse.Namespace, rules: Sequence[Rule]) -> LintConfig:
    """``[tool.toolflow.lint]`` (none with ``--isolated``) with the command line's options over it."""
    import attrs  # noqa: PLC0415

    from toolflow._diagnostics import Severity  # noqa: PLC0415
    from toolflow._lint._config import LintConfig, RuleSet, check_target, load_config  # noqa: PLC0415

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
    return attrs.evolve(config, **changes)  # type: ignore[arg-type]


def _cmd_rule(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._errors import UsageError  # noqa: PLC0415
    from toolflow._lint._config import RuleSet  # noqa: PLC0415
    from toolflow._lint.rules import builtin_rules  # noqa: PLC0415
    from toolflow._schemas import did_you_mean  # noqa: PLC0415

    plugin_rules = [rule for _, rule in _load_plugins(stderr).lint_rules()]
    ruleset = RuleSet(sorted([*builtin_rules(), *plugin_rules], key=lambda r: r.code))
    if args.all or not args.rule:
        stdout.writelines(f"{r.code}  {r.name:<34} {r.severity.value:<8} {r.summary}\n" for r in ruleset.rules)
        return 0
    found = ruleset.lookup(args.rule)
    if found is None:
        choices = [r.code for r in ruleset.rules] + [r.name for r in ruleset.rules]
        msg = f"unknown rule {args.rule!r}{did_you_mean(args.rule, choices)}"
        raise UsageError(msg)
    origin = f", from plugin {found.plugin!r}" if found.plugin else ""
    stdout.write(f"# {found.code} {found.name} ({found.severity.value}{origin})\n\n{found.doc.strip()}\n")
    return 0


def _cmd_list(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_tables import tool_row, write_table  # noqa: PLC0415
    from toolflow._loader import load_specs  # noqa: PLC0415

    plugins = _load_plugins(stderr)
    result = load_specs(spec_paths(args.paths), **plugins.loader_options())
    for diagnostic in result.diagnostics:
        print(diagnostic.render(), file=stderr)
    rows = [tool_row(tool) for tool in (*result.tools, *(remote_tools(result, stderr) if result.ok else ()))]
    if args.output_format == "json":
        stdout.write(json.dumps({"tools": rows}, indent=2) + "\n")
    else:
        header = ("TOOL", "CATEGORY", "IMPLEMENTED BY", "TIMEOUT", "CACHE", "LOCATION")
        table = [header] + [
            (
                r["name"] if r["expose"] else f"{r['name']} (hidden)",
                r["category"],
                r["implementation"] or "-",
                f"{r['timeout']:g}s",
                r["cache"] or "-",
                r["location"],
            )
            for r in rows
        ]
        write_table(table, stdout)
        tools = "tool" if len(rows) == 1 else "tools"
        files = "file" if len(result.files) == 1 else "files"
        hidden = sum(not r["expose"] for r in rows)
        note = f"; {hidden} hidden from models (expose: false)" if hidden else ""
        stdout.write(f"{len(rows)} {tools} in {len(result.files)} {files}{note}\n")
    return 0 if result.ok else 1


def _add_graph(commands: Any) -> None:
    """The parser of ``toolflow graph``."""
    graph = commands.add_parser(
        "graph", help="draw the tools, their pipelines' steps and their depends_on rules (Mermaid or DOT)"
    )
    graph.add_argument("paths", nargs="*", metavar="PATH", help="spec files or directories (default: specs/)")
    graph.add_argument(
        "--format", choices=("mermaid", "dot"), default="mermaid", help="Mermaid (default) or Graphviz DOT"
    )
    graph.set_defaults(handler=_cmd_graph)


def _add_init(commands: Any) -> None:
    """The parser of ``toolflow init``."""
    init = commands.add_parser("init", help="create a working project: specs, a plugin module, a session, CI set-up")
    init.add_argument("directory", nargs="?", default=".", help="where to create it (default: here)")
    init.add_argument("--name", help="the project's name (default: the directory's)")
    init.add_argument(
        "--plugin", metavar="NAME", help="create a plugin package instead: one implementation kind, a lint rule, a test"
    )
    init.set_defaults(handler=_cmd_init)


def _cmd_init(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_init import command  # noqa: PLC0415

    return command(args, stdout)


def _cmd_completion(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_completion import script  # noqa: PLC0415

    stdout.write(script(_parser(), args.shell))
    return 0


def _cmd_graph(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_graph import command  # noqa: PLC0415

    return command(args, _load_plugins(stderr).loader_options(), stdout, stderr)


def _cmd_spec_schema(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._schemas import spec_schema  # noqa: PLC0415

    schema = spec_schema() if args.no_plugins else _load_plugins(stderr).spec_schema()
    stdout.write(json.dumps(schema, indent=2) + "\n")
    return 0


def _cmd_schema(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._export import export_tools  # noqa: PLC0415

    registry = registry_to_read(spec_paths(args.specs or []), _load_plugins(stderr), stderr)
    selected = registry.toolset(args.toolset) if args.toolset else registry
    # Definitions are for models, and a hidden tool is offered to none.
    specs = [tool.spec for tool in selected if args.all or tool.spec.expose]
    every = {tool.name: tool.spec for tool in registry}  # the steps of pipelines, for their annotations
    stdout.write(json.dumps(export_tools(specs, args.format, tools=every), indent=2) + "\n")
    return 0


def _load_plugins(stderr: TextIO, *, strict: bool = False) -> Plugins:
    """Load every plugin the project sees; print each load warning as ``toolflow: warning: ...``."""
    import warnings  # noqa: PLC0415

    from toolflow._plugins import PluginLoadWarning, load_plugins  # noqa: PLC0415
    from toolflow._project import load_project  # noqa: PLC0415

    project = load_project()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginLoadWarning)
        plugins = load_plugins(project_plugins=project.plugins, project_root=project.root, strict=strict)
    for warning in caught:
        if issubclass(warning.category, PluginLoadWarning):
            print(f"toolflow: warning: {warning.message}", file=stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return plugins


def _cmd_plugins(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_tables import print_plugins  # noqa: PLC0415

    plugins = _load_plugins(stderr, strict=args.strict)
    if args.output_format == "json":
        stdout.write(json.dumps({"plugins": [info.to_dict() for info in plugins.infos]}, indent=2) + "\n")
    else:
        print_plugins(plugins.infos, stdout)
    return 1 if any(info.status == "failed" for info in plugins.infos) else 0


def _cmd_call(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_call import call_request, command  # noqa: PLC0415 - the engine and trio load only for `call`

    request = call_request(args, stdout)  # a malformed call is answered before any plugin loads
    if request is None:
        return 1
    return command(args, request, _load_plugins(stderr), stdout, stderr)


def _cmd_run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_run import command  # noqa: PLC0415 - the loop, trio and providers load only for `run`

    return command(args, _load_plugins(stderr), stdout, stderr)


def _cmd_test(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._cli_test import command  # noqa: PLC0415 - the engine, trio and the loop load only for `test`

    return command(args, _load_plugins(stderr), stdout, stderr)


def _cmd_serve(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from toolflow._errors import UsageError  # noqa: PLC0415
    from toolflow._loader import load_specs  # noqa: PLC0415
    from toolflow._policy import Policy  # noqa: PLC0415

    try:
        from toolflow import _serve  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in {"mcp", "mcp_types", "hypercorn", "starlette"}:
            raise
        msg = f"serve needs the MCP SDK ({exc.name!r} is not installed): pip install 'toolflow-yaml[mcp]'"
        raise UsageError(msg) from None
    task_limits = _task_limits(args)
    if args.project:
        try:
            os.chdir(args.project)  # MCP clients start servers in a directory of their own choosing
        except OSError as exc:
            msg = f"serve: cannot use project directory {args.project!r}: {exc.strerror or exc}"
            raise UsageError(msg) from None
    stores = project_cache_settings(args)  # the state: the engines' and, in a fleet, the HTTP sessions'
    http = _http_settings(args, stderr, stores["state"]) if args.transport == "http" else None
    plugins = _load_plugins(stderr)
    specs = load_specs(spec_paths(args.specs or []), **plugins.loader_options())

    @contextlib.asynccontextmanager
    async def open_service() -> AsyncIterator[_serve.ToolService]:
        async with open_tools(specs, plugins, no_cache=args.no_cache) as registry:
            yield _serve.ToolService.under_policy(
                registry,
                policy=with_caps(Policy.from_specs(specs), args),
                toolsets=args.toolset or (),
                tools=_split(args.tool),
                approve=None if args.approve is None else args.approve == "yes",
                plugins=plugins,
                task_limits=task_limits,
                **stores,
                **serve_state_settings(http, stores["state"], stderr),  # the keys, the conversations' lifetime
            )

    return _serve.serve(
        open_service,
        transport=args.transport,
        http=http,
        grace=shutdown_grace(args),
        stderr=stderr,
    )


def _task_limits(args: argparse.Namespace) -> TaskLimits:
    """``toolflow serve``'s MCP task limits: ``--task-max-running``, ``--task-max-kept``, ``--task-[max-]ttl``.

    An option not given keeps ``TaskLimits``' default, moved to fit the one given with it
    (``--task-max-ttl 5m`` alone: tasks are kept 5 minutes unless a client asks for less). Each
    replica of a fleet reads its own options.

    Raises:
        UsageError: A duration is not a positive one, or two limits given contradict each other:
            more tasks running than kept, or a ttl longer than the longest.
    """
    from toolflow._model import duration_setting  # noqa: PLC0415
    from toolflow._serve_tasks import TaskLimits  # noqa: PLC0415

    ttl = None if args.task_ttl is None else duration_setting(args.task_ttl, where="serve: --task-ttl")
    longest = None if args.task_max_ttl is None else duration_setting(args.task_max_ttl, where="serve: --task-max-ttl")
    default = TaskLimits()
    running, kept = _fitted(
        args.task_max_running,
        args.task_max_kept,
        (default.running, default.kept),
        f"--task-max-running {args.task_max_running} is more than --task-max-kept {args.task_max_kept}",
    )
    ttl, longest = _fitted(
        ttl,
        longest,
        (default.ttl, default.max_ttl),
        f"--task-ttl {args.task_ttl} is more than --task-max-ttl {args.task_max_ttl}",
    )
    return TaskLimits(running=int(running), kept=int(kept), ttl=ttl, max_ttl=longest)


def _fitted(
    small: float | None, large: float | None, defaults: tuple[float, float], refused: str
) -> tuple[float, float]:
    """Two limits, the first at most the second: each as given, or its default moved to fit the other.

    Raises:
        UsageError: Both were given, the first over the second (*refused* says so).
    """
    from toolflow._errors import UsageError  # noqa: PLC0415

    if small is not None and large is not None and small > large:
        msg = f"serve: {refused}"
        raise UsageError(msg)
    return small or min(defaults[0], large or defaults[0]), large or max(defaults[1], small or 0)


def _http_settings(args: argparse.Namespace, stderr: TextIO, state: StateBackend | None = None) -> HTTPSettings:
    """``toolflow serve``'s HTTP settings: the options, then ``[tool.toolflow.serve]``, then the defaults."""
    from toolflow._errors import UsageError  # noqa: PLC0415
    from toolflow._model import duration_setting  # noqa: PLC0415
    from toolflow._project import load_project  # noqa: PLC0415
    from toolflow._serve_http import (  # noqa: PLC0415
        DEFAULT_MAX_SESSIONS,
        DEFAULT_SESSION_IDLE_TIMEOUT,
        BearerTokens,
        HTTPSettings,
    )

    config = load_project().serve
    if args.max_sessions is not None and args.max_sessions < 1:
        msg = f"serve: --max-sessions must be at least 1, got {args.max_sessions}"
        raise UsageError(msg)
    idle = config.session_idle_timeout or DEFAULT_SESSION_IDLE_TIMEOUT
    if args.session_idle_timeout is not None:
        idle = duration_setting(args.session_idle_timeout, where="serve: --session-idle-timeout")
    tokens = None
    token_file = args.auth_tokens or config.auth_tokens
    token_env = args.auth_token_env or config.auth_token_env
    if token_file or token_env:
        tokens, warnings = BearerTokens.load(path=token_file, env=token_env)
        for warning in warnings:
            print(f"toolflow: warning: {warning}", file=stderr)
    return HTTPSettings(
        host=args.host,
        port=args.port,
        allowed_hosts=(*config.allowed_hosts, *_split(args.allow_host)),
        allowed_origins=(*config.allowed_origins, *_split(args.allow_origin)),
        tokens=tokens,
        insecure_no_auth=args.insecure_no_auth,
        max_sessions=args.max_sessions or config.max_sessions or DEFAULT_MAX_SESSIONS,
        session_idle_timeout=idle,
        stateless=args.stateless,
        state=state,
    )
