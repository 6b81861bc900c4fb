"""The trio executor: every tool call looked up, gated, validated, cached, timed out, retried and recorded.

:func:`open_engine` yields an :class:`Engine`. :meth:`Engine.call` runs one call through
issue 4's flow (seed 000, steps 3-8):

1. look the tool up (unknown: a failure result naming the nearest tools);
2. gate it: an allowlist in force blocks a tool outside it (a model-visible ``blocked``
   result, nothing dispatched); a ``depends_on`` tool that has not yet succeeded (in this
   loop, see :meth:`Engine.new_loop`, or in this session) makes a result saying what must
   run first;
3. validate the arguments with the tool's validator;
4. look the result up in the cache of the tool's ``cache`` scope (``tick``, ``session`` or
   ``persistent``), keyed by :func:`toolflow._cache.cache_key`;
5. run attempts, each under ``trio.fail_after(spec.timeout)``: async implementations are
   awaited, sync ones run in a worker thread that is abandoned at the timeout; a timeout is
   the failure ``timed out after 30s``;
6. retry what :mod:`toolflow._retrying` says may be retried, sleeping the backoff with
   ``trio.sleep``; a ``dangerous`` tool is retried only when ``idempotent``; the result's
   ``extra["attempts"]`` says how many attempts ran;
7. normalise, cache a success, run the plugins' ``after_call`` hooks and log the duration at
   INFO (``Function call completed: name (12ms)``).

Nothing escapes :meth:`Engine.call` but cancellation: ``trio.Cancelled`` (and other
``BaseException``) is never caught, never retried and never cached.

:meth:`Engine.run_batch` runs the calls of one model turn: non-dangerous calls concurrently in
a nursery, then ``dangerous`` calls one after another, at most one per tick (the others get a
model-visible failure); one result per call, in the order of the calls. It is built on
:meth:`Engine.execute_batch`, which returns seed 002's discriminated outcome: a
:class:`HistoryEntry` per call, in call order, or one :class:`Abort` accounting for every call
of the batch (``stopped``: :meth:`Engine.request_stop` before a call was dispatched;
``killed``: :meth:`Engine.kill` cancelled the batch, and no killed tool's result becomes an
entry; ``malformed_calls``: more than ``max_malformed`` malformed calls). A plain timeout stays
a failure entry the model sees.

Sync tools run in worker threads behind ``max_threads`` tokens; an abandoned (timed out or
killed) thread gives its token back at once, so hung sync tools never starve the others (the
thread itself runs on until its function returns).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from typing import Any, Literal, TypeAlias, cast

import attrs
import trio

from toolflow._cache import CacheBackend, MemoryCache, cache_key, open_cache
from toolflow._calls import MalformedCall, ParsedCall, ToolCall, parse_tool_calls
from toolflow._context import CallContext, wants_context
from toolflow._invoke import CallHookWarning, _observe, _wrappers
from toolflow._model import CacheScope, Category, ToolSpec
from toolflow._plugins import PluginError, Plugins
from toolflow._registry import RegisteredTool, Registry, UnknownToolError
from toolflow._results import ToolResult
from toolflow._retrying import classify, may_retry_automatically, next_delay

__all__ = [
    "ONE_DANGEROUS_PER_TURN",
    "Abort",
    "AbortReason",
    "BatchOutcome",
    "Engine",
    "HistoryEntry",
    "Outcome",
    "open_engine",
]

logger = logging.getLogger("toolflow")

ONE_DANGEROUS_PER_TURN = "Error: one dangerous action per turn - {name!r} was not run; call it again next turn"
"""The failure of a dangerous call after the first of its tick."""


def _seconds(value: float) -> str:
    """A duration as a spec writes it: ``500ms`` below a second, else ``30s``, ``1.5s``."""
    return f"{value * 1000:g}ms" if value < 1 else f"{value:g}s"


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
    """

    call_id: str
    tool_name: str
    call: ParsedCall
    result: ToolResult
    success: bool


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


