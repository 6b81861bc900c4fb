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

The engine's approver may be :func:`defer_approval` (``toolflow run --approve defer``): then
nobody is asked and the call is not run; its result says it awaits approval
(``{"status": "awaiting_approval"}``). The agent loop defers such a call (issue 21): the run
ends ``deferred``, and the caller approves or refuses it when resuming; an approved call then
runs through the engine with the approval given (:mod:`toolflow._deferred`). Elsewhere (``call``,
``serve``, pipelines) the call is not run and the result says so.

A tool may add approval of its own (issue 20): ``approval: true`` in its spec has every call
approved, and a template over the arguments (``approval: "{{ amount > 100 }}"``) the calls for
which it is true, evaluated per call with the validated arguments in a template worker, like a
pipeline's ``when:``. A condition that fails refuses the call (``"reason": "approval_condition"``);
it never runs unasked. A tool cannot take away its category's approval: when the category needs
it, the tool's own key is not even read. The approvers are asked exactly as for a category; the
*category* they get is an :class:`ApprovalReason`, the category's name that also says why.

Each approver answers ``True`` (run it), ``False`` (do not) or ``None`` (no opinion: ask the
next). An approver that raises is a warning naming it, and the call is refused: approval
fails closed.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import warnings
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from typing import Any, Self, TypeAlias

import trio

from toolflow._attempts import KILLED, STOPPED, Attempts, first_verdict
from toolflow._calls import ToolCall
from toolflow._errors import error_text
from toolflow._model import ToolSpec
from toolflow._plugins import Plugins
from toolflow._rendering import run_in_template_worker
from toolflow._results import ToolResult
from toolflow._template_values import CompiledValue, compile_value, evaluate, is_constant, is_true
from toolflow._templates import TemplateError

__all__ = [
    "ApprovalReason",
    "ApprovalWarning",
    "Approvals",
    "Approver",
    "answer_of",
    "asking_approval",
    "awaiting_approval",
    "condition_failed",
    "current_asker",
    "defer_approval",
    "denied",
    "no_approver",
    "why",
]

Approver: TypeAlias = Callable[[ToolCall, str], "bool | Awaitable[bool | None] | None"]
"""Decides whether a call needing approval may run: ``approve(call, category)``, sync or async.

``True`` approves, ``False`` refuses, ``None`` leaves the decision to the next in line.
"""


class ApprovalWarning(UserWarning):
    """An approver raised; the call it was asked about was refused."""


class ApprovalReason(str):
    """The *category* an approver is asked with: the tool's category name, which also says why it asks.

    It is the category's name (a ``str``, as approvers always got), with:

    - :attr:`by_tool`: ``False`` when the policy's category needs approval, ``True`` when the
      tool's own ``approval:`` asks for it;
    - :attr:`condition`: the tool's ``approval:`` template when that decided (else ``None``);
    - :attr:`text`: the reason in words, as ``toolflow run --approve ask`` and ``toolflow serve``'s
      elicitation show it.
    """

    __slots__ = ("by_tool", "condition", "text")

    by_tool: bool
    condition: str | None
    text: str

    def __new__(cls, category: str, tool: str, *, by_tool: bool = False, condition: str | None = None) -> Self:
        reason = super().__new__(cls, category)
        reason.by_tool = by_tool
        reason.condition = condition
        if not by_tool:
            reason.text = f"{category} calls need approval"
        elif condition is None:
            reason.text = f"{tool} needs approval (approval: true)"
        else:
            reason.text = f"{tool} needs approval when {condition}"
        return reason


def why(category: str) -> str:
    """Why a call needs approval, in words, from the *category* an approver is given."""
    return category.text if isinstance(category, ApprovalReason) else f"{category} calls need approval"


@functools.lru_cache(maxsize=256)
def _compiled(condition: str) -> CompiledValue | str:
    """*condition* compiled once per process, or why it does not compile."""
    compiled = compile_value(condition)
    return compiled[1].message if isinstance(compiled, tuple) else compiled


def condition_failed(spec: ToolSpec, problem: str) -> ToolResult:
    """The result of a call whose approval condition could not be decided: refused, never run unasked."""
    return ToolResult.failure(
        f"Error: {spec.name!r} needs approval when {spec.approval}, and that could not be decided ({problem}), "
        "so it did not run",
        extra={"status": "denied", "reason": "approval_condition"},
    )


