"""Running a pipeline: every step a real call through the caller's engine (issue 16).

:func:`run_pipeline` runs a :class:`~toolflow._pipeline_plan.CompiledPipeline` for one call of
its tool. Each step starts as soon as the steps it waits for have finished (those its templates
read and those its ``needs`` lists), so independent steps run concurrently; a ``for_each``
step calls its tool once per item, at most ``concurrency`` items at a time. A step's templates
(``when``, ``for_each``, ``with``) are evaluated in one job of a template worker, under the
same sandbox and limits as ``template:`` tools; a step without templates needs no job.

Each call of a step goes through the :class:`StepRunner` (the engine): the gates, the
validator, the caches, the step tool's own timeout and retries, the concurrency limits, the
call hooks. Which steps the pipeline's approval covered is the caller's to say (*approved*).

How a pipeline ends:

- every step finished: the result is ``result:`` evaluated (default: each step's data, by
  name), a success; a step that failed under ``on_error: continue`` adds a warning;
- a step failed under ``on_error: stop`` (the default): the steps still running are cancelled
  and no new one starts; a failure naming the step, with its error;
- the pipeline's own timeout: its steps are cancelled; a failure ``timed out after ...``;
- a stop (:meth:`StepRunner.stopping`): running steps finish, no new one starts; when a step
  was kept from running, the failure ``{"status": "aborted", "reason": "stopped"}``;
- a kill: every step is cancelled; the failure ``{"status": "aborted", "reason": "killed"}``.

Every ending carries a :class:`~toolflow.StepRecord` per step (per item of a ``for_each``) in
:attr:`~toolflow.ToolResult.steps`, and a failure's error says which steps ran, which were
cancelled and which never started. Only cancellation from outside escapes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import trio

from toolflow._attempts import KILLED, STOPPED
from toolflow._errors import error_text
from toolflow._model import ToolSpec, format_duration
from toolflow._pipeline_plan import CompiledPipeline, CompiledStep
from toolflow._rendering import run_in_template_worker
from toolflow._results import StepRecord, ToolResult, without_prefix
from toolflow._template_values import constant_of, evaluate, evaluate_step, is_constant
from toolflow._templates import TemplateError

__all__ = ["StepRunner", "run_pipeline"]


class StepRunner(Protocol):
    """What a pipeline needs of the engine that runs its steps."""

    @property
    def kills(self) -> int:
        """How many kills came so far: a pipeline that sees it change was killed."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether a stop is pending: no new step starts."""
        ...

    def guarded(self, scope: trio.CancelScope) -> contextlib.AbstractContextManager[trio.CancelScope]:
        """Enter *scope* as one that a kill cancels."""
        ...

    async def call_step(self, name: str, arguments: Mapping[str, Any], call_id: str, *, approved: bool) -> ToolResult:
        """One call of a step's tool; :data:`~toolflow._attempts.STOPPED` when a stop kept it from running."""
        ...


async def run_pipeline(
    runner: StepRunner,
    spec: ToolSpec,
    pipeline: CompiledPipeline,
    arguments: Mapping[str, Any],
    *,
    call_id: str,
    approved: frozenset[str] = frozenset(),
) -> ToolResult:
    """Run *pipeline*, the implementation of the tool *spec*, for one call with the validated *arguments*.

    The pipeline runs under the tool's ``timeout``. *approved* names the steps whose calls the
    pipeline's approval covered. See the module documentation for how it ends; only
    cancellation from outside escapes.
    """
    name, timeout = spec.name, spec.timeout
    run = _Run(runner, pipeline, arguments, call_id, approved)
    kills = runner.kills
    data: Any = None
    result_error: str | None = None
    with runner.guarded(trio.CancelScope(deadline=trio.current_time() + timeout)) as scope:
        async with trio.open_nursery() as nursery:
            run.nursery = nursery
            for step in pipeline.steps:
                if not step.waits_for:
                    nursery.start_soon(run.chain, step)
        if run.ending() is None:
            try:
                data = await run.result()
            except TemplateError as exc:
                result_error = f"the pipeline's result: {exc}"
    records = run.records()
    if runner.kills != kills:
        message = KILLED.error or "killed"
        return ToolResult.failure(f"{message}; {_summary(records)}", extra=dict(KILLED.extra), steps=records)
    if scope.cancelled_caught:
        return ToolResult.failure(
            f"pipeline {name!r} timed out after {format_duration(timeout)}; {_summary(records)}", steps=records
        )
    ending = run.ending()
    if ending is not None:
        return ending.with_steps(records)
    if result_error is not None:
        return ToolResult.failure(result_error, steps=records)
    warnings = tuple(f"step {step!r} failed: {without_prefix(error)}" for step, error in run.continued)
    return ToolResult(success=True, data=data, warnings=warnings, steps=records)


