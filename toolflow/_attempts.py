"""The attempt runner: one call's attempts, each behind the concurrency limits and under its deadline.

What a call does once the gates, the validator, the caches and the approval have let it through
(seed 000, steps 5-7): :meth:`Attempts.run` takes a slot of the global limit and of the tool's
``concurrency``, runs the implementation under a cancel scope with the tool's deadline (async
implementations are awaited, sync ones run in a worker thread that is abandoned at the
timeout), turns what it returned or raised into a :class:`~toolflow.ToolResult`, and retries
what :mod:`toolflow._retrying` allows, sleeping the backoff. A :meth:`Attempts.kill` cancels
every scope a call can wait in (an attempt, a back-off, a wait for a slot).

Two users: the engine (:mod:`toolflow._executor`), whose attempts count (``extra["attempts"]``)
and retry, and :func:`call_once`, behind :func:`toolflow.invoke`: validation, the plugins' call
hooks and one attempt under the tool's timeout, without an engine's gates, caches, retries and
limits.

:class:`Plan` is what a call needs to know about its tool, worked out once per tool (per engine,
or per :func:`call_once`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol, TypeAlias, cast

import attrs
import trio

from toolflow._bound import bind
from toolflow._calls import ToolCall
from toolflow._checking import ARGUMENTS, ParameterError
from toolflow._context import CallContext, wants_context
from toolflow._errors import error_text
from toolflow._model import CacheScope, Category
from toolflow._model import format_duration as _seconds
from toolflow._plugins import PluginError, Plugins
from toolflow._provenance import Redactor
from toolflow._raised import Thrown, own_error, sync_call
from toolflow._registry import RegisteredTool
from toolflow._results import ToolResult, without_prefix
from toolflow._retrying import RETRY_AFTER_CEILING, classify, next_delay
from toolflow._validation import ValidationResult

__all__ = [
    "KILLED",
    "STOPPED",
    "Attempts",
    "CallHookWarning",
    "Checked",
    "Hooks",
    "Plan",
    "SharedLimits",
    "Slots",
    "after_call",
    "call_once",
    "checked_arguments",
    "finished",
    "first_verdict",
    "record",
]

logger = logging.getLogger("toolflow")
attempt_logger = logging.getLogger("toolflow.attempts")
"""Each failed attempt of a call that may be retried, and what was decided (INFO)."""

KILLED = ToolResult.failure(
    "Error: the call was killed; its result, if any, was dropped", extra={"status": "aborted", "reason": "killed"}
)
"""The result of a call that :meth:`Attempts.kill` ended (returned as it is, so it is told by identity)."""

STOPPED = ToolResult.failure(
    "Error: not run - a stop was requested before the call started", extra={"status": "aborted", "reason": "stopped"}
)
"""The result of a call that a stop kept from starting (told by identity, as :data:`KILLED`)."""

Checked: TypeAlias = "tuple[Mapping[str, Any], tuple[str, ...]] | ToolResult"
"""A call's arguments after step 3: the validated arguments and their warnings, or the failure that answers them."""

_NONE: frozenset[str] = frozenset()

_PLAIN_DATA = frozenset({str, int, float, bool, list})
"""Return types that normalise to a plain success holding the value (see ``ResultValidator.normalize``)."""


class SharedLimits(Protocol):
    """A tool's limits kept by the engine's state backend (:class:`toolflow._limits.ToolLimits`).

    A protocol here because the limits' module uses the attempt runner.
    """

    @property
    def leases(self) -> bool:
        """Whether each attempt takes a lease of the tool's fleet-wide ``concurrency``."""
        ...

    async def admit(self) -> ToolResult | None:
        """Count the call under the tool's ``rate_limit``: ``None`` when it may run, else its result."""
        ...

    async def take(self, *, stoppable: bool) -> str | ToolResult:
        """A lease's holder id (empty: none needed), or KILLED, STOPPED or the call's refusal when there is none."""
        ...

    def hold(self, work: Awaitable[Any], holder: str) -> Awaitable[Any]:
        """*work*, with *holder*'s lease renewed while it runs."""
        ...

    async def give_back(self, holder: str) -> None:
        """Release *holder*'s lease."""
        ...