class Engine:
    """Runs tool calls of one registry; made by :func:`open_engine`, valid inside its ``async with``."""

    def __init__(
        self,
        registry: Registry,
        *,
        plugins: Plugins | None,
        allowlist: Collection[str] | None,
        max_concurrency: int,
        cache_path: str | os.PathLike[str] | None,
        clock: Callable[[], float],
        max_threads: int | None = None,
        max_malformed: int = 3,
    ) -> None:
        if max_concurrency < 1:
            msg = f"max_concurrency must be at least 1, got {max_concurrency!r}"
            raise ValueError(msg)
        if max_threads is not None and max_threads < 1:
            msg = f"max_threads must be at least 1, got {max_threads!r}"
            raise ValueError(msg)
        if max_malformed < 0:
            msg = f"max_malformed must not be negative, got {max_malformed!r}"
            raise ValueError(msg)
        self.registry = registry
        self.plugins = plugins
        self.allowlist = None if allowlist is None else frozenset(allowlist)
        self._clock = clock
        self._cache_path = cache_path
        self._global = trio.CapacityLimiter(max_concurrency)
        self._threads = trio.CapacityLimiter(max_concurrency if max_threads is None else max_threads)
        self.max_malformed = max_malformed
        self._stop_requested = False
        self._batch_scopes: set[trio.CancelScope] = set()
        self._per_tool: dict[str, trio.CapacityLimiter] = {}
        self._caches: dict[CacheScope, CacheBackend] = {}
        self._succeeded_loop: set[str] = set()
        self._succeeded_session: set[str] = set()
        self._dangerous_this_tick = 0
        # Which call hooks exist, looked up once: most engines have none, and the look-up copies lists.
        hooks = plugins.manager.hook if plugins is not None else None
        self._observes_before = bool(hooks and hooks.toolflow_before_call.get_hookimpls())
        self._observes_after = bool(hooks and hooks.toolflow_after_call.get_hookimpls())
        self._wraps = bool(hooks and hooks.toolflow_wrap_call.get_hookimpls())

    # --- lifecycle -----------------------------------------------------------------------

    def tick(self) -> None:
        """Start a new tick (model turn): clear the tick cache, allow one dangerous call again, clear a stop."""
        self._stop_requested = False
        tick_cache = self._caches.get(CacheScope.TICK)
        if tick_cache is not None:
            tick_cache.clear()
        self._dangerous_this_tick = 0

    def new_loop(self) -> None:
        """Start a new agent loop: ``depends_on`` rules of scope ``loop`` must be satisfied again."""
        self._succeeded_loop.clear()

    @property
    def stop_requested(self) -> bool:
        """Whether a stop (or kill) is pending; :meth:`tick` clears it."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Stop this turn: calls not yet dispatched abort as ``stopped``; calls in flight finish."""
        self._stop_requested = True

    def kill(self) -> None:
        """Cancel every batch in flight at once (each aborts as ``killed``) and stop the turn."""
        self._stop_requested = True
        for scope in self._batch_scopes:
            scope.cancel()

    def close(self) -> None:
        """Close every cache (done by :func:`open_engine` on exit)."""
        for cache in self._caches.values():
            cache.close()
        self._caches.clear()

    # --- one call --------------------------------------------------------------------------

    async def call(self, name: str, arguments: object, *, call_id: str = "call_0") -> ToolResult:
        """Run one call of tool *name* with *arguments* and return its result; only cancellation escapes."""
        try:
            tool = self.registry.get(name)
        except UnknownToolError as exc:
            return ToolResult.failure(f"Error: {exc}")
        if self.allowlist is not None and name not in self.allowlist:
            allowed = sorted(self.allowlist)
            listed = ", ".join(repr(n) for n in allowed) or "none"
            return ToolResult.failure(
                f"Error: tool {name!r} is not available now; allowed tools: {listed}",
                extra={"status": "blocked", "allowed": allowed},
            )
        missing = self._unmet_dependencies(tool.spec)
        if missing:
            first = ", ".join(repr(n) for n in missing)
            return ToolResult.failure(
                f"Error: {name!r} cannot run yet - run {first} successfully first",
                extra={"status": "dependency", "requires": missing},
            )
        validation = tool.validator.validate(arguments)
        if validation.valid:
            cleaned = dict(validation.cleaned)
        else:
            cleaned = dict(arguments) if isinstance(arguments, dict) else {}
        call = ToolCall(id=call_id, name=name, arguments=cleaned, format="direct")
        result = await self._run(tool, validation, call)
        if validation.warnings:
            result = attrs.evolve(result, warnings=(*validation.warnings, *result.warnings))
        if result.success:
            self._succeeded_loop.add(name)
            self._succeeded_session.add(name)
        if self._observes_after and self.plugins is not None:
            _observe(self.plugins, "toolflow_after_call", call=call, result=result)
        return result

    def _unmet_dependencies(self, spec: ToolSpec) -> list[str]:
        missing: list[str] = []
        for dependency in spec.depends_on:
            done = self._succeeded_session if dependency.scope == "session" else self._succeeded_loop
            if dependency.tool not in done:
                missing.append(dependency.tool)
        return missing

    async def _run(self, tool: RegisteredTool, validation: Any, call: ToolCall) -> ToolResult:
        if not validation.valid:
            return ToolResult.failure(validation.format_for_llm(tool.name))
        spec = tool.spec
        cache, key = self._cache_for(spec, call)
        if cache is not None and key is not None:
            hit = cache.get(key)
            if hit is not None:
                return attrs.evolve(hit, extra={**hit.extra, "attempts": 0, "cached": True})
        try:
            implementation = tool.resolve()
            is_async = tool.is_async
        except PluginError as exc:
            return ToolResult.failure(str(exc), extra={"attempts": 0})
        if self._observes_before and self.plugins is not None:
            _observe(self.plugins, "toolflow_before_call", call=call)
        function: Callable[[], Any] = functools.partial(implementation, **validation.cleaned)
        started = trio.current_time()
        # wants_context inspects each implementation once; afterwards it is a dict look-up.
        result, attempts = await self._attempts(
            tool, call, function, is_async=is_async, with_context=wants_context(implementation)
        )
        elapsed_ms = (trio.current_time() - started) * 1000
        logger.info("Function call completed: %s (%dms)", tool.name, round(elapsed_ms))
        if cache is not None and key is not None and result.success:
            cache.set(key, result, spec.cache.ttl if spec.cache is not None else None)
        return attrs.evolve(result, extra={**result.extra, "attempts": attempts})

    def _cache_for(self, spec: ToolSpec, call: ToolCall) -> tuple[CacheBackend | None, str | None]:
        if spec.cache is None:
            return None, None
        scope = CacheScope(spec.cache.scope)
        cache = self._caches.get(scope)
        if cache is None:
            if scope is CacheScope.PERSISTENT:
                cache = open_cache(scope, path=self._cache_path, plugins=self.plugins, clock=self._clock)
            else:
                cache = MemoryCache(clock=self._clock)
            self._caches[scope] = cache
        return cache, cache_key(spec, call.arguments)

    def _limiter(self, spec: ToolSpec) -> trio.CapacityLimiter | None:
        if spec.concurrency is None:
            return None
        limiter = self._per_tool.get(spec.name)
        if limiter is None:
            limiter = self._per_tool[spec.name] = trio.CapacityLimiter(spec.concurrency)
        return limiter

    async def _attempts(
        self, tool: RegisteredTool, call: ToolCall, function: Callable[..., Any], *, is_async: bool, with_context: bool
    ) -> tuple[ToolResult, int]:
        spec = tool.spec
        policy = spec.retry
        retry_allowed = may_retry_automatically(spec)
        attempt = 0
        while True:
            attempt += 1
            result, error = await self._attempt(
                tool, call, function, is_async=is_async, attempt=attempt if with_context else 0
            )
            if result.success or not retry_allowed:
                return result, attempt
            decision = classify(error if error is not None else result, policy, verdict=self._verdict(call, error))
            delay = next_delay(policy, attempt, decision)
            if delay is None:
                return result, attempt
            await trio.sleep(delay)

    async def _attempt(
        self, tool: RegisteredTool, call: ToolCall, function: Callable[..., Any], *, is_async: bool, attempt: int
    ) -> tuple[ToolResult, Exception | None]:
        """Run one attempt; return its result and the exception it raised, if any.

        *attempt* is the attempt's number when the implementation takes a ``ctx`` (it then gets
        a :class:`~toolflow._context.CallContext` as the keyword ``ctx``), else 0.
        """
        spec = tool.spec
        per_tool = self._limiter(spec)
        held: list[trio.CapacityLimiter] = []
        try:
            for limiter in (self._global,) if per_tool is None else (per_tool, self._global):
                # A free token is taken without a trip through the scheduler; only a full limiter waits.
                try:
                    limiter.acquire_nowait()
                except trio.WouldBlock:
                    await limiter.acquire()
                held.append(limiter)
            # A bare cancel scope rather than trio.fail_after: the same deadline, without the
            # generator-based context managers that cost more than the rest of a trivial call.
            deadline = trio.current_time() + spec.timeout
            if attempt:
                context = CallContext.current(call_id=call.id, tool=tool.name, attempt=attempt, deadline=deadline)
                function = functools.partial(function, ctx=context)  # the context wins over an argument named ctx
            with trio.CancelScope(deadline=deadline) as scope:
                if self._wraps:
                    async with contextlib.AsyncExitStack() as stack:
                        for wrapper in _wrappers(self.plugins, call):
                            await stack.enter_async_context(wrapper)
                        value = await function() if is_async else await self._in_thread(function)
                else:
                    value = await function() if is_async else await self._in_thread(function)
            if scope.cancelled_caught:
                message = f"timed out after {_seconds(spec.timeout)}"
                return ToolResult.failure(message), TimeoutError(message)
        except Exception as exc:  # noqa: BLE001 - a failing tool is a result the model sees; Cancelled is not an Exception
            return ToolResult.failure(f"{type(exc).__name__}: {exc}"), exc
        finally:
            for limiter in reversed(held):
                limiter.release()
        return tool.result_validator.normalize(value), None

    async def _in_thread(self, function: Callable[[], Any]) -> Any:
        slot = _ThreadSlot(self._threads)
        try:
            # trio takes any object with acquire_on_behalf_of/release_on_behalf_of as limiter.
            limiter = cast("trio.CapacityLimiter", slot)
            return await trio.to_thread.run_sync(function, abandon_on_cancel=True, limiter=limiter)
        finally:
            slot.abandon()  # a no-op unless the thread was abandoned

    def _verdict(self, call: ToolCall, error: Exception | None) -> bool | None:
        """The first decision of a plugin's ``toolflow_retryable`` hook about *error*, if any."""
        if self.plugins is None or error is None:
            return None
        for impl in self.plugins.manager.hook.toolflow_retryable.get_hookimpls():
            kwargs = {"call": call, "error": error}
            try:
                verdict = impl.function(**{name: kwargs[name] for name in impl.argnames})
            except Exception as exc:  # noqa: BLE001 - a hook must never fail the call
                message = f"toolflow_retryable of plugin {impl.plugin_name!r} raised {type(exc).__name__}: {exc}"
                warnings.warn(CallHookWarning(message), stacklevel=2)
                continue
            if isinstance(verdict, bool):
                return verdict
        return None

    # --- batches ---------------------------------------------------------------------------

    async def run_batch(self, calls: Iterable[object] | None) -> list[ToolResult]:
        """Run the raw tool calls of one model turn; return one result per call, in their order.

        The simple path over :meth:`execute_batch`: when the batch aborts, each call that did
        not finish gets a failure result with the abort's message and ``extra`` ``{"status":
        "aborted", "reason": ...}``.
        """
        outcome = await self.execute_batch(calls)
        if not isinstance(outcome, Abort):
            return [entry.result for entry in outcome]
        finished = {entry.call_id: entry.result for entry in outcome.finished}
        aborted = ToolResult.failure(outcome.message, extra={"status": "aborted", "reason": outcome.reason})
        return [finished.get(call_id, aborted) for call_id in outcome.call_ids]

    async def execute(self, raw_call: object) -> Outcome:
        """Run one raw tool call; return its :class:`HistoryEntry` or an :class:`Abort`."""
        outcome = await self.execute_batch([raw_call])
        return outcome if isinstance(outcome, Abort) else outcome[0]

    async def execute_batch(self, raw_calls: Iterable[object] | None) -> BatchOutcome:
        """Run the raw tool calls of one model turn; return seed 002's discriminated outcome.

        One :class:`HistoryEntry` per call, in call order, or one :class:`Abort` naming every
        call id once. Malformed calls answer with their error (more than ``max_malformed`` of
        them abort the batch before anything runs). Calls of non-dangerous tools (and unknown
        ones) run concurrently; then ``dangerous`` calls run one at a time, and only the first
        of the tick is dispatched. A pending stop aborts calls not yet dispatched; a kill
        cancels the whole batch. Only cancellation from outside escapes.
        """
        parsed = parse_tool_calls(raw_calls)
        ids = tuple(item.id for item in parsed)
        malformed = sum(isinstance(item, MalformedCall) for item in parsed)
        if malformed > self.max_malformed:
            message = f"{malformed} malformed tool calls in one batch (at most {self.max_malformed} allowed)"
            return Abort(reason="malformed_calls", message=message, call_ids=ids)
        entries: list[HistoryEntry | None] = [None] * len(parsed)
        dangerous: list[tuple[int, ToolCall]] = []
        stopped = False

        async def run_one(index: int, call: ToolCall) -> None:
            nonlocal stopped
            if self._stop_requested:
                stopped = True
                return
            result = await self.call(call.name, call.arguments, call_id=call.id)
            if call.warnings:
                result = attrs.evolve(result, warnings=(*call.warnings, *result.warnings))
            entries[index] = _entry(call, result)

        with trio.CancelScope() as scope:
            self._batch_scopes.add(scope)
            try:
                async with trio.open_nursery() as nursery:
                    for index, item in enumerate(parsed):
                        if isinstance(item, MalformedCall):
                            entries[index] = _entry(item, item.to_result())
                        elif self._is_dangerous(item.name):
                            dangerous.append((index, item))
                        else:
                            nursery.start_soon(run_one, index, item)
                for index, item in dangerous:
                    if self._stop_requested:
                        stopped = True
                    elif self._dangerous_this_tick >= 1:
                        result = ToolResult.failure(
                            ONE_DANGEROUS_PER_TURN.format(name=item.name), extra={"status": "blocked"}
                        )
                        entries[index] = _entry(item, result)
                    else:
                        self._dangerous_this_tick += 1
                        await run_one(index, item)
            finally:
                self._batch_scopes.discard(scope)
        if scope.cancel_called:
            return Abort(reason="killed", message="the turn was killed while its tools ran", call_ids=ids)
        done = tuple(entry for entry in entries if entry is not None)
        if stopped or len(done) != len(parsed):
            message = "stop requested: calls not yet dispatched were not run"
            return Abort(reason="stopped", message=message, call_ids=ids, finished=done)
        return done

    def _is_dangerous(self, name: str) -> bool:
        return name in self.registry and self.registry.get(name).category == Category.DANGEROUS


