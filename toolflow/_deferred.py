"""Deferred calls (issue 21, section 3): calls the agent loop leaves to the application.

A tool with ``deferred: true``, or of a category with ``deferred: true``, is not run by the agent
loop. A call of it passes the gates a call of the model passes before it would run (the
allowlist and deliberate mode, its category's ``per_turn``, the policy's rules, ``depends_on``,
then argument validation, with the parameters bound to the caller's context filled); a call that
fails one is answered as it would be, and counts as it would. A call that passes waits: the
turn's other calls run, the run ends with the reason ``deferred``, and the turn's results wait
with it (:class:`PendingCall`, the saved run of :mod:`toolflow._run_state`) until the
application supplies one result per waiting call (:func:`supplied_results`); then the turn's
results enter the history together, in call order, and the loop goes on as if the calls had
run then. ``toolflow call``, :func:`toolflow.invoke`, ``toolflow serve`` and pipeline steps run
such tools as any other: deferring is the agent loop's.

This module is part of the loop layer: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from toolflow._approval import denied
from toolflow._attempts import STOPPED
from toolflow._batch import HistoryEntry, entry
from toolflow._calls import MalformedCall, ParsedCall, ToolCall
from toolflow._context import providing_context
from toolflow._errors import UsageError
from toolflow._executor import Engine
from toolflow._gates import Gates
from toolflow._loop_texts import STOPPED_BEFORE
from toolflow._policy import LoopDecision, Policy
from toolflow._registry import Registry
from toolflow._results import ToolResult
from toolflow._validation import ResultValidator

__all__ = [
    "DEFERRED",
    "HeldTurn",
    "PendingCall",
    "admit_deferred",
    "awaiting",
    "defer_calls",
    "deferred_tools",
    "run_approved",
    "supplied_results",
    "waiting_decision",
]

DEFERRED = ToolResult.failure(
    "Error: this call waits for its result, which the application gives later (deferred)",
    extra={"status": "deferred"},
)
"""What a waiting call's entry holds in the turn's record until its result comes (never in the history)."""


@attrs.frozen(kw_only=True)
class PendingCall:
    """A call of a deferred tool that waits for its result.

    Attributes:
        id: The call's id (the key of its result, ``--result ID=JSON``).
        tool: The tool.
        arguments: The validated arguments, with the parameters bound to the caller's context;
            for a call awaiting approval, the arguments as the model sent them.
        approval: The call awaits an approval (``toolflow run --approve defer``), not a result:
            approved on resume, it runs through the engine.
    """

    id: str
    tool: str
    arguments: Mapping[str, Any]
    approval: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "tool", "arguments", "approval"}``."""
        return {"id": self.id, "tool": self.tool, "arguments": dict(self.arguments), "approval": self.approval}


def deferred_tools(registry: Registry, policy: Policy) -> frozenset[str]:
    """The tools of *registry* whose calls the agent loop defers: their own ``deferred``, or their category's."""
    return frozenset(tool.name for tool in registry if tool.spec.deferred or policy.category(tool.category).deferred)


def admit_deferred(engine: Engine, call: ToolCall) -> ToolResult | PendingCall:
    """The waiting call, or the result that refuses *call* of a deferred tool: the rules, ``depends_on``, validation.

    The rules count the call as they count a call that runs (the loop asks about a turn's
    deferred calls before its batch runs). Call it with the caller's context provided
    (:func:`toolflow.providing_context`): bound parameters are filled from it.
    """
    refusal = engine.rule_refusal(call.name)
    if refusal is not None:
        return refusal
    checked = engine.admit_waiting(call)
    if isinstance(checked, ToolResult):
        return checked
    return PendingCall(id=call.id, tool=call.name, arguments=checked[0])


def defer_calls(
    engine: Engine,
    calls: Sequence[ToolCall],
    decided: dict[str, HistoryEntry],
    uncounted: set[str],
    stopped: ToolResult | None,
) -> tuple[PendingCall, ...]:
    """Defer *calls* (the turn's calls of deferred tools, in call order): the calls that wait.

    Each refused call's entry goes into *decided*. With *stopped* (a stop or a kill came), none
    waits: each is answered with *stopped*, as a call a stop kept from running, and no error of
    the model's. A waiting call counts for no error either until its result comes (*uncounted*).
    """
    waiting: list[PendingCall] = []
    for call in calls:
        admitted = stopped if stopped is not None else admit_deferred(engine, call)
        if isinstance(admitted, ToolResult):
            decided[call.id] = entry(call, admitted)
            if stopped is not None:
                uncounted.add(call.id)
        else:
            waiting.append(admitted)
            uncounted.add(call.id)
    return tuple(waiting)