class _Ending:
    """Why a pipeline stopped early: a step that failed under ``on_error: stop``, or a stop."""

    def __init__(self, message: str, extra: Mapping[str, Any]) -> None:
        self.message = message
        self.extra = extra

    def with_steps(self, records: tuple[StepRecord, ...]) -> ToolResult:
        return ToolResult.failure(f"{self.message}; {_summary(records)}", extra=dict(self.extra), steps=records)


_FINISHED = ("succeeded", "failed", "skipped")


def _summary(records: tuple[StepRecord, ...]) -> str:
    """Which steps ran, which were cancelled and which never started: ``ran: a, b; cancelled: c; not run: d``.

    Items of a ``for_each`` are named (``notes[2]``) up to :data:`_NAMED_ITEMS` per step and
    group, and counted beyond (``notes (40 items)``), so that the text stays short for a model.
    """
    groups: dict[str, dict[str, list[str]]] = {"ran": {}, "cancelled": {}, "not run": {}}
    for record in records:
        group = "ran" if record.status in _FINISHED else "cancelled" if record.status == "cancelled" else "not run"
        label = record.step if record.item is None else f"{record.step}[{record.item}]"
        groups[group].setdefault(record.step, []).append(label)
    parts = []
    for group, steps in groups.items():
        labels = [
            label
            for step, named in steps.items()
            for label in (named if len(named) <= _NAMED_ITEMS else [f"{step} ({len(named)} items)"])
        ]
        if labels:
            parts.append(f"{group}: {', '.join(labels)}")
    return "; ".join(parts) or "no steps"


_NAMED_ITEMS = 3


