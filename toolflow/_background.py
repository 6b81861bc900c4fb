"""Background calls of the agent loop (issue 21 section 1): answered at once, run on, reported at a turn boundary.

A category with ``background: true`` (:class:`toolflow.CategoryPolicy`) has its calls run in
the background by :meth:`toolflow.Agent.run` (:class:`BackgroundCalls`, one per agent; the
tasks of a run live in a nursery the run opens, :meth:`BackgroundCalls.open`):

- In a turn's batch, after the category gates (``per_turn``, deliberate mode) and the policy's
  rules (asked in call order with the turn's other calls), each such call is answered at once
  with its one tool result, ``{"status": "started", "task_id": "task-1"}`` (a success that
  counts neither way towards ``max_consecutive_errors``), and is not run by the batch
  (:meth:`BackgroundCalls.admit`, the batch's ``aside``).
- Once the batch is done (so a call that ``depends_on`` a tool called before it in the turn
  finds it done), each runs as a task of the run's nursery, through the engine as a batch's
  call does (:meth:`toolflow.Engine.run_entry`: ``depends_on``, validation, caches, approval,
  timeout, retries, hooks), under the caller's context (:func:`toolflow.providing_context`).
  What the engine refuses without running it (a ``depends_on`` tool not yet run, invalid
  arguments, a refused approval) is the task's outcome: the model was answered ``started``
  already.
- An outcome reaches the model before the first model request after it finished
  (:meth:`BackgroundCalls.deliver`): one user-role note per boundary, a line per outcome
  naming the task id, the tool, the call id (not in ``fallback`` and ``text``, which write no
  ids) and the result's JSON, cut to ``max_result_chars`` (:func:`note_text`); never a second
  tool result for the call id, which the providers refuse. A failed outcome counts towards
  ``max_consecutive_errors`` when delivered, a success resets the count; a task cancelled or
  kept from running by the user counts neither way.
- When the run would end with tasks running, ``policy.on_exit`` decides
  (:meth:`BackgroundCalls.settle`): ``wait`` lets them finish, and after a final answer or a
  terminal call, with turns left, gives the model another turn to read their outcomes;
  ``cancel`` cancels them. A kill cancels them at once, and so does an exception or a
  cancellation from outside that ends the run (:meth:`BackgroundCalls.abandon`). Whatever ends
  the run, each task's outcome enters the history exactly once: the outcomes the model did not
  get at a turn boundary are noted after the last turn (:attr:`BackgroundCalls.exit_outcomes`).

The outcomes that finished but are not in the history yet wait in
:attr:`BackgroundCalls.finished`, plain :class:`TaskOutcome` records.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Collection, Mapping, MutableSequence, Sequence
from typing import Any

import trio

from toolflow._batch import HistoryEntry, entry
from toolflow._calls import ToolCall
from toolflow._context import providing_context
from toolflow._deferred import saved_result
from toolflow._executor import Engine
from toolflow._history import HistoryFormat, _angle_safe
from toolflow._loop_records import RunState, TaskOutcome
from toolflow._policy import CategoryPolicy, LoopDecision, OnExit, Policy
from toolflow._results import ToolResult, truncate_text

__all__ = ["BackgroundCalls", "note_text", "running", "started"]

CANCELLED = ToolResult.failure(
    "Error: cancelled - the run ended before the background task finished", extra={"status": "cancelled"}
)
KILLED = ToolResult.failure(
    "Error: cancelled - the user killed the run while the background task ran", extra={"status": "cancelled"}
)
STOPPED = ToolResult.failure(
    "Error: not run - the user stopped the run before the background task started", extra={"status": "stopped"}
)
_USERS = (CANCELLED, KILLED, STOPPED)
"""Outcomes that are no error of the model's: they count neither way towards ``max_consecutive_errors``."""

_UNLIMITED = 1 << 62


def started(task_id: str) -> ToolResult:
    """The one tool result of a background call: ``{"status": "started", "task_id": ...}``."""
    return ToolResult(success=True, data={"status": "started", "task_id": task_id})


def note_text(outcome: TaskOutcome, *, format_name: str, max_chars: int) -> str:
    r"""The line that tells the model of *outcome*: task id, tool, call id (where the format writes ids), result.

    ``Background task task-1 (web_search, call "call_1") ended: {"success":true,"data":...}``.
    The result's JSON is cut to *max_chars* as a tool result is; in the ``text`` format its
    ``<`` and ``>`` are written as ``\u003c`` / ``\u003e`` first, as in a ``<tool_result>``
    block, so a result's text cannot forge one.
    """
    call = f", call {json.dumps(outcome.call_id)}" if format_name in ("openai", "anthropic", "gemini") else ""
    if format_name == "text":
        text = truncate_text(_angle_safe(outcome.result.text_for_model(_UNLIMITED)), max_chars)
    else:
        text = outcome.result.text_for_model(max_chars)
    return f"Background task {outcome.task_id} ({outcome.tool_name}{call}) ended: {text}"


def _number(outcome: TaskOutcome) -> int:
    return int(outcome.task_id.rpartition("-")[2])