def awaiting(
    entries: Sequence[HistoryEntry], uncounted: frozenset[str], deferred: tuple[PendingCall, ...]
) -> tuple[tuple[PendingCall, ...], frozenset[str]]:
    """*deferred* and the calls of *entries* that await an approval (``--approve defer``); *uncounted* with them."""
    waiting = tuple(
        PendingCall(id=item.call_id, tool=item.tool_name, arguments=item.call.arguments, approval=True)
        for item in entries
        if item.result.extra.get("status") == "awaiting_approval" and isinstance(item.call, ToolCall)
    )
    return (deferred + waiting, uncounted | {call.id for call in waiting}) if waiting else (deferred, uncounted)


_READER = ResultValidator(name="", compiled=None)


def saved_result(data: Mapping[str, Any]) -> ToolResult:
    """A result a saved run holds (``ToolResult.to_dict()``'s shape), read back."""
    return _READER.normalize(data)


@attrs.frozen(kw_only=True)
class HeldTurn:
    """A turn whose results wait for those of its deferred calls (see the module's docstring).

    Attributes:
        turn: The iteration.
        text: What the model wrote beside its calls.
        tokens: The tokens its response reported (the token advisory's measure), if any.
        tools_offered: Whether the turn offered tools (the turn without tools has none).
        entries: One entry per call, in call order; a waiting call's holds :data:`DEFERRED`.
        uncounted: The ids of the calls that count for no error (the waiting ones among them).
        pending: The waiting calls.
    """

    turn: int
    text: str
    tokens: int | None
    tools_offered: bool
    entries: tuple[HistoryEntry, ...]
    uncounted: frozenset[str]
    pending: tuple[PendingCall, ...]

    def completed(self, results: Mapping[str, ToolResult], gates: Gates) -> tuple[HistoryEntry, ...]:
        """The turn's entries with the waiting calls answered by *results* (one per waiting call).

        The engine's *gates* note each result as a call's that ran: the rules' ``before_exit``
        and ``depends_on`` see a deferred call that succeeded.
        """
        for call in self.pending:
            result = results[call.id]
            gates.answered(call.tool, result)
            if result.success:
                gates.succeeded(call.tool)
        return tuple(
            entry(item.call, results[item.call_id]) if item.call_id in results else item for item in self.entries
        )

    def to_dict(self) -> dict[str, Any]:
        """The turn as plain JSON data (a saved run's ``held``)."""
        waiting = {call.id for call in self.pending}
        return {
            "turn": self.turn,
            "text": self.text,
            "tokens": self.tokens,
            "tools_offered": self.tools_offered,
            "uncounted": sorted(self.uncounted),
            "entries": [
                {
                    "id": item.call_id,
                    "tool": item.tool_name,
                    "arguments": dict(item.call.arguments) if isinstance(item.call, ToolCall) else None,
                    "result": None if item.call_id in waiting else item.result.to_dict(),
                }
                for item in self.entries
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], pending: Sequence[PendingCall]) -> HeldTurn:
        """The turn :meth:`to_dict` wrote (of the shape ``toolflow._run_state`` checked), waiting for *pending*."""
        entries = []
        for item in data["entries"]:
            result = DEFERRED if item["result"] is None else saved_result(item["result"])
            call: ParsedCall
            if item["arguments"] is None:  # a malformed call, answered by its error
                call = MalformedCall(
                    id=item["id"], name=item["tool"] or None, error=result.error or "", format="unknown"
                )
            else:
                call = ToolCall(id=item["id"], name=item["tool"], arguments=item["arguments"], format="direct")
            entries.append(entry(call, result))
        return cls(
            turn=data["turn"],
            text=data["text"],
            tokens=data["tokens"],
            tools_offered=data["tools_offered"],
            entries=tuple(entries),
            uncounted=frozenset(data["uncounted"]),
            pending=tuple(pending),
        )