class CallHookWarning(UserWarning):
    """A plugin's call hook raised; the call went on without it."""


def first_answer(plugins: Plugins | None, hook_name: str, accept: Callable[[Any], bool], **kwargs: Any) -> Any:
    """The first answer of a ``firstresult`` hook that *accept* takes, asking in registration order.

    A hook implementation that raises is reported with a :class:`CallHookWarning` naming its
    plugin and counts as no answer; ``None`` when nobody answers.
    """
    if plugins is None:
        return None
    for impl in getattr(plugins.manager.hook, hook_name).get_hookimpls():
        try:
            answer = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - a hook must never fail the call or the loop
            message = f"{hook_name} of plugin {impl.plugin_name!r} raised {error_text(exc)}"
            warnings.warn(CallHookWarning(message), stacklevel=3)
            continue
        if accept(answer):
            return answer
    return None


def first_verdict(plugins: Plugins | None, hook_name: str, **kwargs: Any) -> bool | None:
    """The first ``True``/``False`` of a ``firstresult`` decision hook (see :func:`first_answer`)."""
    verdict: bool | None = first_answer(plugins, hook_name, lambda answer: isinstance(answer, bool), **kwargs)
    return verdict


class Hooks:
    """The plugins' call hooks (``before_call``, ``after_call``, ``wrap_call``, ``retryable``).

    Which of them exist is looked up once: most plugin sets have none, and the look-up copies
    lists. :attr:`records` says whether a call needs its :class:`~toolflow.ToolCall` record
    for a hook to see.
    """

    __slots__ = ("after", "before", "plugins", "records", "retryable", "validates", "wraps")

    def __init__(self, plugins: Plugins | None) -> None:
        self.plugins = plugins
        hooks = plugins.manager.hook if plugins is not None else None
        self.before = bool(hooks and hooks.toolflow_before_call.get_hookimpls())
        self.after = bool(hooks and hooks.toolflow_after_call.get_hookimpls())
        self.wraps = bool(hooks and hooks.toolflow_wrap_call.get_hookimpls())
        self.retryable = bool(hooks and hooks.toolflow_retryable.get_hookimpls())
        self.validates = bool(hooks and hooks.toolflow_validate_arguments.get_hookimpls())
        self.records = self.before or self.after or self.wraps or self.retryable

    def observe(self, hook_name: str, **kwargs: Any) -> None:
        """Call every implementation of an observer hook, reporting (not raising) what fails."""
        if self.plugins is None:
            return
        for impl in getattr(self.plugins.manager.hook, hook_name).get_hookimpls():  # registration order
            try:
                impl.function(**{name: kwargs[name] for name in impl.argnames})
            except Exception as exc:  # noqa: BLE001 - an observer must never fail the call
                message = f"{hook_name} of plugin {impl.plugin_name!r} raised {error_text(exc)}"
                warnings.warn(CallHookWarning(message), stacklevel=2)

    def argument_errors(self, call: ToolCall) -> tuple[ParameterError, ...]:
        """What the plugins' ``toolflow_validate_arguments`` find wrong with *call*'s arguments, in plugin order."""
        errors: list[ParameterError] = []
        for impl in cast("Plugins", self.plugins).manager.hook.toolflow_validate_arguments.get_hookimpls():
            try:
                found = impl.function(
                    **{name: {"call": call, "arguments": call.arguments}[name] for name in impl.argnames}
                )
            except Exception as exc:  # noqa: BLE001 - reported, and the call fails: an unchecked call must not run
                message = f"toolflow_validate_arguments of plugin {impl.plugin_name!r} raised {error_text(exc)}"
                warnings.warn(CallHookWarning(message), stacklevel=2)
                errors.append(
                    ParameterError(parameter=ARGUMENTS, message="the tool's own check of the arguments failed")
                )
                continue
            errors.extend(_argument_errors(found))
        return tuple(errors)

    def wrappers(self, call: ToolCall) -> Iterator[Any]:
        """The wrap_call context managers for *call*, first registered first (outermost)."""
        if self.plugins is None:
            return
        for impl in self.plugins.manager.hook.toolflow_wrap_call.get_hookimpls():  # registration order
            wrapper = impl.function(**{name: call for name in impl.argnames if name == "call"})
            if wrapper is not None:
                yield wrapper