def _entry(call: ParsedCall, result: ToolResult) -> HistoryEntry:
    return HistoryEntry(call_id=call.id, tool_name=call.name or "", call=call, result=result, success=result.success)


@contextlib.asynccontextmanager
async def open_engine(
    registry: Registry,
    *,
    plugins: Plugins | None = None,
    allowlist: Collection[str] | None = None,
    max_concurrency: int = 64,
    cache_path: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
    max_threads: int | None = None,
    max_malformed: int = 3,
) -> AsyncIterator[Engine]:
    """Open an :class:`Engine` over *registry*; its caches are closed on exit.

    Args:
        registry: The tools to run.
        plugins: Plugins whose call hooks take part in every call (and that may provide cache backends).
        allowlist: When given, only these tools may run; others get a model-visible ``blocked`` result.
        max_concurrency: At most this many attempts run at once, across all tools.
        cache_path: The SQLite file of the ``persistent`` cache (default: ``.toolflow/cache.sqlite3``).
        clock: Wall-clock seconds for cache expiry (default ``time.time``).
        max_threads: At most this many sync tools run in worker threads at once (default
            *max_concurrency*); an abandoned thread gives its place back at once.
        max_malformed: A batch with more malformed calls than this aborts as ``malformed_calls``.

    Raises:
        ValueError: *max_concurrency* or *max_threads* is less than 1, or *max_malformed* is negative.
    """
    engine = Engine(
        registry,
        plugins=plugins,
        allowlist=allowlist,
        max_concurrency=max_concurrency,
        cache_path=cache_path,
        clock=clock if clock is not None else time.time,
        max_threads=max_threads,
        max_malformed=max_malformed,
    )
    try:
        yield engine
    finally:
        engine.close()