def waiting_decision(pending: Sequence[PendingCall], remaining: int) -> LoopDecision:
    """The decision of a run that ends with *pending* calls waiting (*remaining* iterations left)."""
    waits = ", ".join(f"{call.tool} ({call.id})" for call in pending)
    message = f"{len(pending)} deferred call(s) wait for their results: {waits}"
    return LoopDecision(should_continue=False, reason="deferred", message=message, iterations_remaining=remaining)


_APPROVED = ToolResult(success=True, data="approved; runs on resume", extra={"status": "approved"})
"""What :func:`supplied_results` answers an approved call with, until :func:`run_approved` runs it."""


def _approval_answer(call: PendingCall, value: object) -> ToolResult:
    if value is True:
        return _APPROVED
    if value is False:
        return denied(call.tool)
    msg = f"{call.id!r} ({call.tool}) waits for an approval: approve it (True) or refuse it (False), got {value!r}"
    raise UsageError(msg)


async def run_approved(
    engine: Engine, pending: Sequence[PendingCall], answered: dict[str, ToolResult], context: Mapping[str, Any] | None
) -> None:
    """Run each approved call of *pending* through *engine*, with the approval given; its result goes into *answered*.

    The call runs as a pipeline's approved step does (validation, ``depends_on``, the cache,
    timeouts, retries and hooks; nobody is asked again); the rules counted it when the model
    made it. A stop or a kill meanwhile answers it ``stopped``.
    """
    for call in pending:
        if answered.get(call.id) is _APPROVED:
            with providing_context(context):
                result = await engine.call_step(call.tool, call.arguments, call.id, approved=True)
            answered[call.id] = STOPPED_BEFORE if result is STOPPED else result


def _meant_to_fail(value: object) -> bool:
    if isinstance(value, ToolResult):
        return not value.success
    return isinstance(value, Mapping) and value.get("success") is False


def _check_ids(pending: Sequence[PendingCall], results: object) -> None:
    """Refuse *results* that are no mapping, or whose ids are not exactly those of *pending*."""
    if not isinstance(results, Mapping):
        msg = f"the results must be a mapping of call ids to values, got {type(results).__name__}"
        raise UsageError(msg)
    waiting = {call.id: call for call in pending}
    unknown = [str(call_id) for call_id in results if call_id not in waiting]
    missing = [call_id for call_id in waiting if call_id not in results]
    problems = []
    if unknown:
        problems.append(f"no call waits for a result under {', '.join(map(repr, unknown))}")
    if missing:
        problems.append(f"no result for {', '.join(f'{i!r} ({waiting[i].tool})' for i in missing)}")
    if not waiting:
        problems.append("the run has no deferred calls waiting for results")
    if problems:
        waits = ", ".join(f"{call.id!r} ({call.tool})" for call in pending) or "none"
        msg = f"{'; '.join(problems)}; the calls waiting: {waits}"
        raise UsageError(msg)


def supplied_results(
    pending: Sequence[PendingCall], results: Mapping[str, object], registry: Registry
) -> dict[str, ToolResult]:
    """The result of each of *pending*, read from *results* (``{call_id: value}``) as a tool's return value is read.

    A value is the data of a success, or a result dictionary (``{"success": false, "error":
    "..."}``), or a :class:`toolflow.ToolResult` (``ToolResult.failure("...")`` for an error).
    The data of a success must match the tool's ``output_schema``, where it has one.

    Raises:
        UsageError: An id that waits for no result, a waiting call without one, or a value that
            is no result of its tool (the message names them).
    """
    _check_ids(pending, results)
    answered: dict[str, ToolResult] = {}
    for call in pending:
        value = results[call.id]
        if call.approval:
            answered[call.id] = _approval_answer(call, value)
            continue
        try:
            normalize = registry.get(call.tool).result_validator.normalize
        except LookupError:
            msg = f"the result of {call.id!r}: the tool {call.tool!r} is not among the tools"
            raise UsageError(msg) from None
        result = normalize(value)
        if not result.success and not _meant_to_fail(value):
            msg = f"the result of {call.id!r} ({call.tool}) is not a result of the tool: {result.error}"
            raise UsageError(msg)
        answered[call.id] = result
    return answered