def _argument_errors(found: object) -> Iterator[ParameterError]:
    """A ``toolflow_validate_arguments`` answer as errors: none, a string, strings, or ``{parameter: message}``."""
    if not found:
        return
    if isinstance(found, str):
        yield ParameterError(parameter=ARGUMENTS, message=found)
    elif isinstance(found, Mapping):
        yield from (ParameterError(parameter=str(name), message=str(message)) for name, message in found.items())
    else:
        yield from (ParameterError(parameter=ARGUMENTS, message=str(message)) for message in cast("Any", found))


def record(call_id: str, name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """The call as the plugins' hooks see it."""
    return ToolCall(id=call_id, name=name, arguments=arguments, format="direct")


class Slots:
    """A concurrency limit whose free slot is taken without a trip through the scheduler.

    ``trio.CapacityLimiter`` keeps a set of borrowers; here taking a free slot is
    ``slots.free -= 1``. Waiters queue in a FIFO ``ParkingLot`` and :meth:`release` hands the
    slot straight to the first of them, so no call jumps the queue (``free`` is positive only
    while nobody waits).
    """

    __slots__ = ("_lot", "free", "waiting")

    def __init__(self, total: int) -> None:
        self.free = total
        self.waiting = 0  # tasks inside wait(), until they resume
        self._lot = trio.lowlevel.ParkingLot()

    async def wait(self) -> None:
        """Wait until :meth:`release` hands a slot over; only when :attr:`free` is 0."""
        self.waiting += 1
        try:
            await self._lot.park()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        # Nobody waits: the slot is free. Otherwise the lot says who still waits: a cancelled
        # waiter leaves it at once (trio's abort callback runs inside cancel()), before its task
        # resumes and leaves wait(), so unpark() hands the slot to the first live waiter, which
        # can no longer be cancelled out of it, or to nobody.
        if not self.waiting or not self._lot.unpark():
            self.free += 1


class _ThreadSlot:
    """A per-call limiter for ``trio.to_thread.run_sync`` whose token can be given back early.

    trio releases a thread's token only when the thread ends, so a hung, abandoned sync tool
    would hold it forever; :meth:`abandon` returns the token to *pool* as soon as the call gives
    up on the thread, and the late release from trio is then a no-op.
    """

    __slots__ = ("_borrower", "_pool")

    def __init__(self, pool: trio.CapacityLimiter) -> None:
        self._pool = pool
        self._borrower: object | None = None

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        await self._pool.acquire_on_behalf_of(borrower)
        self._borrower = borrower

    def release_on_behalf_of(self, borrower: object) -> None:
        if self._borrower is borrower:
            self._borrower = None
            self._pool.release_on_behalf_of(borrower)

    def abandon(self) -> None:
        if self._borrower is not None:
            self.release_on_behalf_of(self._borrower)


class Plan:
    """What a call needs to know about its tool, worked out once per tool (per engine, or per :func:`call_once`)."""

    __slots__ = (
        "awaited",
        "bound",
        "cache_scope",
        "category",
        "dangerous",
        "depends_on",
        "function",
        "gated",
        "is_clean",
        "leased",
        "limits",
        "name",
        "needs",
        "normalize",
        "pipeline",
        "plain_results",
        "redact",
        "retries",
        "slots",
        "spec",
        "tool",
        "ttl",
        "validate",
        "with_context",
    )

    def __init__(self, tool: RegisteredTool) -> None:
        spec = tool.spec
        self.tool = tool
        self.spec = spec
        self.name = spec.name
        self.validate = tool.validator.validate
        self.is_clean = tool.validator.is_clean
        self.normalize = tool.result_validator.normalize
        self.plain_results = tool.result_validator.compiled is None  # no output_schema to check
        self.category = spec.category
        self.redact = (Redactor(string for _, string in spec.interpolated) or None) if spec.interpolated else None
        self.dangerous = spec.category == Category.DANGEROUS
        self.cache_scope = None if spec.cache is None else CacheScope(spec.cache.scope)
        self.ttl = None if spec.cache is None else spec.cache.ttl
        self.depends_on = spec.depends_on
        self.needs = frozenset(dependency.tool for dependency in spec.depends_on) if spec.depends_on else _NONE
        self.bound = bool(spec.context)  # parameters filled from the caller's context (toolflow._bound)
        self.pipeline = tool.pipeline  # an engine runs a pipeline's steps itself (toolflow._pipelines)
        # An engine's, set by the engine: the tool's ``concurrency``, its gates, whether it retries.
        self.slots: Slots | None = None
        self.limits: SharedLimits | None = None  # kept by the state backend: rate_limit, leases
        self.leased = False  # each attempt takes a lease of the fleet-wide concurrency
        self.gated = False
        self.retries = False
        # Filled in by the first call that resolves the implementation (a failure is tried again).
        self.function: Callable[..., Any] | None = None
        self.awaited = False  # an async implementation: awaited in the call's own task
        self.with_context = False

    def resolve(self) -> Callable[..., Any]:
        """The implementation, imported or built at the first call; PluginError when that fails."""
        if self.function is None:
            function = self.tool.resolve()
            self.awaited = self.tool.is_async
            self.with_context = wants_context(function)
            self.function = function
        return self.function


def checked_arguments(
    plan: Plan, arguments: object, hooks: Hooks | None = None, call_id: str = "call_0", *, ignore_bound: bool = False
) -> Checked:
    """The validated arguments and their warnings, or the failure that answers invalid ones (step 3).

    Parameters the tool binds to the caller's context are filled first (``toolflow._bound``;
    *ignore_bound*: values the arguments set for them are dropped rather than refused); the
    plugins' ``toolflow_validate_arguments`` check what the schema and the rules passed.
    """
    if plan.bound:
        arguments = bind(plan.spec, arguments, ignore_sent=ignore_bound)
        if isinstance(arguments, ToolResult):
            return arguments
    cleaned: Mapping[str, Any]
    warnings: tuple[str, ...]
    if plan.is_clean(arguments):  # validate()'s happy path, without its result object
        cleaned, warnings = cast("dict[str, Any]", arguments), ()
    else:
        validation = plan.validate(arguments)
        if not validation.valid:
            return ToolResult.failure(validation.format_for_llm(plan.name), warnings=validation.warnings)
        cleaned, warnings = validation.cleaned, validation.warnings
    if hooks is not None and hooks.validates:
        errors = hooks.argument_errors(record(call_id, plan.name, cleaned))
        if errors:
            refused = ValidationResult(valid=False, errors=errors, warnings=warnings)
            return ToolResult.failure(refused.format_for_llm(plan.name), warnings=warnings)
    return cleaned, warnings


def finished(plan: Plan, result: ToolResult, warnings: tuple[str, ...]) -> ToolResult:
    """*result* with the argument *warnings* first and the values of the tool's ``${...}`` strings masked."""
    if plan.redact is not None and (result.error or result.warnings):
        redact = plan.redact
        result = ToolResult(
            success=result.success,
            data=result.data,
            error=None if result.error is None else redact(result.error),
            warnings=tuple(redact(warning) for warning in result.warnings),
            extra=result.extra,
        )
    if warnings:
        result = ToolResult(
            success=result.success,
            data=result.data,
            error=result.error,
            warnings=(*warnings, *result.warnings),
            extra=result.extra,
        )
    return result


class Attempts:
    """Runs the attempts of calls: behind concurrency slots, under deadlines, with retries; kill ends them.

    Args:
        hooks: The plugins' call hooks (``wrap_call`` around each attempt, ``retryable``).
        threads: The worker-thread tokens of sync implementations.
        slots: The global concurrency limit, or ``None`` for none.
        counted: Whether results carry ``extra["attempts"]`` (an engine's); failed attempts are
            retried when the plan says so (the engine's plans do, as the tool's spec allows).
    """

    __slots__ = ("counted", "hooks", "kills", "scopes", "slots", "stoppable", "threads")

    def __init__(self, hooks: Hooks, *, threads: trio.CapacityLimiter, slots: Slots | None, counted: bool) -> None:
        self.hooks = hooks
        self.threads = threads
        self.slots = slots
        self.counted = counted
        self.kills = 0  # kill() counts up; a call that sees it change was killed
        self.scopes: set[trio.CancelScope] = set()  # every scope a kill cancels
        self.stoppable: set[trio.CancelScope] = set()  # waits for a first slot, which a stop cancels

    def kill(self) -> None:
        """Cancel every wait of every call: attempts, back-offs, waits for a slot (and :meth:`guarded` waits)."""
        self.kills += 1
        for scope in tuple(self.scopes):
            scope.cancel()

    def stop(self) -> None:
        """End the waits that a stop ends: a call's wait for its first slot (and stoppable :meth:`guarded` waits)."""
        for scope in tuple(self.stoppable):
            scope.cancel()

    @contextlib.contextmanager
    def guarded(self, scope: trio.CancelScope, *, stoppable: bool) -> Iterator[trio.CancelScope]:
        """Enter *scope* as one that a kill (and, if *stoppable*, a stop) cancels."""
        self.scopes.add(scope)
        if stoppable:
            self.stoppable.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self.scopes.discard(scope)
            self.stoppable.discard(scope)

    async def run(
        self, plan: Plan, function: Callable[..., Any], cleaned: Mapping[str, Any], call: ToolCall | None, call_id: str
    ) -> ToolResult:
        """Run the attempts of one call; :data:`KILLED` or :data:`STOPPED` when a kill or a stop ended it.

        Each attempt holds its slots (and a lease of the fleet-wide ``concurrency``, renewed
        while it runs) and runs under a cancel scope with the tool's deadline, which a kill
        cancels too (a kill is told by the kill count); the slots and the lease are given back
        when it ends.
        """
        kills = self.kills
        logs = logger.isEnabledFor(logging.INFO)
        started = trio.current_time() if logs else 0.0
        attempt = 1
        while True:
            holder = ""
            if plan.leased or not self._take_free_slots(plan):
                taken = await self._take_slots(plan, kills, stoppable=attempt == 1)
                if isinstance(taken, ToolResult):  # killed, stopped, or refused (on_outage: closed)
                    return taken
                holder = taken
            attempt_started = trio.current_time()
            scope = trio.CancelScope(deadline=attempt_started + plan.spec.timeout)
            self.scopes.add(scope)
            value: object = None
            error: BaseException | None = None
            try:
                with scope:
                    work = self._dispatch(plan, function, cleaned, call, call_id, attempt, scope.deadline)
                    value = await (cast("SharedLimits", plan.limits).hold(work, holder) if holder else work)
            except BaseException as exc:  # noqa: BLE001 - the tool's failure; own_error raises interruptions on
                error = own_error(exc)
            finally:
                self.scopes.discard(scope)
                self._release_slots(plan)
                if holder:
                    await cast("SharedLimits", plan.limits).give_back(holder)
            if self.kills != kills:
                return KILLED
            result, error = self._outcome(plan, value, error, attempt, timed_out=scope.cancelled_caught)
            if result.success or not plan.retries:
                break
            delay = self._retry_delay(plan, call, result, error, attempt, started=attempt_started)
            if delay is None:
                break
            with self.guarded(trio.CancelScope(), stoppable=False):
                await trio.sleep(delay)
            if self.kills != kills:
                return KILLED
            attempt += 1
        if logs:
            elapsed_ms = (trio.current_time() - started) * 1000
            logger.info("Function call completed: %s (%dms)", plan.name, round(elapsed_ms))
        return result

    async def _take_slots(self, plan: Plan, kills: int, *, stoppable: bool) -> str | ToolResult:
        """Take the attempt's slots, waiting as long as needed, and its lease when the plan has one.

        The lease's holder (empty: none needed), or a result with no slot held: :data:`KILLED`
        or :data:`STOPPED` when a kill or a stop ended a wait, or the call's refusal.
        """
        if not self._take_free_slots(plan) and not await self._wait_for_slots(plan, stoppable=stoppable):
            return KILLED if self.kills != kills else STOPPED
        if not plan.leased:
            return ""
        taken = await cast("SharedLimits", plan.limits).take(stoppable=stoppable)
        if isinstance(taken, ToolResult):
            self._release_slots(plan)
        return taken

    def _dispatch(  # noqa: PLR0917 - one attempt's whole context
        self,
        plan: Plan,
        function: Callable[..., Any],
        cleaned: Mapping[str, Any],
        call: ToolCall | None,
        call_id: str,
        attempt: int,
        deadline: float,
    ) -> Awaitable[Any]:
        """The awaitable of one attempt: the implementation awaited, in a worker thread, or inside the wrappers."""
        kwargs = cleaned
        if plan.with_context:
            context = CallContext.current(call_id=call_id, tool=plan.name, attempt=attempt, deadline=deadline)
            kwargs = {**cleaned, "ctx": context}  # the context wins over an argument named ctx
        if self.hooks.wraps:
            return self._wrapped(plan, function, kwargs, cast("ToolCall", call))
        if plan.awaited:
            return cast("Awaitable[Any]", function(**kwargs))
        return self._in_thread(functools.partial(function, **kwargs))

    async def _wrapped(
        self, plan: Plan, function: Callable[..., Any], kwargs: Mapping[str, Any], call: ToolCall
    ) -> Any:
        """Run the implementation inside the plugins' wrap_call wrappers."""
        async with contextlib.AsyncExitStack() as stack:
            for wrapper in self.hooks.wrappers(call):
                await stack.enter_async_context(wrapper)
            if plan.awaited:
                return await function(**kwargs)
            return await self._in_thread(functools.partial(function, **kwargs))

    async def _in_thread(self, function: Callable[[], Any]) -> Any:
        slot = _ThreadSlot(self.threads)
        try:
            # trio takes any object with acquire_on_behalf_of/release_on_behalf_of as limiter.
            limiter = cast("trio.CapacityLimiter", slot)
            return await trio.to_thread.run_sync(sync_call, function, abandon_on_cancel=True, limiter=limiter)
        finally:
            slot.abandon()  # a no-op unless the thread was abandoned

    def _take_free_slots(self, plan: Plan) -> bool:
        """Take a slot of the tool's limit and a global one when both are free (no checkpoint: the attempt has one)."""
        per_tool, slots = plan.slots, self.slots
        if (per_tool is None or per_tool.free) and (slots is None or slots.free):
            if per_tool is not None:
                per_tool.free -= 1
            if slots is not None:
                slots.free -= 1
            return True
        return False

    async def _wait_for_slots(self, plan: Plan, *, stoppable: bool) -> bool:
        """Take a slot of the tool's limit, then a global one, waiting as long as needed.

        False (and no slot held) when a kill or, if *stoppable*, a stop ended a wait.
        """
        per_tool = plan.slots
        if per_tool is not None and not await self.take(per_tool, stoppable=stoppable):
            return False
        if self.slots is not None and not await self.take(self.slots, stoppable=stoppable):
            if per_tool is not None:
                per_tool.release()
            return False
        return True

    async def take(self, slots: Slots, *, stoppable: bool) -> bool:
        """Take a slot of *slots*, waiting as long as needed.

        False (and no slot held) when a kill or, if *stoppable*, a stop ended the wait.
        """
        if slots.free:
            slots.free -= 1
            return True
        with self.guarded(trio.CancelScope(), stoppable=stoppable):
            await slots.wait()
            return True
        return False

    def _release_slots(self, plan: Plan) -> None:
        if self.slots is not None:
            self.slots.release()
        if plan.slots is not None:
            plan.slots.release()

    def _outcome(
        self, plan: Plan, value: object, error: BaseException | None, attempt: int, *, timed_out: bool
    ) -> tuple[ToolResult, BaseException | None]:
        """What an attempt that returned *value*, raised *error* or *timed_out* answers, and the error it ended with.

        A value becomes a result as ``ResultValidator.normalize`` makes it, with ``attempts``
        when counted.
        """
        if isinstance(value, Thrown):
            error = value.error
        if error is not None:
            return self._failure(f"Error: tool {plan.name!r} raised {error_text(error)}", attempt), error
        if timed_out:
            error = TimeoutError(f"tool {plan.name!r} timed out after {_seconds(plan.spec.timeout)}")
            return self._failure(f"Error: {error}", attempt), error
        if plan.plain_results and type(value) in _PLAIN_DATA:
            # What normalize() makes of it, without its checks.
            return ToolResult(success=True, data=value, extra={"attempts": attempt} if self.counted else None), None
        result = plan.normalize(value)
        if self.counted:
            result = attrs.evolve(result, extra={**result.extra, "attempts": attempt})
        return result, None

    def _failure(self, error: str, attempt: int) -> ToolResult:
        return ToolResult.failure(error, extra={"attempts": attempt} if self.counted else None)

    def _retry_delay(
        self,
        plan: Plan,
        call: ToolCall | None,
        result: ToolResult,
        error: BaseException | None,
        attempt: int,
        *,
        started: float,
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to stop (see :mod:`toolflow._retrying`).

        Logs the failed attempt and the decision at INFO on ``toolflow.attempts``.
        """
        policy = plan.spec.retry
        verdict = None
        if self.hooks.retryable and error is not None:
            verdict = first_verdict(self.hooks.plugins, "toolflow_retryable", call=call, error=error)
        decision = classify(error if error is not None else result, policy, verdict=verdict)
        delay = next_delay(policy, attempt, decision)
        if policy.attempts > 1 and attempt_logger.isEnabledFor(logging.INFO):
            if delay is not None:
                then = f"retrying in {delay:.2f}s ({decision.reason})"
            elif not decision.retryable:
                then = f"not retried: {decision.reason}"
            elif attempt >= policy.attempts:
                then = f"no attempts left ({attempt} of {policy.attempts})"
            else:
                then = f"not retried: the server asks to wait {decision.retry_after:g}s, over {RETRY_AFTER_CEILING:g}s"
            elapsed_ms = round((trio.current_time() - started) * 1000)
            what = without_prefix(result.error or "")  # the line says the attempt failed already
            attempt_logger.info(
                "Attempt %d of %s failed after %dms: %s; %s", attempt, plan.name, elapsed_ms, what, then
            )
        return delay


async def call_once(
    tool: RegisteredTool,
    arguments: object,
    *,
    plugins: Plugins | None,
    call_id: str,
    body: Callable[[Mapping[str, Any]], Awaitable[ToolResult]] | None = None,
    approval: Callable[[Mapping[str, Any]], Awaitable[ToolResult | None]] | None = None,
) -> ToolResult:
    """One call of *tool* without an engine (``toolflow.invoke``): validated, one attempt under the tool's timeout.

    No gates, caches, retries or concurrency limits, no ``attempts`` key in the result; the call
    hooks of *plugins* take part as in an engine. *body*, given the validated arguments, runs the
    call instead of an attempt of the implementation (a pipeline's steps). *approval*, given the
    validated arguments, answers ``None`` (run it) or the result of a call that was not approved.
    """
    plan = Plan(tool)
    hooks = Hooks(plugins)
    checked = checked_arguments(plan, arguments, hooks, call_id)
    if isinstance(checked, ToolResult):
        raw = dict(arguments) if isinstance(arguments, dict) else {}
        return after_call(hooks, plan, finished(plan, checked, ()), call_id, raw)
    cleaned, warnings = checked
    try:
        function = plan.resolve() if body is None else None
    except PluginError as exc:
        return after_call(hooks, plan, finished(plan, ToolResult.failure(str(exc)), warnings), call_id, cleaned)
    refusal = None if approval is None else await approval(cleaned)
    if refusal is not None:
        return after_call(hooks, plan, finished(plan, refusal, warnings), call_id, cleaned)
    call = record(call_id, plan.name, cleaned) if hooks.records else None
    if hooks.before:
        hooks.observe("toolflow_before_call", call=call)
    if function is None:
        result = await cast("Callable[[Mapping[str, Any]], Awaitable[ToolResult]]", body)(cleaned)
    else:
        threads = trio.to_thread.current_default_thread_limiter()
        attempts = Attempts(hooks, threads=threads, slots=None, counted=False)
        result = await attempts.run(plan, function, cleaned, call, call_id)
    return after_call(hooks, plan, finished(plan, result, warnings), call_id, cleaned, call)


def after_call(  # noqa: PLR0917 - the call's whole ending
    hooks: Hooks,
    plan: Plan,
    result: ToolResult,
    call_id: str,
    arguments: Mapping[str, Any],
    call: ToolCall | None = None,
) -> ToolResult:
    """*result*, after the plugins' ``after_call`` hooks saw it."""
    if hooks.after:
        hooks.observe("toolflow_after_call", call=call or record(call_id, plan.name, arguments), result=result)
    return result
