"""What the agent loop tells the model when it does not run a call, and in its turn without tools.

These are history, so they are written for the model: each result says what happened to the
call and what to do now. (The engine's own results for a killed or stopped call,
``toolflow._attempts.KILLED`` and ``STOPPED``, are for callers, not history.)
"""

from __future__ import annotations

from collections.abc import Mapping

from toolflow._results import ToolResult

__all__ = [
    "ENDED",
    "KILLED_BEFORE",
    "KILLED_WHILE_RUNNING",
    "LAST_TURN",
    "NO_TOOLS_NOW",
    "RESTART_CONTEXT",
    "RESTART_NOTE",
    "STOPPED_BEFORE",
    "exit_refused",
    "must_call_last",
    "over_per_turn",
]

LAST_TURN: Mapping[str, str] = {
    "token_critical": (
        "The context window is nearly full. Answer the user now, in plain text, without calling tools: "
        "no more tool calls will be run."
    ),
    "max_iterations": (
        "This task has used all its turns. Answer the user now, in plain text, with what you have found: "
        "no more tool calls will be run."
    ),
}
"""The user message of the turn without tools, by the reason the model gets it."""


def must_call_last(reason: str, tools: list[str]) -> str:
    """The user message of the turn without tools when a ``before_exit`` rule still waits for one of *tools*."""
    listed = ", ".join(repr(name) for name in tools)
    situation = _SITUATION[reason]
    return (
        f"{situation} The tool rules still require a call of {listed}: make it now, with your answer; "
        "no other tool calls will be run."
    )


_SITUATION = {
    "token_critical": "The context window is nearly full.",
    "max_iterations": "This task has used all its turns.",
}


def exit_refused(unmet: str) -> str:
    """The user message after a final answer that a ``before_exit`` rule refused (*unmet*: the rules, described)."""
    return f"Error: you cannot give your final answer yet. The tool rules say: {unmet}. Do that now, then answer."


NO_TOOLS_NOW: Mapping[str, ToolResult] = {
    "token_critical": ToolResult.failure(
        "Error: no tools may be called now - the context window is full; answer in plain text",
        extra={"status": "not_run"},
    ),
    "max_iterations": ToolResult.failure(
        "Error: no tools may be called now - the task has used all its turns; answer in plain text",
        extra={"status": "not_run"},
    ),
}
"""The result of a call the model made anyway in the turn without tools, by its reason."""

STOPPED_BEFORE = ToolResult.failure(
    "Error: not run - the user stopped the turn before this call", extra={"status": "stopped"}
)
KILLED_WHILE_RUNNING = ToolResult.failure(
    "Error: cancelled - the user killed the turn while the tool ran", extra={"status": "cancelled"}
)
KILLED_BEFORE = ToolResult.failure(
    "Error: cancelled - the user killed the turn before this call ran", extra={"status": "cancelled"}
)
ENDED = ToolResult.failure(
    "Error: cancelled - the turn ended before this call was answered", extra={"status": "cancelled"}
)

RESTART_NOTE = (
    "{tools} asked to restart your turn with more context, so the tool calls of that turn are not shown "
    "(they ran). Decide again what to do, with this context:\n\n{contexts}"
)
"""The user message that replaces a restarted turn (``toolflow._restart``): *tools* and their *contexts*."""
RESTART_CONTEXT = "[context from {tool!r}]\n{context}"
"""One tool's context in :data:`RESTART_NOTE`."""


def over_per_turn(per_turn: int, category: str, name: str) -> ToolResult:
    """The result of a call over its category's ``per_turn`` limit (no error of the model's: it may call again)."""
    message = f"Error: at most {per_turn} {category} call(s) per turn - {name!r} was not run; call it again next turn"
    return ToolResult.failure(message, extra={"status": "blocked"})
