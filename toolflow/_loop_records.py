"""The records of an agent loop: each turn (:class:`TurnRecord`), the whole run (:class:`LoopResult`).

Model-layer data, what :class:`toolflow.Agent` hands back and ``toolflow run --output json`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolflow._batch import HistoryEntry
from toolflow._calls import ToolCall
from toolflow._deferred import HeldTurn, PendingCall
from toolflow._deliberate import Trigger
from toolflow._policy import LoopDecision, LoopReason
from toolflow._providers import Usage
from toolflow._results import ToolResult

__all__ = ["LoopResult", "RunState", "TaskOutcome", "TurnRecord", "add_usage"]


@attrs.frozen(kw_only=True)
class TaskOutcome:
    """How a background call ended: its task and the entry it would have had in a batch.

    Attributes:
        task_id: ``task-1``, ``task-2``, ... (numbered across the runs of one agent).
        entry: The call and its result (``duration``: from the task's start to its end).
    """

    task_id: str
    entry: HistoryEntry

    @property
    def call_id(self) -> str:
        """The id of the call (its ``started`` result answers it)."""
        return self.entry.call_id

    @property
    def tool_name(self) -> str:
        """The tool called."""
        return self.entry.tool_name

    @property
    def result(self) -> ToolResult:
        """The call's result, as the note shows it."""
        return self.entry.result

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (``toolflow run --output-format json``)."""
        duration = self.entry.duration
        call = self.entry.call
        return {
            "task_id": self.task_id,
            "id": self.call_id,
            "tool": self.tool_name,
            "arguments": dict(call.arguments) if isinstance(call, ToolCall) else None,
            "result": self.result.to_dict(),
            "duration_ms": None if duration is None else round(duration * 1000, 3),
        }


@attrs.frozen(kw_only=True)
class TurnRecord:
    """What happened in one model turn.

    Attributes:
        turn: The iteration, from 1.
        text: The text the model wrote (beside its calls, or its final answer).
        entries: One entry per tool call of the turn, in call order, each with its result.
        usage: The response's token usage, when the provider reported it.
        decision: Whether the loop went on after the turn, and why.
        duration: Seconds the turn took (model and tools).
        reflection: Whether the turn ran in reflection mode (outside the history).
        tools_offered: Whether the model was offered tools this turn.
        ended_by: The ids of the calls whose category ended the loop (``decision.reason`` is
            ``terminal``), or whose results restarted the turn (``restart``: the turn's model
            message and results left the history), in call order; empty otherwise.
        triggers: On a run's first turn in deliberate mode, the tools with triggers that the
            user's message exposed, each with the phrase that did (or ``None``: kept by a recent
            successful call). Recorded for the trace, never shown to the model.
        outcomes: The outcomes of background calls that entered the history before this turn's
            model request, as one note (``toolflow._background``), in task order.
    """

    turn: int
    text: str
    entries: tuple[HistoryEntry, ...]
    usage: Usage | None
    decision: LoopDecision
    duration: float
    reflection: bool = False
    tools_offered: bool = True
    ended_by: tuple[str, ...] = ()
    triggers: tuple[Trigger, ...] = ()
    outcomes: tuple[TaskOutcome, ...] = ()

    @classmethod
    def resumed(
        cls, held: HeldTurn, entries: tuple[HistoryEntry, ...], decision: LoopDecision, ended_by: tuple[str, ...]
    ) -> TurnRecord:
        """The record of a turn kept back for its deferred calls and ended on resume (no usage, no duration)."""
        return cls(
            turn=held.turn,
            text=held.text,
            entries=entries,
            usage=None,
            decision=decision,
            duration=0.0,
            tools_offered=held.tools_offered,
            ended_by=ended_by,
        )


@attrs.frozen(kw_only=True)
class LoopResult:
    """How a loop ended, with everything it did.

    Attributes:
        final_answer: The model's last text (its answer, or what it said with the last calls).
        reason: Why the loop ended (``decision.reason``).
        decision: The decision that ended the loop.
        turns: Every turn, in order.
        messages: The whole history in the format's shape, without the system prompt.
        system: The system prompt that was sent.
        format: The history format.
        usage: Tokens summed over all responses.
        outcomes: The outcomes of background calls noted in the history after the last turn:
            those the run ended with (``policy.on_exit``), in task order.
        pending: The calls of deferred tools that wait for their results (``reason`` is
            ``deferred``), in call order; :meth:`toolflow.Agent.resume` takes them.
    """

    final_answer: str
    reason: LoopReason
    decision: LoopDecision
    turns: tuple[TurnRecord, ...]
    messages: tuple[Mapping[str, Any], ...]
    system: str
    format: str
    usage: Usage
    outcomes: tuple[TaskOutcome, ...] = ()
    pending: tuple[PendingCall, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The result as one JSON-ready document (``toolflow run --output json``)."""
        return {
            "final_answer": self.final_answer,
            "reason": self.reason,
            "decision": self.decision.to_dict(),
            "format": self.format,
            "usage": _usage_dict(self.usage),
            "pending": [call.to_dict() for call in self.pending],
            "turns": [_turn_dict(turn) for turn in self.turns],
            "outcomes": [outcome.to_dict() for outcome in self.outcomes],
            "system": self.system,
            "history": [dict(message) for message in self.messages],
        }


@attrs.define
class RunState:
    """What one :meth:`Agent.run` carries from turn to turn."""

    iteration: int = 0
    tools_offered: bool = True
    last_turn: LoopReason = "token_critical"
    """Why the model gets the turn without tools, once ``tools_offered`` is false."""
    required: frozenset[str] = frozenset()
    """The tools the turn without tools still offers: those a ``before_exit`` rule waits for."""
    errors: int = 0
    """Failed calls in a row (see ``max_consecutive_errors``)."""
    final_answer: str = ""
    restarts: int = 0
    """Turns restarted so far (see ``max_restarts``)."""
    triggers: tuple[Trigger, ...] = ()
    """What deliberate mode's triggers made of the run's user message (its first turn's record)."""
    usage: Usage = attrs.Factory(Usage)
    turns: list[TurnRecord] = attrs.Factory(list)


def _usage_dict(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {**attrs.asdict(usage), "total_tokens": usage.total_tokens}


def _turn_dict(turn: TurnRecord) -> dict[str, Any]:
    return {
        "turn": turn.turn,
        "text": turn.text,
        "reflection": turn.reflection,
        "tools_offered": turn.tools_offered,
        "ended_by": list(turn.ended_by),
        "triggers": [trigger.to_dict() for trigger in turn.triggers],
        "outcomes": [outcome.to_dict() for outcome in turn.outcomes],
        "duration_ms": round(turn.duration * 1000, 3),
        "usage": _usage_dict(turn.usage),
        "decision": turn.decision.to_dict(),
        "calls": [
            {
                "id": entry.call_id,
                "tool": entry.tool_name,
                "arguments": dict(entry.call.arguments) if isinstance(entry.call, ToolCall) else None,
                "result": entry.result.to_dict(),
                "duration_ms": None if entry.duration is None else round(entry.duration * 1000, 3),
            }
            for entry in turn.entries
        ],
    }


def add_usage(total: Usage, usage: Usage | None) -> Usage:
    if usage is None:
        return total
    return Usage(
        prompt_tokens=total.prompt_tokens + usage.prompt_tokens,
        completion_tokens=total.completion_tokens + usage.completion_tokens,
    )
