"""Restart: a tool result that asks the agent loop to restart the turn with more context (issue 20, section 3).

Seed 002's third outcome of a call (``handleEnhancedContextRestart``): instead of recording the
call, the loop forgets the turn and asks the model again with the context the tool supplied. A
tool asks for it with a ``restart`` key in its result dictionary, whatever made the result::

    {"success": true, "data": ..., "restart": {"context": "The door is locked; the key is in the desk."}}

(a Python implementation may return it, or ``ToolResult(..., extra={"restart": {...}})``; a
``template`` or ``command`` tool with ``output: json`` writes it as JSON). :meth:`Restarts.take`
decides whether the loop honours it:

- only in a turn that offered tools, after which the loop would go on (a stop, a kill, a
  ``terminal`` call, the token budget's critical level or the iteration limit end the loop as
  usual; ``error_cap`` does not, since a restart resets the count of failed calls);
- at most ``policy.max_restarts`` times per run;
- never from a remote tool (an MCP server's, kind ``mcp``): its results are untrusted data, and a
  restart's context reaches the model as a user-role message, with more authority than a result.

A plugin may ask too, for any call whose result did not: the ``toolflow_restart_turn`` hook is
given the call and its result and returns the context (the first answer wins; a hook that
raises is reported with a :class:`~toolflow.CallHookWarning` and counts as no answer).

When it does, the agent loop removes the model's message of the turn from the history (its
calls' results never enter it, so every call in the history still has exactly one result), adds
the contexts as one user message, resets the count of failed calls, and records the turn with
the decision ``restart``. Otherwise the result is recorded as it is, ``restart`` key and all.
Only the agent loop restarts: ``toolflow call``, ``toolflow serve`` and pipelines return the
result as it is.

This module is part of the loop layer: pure decisions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from toolflow._attempts import first_answer
from toolflow._batch import HistoryEntry
from toolflow._calls import ToolCall
from toolflow._loop_records import RunState
from toolflow._loop_texts import RESTART_CONTEXT, RESTART_NOTE
from toolflow._mcp_specs import MCP_KIND
from toolflow._plugins import Plugins
from toolflow._policy import LoopDecision
from toolflow._registry import Registry
from toolflow._results import ToolResult, truncate_text

__all__ = ["Restart", "Restarts", "restart_context"]


def _is_context(answer: object) -> bool:
    return isinstance(answer, str) and bool(answer.strip())


def restart_context(result: ToolResult) -> str | None:
    """The context *result* asks to restart the turn with (``extra["restart"]["context"]``), else ``None``."""
    request = result.extra.get("restart")
    if not isinstance(request, Mapping):
        return None
    context = request.get("context")
    return context if isinstance(context, str) and context.strip() else None


@attrs.frozen(kw_only=True)
class Restart:
    """A restart the loop takes.

    Attributes:
        note: The user message that replaces the turn: each context, capped.
        call_ids: The calls whose results asked for it, in call order.
        decision: The turn's decision (``restart``).
    """

    note: str
    call_ids: tuple[str, ...]
    decision: LoopDecision


def _next_turn(decision: LoopDecision) -> bool:
    """Whether the loop, which *decision* ends, would go on were the failed calls not counted."""
    critical = decision.advisory is not None and decision.advisory.get("level") == "critical"
    return decision.reason == "error_cap" and decision.iterations_remaining > 0 and not critical


@attrs.frozen
class Restarts:
    """Which tools may restart a turn, and the policy's bound; see the module's docstring."""

    trusted: frozenset[str]
    """The tools whose results may ask for a restart (every tool but the remote ones)."""
    limit: int
    plugins: Plugins | None = None
    """Whose ``toolflow_restart_turn`` is asked, when any plugin implements it."""

    @classmethod
    def of(cls, registry: Registry, limit: int, plugins: Plugins | None = None) -> Restarts:
        hooked = plugins is not None and bool(plugins.manager.hook.toolflow_restart_turn.get_hookimpls())
        return cls(
            frozenset(tool.name for tool in registry if tool.kind != MCP_KIND), limit, plugins if hooked else None
        )

    def _context(self, entry: HistoryEntry) -> str | None:
        """The context *entry*'s result asks for (a trusted tool's), else the first plugin's answer."""
        if entry.tool_name in self.trusted:
            context = restart_context(entry.result)
            if context is not None:
                return context
        if self.plugins is None or not isinstance(entry.call, ToolCall):
            return None
        answer: str | None = first_answer(
            self.plugins, "toolflow_restart_turn", _is_context, call=entry.call, result=entry.result
        )
        return answer

    def take(
        self, entries: Sequence[HistoryEntry], decision: LoopDecision, state: RunState, max_chars: int
    ) -> Restart | None:
        """The restart *entries* ask for, when the loop honours it (counted in *state*, whose error count resets)."""
        if not state.tools_offered or state.restarts >= self.limit:
            return None
        if not decision.should_continue and not _next_turn(decision):
            return None
        asked: list[tuple[HistoryEntry, str]] = []
        for entry in entries:
            # Without a plugin to ask, only a result with a "restart" key can: most have none.
            if self.plugins is not None or "restart" in entry.result.extra:
                context = self._context(entry)
                if context is not None:
                    asked.append((entry, context))
        if not asked:
            return None
        state.restarts += 1
        state.errors = 0
        contexts = "\n\n".join(
            RESTART_CONTEXT.format(tool=entry.tool_name, context=truncate_text(context, max_chars))
            for entry, context in asked
        )
        tools = ", ".join(dict.fromkeys(repr(entry.tool_name) for entry, _ in asked))
        message = f"{tools} restarted the turn with more context (restart {state.restarts} of {self.limit})"
        return Restart(
            note=RESTART_NOTE.format(tools=tools, contexts=contexts),
            call_ids=tuple(entry.call_id for entry, _ in asked),
            decision=LoopDecision(
                should_continue=True,
                reason="restart",
                message=message,
                advisory=decision.advisory,
                iterations_remaining=decision.iterations_remaining,
            ),
        )
