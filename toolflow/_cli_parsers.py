"""The arguments of ``toolflow call``, ``run`` and ``serve`` (their handlers live in :mod:`toolflow._cli`).

Only argparse and the CLI's own option helpers: building the parser imports nothing heavy.
"""

from __future__ import annotations

import argparse
from typing import Any

from toolflow._cli_support import add_cap_options, add_context_option, add_output_format, positive_count

__all__ = ["add_call_parser", "add_run_parser", "add_serve_parser"]


def add_serve_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``toolflow serve`` (its handler imports the MCP SDK only when it runs)."""
    serve: argparse.ArgumentParser = commands.add_parser(
        "serve", help="serve the tools over the Model Context Protocol (needs toolflow-yaml[mcp])"
    )
    serve.add_argument(
        "--specs", action="append", metavar="PATH", help="spec file or directory (repeatable; default: specs/)"
    )
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP"
    )
    serve.add_argument(
        "--project", metavar="DIR", help="serve as if started in DIR: its pyproject.toml, plugins, specs and cache"
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default: 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=8000, help="HTTP: the port to listen on (default: 8000; 0: any free port)"
    )
    serve.add_argument(
        "--toolset", action="append", metavar="NAME", help="serve the tools of this toolset (repeatable)"
    )
    serve.add_argument("--tool", action="append", metavar="NAME", help="serve this tool (repeatable, comma-separated)")
    serve.add_argument(
        "--no-cache", action="store_true", help="use no cache at all: neither read nor write the tools' caches"
    )
    serve.add_argument(
        "--approve",
        choices=("yes", "no"),
        help="answer every approval the policy asks for: approve all, or refuse all (default: the plugins "
        "decide, else the client is asked if it supports elicitation, else the call is refused)",
    )
    _add_grace_option(serve, "the calls")
    add_cap_options(serve)
    _add_http_options(serve)
    _add_state_options(serve)
    _add_task_options(serve)
    return serve


def _add_task_options(serve: argparse.ArgumentParser) -> None:
    """Add the limits of ``toolflow serve``'s MCP tasks (``toolflow._serve_tasks.TaskLimits``; see docs/serving.md).

    The defaults are ``TaskLimits``' own, named in the help (importing them would import the MCP
    SDK); the handler combines the options with them and checks the result.
    """
    tasks = serve.add_argument_group("MCP tasks: limits per client, on each replica (see docs/serving.md)")
    tasks.add_argument(
        "--task-max-running",
        type=positive_count,
        metavar="N",
        help="tasks running at once per client; one more is refused (default: 16; at most --task-max-kept)",
    )
    tasks.add_argument(
        "--task-max-kept",
        type=positive_count,
        metavar="N",
        help="tasks kept per client, running or finished; past it the oldest finished one is dropped (default: 100)",
    )
    tasks.add_argument(
        "--task-ttl",
        metavar="DURATION",
        help="how long a task is kept when the client asks for no ttl (default: 15m; at most --task-max-ttl)",
    )
    tasks.add_argument(
        "--task-max-ttl",
        metavar="DURATION",
        help="the longest ttl a client may ask for; a longer one is cut to it (default: 1h)",
    )


def _add_state_options(serve: argparse.ArgumentParser) -> None:
    """Add the shared-state options of ``toolflow serve`` (issue 19; see docs/deploying.md)."""
    state = serve.add_argument_group("shared state: what a fleet of replicas shares (see docs/deploying.md)")
    state.add_argument(
        "--state",
        metavar="URL",
        help="the state backend: 'memory' (one process) or redis://[:PASSWORD@]HOST:PORT/DB, which holds the"
        " persistent cache and the tools' concurrency and rate limits across replicas (default: $TOOLFLOW_STATE,"
        " else [tool.toolflow] state, else memory; needs toolflow-yaml[redis])",
    )


def _add_http_options(serve: argparse.ArgumentParser) -> None:
    """Add the HTTP transport's security and session options of ``toolflow serve``."""
    http = serve.add_argument_group("HTTP: authentication, allowed hosts, sessions (see docs/serving.md)")
    http.add_argument(
        "--auth-tokens",
        metavar="FILE",
        help="bearer tokens that may call: one per line, or a TOML file of [principals.ID] with token and claims",
    )
    http.add_argument(
        "--auth-token-env", action="append", metavar="VAR", help="a variable holding a bearer token (repeatable)"
    )
    http.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve a non-loopback address without authentication (anyone who can reach it can call the tools)",
    )
    http.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="a Host name clients use, besides the bind address's (repeatable; required with --host 0.0.0.0)",
    )
    http.add_argument(
        "--allow-origin", action="append", metavar="ORIGIN", help="a browser Origin allowed besides the hosts' own"
    )
    http.add_argument(
        "--max-sessions", type=int, metavar="N", help="concurrent sessions; the next gets 503 (default: 100)"
    )
    http.add_argument(
        "--session-idle-timeout",
        metavar="DURATION",
        help="a session without requests for this long is closed (default: 30m)",
    )
    http.add_argument(
        "--stateless",
        action="store_true",
        help="keep no sessions: no Mcp-Session-Id, every request stands alone (replicas behind a load balancer)",
    )


