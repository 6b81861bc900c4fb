"""Parts of the agent loop that need none of its state.

The checks of :class:`toolflow.Agent`'s arguments, the model's message with its call ids, the
answers of a batch that ended early, the advisories on a turn's last result.

Moved out of :mod:`toolflow._loop` (issue 21) to make room there; loop layer, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import attrs

from toolflow._batch import Abort, HistoryEntry, entry
from toolflow._calls import ParsedCall
from toolflow._calls import with_call_id as _with_id
from toolflow._errors import UsageError, expect
from toolflow._executor import Engine
from toolflow._loop_texts import KILLED_BEFORE, KILLED_WHILE_RUNNING, LAST_TURN, STOPPED_BEFORE
from toolflow._model import RetryPolicy
from toolflow._policy import LoopDecision, LoopReason, Policy
from toolflow._providers import HISTORY_FORMATS, ModelProvider
from toolflow._results import ToolResult

__all__ = [
    "Offer",
    "advise",
    "answer_aborted",
    "check_arguments",
    "check_format",
    "stopped_decision",
    "with_call_ids",
]

Offer: TypeAlias = tuple[str, tuple[Mapping[str, Any], ...]]
"""What a turn offers the model: the system prompt and the tool definitions."""

_ARGUMENT_TYPES: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("engine", Engine, "a toolflow.Engine (from toolflow.open_engine())"),
    ("provider", ModelProvider, "a toolflow.ModelProvider (from toolflow.load_provider())"),
    ("policy", (Policy, type(None)), "a toolflow.Policy or None"),
    ("system", (str, type(None)), "a string or None"),
    ("deliberate", bool, "True or False"),
    ("model", str, "a string"),
    ("provider_retry", RetryPolicy, "a toolflow.RetryPolicy"),
    ("context", (Mapping, type(None)), "a mapping (a JSON object) or None"),
)


def check_arguments(arguments: Mapping[str, object]) -> None:
    """The type checks of :class:`Agent`'s *arguments* (a wrong one would fail later, deep in a turn)."""
    for name, types, what in _ARGUMENT_TYPES:
        expect(arguments[name], types, f"Agent: {name}", what)
    for name in ("approve", "on_turn"):
        if arguments[name] is not None and not callable(arguments[name]):
            msg = f"Agent: {name} must be a function or None, got {type(arguments[name]).__name__!r}"
            raise TypeError(msg)


def check_format(name: str, provider: ModelProvider) -> None:
    """Refuse a history format that does not exist or that *provider* cannot speak."""
    if name not in HISTORY_FORMATS:
        msg = f"unknown history format {name!r}; expected one of {', '.join(HISTORY_FORMATS)}"
        raise UsageError(msg)
    if name not in provider.formats:
        msg = (
            f"the {provider.name!r} provider cannot speak the {name!r} format; it speaks {', '.join(provider.formats)}"
        )
        raise UsageError(msg)


def advise(
    entries: tuple[HistoryEntry, ...], decision: LoopDecision, max_iterations: int, soft_warn_at: int
) -> tuple[HistoryEntry, ...]:
    """Put the token advisory, and from the soft-warn turn on the loop advisory, on the turn's last result."""
    if not entries:
        return entries
    extra: dict[str, Any] = {}
    if decision.advisory is not None:
        extra["_token_advisory"] = dict(decision.advisory)
        if decision.reason == "token_critical":
            extra["_token_advisory"]["message"] = LAST_TURN["token_critical"]
    turn = max_iterations - decision.iterations_remaining
    if decision.should_continue and turn >= soft_warn_at:
        left = decision.iterations_remaining
        extra["_loop_advisory"] = {
            "iterations_remaining": left,
            "message": f"{left} turn(s) left before the iteration limit; wrap up and answer",
        }
    if not extra:
        return entries
    last = entries[-1]
    result = attrs.evolve(last.result, extra={**last.result.extra, **extra})
    return (*entries[:-1], attrs.evolve(last, result=result))


def with_call_ids(
    message: Mapping[str, Any], raw_calls: Sequence[object], calls: Sequence[ParsedCall]
) -> dict[str, Any]:
    """*message* as the history keeps it: each tool call with the id its result answers.

    :func:`toolflow.parse_tool_calls` renames a call that repeats an earlier call's id and
    invents the id a call lacks; a provider refuses a history whose results answer ids its
    assistant message does not have. ``read_response`` hands back the message's own call
    objects, so each is found by identity. For the formats that write ids (``openai``,
    ``anthropic``, ``gemini``; ``fallback`` and ``text`` write none).
    """
    stored = dict(message)
    ids: dict[int, str] = {}  # the calls whose id is not (or not yet) the one their result answers
    for raw, call in zip(raw_calls, calls, strict=True):
        if not isinstance(raw, dict) or raw.get("id") != call.id:
            ids[id(raw)] = call.id
    if not ids:
        return stored
    for key in ("tool_calls", "content", "parts"):  # openai's calls, anthropic's and gemini's parts
        value = stored.get(key)
        if isinstance(value, Mapping) and id(value) in ids:  # one openai call, not in a list
            stored[key] = [_with_id(value, ids[id(value)])]
        elif isinstance(value, list | tuple):
            stored[key] = [_with_id(item, ids[id(item)]) if id(item) in ids else item for item in value]
    legacy = stored.get("function_call")
    if legacy is not None and id(legacy) in ids:
        # A legacy function call has no id: write it as the tool call its tool message answers.
        del stored["function_call"]
        stored["tool_calls"] = [{"id": ids[id(legacy)], "type": "function", "function": legacy}]
    return stored


def answer_aborted(
    outcome: Abort, to_run: Sequence[ParsedCall], decided: dict[str, HistoryEntry], uncounted: set[str], *, killed: bool
) -> None:
    """Answer each call of *to_run* in *decided* after the batch ended early (*killed*: the loop was killed).

    The calls a kill or a stop kept from running go into *uncounted*.
    """
    if outcome.reason == "killed":
        result = KILLED_WHILE_RUNNING
    elif outcome.reason == "stopped":
        result = KILLED_BEFORE if killed else STOPPED_BEFORE  # kept from running
    else:
        result = ToolResult.failure(outcome.message, extra={"status": "aborted"})
    ran = {item.call_id: item for item in outcome.finished}
    for call in to_run:
        answer = ran.get(call.id)
        if answer is None:
            answer = entry(call, result)
            if outcome.reason != "malformed_calls":
                uncounted.add(call.id)
        decided[call.id] = answer


def stopped_decision(*, killed: bool, remaining: int) -> LoopDecision:
    """The decision of a loop that a stop (or with *killed*, a kill) ended, *remaining* turns before its limit."""
    reason: LoopReason = "killed" if killed else "stopped"
    return LoopDecision(
        should_continue=False, reason=reason, message=f"{reason} by the user", iterations_remaining=remaining
    )