async def _condition_holds(spec: ToolSpec, arguments: Mapping[str, Any]) -> bool | ToolResult:
    """Whether the tool's ``approval:`` template is true for *arguments*, under the tool's timeout."""
    compiled = _compiled(str(spec.approval))
    if isinstance(compiled, str):
        return condition_failed(spec, compiled)
    if is_constant(compiled):
        return is_true(evaluate(compiled, {}))
    value: Any = None
    with trio.move_on_after(spec.timeout) as scope:
        try:
            value = await run_in_template_worker(evaluate, compiled, dict(arguments))
        except TemplateError as exc:
            return condition_failed(spec, str(exc))
        except Exception as exc:  # noqa: BLE001 - arguments that cannot reach the worker refuse the call
            return condition_failed(spec, f"{error_text(exc)}")
    if scope.cancelled_caught:
        return condition_failed(spec, f"it took longer than the tool's timeout of {spec.timeout:g}s")
    return is_true(value)


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
        message = f"{who} raised {error_text(exc)}; {call.name!r} was not approved"
        warnings.warn(ApprovalWarning(message), stacklevel=3)
        return False
    return None if answer is None else bool(answer)


def defer_approval(call: ToolCall, category: str) -> None:
    """The approver that defers: the engine asks nobody and answers the call ``awaiting_approval``.

    Set it as the engine's approver (``Agent(approve=toolflow.defer_approval)``): the agent loop
    then defers such calls until the caller approves or refuses them on resume. Called as an
    approver, it has no opinion (it is recognised before it would be called).
    """


def awaiting_approval(name: str, category: str) -> ToolResult:
    """The result of a call whose approval is deferred (:func:`defer_approval`): not run, not refused."""
    return ToolResult.failure(
        f"Error: {name!r} waits for approval ({why(category)}), so it did not run yet",
        extra={"status": "awaiting_approval"},
    )


def denied(name: str) -> ToolResult:
    """The result of a call its approver refused."""
    return ToolResult.failure(
        f"Error: {name!r} was not approved, so it did not run; do not retry it unchanged",
        extra={"status": "denied"},
    )


def no_approver(name: str, category: str) -> ToolResult:
    """The result of a call that needs approval when nobody could give it."""
    by_tool = isinstance(category, ApprovalReason) and category.by_tool
    return ToolResult.failure(
        f"Error: {name!r} needs approval before it runs ({why(category) if by_tool else f'{category} calls do'}), "
        "and nobody could approve it "
        "here, so it did not run; ask the user to run it, or to approve it where they can",
        extra={"status": "denied", "reason": "no_approver"},
    )


class Approvals:
    """An engine's questions about calls that need approval: one at a time, in the order above."""

    def __init__(self, plugins: Plugins | None, attempts: Attempts) -> None:
        self._plugins = plugins
        self._attempts = attempts
        self._lock = trio.Lock()  # one question at a time, on any terminal or client

    @staticmethod
    def may_ask(spec: ToolSpec, approving: Collection[str]) -> bool:
        """Whether a call of *spec* may need approval: its category is one of *approving*, or it has its own."""
        return spec.category in approving or bool(spec.approval)

    async def check(
        self, call: ToolCall, spec: ToolSpec, by_category: bool, approve: Approver | None
    ) -> ToolResult | bool:
        """Whether *call* of *spec* needs approval now, and if so :meth:`ask`.

        ``True``: approved; ``False``: nobody was asked (the tool's condition is false); else the
        result of the call that was not approved (:data:`~toolflow._attempts.STOPPED`,
        :data:`~toolflow._attempts.KILLED` included). *by_category*: the policy's category needs
        approval, whatever the tool says; else the tool's own ``approval:`` decides, and a
        condition that cannot be decided refuses the call.
        """
        if by_category or spec.approval is True:
            reason = ApprovalReason(spec.category, spec.name, by_tool=not by_category)
        elif isinstance(spec.approval, str):
            holds = await self._condition(spec, call.arguments)
            if isinstance(holds, ToolResult):
                return holds
            if not holds:
                return False
            reason = ApprovalReason(spec.category, spec.name, by_tool=True, condition=spec.approval)
        else:
            return False
        refusal = await self.ask(call, reason, approve)
        return True if refusal is None else refusal

    async def _condition(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> bool | ToolResult:
        """:func:`_condition_holds`, ended at once by a stop (:data:`STOPPED`) or a kill (:data:`KILLED`)."""
        kills = self._attempts.kills
        holds: bool | ToolResult = STOPPED
        with self._attempts.guarded(trio.CancelScope(), stoppable=True):
            holds = await _condition_holds(spec, arguments)
        return KILLED if self._attempts.kills != kills else holds

    async def ask(self, call: ToolCall, category: str, approve: Approver | None) -> ToolResult | None:
        """``None`` when *call* may run; else the result of the call that was not approved.

        Asks *approve*, the plugins' ``toolflow_approve_call``, then the request's asker
        (:func:`asking_approval`). A stop ends the wait (:data:`~toolflow._attempts.STOPPED`: not
        run), so does a kill (:data:`~toolflow._attempts.KILLED`).
        """
        if approve is defer_approval:  # the caller decides later (the agent loop defers the call)
            return awaiting_approval(call.name, category)
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
