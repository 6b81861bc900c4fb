"""Who approves a call whose category needs approval, and in which order (issue 14, section 1).

A category with ``approval: true`` in the policy has every call of its tools approved before
the tool runs. The engine asks after everything that could still refuse the call without
running it: the allowlist, ``depends_on``, argument validation and the cache (a cached result
runs nothing, so it needs no approval). So an operator is never asked about a call that would
then fail for another reason. Who decides, first answer wins:

1. the engine's *approver*: the caller's own decision (``open_engine(approve=...)``,
   ``Agent(approve=...)``, ``toolflow run|call|serve --approve``);
2. the plugins' ``toolflow_approve_call`` hook, in registration order;
3. the *asker* of the request in progress (:func:`asking_approval`): ``toolflow serve`` asks the
   MCP client that made the request, when it declared the elicitation capability;
4. nobody: the call is refused (``{"status": "denied", "reason": "no_approver"}``).

Each approver answers ``True`` (run it), ``False`` (do not) or ``None`` (no opinion: ask the
next). An approver that raises is a warning naming it, and the call is refused: approval
fails closed.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeAlias

import trio

from toolflow._attempts import KILLED, STOPPED, Attempts, first_verdict
from toolflow._calls import ToolCall
from toolflow._plugins import Plugins
from toolflow._results import ToolResult

__all__ = [
    "ApprovalWarning",
    "Approvals",
    "Approver",
    "answer_of",
    "asking_approval",
    "current_asker",
    "denied",
    "no_approver",
]

Approver: TypeAlias = Callable[[ToolCall, str], "bool | Awaitable[bool | None] | None"]
"""Decides whether a call needing approval may run: ``approve(call, category)``, sync or async.

``True`` approves, ``False`` refuses, ``None`` leaves the decision to the next in line.
"""


class ApprovalWarning(UserWarning):
    """An approver raised; the call it was asked about was refused."""


_asker: contextvars.ContextVar[Approver | None] = contextvars.ContextVar("toolflow_approval_asker", default=None)


@contextlib.contextmanager
def asking_approval(asker: Approver) -> Iterator[None]:
    """Ask *asker*, after the engine's approver and the plugins, about the calls made inside the block.

    ``toolflow serve`` sets one per MCP request, asking the client that made it. The asker
    lives in a :class:`contextvars.ContextVar`, so calls that a call starts (in a batch's
    nursery) are asked about by the same asker.
    """
    token = _asker.set(asker)
    try:
        yield
    finally:
        _asker.reset(token)


def current_asker() -> Approver | None:
    """The asker set by the innermost :func:`asking_approval` around this task, if any."""
    return _asker.get()


async def answer_of(approver: Approver, call: ToolCall, category: str, who: str) -> bool | None:
    """*approver*'s answer as True, False or None; an approver that raises refuses, with an :class:`ApprovalWarning`."""
    try:
        answer = approver(call, category)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # noqa: BLE001 - approval fails closed; Cancelled is not an Exception
        message = f"{who} raised {type(exc).__name__}: {exc}; {call.name!r} was not approved"
        warnings.warn(ApprovalWarning(message), stacklevel=3)
        return False
    return None if answer is None else bool(answer)


def denied(name: str) -> ToolResult:
    """The result of a call its approver refused."""
    return ToolResult.failure(
        f"Error: {name!r} was not approved, so it did not run; do not retry it unchanged",
        extra={"status": "denied"},
    )


def no_approver(name: str, category: str) -> ToolResult:
    """The result of a call that needs approval when nobody could give it."""
    return ToolResult.failure(
        f"Error: {name!r} needs approval before it runs ({category} calls do), and nobody could approve it "
        "here, so it did not run; ask the user to run it, or to approve it where they can",
        extra={"status": "denied", "reason": "no_approver"},
    )


class Approvals:
    """An engine's questions about calls whose category needs approval: one at a time, in the order above."""

    def __init__(self, plugins: Plugins | None, attempts: Attempts) -> None:
        self._plugins = plugins
        self._attempts = attempts
        self._lock = trio.Lock()  # one question at a time, on any terminal or client

    async def ask(self, call: ToolCall, category: str, approve: Approver | None) -> ToolResult | None:
        """``None`` when *call* may run; else the result of the call that was not approved.

        Asks *approve*, the plugins' ``toolflow_approve_call``, then the request's asker
        (:func:`asking_approval`). A stop ends the wait (:data:`~toolflow._attempts.STOPPED`: not
        run), so does a kill (:data:`~toolflow._attempts.KILLED`).
        """
        kills = self._attempts.kills
        verdict: bool | None = None
        with self._attempts.guarded(trio.CancelScope(), stoppable=True) as scope:
            async with self._lock:
                if approve is not None:
                    verdict = await answer_of(approve, call, category, "the approver")
                if verdict is None:
                    verdict = first_verdict(self._plugins, "toolflow_approve_call", call=call, category=category)
                asker = current_asker()
                if verdict is None and asker is not None:
                    verdict = await answer_of(asker, call, category, "the client's approval")
        if self._attempts.kills != kills:
            return KILLED
        if scope.cancelled_caught:
            return STOPPED
        if verdict is None:
            return no_approver(call.name, category)
        return None if verdict else denied(call.name)