class _Run:
    """The state of one pipeline call: what each step gave, what became of each call."""

    def __init__(
        self,
        runner: StepRunner,
        pipeline: CompiledPipeline,
        arguments: Mapping[str, Any],
        call_id: str,
        approved: frozenset[str],
    ) -> None:
        self.runner = runner
        self.pipeline = pipeline
        self.arguments = arguments
        self.call_id = call_id
        self.approved = approved
        # How many steps each step still waits for, and who waits for it (see chain()).
        self.waiting = {step.name: len(step.waits_for) for step in pipeline.steps}
        self.waiters: dict[str, list[CompiledStep]] = {step.name: [] for step in pipeline.steps}
        for step in pipeline.steps:
            for name in step.waits_for:
                self.waiters[name].append(step)
        self.data: dict[str, Any] = {}
        self.errors: dict[str, Any] = {}
        self.continued: list[tuple[str, str]] = []
        self.failure: _Ending | None = None
        self.stopped = False
        self.nursery: trio.Nursery | None = None
        self._records: dict[tuple[str, int | None], StepRecord] = {}
        self._running: dict[tuple[str, int | None], tuple[Any, str]] = {}  # calls in flight: arguments, call id
        self.items: dict[str, list[Any]] = {}  # each for_each step's arguments, per item

    def ending(self) -> _Ending | None:
        """Why the pipeline stopped early, if it did."""
        if self.failure is not None:
            return self.failure
        if self.stopped:
            return _Ending("stop requested: the pipeline's remaining steps were not run", _STOPPED_EXTRA)
        return None

    def variables(self) -> dict[str, Any]:
        """What the templates see: the parameters, ``steps`` and ``errors``."""
        return {**self.arguments, "steps": dict(self.data), "errors": dict(self.errors)}

    async def chain(self, compiled: CompiledStep) -> None:
        """Run *compiled*, then the steps its end makes ready: the first in this task, the others in their own.

        A step is ready when every step it waits for has finished; none starts once the
        pipeline is ending (a failure under ``on_error: stop``, a stop), nor when it is cancelled.
        """
        step: CompiledStep | None = compiled
        while step is not None:
            await self._step(step)
            ready = []
            for waiter in self.waiters[step.name]:
                self.waiting[waiter.name] -= 1
                if not self.waiting[waiter.name]:
                    ready.append(waiter)
            if self.failure is not None or self.stopped:
                return
            for other in ready[1:]:
                cast("trio.Nursery", self.nursery).start_soon(self.chain, other)
            step = ready[0] if ready else None

    async def _step(self, compiled: CompiledStep) -> None:
        """Run one step whose steps are done: its templates, then its call or its items' calls."""
        if self.runner.stopping:
            self.stopped = True
            return
        try:
            calls = await self._arguments(compiled)
        except TemplateError as exc:
            self._record(compiled, None, "failed", None, ToolResult.failure(str(exc)))
            self._failed(compiled, str(exc), None)
            return
        if calls is None:
            self.data[compiled.name] = self.errors[compiled.name] = None
            self._record(compiled, None, "skipped", None, None)
        elif compiled.for_each is None:
            result = await self._call(compiled, calls[0], None)
            if result is not None:
                self._settle(compiled, result, None)
        else:
            await self._each(compiled, calls)

    async def _arguments(self, compiled: CompiledStep) -> list[Any] | None:
        """The step's arguments (one set per item of a ``for_each``), or ``None`` when ``when`` is false."""
        parts = (compiled.when, compiled.for_each, compiled.arguments)
        if all(part is None or is_constant(part) for part in parts):
            # Nothing to render: the same evaluation, in this process.
            return evaluate_step(compiled.when, compiled.for_each, compiled.arguments, compiled.step.item_name, {})
        calls: list[Any] | None = await _in_worker(
            evaluate_step,
            compiled.when,
            compiled.for_each,
            compiled.arguments,
            compiled.step.item_name,
            self.variables(),
        )
        return calls

    async def _each(self, compiled: CompiledStep, calls: list[Any]) -> None:
        """The items of a ``for_each`` step, at most ``concurrency`` at a time; their data in the items' order."""
        results: list[ToolResult | None] = [None] * len(calls)
        self.items[compiled.name] = calls
        indexes = iter(range(len(calls)))  # shared: each worker takes the next item when it is free

        async def worker() -> None:
            for index in indexes:
                if self.runner.stopping:
                    self.stopped = True
                    return
                results[index] = await self._call(compiled, calls[index], index)

        async with trio.open_nursery() as nursery:
            for _ in range(min(compiled.step.concurrency or len(calls), len(calls))):
                nursery.start_soon(worker)
        done = [result for result in results if result is not None]
        if len(done) == len(results):  # else a stop or a kill kept an item from ending: the pipeline ends so
            self._settle_items(compiled, done)

    def _settle_items(self, compiled: CompiledStep, results: list[ToolResult]) -> None:
        """The data (and, when an item failed under ``on_error: continue``, the errors) of a ``for_each`` step."""
        self.data[compiled.name] = [result.data if result.success else None for result in results]
        self.errors[compiled.name] = None
        if any(not result.success for result in results):  # under on_error: stop, _call ended the pipeline
            self.errors[compiled.name] = [None if result.success else result.error for result in results]
            self.continued.extend(
                (f"{compiled.name}[{index}]", result.error or "failed")
                for index, result in enumerate(results)
                if not result.success
            )

    async def _call(self, compiled: CompiledStep, arguments: Any, index: int | None) -> ToolResult | None:
        """One call of the step's tool; ``None`` when a stop kept it from running."""
        call_id = f"{self.call_id}.{compiled.name}" if index is None else f"{self.call_id}.{compiled.name}[{index}]"
        key = (compiled.name, index)
        self._running[key] = (arguments, call_id)  # a call still here when the pipeline ends was cancelled
        started = trio.current_time()
        result = await self.runner.call_step(compiled.tool, arguments, call_id, approved=compiled.name in self.approved)
        if result is STOPPED:
            self.stopped = True
            del self._running[key]
            return None
        if result is KILLED:
            return None  # still running when the pipeline ends: cancelled
        del self._running[key]
        status = "succeeded" if result.success else "failed"
        self._record(
            compiled, index, status, arguments, result, call_id=call_id, duration=trio.current_time() - started
        )
        if index is not None and not result.success:
            self._failed(compiled, result.error or "failed", index)
        return result

    def _settle(self, compiled: CompiledStep, result: ToolResult, index: int | None) -> None:
        if result.success:
            self.data[compiled.name] = result.data
            self.errors[compiled.name] = None
        else:
            self._failed(compiled, result.error or "failed", index)

    def _failed(self, compiled: CompiledStep, error: str, index: int | None) -> None:
        """Record a failure of the step (of one item, *index*): end the pipeline (``on_error: stop``) or go on.

        Under ``on_error: continue`` a plain step's data is ``None`` and its error is in
        ``errors``; a ``for_each`` step's items are settled by :meth:`_each`.
        """
        where = f"step {compiled.name!r}" if index is None else f"step {compiled.name!r} (item {index})"
        if compiled.step.on_error == "continue":
            if index is None:
                self.data[compiled.name] = None
                self.errors[compiled.name] = error
                self.continued.append((compiled.name, error))
            return
        if self.failure is None:
            message = f"{where} ({compiled.tool}) failed: {without_prefix(error)}"
            self.failure = _Ending(message, {"failed_step": compiled.name})
            if self.nursery is not None:
                self.nursery.cancel_scope.cancel()

    def _record(
        self,
        compiled: CompiledStep,
        index: int | None,
        status: str,
        arguments: Any,
        result: ToolResult | None,
        *,
        call_id: str = "",
        duration: float | None = None,
    ) -> None:
        self._records[compiled.name, index] = StepRecord(
            step=compiled.name,
            tool=compiled.tool,
            status=status,
            call_id=call_id,
            item=index,
            arguments=arguments if isinstance(arguments, dict) else None,
            result=result,
            duration=duration,
        )

    def records(self) -> tuple[StepRecord, ...]:
        """A record per step (per item of a ``for_each``), in the pipeline's order; ``not_run`` if it never started."""
        steps = {compiled.name: compiled for compiled in self.pipeline.steps}
        for (step, index), (arguments, call_id) in self._running.items():
            self._record(steps[step], index, "cancelled", arguments, None, call_id=call_id)
        self._running.clear()
        out: list[StepRecord] = []
        for compiled in self.pipeline.steps:
            name, tool = compiled.name, compiled.tool
            items = self.items.get(name)
            if items is None:
                record = self._records.get((name, None))
                out.append(record or StepRecord(step=name, tool=tool, status="not_run"))
                continue
            for index, arguments in enumerate(items):
                record = self._records.get((name, index))
                if record is None:  # a stop or a kill came before the item's turn
                    record = StepRecord(step=name, tool=tool, status="not_run", item=index, arguments=arguments)
                out.append(record)
        return tuple(out)

    async def result(self) -> Any:
        """The pipeline's result data: ``result:`` evaluated, or every step's data by name."""
        if self.pipeline.result is None:
            return {compiled.name: self.data.get(compiled.name) for compiled in self.pipeline.steps}
        if is_constant(self.pipeline.result):
            return constant_of(self.pipeline.result)
        return await _in_worker(evaluate, self.pipeline.result, self.variables())


_STOPPED_EXTRA: Mapping[str, Any] = {"status": "aborted", "reason": "stopped"}


async def _in_worker(function: Callable[..., Any], /, *args: Any) -> Any:
    """``function(*args)`` in a template worker; every failure a :class:`TemplateError` (only cancellation escapes)."""
    try:
        return await run_in_template_worker(function, *args)
    except TemplateError:
        raise
    except Exception as exc:  # noqa: BLE001 - a tool's data that cannot be pickled fails the step, not the engine
        msg = f"the steps' data cannot reach the template worker ({error_text(exc)})"
        raise TemplateError(msg) from None
