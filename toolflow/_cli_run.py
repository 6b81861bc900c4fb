"""``toolflow run``: an agent loop from the command line, with a readable trace (issue 5, section 5).

Kept apart from :mod:`toolflow._cli` so that ``toolflow --help`` and ``toolflow lint`` never
import the loop, trio or a provider.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

import attrs

from toolflow._approval import defer_approval
from toolflow._calls import ToolCall
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
from toolflow._deferred import supplied_results
from toolflow._errors import UsageError
from toolflow._executor import Engine, open_engine
from toolflow._json import decode_problem
from toolflow._loader import load_specs
from toolflow._loop import Agent, LoopResult, TurnRecord
from toolflow._loop_records import TaskOutcome
from toolflow._plugins import Plugins
from toolflow._policy import Policy
from toolflow._providers import ModelProvider, load_provider
from toolflow._results import StepRecord, ToolResult, json_text
from toolflow._run_state import SavedRun, check_resumable
from toolflow._shutdown import Interrupts, open_signal_watch

__all__ = ["EXIT_CODES", "command", "print_end", "print_turn", "print_waiting"]

EXIT_CODES = {
    "final_answer": 0,
    "terminal": 0,
    "max_iterations": 0,
    "token_critical": 0,
    "error_cap": 1,
    "provider_error": 1,
    "stopped": 130,
    "killed": 130,
    "deferred": 3,
}
"""The exit code of ``toolflow run`` for each way the loop can end (a stop or kill: 128 + the signal's number)."""


def _provider(spec: str, plugins: Plugins, args: argparse.Namespace, environ: Mapping[str, str]) -> ModelProvider:
    options: dict[str, Any] = {}
    if args.base_url is not None:
        options["base_url"] = args.base_url
    if args.api_key_env is not None:
        key = environ.get(args.api_key_env)
        if not key:
            msg = f"--api-key-env {args.api_key_env}: the variable is not set"
            raise UsageError(msg)
        options["api_key"] = key
    if args.no_stream:
        options["stream"] = False
    if args.response_timeout is not None:
        options["response_timeout"] = args.response_timeout
    return load_provider(spec, plugins=plugins, **options)


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _outcome(result: ToolResult, limit: int = 300) -> str:
    if result.success:
        if result.data is None:
            return "ok"
        return "ok: " + _shorten(json_text(result.data, separators=(", ", ": ")), limit)
    status = result.extra.get("status")
    label = status if isinstance(status, str) else "failed"
    return f"{label}: {_shorten(str(result.error or ''), limit)}"


def _json(value: Mapping[str, Any]) -> str:
    return json_text(dict(value), separators=(", ", ": "))


def _arguments(call: object) -> str:
    return _json(call.arguments) if isinstance(call, ToolCall) else "(malformed)"


def _milliseconds(seconds: float) -> str:
    """``12 ms``, or ``0.4 ms`` below 10 ms, where whole milliseconds would say little."""
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def _one_line(text: str) -> str:
    """*text* with each line break and the blanks around it made one space (a validation error has several lines)."""
    return re.sub(r"\s*\n\s*", " ", text)


def _details(result: ToolResult, duration: float | None) -> str:
    """`` (cached)``, `` (3 attempts, 12 ms)``: what the engine did for a call, when there is something to say."""
    details = []
    attempts = result.extra.get("attempts")
    if result.extra.get("cached") is True:
        details.append("cached")
    elif isinstance(attempts, int) and attempts > 1:
        details.append(f"{attempts} attempts")
    if duration is not None:
        details.append(_milliseconds(duration))
    return f" ({', '.join(details)})" if details else ""


def _step_lines(records: tuple[StepRecord, ...], indent: str, shown: Callable[[Any], Any]) -> Iterator[str]:
    """A line per step of a pipeline call, under its call: ``· notes[1] → item_notes {"sku": "b"}: ok: ...``.

    The steps of a step that is a pipeline follow their step, indented further. A ``${...}``
    value of the specs shows as its reference (*shown*).
    """
    for record in records:
        label = record.step if record.item is None else f"{record.step}[{record.item}]"
        arguments = "" if record.arguments is None else " " + _shorten(_json(shown(record.arguments)), 120)
        result = record.result
        if record.status in {"succeeded", "failed"} and result is not None:
            outcome = _outcome(result, limit=120) + _details(result, record.duration)
        elif result is not None and result.error:
            outcome = f"{record.status}: {_shorten(result.error, 120)}"
        else:
            outcome = record.status.replace("_", " ")
        yield shown(f"{indent}· {label} → {record.tool}{arguments}: {_one_line(outcome)}") + "\n"
        if result is not None and result.steps:
            yield from _step_lines(result.steps, indent + "  ", shown)


def _task_lines(outcomes: tuple[TaskOutcome, ...]) -> Iterator[str]:
    """A line per background outcome the model was told of: ``  background task-1 → fetch {...}: ok: ... (15 s)``."""
    for outcome in outcomes:
        result = outcome.result
        arguments = _arguments(outcome.entry.call)
        shown = _one_line(_outcome(result)) + _details(result, outcome.entry.duration)
        yield f"  background {outcome.task_id} → {outcome.tool_name} {arguments}: {shown}\n"


def print_turn(turn: TurnRecord, stdout: TextIO, shown: Callable[[Any], Any]) -> None:
    """Write the trace of one turn; *shown* is how the steps of pipeline calls show values (``shown_in_traces``)."""
    tokens = f" · {turn.usage.total_tokens:,} tokens" if turn.usage is not None else ""
    tools = "" if turn.tools_offered else " · no tools offered"
    stdout.write(f"turn {turn.turn}{tokens}{tools} · {turn.duration * 1000:.0f} ms\n")
    # Seed 002's hidden trigger notice: for the operator, never the model.
    stdout.writelines(f"  deliberate: {trigger.describe()}\n" for trigger in turn.triggers)
    stdout.writelines(_task_lines(turn.outcomes))  # told to the model before this turn's request
    if turn.text and turn.entries:
        stdout.write(f"  model: {turn.text}\n")
    for entry in turn.entries:
        result = entry.result
        stdout.write(f"  → {entry.tool_name or '?'} {_arguments(entry.call)}\n")
        stdout.write(f"    {_outcome(result)}{_details(result, entry.duration)}\n")
        stdout.writelines(_step_lines(result.steps, "    ", shown))
        for key in ("_token_advisory", "_loop_advisory"):
            advisory = result.extra.get(key)
            if isinstance(advisory, Mapping):
                stdout.write(f"    advisory: {advisory.get('message')}\n")
    if turn.decision.reason == "restart":
        stdout.write(f"  restart: {turn.decision.message}; the turn leaves the history\n")
    stdout.flush()


def print_end(result: LoopResult, stdout: TextIO) -> None:
    """Write the final answer, the result of each call that ended the loop, and why it ended."""
    calls = sum(len(turn.entries) for turn in result.turns)
    if result.final_answer:
        stdout.write(f"final answer: {result.final_answer}\n")
    if result.reason == "terminal" and result.turns:
        last = result.turns[-1]
        for entry in last.entries:
            if entry.call_id in last.ended_by:
                data = entry.result.data
                shown = data if isinstance(data, str) else json_text(data, separators=(", ", ": "))
                stdout.write(f"{entry.tool_name}: {_shorten(shown)}\n")
    stdout.writelines(_task_lines(result.outcomes))  # noted after the last turn (policy on_exit)
    turns = "turn" if len(result.turns) == 1 else "turns"
    noun = "tool call" if calls == 1 else "tool calls"
    stdout.write(
        f"loop ended: {result.reason} ({result.decision.message}) after {len(result.turns)} {turns}, {calls} {noun}\n"
    )


def command(args: argparse.Namespace, plugins: Plugins, stdout: TextIO, stderr: TextIO) -> int:
    """Run ``toolflow run`` with parsed *args*; return the exit code (see :data:`EXIT_CODES`)."""
    import os  # noqa: PLC0415

    specs = load_specs(spec_paths(args.specs or []), **plugins.loader_options())
    policy = with_caps(Policy.from_specs(specs), args)
    if args.max_iterations is not None:
        if args.max_iterations < 1:
            msg = f"--max-iterations must be at least 1, got {args.max_iterations}"
            raise UsageError(msg)
        policy = attrs.evolve(policy, max_iterations=args.max_iterations)
    if args.toolset is not None:
        policy = attrs.evolve(policy, toolset=args.toolset)
    saved, results = _resume_options(args)
    provider = _provider(args.model, plugins, args, os.environ)
    prompt = _prompt(args, provider, saved)
    system = args.system if args.system is not None else (policy.system_prompt or getattr(provider, "system", ""))
    if saved is not None:
        system = saved.system if args.system is None else args.system
        # The saved run's format, unless asked; resuming it in another is refused.
        args.format = args.format or saved.format
        check_resumable(saved, args.format, waits=results is not None)
    text = args.output_format == "text"
    cache = project_cache_settings()
    approve = defer_approval if args.approve == "defer" else approver(args.approve, stdout)
    interrupts = Interrupts(grace=shutdown_grace(args))
    shown = shown_in_traces(specs.tools)  # remote tools have no ${...} strings

    async def main() -> LoopResult:
        engine: Engine
        try:
            async with (
                open_tools(specs, plugins, no_cache=args.no_cache) as registry,
                open_engine(registry, plugins=plugins, **cache) as engine,
            ):
                agent = Agent(
                    engine,
                    provider,
                    policy=policy,
                    # The provider's own format unless asked: openai where it speaks it (scripted, openai).
                    format=args.format or ("openai" if "openai" in provider.formats else provider.formats[0]),
                    system=system,
                    deliberate=args.deliberate or (saved is not None and saved.deliberate),
                    approve=approve,
                    model=args.model.partition(":")[2],
                    on_turn=(lambda turn: print_turn(turn, stdout, shown)) if text else None,
                    context=args.context,
                )
                if saved is not None and results is not None:  # refused here, not in the signal watch's nursery
                    supplied_results(saved.pending, results, registry)
                grace = interrupts.grace_text()
                stopping = f"stopping after the calls in flight (at most {grace}; a second signal kills them)"
                async with open_signal_watch(
                    interrupts, stop=agent.request_stop, kill=agent.kill, stderr=stderr, stopping=stopping
                ):
                    if saved is None:
                        result = await agent.run(str(prompt))
                    else:
                        result = await agent.resume(saved, results=results, prompt=prompt)
                if args.save is not None:
                    agent.snapshot().save(args.save)
                return result
        finally:
            await provider.aclose()

    result = run_trio(main, stderr)
    if text:
        print_end(result, stdout)
        print_waiting(result, stdout, args.save)
    else:
        stdout.write(json_text(_document(result, shown), indent=2) + "\n")
    if result.reason in {"stopped", "killed"} and interrupts.exit_code is not None:
        return interrupts.exit_code  # 143 after SIGTERM, 130 after Ctrl-C
    return EXIT_CODES.get(result.reason, 1)


def _given_results(args: argparse.Namespace) -> dict[str, object]:
    """The results of ``--result``, ``--result-error``, ``--approve-call`` and ``--refuse-call``, by call id."""
    results: dict[str, object] = {}
    given = [("--result", text) for text in args.result or ()]
    given += [("--result-error", text) for text in args.result_error or ()]
    given += [("--approve-call", f"{text}=true") for text in args.approve_call or ()]
    given += [("--refuse-call", f"{text}=false") for text in args.refuse_call or ()]
    for option, text in given:
        call_id, sign, value = text.partition("=")
        if not sign or not call_id:
            msg = f"{option} {text!r}: expected CALL_ID=VALUE"  # --approve-call and --refuse-call always have one
            raise UsageError(msg)
        if call_id in results:
            msg = f"{option} {call_id}: a second result for the same call"
            raise UsageError(msg)
        if option == "--result-error":
            results[call_id] = ToolResult.failure(value)
            continue
        try:
            results[call_id] = json.loads(value)
        except (ValueError, RecursionError) as exc:
            msg = f"--result {call_id}: the result is not JSON ({decode_problem(exc)}); a string is written '\"text\"'"
            raise UsageError(msg) from None
    return results


def _resume_options(args: argparse.Namespace) -> tuple[SavedRun | None, dict[str, object] | None]:
    """``--resume FILE``'s saved run (or ``None``) and the results given for its waiting calls.

    The results are ``None`` when none were given (a run that waits for none takes a new message instead).
    """
    results = _given_results(args)
    if args.resume is None:
        if results:
            msg = "--result, --result-error, --approve-call and --refuse-call go with a resumed run: add --resume FILE"
            raise UsageError(msg)
        return None, None
    saved = SavedRun.load(args.resume)
    return saved, results or None


def _prompt(args: argparse.Namespace, provider: ModelProvider, saved: SavedRun | None) -> str | None:
    """The user's message: ``--prompt``, or the transcript's; a resumed run takes ``--prompt`` only, if any."""
    if saved is not None:
        if args.prompt is None and not saved.pending:
            msg = f"{args.resume}: the saved run waits for no results; give the next user message with --prompt"
            raise UsageError(msg)
        return args.prompt  # type: ignore[no-any-return]
    prompt = args.prompt if args.prompt is not None else getattr(provider, "prompt", "")
    if not prompt:
        msg = "give the user's message with --prompt (the model provider has no default prompt)"
        raise UsageError(msg)
    return prompt


def print_waiting(result: LoopResult, stdout: TextIO, saved_to: str | None) -> None:
    """After a run that ended ``deferred``: the calls waiting, and how to resume the run with their results."""
    if not result.pending:
        return
    stdout.writelines(f"waiting: {call.id} → {call.tool} {_json(call.arguments)}\n" for call in result.pending)
    where = saved_to or "FILE (run with --save FILE to keep the run)"
    first = result.pending[0]
    give = f"--approve-call {first.id} (or --refuse-call)" if first.approval else f"--result {first.id}=JSON"
    stdout.write(f"resume with: toolflow run --resume {where} {give} ...\n")


def _document(result: LoopResult, shown: Callable[[Any], Any]) -> dict[str, Any]:
    """``--output-format json``: the loop's result, each pipeline call with its step records (``"steps"``)."""
    document = result.to_dict()
    for turn, turn_dict in zip(result.turns, document["turns"], strict=True):
        for entry, call in zip(turn.entries, turn_dict["calls"], strict=True):
            if entry.result.steps:
                call["steps"] = shown([record.to_dict() for record in entry.result.steps])
    return document
