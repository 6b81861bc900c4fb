"""A model turn's calls run as one batch: history entries in call order, or one abort (seed 002).

:func:`execute_batch` answers malformed calls with their error (more than ``max_malformed`` of
them, or more calls than ``max_calls_per_turn``, abort the batch before anything runs), asks the
policy's rules about the other calls in call order (a call that breaks one is answered
``blocked``), runs the calls of tools that are neither ``dangerous`` nor in need of approval
concurrently in a nursery (a call whose tool ``depends_on`` the tool of an earlier call of the
batch waits for that call), then the others one at a time, in call order, at most
``dangerous_per_tick`` ``dangerous`` ones per tick. It returns a :class:`HistoryEntry` per call,
in call order, or one :class:`Abort` naming every call: ``stopped`` (a stop kept calls from
running), ``killed`` (a kill cancelled the batch; no killed tool's result becomes an entry) or
``malformed_calls``.

Each call runs through the engine (:class:`Runner`, what :class:`toolflow.Engine` provides), so
a batch has no cancel scope of its own: every wait of a call is in a scope that a kill cancels,
and a call that has not started yet sees the stop that a kill requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal, Protocol, TypeAlias, cast

import attrs
import trio

from toolflow._calls import MalformedCall, ParsedCall, ToolCall
from toolflow._results import ToolResult

__all__ = [
    "ONE_DANGEROUS_PER_TURN",
    "Abort",
    "AbortReason",
    "BatchOutcome",
    "HistoryEntry",
    "Outcome",
    "Runner",
    "entry",
    "execute_batch",
]

logger = logging.getLogger("toolflow")

ONE_DANGEROUS_PER_TURN = "Error: one dangerous action per turn - {name!r} was not run; call it again next turn"
"""The failure of a dangerous call after the first of its tick."""

_KILLED_BATCH = "the turn was killed while its tools ran"
_STOPPED_BATCH = "stop requested: calls not yet dispatched were not run"

AbortReason: TypeAlias = Literal["stopped", "killed", "malformed_calls"]
"""Why a batch was aborted (seed 002's ``abort``)."""


@attrs.frozen(kw_only=True)
class HistoryEntry:
    """A call that ran to a result the model sees (seed 002's ``history``), success or failure.

    Attributes:
        call_id: The id the result refers to (``tool_call_id``).
        tool_name: The tool asked for (``""`` for a malformed call that named none).
        call: The parsed call; a :class:`~toolflow._calls.MalformedCall` when it could not be run.
        result: The result handed to the model.
        success: ``result.success``.
        duration: Seconds the engine spent on the call, from dispatch to result (cache look-up,
            attempts and back-offs included), on the run's clock (so a test's ``MockClock`` gives
            exact times); ``None`` for a call answered without being dispatched: malformed, an
            unknown tool, refused by the allowlist or a ``depends_on`` rule, a ``dangerous`` call
            over the turn's limit, or gated by the agent loop.
    """

    call_id: str
    tool_name: str
    call: ParsedCall
    result: ToolResult
    success: bool
    duration: float | None = None


def entry(call: ParsedCall, result: ToolResult, duration: float | None = None) -> HistoryEntry:
    """The history entry of *call* answered by *result*."""
    return HistoryEntry(
        call_id=call.id, tool_name=call.name or "", call=call, result=result, success=result.success, duration=duration
    )


@attrs.frozen(kw_only=True)
class Abort:
    """The batch ended without results for the model (seed 002's ``abort``).

    Attributes:
        reason: ``stopped``, ``killed`` or ``malformed_calls``.
        message: What happened, for logs and the user.
        call_ids: The ids of every call of the batch, each once, in call order.
        finished: Entries of calls that completed before a stop (empty for ``killed``: a
            killed batch's results never become history entries).
    """

    reason: AbortReason
    message: str
    call_ids: tuple[str, ...]
    finished: tuple[HistoryEntry, ...] = ()


Outcome: TypeAlias = HistoryEntry | Abort
"""What :meth:`Engine.execute` returns."""

BatchOutcome: TypeAlias = tuple[HistoryEntry, ...] | Abort
"""What :meth:`Engine.execute_batch` returns: one entry per call in call order, or an abort."""


class Runner(Protocol):
    """What a batch needs of the engine that runs its calls."""

    max_malformed: int
    dangerous_per_tick: int | None

    @property
    def kills(self) -> int:
        """How many kills came so far: a batch that sees it change was killed."""

    @property
    def max_calls_per_turn(self) -> int:
        """The most calls a batch may have: with more, none runs (the policy's ``max_calls_per_turn``)."""

    @property
    def stopping(self) -> bool:
        """Whether a stop is pending: calls not yet started are not run."""

    @property
    def dangerous_this_tick(self) -> int:
        """How many ``dangerous`` calls ran in this tick."""

    def is_dangerous(self, name: str) -> bool:
        """Whether *name* is a ``dangerous`` tool (False for an unknown one)."""

    def runs_alone(self, name: str) -> bool:
        """Whether calls of *name* run one by one: ``dangerous``, or in need of approval."""

    def dependencies(self, name: str) -> frozenset[str]:
        """The tools *name* ``depends_on`` (none for an unknown tool)."""

    def concurrency(self, name: str) -> int | None:
        """The tool's own ``concurrency`` limit (``None``: none, or an unknown tool)."""

    def ran_dangerous(self) -> None:
        """Count a ``dangerous`` call that ran in this tick."""

    def rule_refusal(self, name: str) -> ToolResult | None:
        """Count the model's call of *name* under the policy's rules, or its ``blocked`` result."""

    async def run_entry(self, call: ToolCall) -> HistoryEntry | None:
        """Admit and run one call; ``None`` when a stop kept it from running."""


async def execute_batch(
    runner: Runner, calls: Sequence[ParsedCall], aside: Callable[[ToolCall], HistoryEntry | None] | None = None
) -> BatchOutcome:
    """Run the parsed calls of one model turn through *runner*; see the module's docstring.

    *aside* is asked about each call the policy's rules admitted, in call order: a call it answers
    (the agent loop's background calls) takes that entry and is not run by the batch.
    """
    announce(calls)
    if (aborted := _refused(runner, calls)) is not None:
        return aborted
    entries: list[HistoryEntry | None] = [None] * len(calls)
    concurrent: list[tuple[int, ToolCall]] = []
    one_by_one: list[tuple[int, ToolCall]] = []
    for index, item in enumerate(calls):  # in call order: the policy's rules count the calls in order
        if isinstance(item, MalformedCall):
            entries[index] = entry(item, item.to_result())
        elif (refused := runner.rule_refusal(item.name)) is not None:
            entries[index] = entry(item, refused)
        elif aside is not None and (answer := aside(item)) is not None:
            entries[index] = answer
        else:
            (one_by_one if runner.runs_alone(item.name) else concurrent).append((index, item))
    kills = runner.kills
    if concurrent:
        await _concurrently(runner, concurrent, entries)
    if one_by_one:
        await _one_by_one(runner, one_by_one, entries)
    if runner.kills != kills:
        return Abort(reason="killed", message=_KILLED_BATCH, call_ids=_ids(calls))
    if None in entries:  # a stop kept some calls from running
        done = tuple(item for item in entries if item is not None)
        return Abort(reason="stopped", message=_STOPPED_BATCH, call_ids=_ids(calls), finished=done)
    return cast("tuple[HistoryEntry, ...]", tuple(entries))


def _refused(runner: Runner, calls: Sequence[ParsedCall]) -> Abort | None:
    """The abort of a batch that runs nothing: more calls than a turn may make, or too many malformed ones."""
    if len(calls) > (limit := runner.max_calls_per_turn):
        message = f"{len(calls)} tool calls in one turn, more than the {limit} allowed: none ran; make at most {limit}"
        return Abort(reason="malformed_calls", message=message, call_ids=_ids(calls))
    malformed = sum(isinstance(item, MalformedCall) for item in calls)
    if malformed > runner.max_malformed:
        message = f"{malformed} malformed tool calls in one batch (at most {runner.max_malformed} allowed)"
        return Abort(reason="malformed_calls", message=message, call_ids=_ids(calls))
    return None


async def _one_by_one(runner: Runner, calls: list[tuple[int, ToolCall]], entries: list[HistoryEntry | None]) -> None:
    """Run *calls* one after another, at most ``dangerous_per_tick`` dangerous ones; fill *entries*.

    A call a stop keeps from running leaves its entry ``None``.
    """
    for index, call in calls:
        if runner.stopping:
            continue
        dangerous = runner.is_dangerous(call.name)
        limit = runner.dangerous_per_tick
        if dangerous and limit is not None and runner.dangerous_this_tick >= limit:
            result = ToolResult.failure(ONE_DANGEROUS_PER_TURN.format(name=call.name), extra={"status": "blocked"})
            entries[index] = entry(call, result)
            continue
        done = entries[index] = await runner.run_entry(call)
        if dangerous and done is not None and done.result.extra.get("attempts", 0):
            # Only a call that ran is the tick's dangerous action: one that the gates, the
            # validator or the cache answered, or that a stop kept from running, changed nothing.
            runner.ran_dangerous()


async def _concurrently(runner: Runner, calls: list[tuple[int, ToolCall]], entries: list[HistoryEntry | None]) -> None:
    """Run *calls* in a nursery, each after the earlier calls of the tools it ``depends_on``; fill *entries*."""
    if len(calls) == 1:  # the agent loop's usual turn: a nursery and its task cost several times a quick call
        index, call = calls[0]
        entries[index] = await runner.run_entry(call)
        return
    waits = _waits(runner, calls)
    done = {index: trio.Event() for earlier in waits.values() for index in earlier}

    async def run_one(index: int, call: ToolCall) -> None:
        try:
            for earlier in waits.get(index, ()):
                await done[earlier].wait()
            entries[index] = await runner.run_entry(call)
        finally:
            if index in done:  # however the call ended, the calls waiting for it go on
                done[index].set()

    async def in_order(queue: Iterator[tuple[int, ToolCall]]) -> None:
        for index, call in queue:
            await run_one(index, call)

    # trio starts a nursery's tasks in no set order, so the calls of a tool with a `concurrency`
    # limit would take its slots in any order: they go through that many workers, in call order.
    limited: dict[str, list[tuple[int, ToolCall]]] = {}
    async with trio.open_nursery() as nursery:
        for index, call in calls:
            if runner.concurrency(call.name) is None:
                nursery.start_soon(run_one, index, call)
            else:
                limited.setdefault(call.name, []).append((index, call))
        for name, group in limited.items():
            queue = iter(group)
            for _ in range(min(cast("int", runner.concurrency(name)), len(group))):
                nursery.start_soon(in_order, queue)


def _waits(runner: Runner, calls: list[tuple[int, ToolCall]]) -> dict[int, list[int]]:
    """For each call whose tool ``depends_on`` the tool of an earlier call of *calls*, those calls.

    Such a call waits for them to finish, so that a model asking for ``login`` and then
    ``fetch`` in one turn gets the same answer however fast ``login`` is.
    """
    waits: dict[int, list[int]] = {}
    for position, (index, call) in enumerate(calls):
        needed = runner.dependencies(call.name)
        if needed:
            earlier = [other for other, item in calls[:position] if item.name in needed]
            if earlier:
                waits[index] = earlier
    return waits


def announce(calls: Sequence[ParsedCall]) -> None:
    """Log seed 000's steps 1-2: each decision with its reasoning (INFO), what parsing corrected (WARNING)."""
    if logger.isEnabledFor(logging.INFO):
        for call in calls:
            if isinstance(call, MalformedCall):
                logger.info("Malformed tool call %s: %s", call.id, call.error)
            elif call.reasoning:
                logger.info("Assistant decision: %s - %s", call.name, call.reasoning)
            else:
                logger.info("Assistant decision: %s", call.name)
    for call in calls:
        for note in getattr(call, "warnings", ()):
            logger.warning("Tool call %s (%s) was corrected: %s", call.id, call.name, note)


def _ids(calls: Iterable[ParsedCall]) -> tuple[str, ...]:
    return tuple(call.id for call in calls)