class BackgroundCalls:
    """The background calls of one agent: which tools, the task numbers, the tasks of the run in progress.

    Args:
        tools: The exposed tools whose category runs in the background.
        on_exit: ``policy.on_exit``.
        history_format: The agent's history format (the notes are written in it).
        messages: The agent's history, which the notes are appended to.
    """

    def __init__(
        self,
        tools: frozenset[str],
        *,
        on_exit: OnExit,
        history_format: HistoryFormat,
        messages: MutableSequence[Mapping[str, Any]],
    ) -> None:
        self.tools = tools
        self.on_exit = on_exit
        self._format = history_format
        self._messages = messages
        self._count = 0
        self._nursery: trio.Nursery | None = None
        self._engine: Engine | None = None
        self._context: Mapping[str, Any] | None = None
        self._queued: list[tuple[str, ToolCall]] = []
        self._running: dict[str, tuple[ToolCall, trio.CancelScope]] = {}
        self._changed = trio.Event()
        self._alone = trio.Lock()
        self._abandoned = False
        self._last: tuple[int, tuple[TaskOutcome, ...]] = (0, ())
        self.finished: list[TaskOutcome] = []
        """Outcomes that finished and are not in the history yet, in the order they finished."""
        self.exit_outcomes: tuple[TaskOutcome, ...] = ()
        """The outcomes the last run noted after its last turn (see :meth:`settle`)."""

    @classmethod
    def of(
        cls,
        policy: Policy,
        categories: Mapping[str, tuple[str, CategoryPolicy]],
        exposed: Collection[str],
        history_format: HistoryFormat,
        messages: MutableSequence[Mapping[str, Any]],
    ) -> BackgroundCalls | None:
        """The background calls of an agent: ``None`` when no exposed tool's category runs in the background.

        *categories*: each tool's category and what the policy makes of it.
        """
        tools = frozenset(name for name in exposed if categories[name][1].background)
        if not tools:
            return None
        return cls(tools, on_exit=policy.on_exit, history_format=history_format, messages=messages)

    @property
    def tasks_started(self) -> int:
        """How many tasks the agent started so far (task ids go on from it: a saved run keeps it)."""
        return self._count

    def saved(self) -> tuple[dict[str, Any], ...]:
        """The outcomes not in the history yet (after a run that ended ``deferred``), as JSON data."""
        return tuple(
            {
                "task_id": outcome.task_id,
                "id": outcome.call_id,
                "tool": outcome.tool_name,
                "arguments": dict(outcome.entry.call.arguments) if isinstance(outcome.entry.call, ToolCall) else {},
                "result": outcome.result.to_dict(),
            }
            for outcome in self.finished
        )

    def go_on_from(self, tasks_started: int, saved: Sequence[Mapping[str, Any]]) -> None:
        """Take up a resumed run's: number tasks after *tasks_started*; *saved* (:meth:`saved`) waits for a turn."""
        self._count = tasks_started
        self.finished = [
            TaskOutcome(
                task_id=item["task_id"],
                entry=entry(
                    ToolCall(id=item["id"], name=item["tool"], arguments=item["arguments"], format="direct"),
                    saved_result(item["result"]),
                ),
            )
            for item in saved
        ]

    @property
    def pending(self) -> bool:
        """Whether tasks of the run are running, or finished outcomes wait for the history."""
        return bool(self._running or self.finished)

    @contextlib.asynccontextmanager
    async def open(self, engine: Engine, context: Mapping[str, Any] | None, max_chars: int) -> AsyncIterator[None]:
        """The nursery of one run's tasks, around :meth:`toolflow.Agent.run`'s turns.

        An exception or a cancellation that ends the run cancels the tasks and notes each as
        cancelled (:meth:`abandon`). An exception (an approver's) escapes as it is, not in an
        exception group.
        """
        error: Exception | None = None
        async with trio.open_nursery() as nursery:
            self._nursery, self._engine, self._context = nursery, engine, context
            self._abandoned, self.exit_outcomes, self._last = False, (), (0, ())
            try:
                yield
            except Exception as exc:  # noqa: BLE001 - raised again below, outside the nursery
                error = exc
                self.abandon(max_chars)
            except BaseException:
                self.abandon(max_chars)
                raise
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()  # nothing runs on after the run (settle or abandon noted it)
        if error is not None:
            raise error

    def admit(self, call: ToolCall) -> HistoryEntry | None:
        """The ``started`` entry of a background call the rules admitted (the batch's ``aside``); ``None``: not one.

        The task starts with :meth:`launch`, once the batch is done. Outside a run (reflection
        mode) every call runs in the batch.
        """
        if self._nursery is None or call.name not in self.tools:
            return None
        self._count += 1
        task_id = f"task-{self._count}"
        self._queued.append((task_id, call))
        return entry(call, started(task_id))

    def launch(self, *, killed: bool) -> frozenset[str]:
        """Start the tasks of the calls :meth:`admit` answered in the batch; return their call ids.

        After a *killed* batch, whose calls were all answered ``cancelled``, none starts.
        """
        queued, self._queued = self._queued, []
        if killed or self._nursery is None:
            return frozenset()
        for task_id, call in queued:
            scope = trio.CancelScope()
            self._running[task_id] = (call, scope)
            self._nursery.start_soon(self._run, task_id, call, scope, name=f"toolflow background {task_id}")
        return frozenset(call.id for _, call in queued)

    async def _run(self, task_id: str, call: ToolCall, scope: trio.CancelScope) -> None:
        """Run one background call through the engine and keep its outcome in :attr:`finished`."""
        engine = self._engine
        assert engine is not None  # launched inside open()
        kills = engine.kills
        began = trio.current_time()
        done: HistoryEntry | None = None
        with scope, providing_context(self._context):
            if engine.runs_alone(call.name):
                # As in a batch: dangerous calls and calls that need approval one at a time (one question at a time).
                async with self._alone:
                    done = await engine.run_entry(call)
            else:
                done = await engine.run_entry(call)
        # A cancellation from outside the run leaves the task in _running, for abandon() to note.
        self._running.pop(task_id, None)
        self._changed.set()
        if self._abandoned:
            return  # abandon() noted it cancelled already
        if engine.kills != kills:
            done = None
            result = KILLED  # the engine's own result of a killed call is for callers, not history
        else:
            result = CANCELLED if scope.cancelled_caught else STOPPED
        if done is None:
            done = entry(call, result, trio.current_time() - began)
        self.finished.append(TaskOutcome(task_id=task_id, entry=done))

    def cancel(self) -> None:
        """Cancel every running task (a kill, or ``on_exit: cancel``): each is noted cancelled."""
        for _, scope in self._running.values():
            scope.cancel()

    async def _wait(self) -> None:
        while self._running:
            self._changed = trio.Event()
            await self._changed.wait()

    def deliver(self, state: RunState, max_chars: int) -> tuple[TaskOutcome, ...]:
        """Put the finished outcomes in the history as one note (a turn boundary); count their failures in *state*."""
        if not self.finished:
            return ()
        outcomes = tuple(sorted(self.finished, key=_number))
        self.finished.clear()
        self._last = (state.iteration, outcomes)
        for outcome in outcomes:
            if not any(outcome.result is result for result in _USERS):
                state.errors = 0 if outcome.entry.success else state.errors + 1
        self._note(outcomes, max_chars)
        return outcomes

    def _note(self, outcomes: tuple[TaskOutcome, ...], max_chars: int) -> None:
        name = self._format.name
        message = self._format.user_message(
            "\n".join(note_text(o, format_name=name, max_chars=max_chars) for o in outcomes)
        )
        last = self._messages[-1] if self._messages else None
        if name == "gemini" and last is not None and last.get("role") == "user":
            # Gemini wants user and model contents to alternate: the note joins the turn's results.
            self._messages[-1] = {**last, "parts": [*last.get("parts", ()), *message["parts"]]}
        else:
            self._messages.append(message)

    async def settle(self, decision: LoopDecision, state: RunState, max_chars: int) -> LoopDecision | None:
        """Apply ``on_exit`` to the tasks of a run that *decision* ends; ``None``: the model gets another turn.

        A kill, or ``on_exit: cancel``, cancels the running tasks; ``wait`` waits for them.
        After a final answer or a terminal call, with ``wait``, outcomes the model has not seen
        and a turn left (``max_iterations``), the loop goes on: the next turn delivers them.
        Otherwise the outcomes not yet in the history are noted now (:attr:`exit_outcomes`, with
        those delivered before a model request that failed or was killed, whose turn has no record).
        """
        if self._running:
            if decision.reason == "killed" or self.on_exit == "cancel":
                self.cancel()
            await self._wait()
        if decision.reason == "deferred":  # the turn's results wait: notes go after them, on resume (saved())
            self.exit_outcomes = ()
            return decision
        waits = self.on_exit == "wait" and decision.reason in ("final_answer", "terminal")
        if waits and self.finished and decision.iterations_remaining > 0:
            return None
        iteration, last = self._last
        # Only the outcomes whose turn has no record: a turn recorded before the last one keeps its own.
        carried = last if last and not any(turn.turn == iteration for turn in state.turns) else ()
        self.exit_outcomes = (*carried, *self.deliver(state, max_chars))
        return decision

    def abandon(self, max_chars: int) -> None:
        """Note every task of a run that an exception or a cancellation ends: running ones as cancelled.

        Calls admitted but not launched are dropped: the turn answers each ``cancelled``.
        """
        self._abandoned = True
        self._queued.clear()
        for task_id, (call, scope) in self._running.items():
            scope.cancel()
            self.finished.append(TaskOutcome(task_id=task_id, entry=entry(call, CANCELLED)))
        self._running.clear()
        if self.finished:
            outcomes = tuple(sorted(self.finished, key=_number))
            self.finished.clear()
            self._note(outcomes, max_chars)


def running(
    background: BackgroundCalls | None, engine: Engine, context: Mapping[str, Any] | None, max_chars: int
) -> contextlib.AbstractAsyncContextManager[None]:
    """The nursery of a run's background calls (:meth:`BackgroundCalls.open`); nothing without them."""
    return contextlib.nullcontext() if background is None else background.open(engine, context, max_chars)
