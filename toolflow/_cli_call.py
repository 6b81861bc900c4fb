"""``toolflow call``: one tool call through the engine, printed as JSON.

Kept apart from :mod:`toolflow._cli` so that ``toolflow --help`` and ``toolflow lint`` never
import the engine or trio; :mod:`toolflow._cli` imports it only when ``call`` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import attrs
import trio

from toolflow._calls import DEFAULT_MAX_ARGUMENT_BYTES, MalformedCall, parse_tool_call
from toolflow._cli_support import (
    approver,
    open_tools,
    project_cache_settings,
    run_trio,
    shown_in_traces,
    shutdown_grace,
    spec_paths,
    with_caps,
)
from toolflow._context import providing_context
from toolflow._errors import UsageError
from toolflow._executor import open_engine
from toolflow._json import decode_problem
from toolflow._loader import load_specs
from toolflow._plugins import Plugins
from toolflow._policy import Policy
from toolflow._registry import Registry
from toolflow._results import StepRecord, ToolResult, json_text
from toolflow._shutdown import Interrupts, open_signal_watch

__all__ = ["CallRequest", "call_request", "command"]

CallRequest = tuple[str, object, tuple[str, ...], str]
"""NAME, the arguments, the parse warnings and the call id of one ``toolflow call``."""

_TRACE_KEYS = ("attempts", "cached")
"""Bookkeeping keys the engine adds to a result; ``toolflow call`` reports them with ``--trace`` only."""


def call_request(args: argparse.Namespace, stdout: TextIO) -> CallRequest | None:
    """NAME, arguments, parse warnings and call id of ``toolflow call``; None once a malformed call is printed."""
    # With --raw, a single positional is the call itself: NAME is then optional.
    name, text = (None, args.name) if args.raw and args.arguments is None else (args.name, args.arguments)
    text = sys.stdin.read() if text == "-" else text
    try:
        arguments = json.loads(text) if text else {}
    except (ValueError, RecursionError) as exc:  # a number too long for Python, nesting past its recursion
        msg = f"{'the tool call' if args.raw else 'ARGS_JSON'} is not valid JSON: {decode_problem(exc)}"
        raise UsageError(msg) from None
    warnings: tuple[str, ...] = ()
    call_id = "call_0"
    if args.raw:
        call = parse_tool_call(arguments, max_argument_bytes=args.max_argument_bytes or DEFAULT_MAX_ARGUMENT_BYTES)
        if isinstance(call, MalformedCall):
            stdout.write(json.dumps(call.to_result().to_dict(), indent=2, ensure_ascii=False) + "\n")
            return None
        if name is not None and name != call.name:
            msg = f"NAME {name!r} is not the tool of the call, {call.name!r}"
            raise UsageError(msg)
        name, arguments, warnings, call_id = call.name, call.arguments, call.warnings, call.id
    if name is None:
        msg = "call: NAME is required (or give a whole tool call with --raw)"
        raise UsageError(msg)
    return name, arguments, warnings, call_id


def _trace_line(name: str, success: bool, attempts: object, elapsed: float, scope: str | None, *, cached: bool) -> str:
    """The ``--trace`` line: ``toolflow: trace: NAME: success, 1 attempt, 12.3ms, cache miss (session)``."""
    cache_text = _cache_text(scope, cached=cached)
    noun = "attempt" if attempts == 1 else "attempts"
    outcome = "success" if success else "failure"
    return f"toolflow: trace: {name}: {outcome}, {attempts} {noun}, {elapsed * 1000:.1f}ms, {cache_text}"


def _step_lines(
    records: tuple[StepRecord, ...], registry: Registry, shown: Callable[[Any], Any], depth: int = 1
) -> Iterator[str]:
    """A ``--trace`` line per step record, indented under its pipeline's line; a nested pipeline's steps deeper.

    ``toolflow: trace:   notes[1]: item_notes {"sku": "b"}: succeeded, 1 attempt, 0.4ms, no cache``;
    a ``${...}`` value of the specs shows as its reference (*shown*).
    """
    for record in records:
        label = record.step if record.item is None else f"{record.step}[{record.item}]"
        arguments = "" if record.arguments is None else " " + _shorten(_compact(shown(record.arguments)), 80)
        line = f"{'  ' * depth}{label}: {record.tool}{arguments}: {record.status.replace('_', ' ')}"
        result = record.result
        if result is not None:
            attempts = result.extra.get("attempts", 0)
            noun = "attempt" if attempts == 1 else "attempts"
            line += f", {attempts} {noun}"
            if record.duration is not None:
                line += f", {record.duration * 1000:.1f}ms"
            line += ", " + _cache_text(_scope(registry, record.tool), cached=result.extra.get("cached") is True)
            if not result.success:
                line += ": " + _shorten(re.sub(r"\s*\n\s*", " ", result.error or ""), 200)
        yield "toolflow: trace: " + shown(line)
        if result is not None and result.steps:
            yield from _step_lines(result.steps, registry, shown, depth + 1)


def _scope(registry: Registry, name: str) -> str | None:
    """The cache scope of the tool *name* (``None``: no cache, or no such tool)."""
    if name not in registry:
        return None
    cache = registry.get(name).spec.cache
    return None if cache is None else cache.scope.value


def _cache_text(scope: str | None, *, cached: bool) -> str:
    return "no cache" if scope is None else f"cache {'hit' if cached else 'miss'} ({scope})"


def _compact(value: object) -> str:
    return json_text(value)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _print_trace(name: str, result: ToolResult, elapsed: float, registry: Registry, stderr: TextIO) -> dict[str, Any]:
    """Print the ``--trace`` lines of the call and its steps; the keys ``--trace`` adds to the printed result."""
    attempts = result.extra.get("attempts", 0)
    cached = result.extra.get("cached") is True
    print(_trace_line(name, result.success, attempts, elapsed, _scope(registry, name), cached=cached), file=stderr)
    if not result.steps:
        return {}
    shown = shown_in_traces(tool.spec for tool in registry)
    stderr.writelines(line + "\n" for line in _step_lines(result.steps, registry, shown))
    return {"steps": shown([record.to_dict() for record in result.steps])}


def command(args: argparse.Namespace, request: CallRequest, plugins: Plugins, stdout: TextIO, stderr: TextIO) -> int:
    """Run ``toolflow call`` for the parsed *request*; return the exit code (0, 1 on failure, 128+N on signal N)."""
    name, arguments, warnings, call_id = request
    specs = load_specs(spec_paths(args.specs or []), **plugins.loader_options())
    # One call by hand is no conversation: the policy's approval holds, its order rules do not.
    policy = attrs.evolve(with_caps(Policy.from_specs(specs), args), rules=())
    approve = approver(args.approve, stderr)
    cache = project_cache_settings()
    interrupts = Interrupts(grace=shutdown_grace(args))
    elapsed = 0.0
    opened: list[Registry] = []  # the registry, for the trace printed after the run

    async def run_call() -> ToolResult:
        nonlocal elapsed
        async with open_tools(specs, plugins, no_cache=args.no_cache) as registry:
            opened.append(registry)
            registry.get(name)  # an unknown tool is a usage error (exit 2), before the engine opens
            async with open_engine(registry, plugins=plugins, policy=policy, approve=approve, **cache) as engine:
                attempt = trio.CancelScope()  # a kill cancels it: the call ends as `cancelled`
                stopping = (
                    f"stopping after the call in flight (at most {interrupts.grace_text()}; a second signal kills it)"
                )
                async with open_signal_watch(
                    interrupts, stop=engine.request_stop, kill=attempt.cancel, stderr=stderr, stopping=stopping
                ):
                    started = time.perf_counter()
                    try:
                        with attempt, providing_context(args.context):
                            result = await engine.call(name, arguments, call_id=call_id)
                    finally:
                        elapsed = time.perf_counter() - started
        return interrupts.cancelled() if attempt.cancelled_caught else result

    with _attempts_traced(stderr) if args.trace else contextlib.nullcontext():
        result = run_trio(run_call, stderr)
    if warnings:
        result = attrs.evolve(result, warnings=(*warnings, *result.warnings))
    printed = attrs.evolve(result, extra={k: v for k, v in result.extra.items() if k not in _TRACE_KEYS})
    document = printed.to_dict()
    if args.trace:
        document.update(_print_trace(name, result, elapsed, opened[0], stderr))
    stdout.write(json_text(document, indent=2) + "\n")
    if interrupts.exit_code is not None:
        return interrupts.exit_code
    return 0 if result.success else 1


@contextlib.contextmanager
def _attempts_traced(stderr: TextIO) -> Iterator[None]:
    """Print the engine's log of failed attempts (``toolflow.attempts``) as ``toolflow: trace: ...`` lines."""
    handler = logging.StreamHandler(stderr)
    handler.setFormatter(logging.Formatter("toolflow: trace: %(message)s"))
    attempts = logging.getLogger("toolflow.attempts")
    level = attempts.level
    attempts.addHandler(handler)
    attempts.setLevel(logging.INFO)
    try:
        yield
    finally:
        attempts.removeHandler(handler)
        attempts.setLevel(level)