def add_call_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``toolflow call``."""
    call: argparse.ArgumentParser = commands.add_parser(
        "call", help="run one tool: validate the arguments, call it, print the result as JSON"
    )
    call.add_argument("name", nargs="?", metavar="NAME", help="the tool to call (with --raw: optional, checked)")
    call.add_argument(
        "arguments", nargs="?", metavar="ARGS_JSON", help="the arguments, a JSON object (default: {}; '-': stdin)"
    )
    call.add_argument(
        "--raw",
        action="store_true",
        help="ARGS_JSON is a whole tool call as a model sends it (OpenAI, Anthropic, "
        '{"tool", "parameters"} or {"name", "args"}); its tool must be NAME when NAME is given',
    )
    call.add_argument(
        "--specs", action="append", metavar="PATH", help="spec file or directory (repeatable; default: specs/)"
    )
    call.add_argument(
        "--no-cache", action="store_true", help="use no cache at all: neither read nor write the tool's cache"
    )
    call.add_argument(
        "--trace", action="store_true", help="print the attempts, the duration and the cache use on standard error"
    )
    call.add_argument(
        "--approve",
        choices=("ask", "yes", "no"),
        help="when the tool's category needs approval: ask on the terminal (standard error), approve, or refuse "
        "(default: ask when standard input is a terminal, else the plugins decide; nobody: refused)",
    )
    add_output_format(call, ("json",), what="the result as JSON, the only format")
    add_cap_options(call, result_chars=False)  # the result is printed whole, for a person
    add_context_option(call)
    _add_grace_option(call, "the call")
    return call


def _add_grace_option(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--shutdown-grace`` (``toolflow call``, ``run`` and ``serve``)."""
    parser.add_argument(
        "--shutdown-grace",
        metavar="DURATION",
        help=f"after SIGTERM or Ctrl-C, how long {what} in flight may finish before it is killed"
        " (default: [tool.toolflow] shutdown-grace, or 10s; a second signal kills at once)",
    )


def add_run_parser(commands: Any, history_formats: tuple[str, ...]) -> argparse.ArgumentParser:
    """Add ``toolflow run`` (its handler imports the loop only when it runs)."""
    run: argparse.ArgumentParser = commands.add_parser(
        "run", help="run an agent loop: a model calls the tools until the policy ends the loop; print the trace"
    )
    run.add_argument(
        "--specs", action="append", metavar="PATH", help="spec file or directory (repeatable; default: specs/)"
    )
    run.add_argument(
        "--model",
        required=True,
        metavar="PROVIDER:TARGET",
        help="the model: scripted:FILE (a YAML transcript), openai:MODEL (any OpenAI-compatible server)"
        " or anthropic:MODEL (the Messages API)",
    )
    run.add_argument(
        "--format",
        choices=history_formats,
        help="the history format (default: openai, or anthropic for an anthropic: model)",
    )
    run.add_argument("--prompt", metavar="TEXT", help="the user's message (default: the transcript's 'prompt')")
    run.add_argument("--system", metavar="TEXT", help="the system prompt (default: the policy's, or the transcript's)")
    run.add_argument("--max-iterations", type=int, metavar="N", help="override the policy's max_iterations")
    run.add_argument("--toolset", metavar="NAME", help="expose only this toolset's tools (overrides the policy's)")
    run.add_argument(
        "--deliberate", action="store_true", help="deliberate mode: expose only the policy's 'deliberate' allowlist"
    )
    run.add_argument(
        "--approve",
        choices=("ask", "yes", "no", "defer"),
        help="calls whose category needs approval: ask on the terminal, approve all, refuse all, or defer them "
        "(the run ends 'deferred'; --resume with --approve-call or --refuse-call) "
        "(default: ask when standard input is a terminal, else the plugins decide)",
    )
    run.add_argument("--no-cache", action="store_true", help="use no cache at all")
    add_output_format(run, ("text", "json"), what="the trace as text, or one JSON document", old="--output")
    run.add_argument(
        "--base-url",
        metavar="URL",
        help="openai, anthropic: the server (default: $OPENAI_BASE_URL, $ANTHROPIC_BASE_URL)",
    )
    run.add_argument("--api-key-env", metavar="VAR", help="openai, anthropic: read the API key from this variable")
    run.add_argument("--no-stream", action="store_true", help="openai, anthropic: ask for whole responses, not streams")
    _add_grace_option(run, "the calls")
    add_cap_options(run)
    add_context_option(run)
    _add_resume_options(run)
    run.add_argument(
        "--response-timeout",
        type=float,
        metavar="SECONDS",
        help="openai, anthropic: seconds allowed for a whole answer, keep-alives or not (default: 600)",
    )
    return run


def _add_resume_options(run: argparse.ArgumentParser) -> None:
    """Add ``toolflow run``'s options that save a run and resume it (issue 21, section 3)."""
    group = run.add_argument_group("saved runs and deferred calls (see docs/agent-loop.md)")
    group.add_argument(
        "--save", metavar="FILE", help="when the run ends, whatever the reason, write its state to FILE (JSON)"
    )
    group.add_argument(
        "--resume",
        metavar="FILE",
        help="go on with the run saved in FILE: with --result for its deferred calls, else with --prompt",
    )
    group.add_argument(
        "--result",
        action="append",
        metavar="CALL_ID=JSON",
        help="the result of a deferred call of the resumed run, as JSON (repeatable; one per waiting call)",
    )
    group.add_argument(
        "--approve-call",
        action="append",
        metavar="CALL_ID",
        help="approve a call the resumed run defers for approval (--approve defer): it runs (repeatable)",
    )
    group.add_argument(
        "--refuse-call",
        action="append",
        metavar="CALL_ID",
        help="refuse a call the resumed run defers for approval: the model reads that it was not approved",
    )
    group.add_argument(
        "--result-error",
        action="append",
        metavar="CALL_ID=MESSAGE",
        help="a deferred call of the resumed run failed: the model reads MESSAGE as its error (repeatable)",
    )


def _port(text: str) -> int:
    """``--port``: a TCP port number, 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        msg = f"expected a port number from 0 to 65535, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return port
