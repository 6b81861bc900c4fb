r"""Deliberate mode's trigger phrases and retention window (issue 20, section 2; seed 002).

In deliberate mode (``toolflow run --deliberate``, ``Agent(deliberate=True)``) the model is
offered only the policy's ``deliberate`` list. A tool of that list with ``triggers`` is hidden
until a user message (the prompt of :meth:`toolflow.Agent.run`) contains one of its phrases;
then it is offered for that message's turns. A successful call keeps it offered for
``retain_turns`` further user messages (seed 002's ``retainSuccessfulToolAffordance``: "do it
again" needs no phrase), counted across the runs of one agent. A call of a hidden tool is not
run: it gets seed 002's model-visible ``blocked`` result naming the tools offered now.

A phrase matches case-insensitively, as whole words: ``(?<!\w)`` before it, ``(?!\w)`` after
it, and any run of blanks in the message where the phrase has one. A trigger exposes a tool that
the policy's author chose to keep from the model, so a false match costs more than a missed one:
``"ls"`` must not expose a shell tool because the user wrote "tools", nor ``"run"`` because they
wrote "rerun" or "brunch".

Which phrase exposed which tool is recorded (:class:`Trigger`, on the run's first
:class:`toolflow.TurnRecord`; seed 002's hidden trigger notice), never shown to the model.

This module is part of the loop layer: bookkeeping for one agent, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolflow._batch import HistoryEntry
from toolflow._policy import Policy
from toolflow._results import ToolResult

__all__ = ["DeliberateTools", "Trigger", "phrase_pattern"]


@attrs.frozen(kw_only=True)
class Trigger:
    """Why deliberate mode offers a tool that has triggers, for the current user message.

    Attributes:
        tool: The tool.
        phrase: The trigger phrase the user's message contained; ``None`` when no phrase
            matched and the tool is still offered because a call of it succeeded within the
            last ``retain_turns`` user messages.
    """

    tool: str
    phrase: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"tool", "phrase", "retained"}`` (``toolflow run --output-format json``)."""
        return {"tool": self.tool, "phrase": self.phrase, "retained": self.phrase is None}

    def describe(self) -> str:
        """The trace's words for it: ``'run' exposed by "run the command"``."""
        if self.phrase is None:
            return f"{self.tool!r} still exposed (a successful call in a recent message)"
        return f"{self.tool!r} exposed by {self.phrase!r}"


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """The pattern of a trigger *phrase*: case-insensitive, whole words, any blanks between them.

    A phrase of blanks alone matches nothing (it would otherwise match every message).
    """
    words = phrase.split()
    if not words:
        return re.compile(r"(?!)")
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(word) for word in words) + r"(?!\w)", re.IGNORECASE)


@attrs.define
class DeliberateTools:
    """Which tools of deliberate mode's list one agent offers now (see the module's docstring).

    Made by :meth:`of`; without deliberate mode or triggers it hides nothing and costs nothing.
    """

    _exposed: tuple[str, ...]
    _patterns: dict[str, tuple[tuple[str, re.Pattern[str]], ...]]
    _retain: int
    _message: int = 0
    """User messages heard so far."""
    _until: dict[str, int] = attrs.Factory(dict)
    """Per tool with triggers, the last user message it is offered in."""

    @classmethod
    def of(cls, policy: Policy, exposed: Iterable[str], *, deliberate: bool) -> DeliberateTools:
        """The state for an agent offering *exposed*; triggers count only in *deliberate* mode.

        A trigger of a tool that is not exposed (not in the list, or denied) is ignored.
        """
        names = tuple(exposed)
        triggers = policy.triggers if deliberate else {}
        patterns = {
            name: tuple((phrase, phrase_pattern(phrase)) for phrase in triggers[name])
            for name in names
            if triggers.get(name)
        }
        return cls(names, patterns, policy.retain_turns)

    def hear(self, message: str) -> tuple[Trigger, ...]:
        """Take the next user *message*: which tools with triggers it (or a recent success) exposes, and why."""
        self._message += 1
        heard: list[Trigger] = []
        for tool, patterns in self._patterns.items():
            phrase = next((phrase for phrase, pattern in patterns if pattern.search(message)), None)
            if phrase is not None:
                self._until[tool] = max(self._until.get(tool, 0), self._message)
                heard.append(Trigger(tool=tool, phrase=phrase))
            elif self._until.get(tool, 0) >= self._message:
                heard.append(Trigger(tool=tool, phrase=None))
        return tuple(heard)

    def hidden(self) -> frozenset[str]:
        """The tools with triggers that are not offered now."""
        return frozenset(tool for tool in self._patterns if self._until.get(tool, 0) < self._message)

    def has_triggers(self) -> bool:
        """Whether any tool has triggers: without, nothing is ever hidden or retained."""
        return bool(self._patterns)

    def retain(self, entries: Sequence[HistoryEntry]) -> None:
        """Keep the tools with triggers that *entries* called successfully for ``retain_turns`` more messages."""
        for entry in entries:
            if entry.success and entry.tool_name in self._patterns:
                self._until[entry.tool_name] = max(self._until.get(entry.tool_name, 0), self._message + self._retain)

    def dump(self) -> dict[str, Any]:
        """The retention window as plain JSON data (a saved run, ``toolflow._run_state``)."""
        return {"message": self._message, "until": dict(self._until)}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Take up the retention :meth:`dump` wrote (tools this agent has no triggers for are dropped)."""
        self._message = int(data["message"])
        self._until = {str(tool): int(until) for tool, until in data["until"].items() if tool in self._patterns}

    def refusal(self, name: str) -> ToolResult:
        """Seed 002's model-visible ``blocked`` result for a call of *name*, one of the tools :meth:`hidden` now."""
        hidden = self.hidden()
        allowed = sorted(tool for tool in self._exposed if tool not in hidden)
        listed = ", ".join(repr(tool) for tool in allowed) or "none"
        message = (
            f"Error: tool {name!r} is not available now - deliberate mode offers it only when the user asks "
            f"for it; allowed tools: {listed}"
        )
        return ToolResult.failure(
            message, extra={"status": "blocked", "reason": "deliberate_tool_mode", "allowed": allowed}
        )
