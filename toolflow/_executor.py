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
   ``persistent``), keyed by :func:`toolflow._cache.cache_key`. The ``persistent`` store (a
   SQLite file or a plugin's backend, which may block) is called from a worker thread, one
   operation at a time, and a call waits for it at most ``cache_timeout`` (50ms): then the
   look-up is a miss and the store is skipped;
4a. when the engine's :attr:`~Engine.policy` says the tool's category needs approval, ask for
   it (:mod:`toolflow._approval`: the engine's approver, the plugins, the request's asker):
   only now, so nobody approves a call that the gates, the validator or the cache would have
   answered; a refusal is the failure ``{"status": "denied"}``, and the plugins'
   ``before_call`` hooks see only calls that go on to run;
5. run attempts, each behind the concurrency limits (global, then the tool's
   ``concurrency``) and under a cancel scope with the tool's deadline (what
   ``trio.fail_after(spec.timeout)`` does, without its generator): async implementations are
   awaited, sync ones run in a worker thread that is abandoned at the timeout; a timeout is
   the failure ``timed out after 30s``;
6. retry what :mod:`toolflow._retrying` says may be retried, sleeping the backoff with
   ``trio.sleep``; a ``dangerous`` tool is retried only when ``idempotent``; the result's
   ``extra["attempts"]`` says how many attempts ran;
7. normalise, cache a success, run the plugins' ``after_call`` hooks and log the duration at
   INFO (``Function call completed: name (12ms)``). A result's ``error`` and ``warnings`` never
   echo a value the tool's spec took from ``${...}`` (an exception naming a URL with a key in
   it, say): such values are replaced by their ``${...}`` references
   (``toolflow._provenance.Redactor``).

Steps 3-7 are one implementation, :meth:`Engine._run`; :func:`toolflow.invoke` runs it in a
throwaway *bare* engine (:func:`run_bare`: no timeout, one attempt, no caches, no limits).

Nothing escapes :meth:`Engine.call` but cancellation: ``trio.Cancelled`` (and other
``BaseException``) is never caught, never retried and never cached.

Stop and kill reach every call. :meth:`Engine.kill` cancels every scope a call can wait in
(its attempt, a retry back-off, a wait for a slot) and every batch: a direct call returns the
failure ``{"status": "aborted", "reason": "killed"}``, its result dropped and never cached.
:meth:`Engine.request_stop` ends the waits for a first slot: such a call is not dispatched
(``{"status": "aborted", "reason": "stopped"}``); calls already running finish.

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

The hot path (``tests/bench/bench_executor.py``, ``docs/performance.md``): what a tool's spec
implies is worked out once per engine and tool (``_Plan``); a free concurrency slot is an
integer decrement (``_Slots``); the call record a hook sees is built only when a plugin has
call hooks; results are built once, with their ``attempts``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import time
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, TypeVar, cast

import attrs
import trio

from toolflow._approval import Approver, answer_of, current_asker, denied, no_approver
from toolflow._cache import (
    DEFAULT_CACHE_TIMEOUT,
    SQLITE_BACKEND,
    MemoryCache,
    PersistentStore,
    cache_backend_factory,
    cache_key,
    persistent_store,
)
from toolflow._calls import MalformedCall, ParsedCall, ToolCall, parse_tool_calls
from toolflow._context import CallContext, wants_context
from toolflow._errors import expect, expect_count, expect_names
from toolflow._model import CacheScope, Category
from toolflow._model import format_duration as _seconds
from toolflow._plugins import PluginError, Plugins
from toolflow._policy import Policy
from toolflow._provenance import Redactor
from toolflow._records import unchecked_init
from toolflow._registry import RegisteredTool, Registry, UnknownToolError
from toolflow._results import ToolResult, _unchecked_result
from toolflow._retrying import RETRY_AFTER_CEILING, classify, may_retry_automatically, next_delay

__all__ = [
    "ONE_DANGEROUS_PER_TURN",
    "Abort",
    "AbortReason",
    "BatchOutcome",
    "CallHookWarning",
    "Engine",
    "HistoryEntry",
    "Outcome",
    "open_engine",
]

logger = logging.getLogger("toolflow")
attempt_logger = logging.getLogger("toolflow.attempts")
"""Each failed attempt of a call that may be retried, and what was decided (INFO)."""

_NO_TOOLS = Registry(tools={})

ONE_DANGEROUS_PER_TURN = "Error: one dangerous action per turn - {name!r} was not run; call it again next turn"
"""The failure of a dangerous call after the first of its tick."""

_KILLED = ToolResult.failure(
    "the call was killed: its result, if any, was dropped", extra={"status": "aborted", "reason": "killed"}
)
_STOPPED = ToolResult.failure("stop requested: the call was not run", extra={"status": "aborted", "reason": "stopped"})
_KILLED_BATCH = "the turn was killed while its tools ran"
_STOPPED_BATCH = "stop requested: calls not yet dispatched were not run"
# Returned as they are (results are immutable), so that a batch can tell them by identity.

_PLAIN_DATA = frozenset({str, int, float, bool, list})
"""Return types that normalise to a plain success holding the value (see ``ResultValidator.normalize``)."""

_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
_NO_WAITS: Mapping[int, Any] = MappingProxyType({})


class _AttemptExtras(dict[int, Mapping[str, Any]]):
    """The read-only ``{"attempts": n}`` of a result, made once per *n*: ``_ATTEMPT_EXTRAS[n]``."""

    def __missing__(self, attempts: int) -> Mapping[str, Any]:
        extra = self[attempts] = MappingProxyType({"attempts": attempts})
        return extra


_ATTEMPT_EXTRAS = _AttemptExtras()


class CallHookWarning(UserWarning):
    """A plugin's call hook raised; the call went on without it."""


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


class _Slots:
    """A concurrency limit whose free slot is taken without a trip through the scheduler.

    ``trio.CapacityLimiter`` keeps a set of borrowers and costs about as much as a trivial
    tool call; here taking a free slot is ``slots.free -= 1``. Waiters queue in a FIFO
    ``ParkingLot`` and :meth:`release` hands the slot straight to the first of them, so no call
    jumps the queue (``free`` is positive only while nobody waits).
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
        # Nobody waits (the common case): the slot is free, without asking the lot. Otherwise the
        # lot says who still waits: a cancelled waiter leaves it at once (trio's abort callback
        # runs inside cancel()), before its task resumes and leaves wait(), so unpark() hands the
        # slot to the first live waiter, which can no longer be cancelled out of it, or to nobody.
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


class _Persistent:
    """One call's use of the persistent store: what to look up, and how long the call may still wait for it.

    The look-up and the store share one allowance of ``cache_timeout`` seconds, so that a call
    waits at most that long for the store in all: after a look-up that used it up (a lock, a
    hung backend), the store is skipped.
    """

    __slots__ = ("allowance", "cleaned", "key", "store", "warnings")

    def __init__(self, cleaned: Mapping[str, Any], warnings: tuple[str, ...], key: str, allowance: float) -> None:
        self.cleaned = cleaned
        self.warnings = warnings
        self.key = key
        self.allowance = allowance
        self.store: PersistentStore | None = None


_Prepared: TypeAlias = tuple[
    Callable[..., Any],
    Mapping[str, Any],
    tuple[str, ...],
    ToolCall | None,
    MemoryCache | _Persistent | None,
    str | None,
]
"""What :meth:`Engine._prepare` hands to the attempts: function, cleaned arguments, their warnings,
the call record (when hooks need one), the cache (a memory cache, or the call's use of the
persistent store) and the key."""

_T = TypeVar("_T")


class _Plan:
    """What the engine needs to know about one tool, worked out once per engine and tool."""

    __slots__ = (
        "awaited",
        "cache_scope",
        "category",
        "dangerous",
        "depends_on",
        "function",
        "gated",
        "is_clean",
        "name",
        "normalize",
        "plain_results",
        "redact",
        "retries",
        "slots",
        "spec",
        "timeout",
        "tool",
        "ttl",
        "validate",
        "with_context",
    )

    def __init__(self, tool: RegisteredTool, *, bare: bool) -> None:
        spec = tool.spec
        self.tool = tool
        self.spec = spec
        self.name = spec.name
        self.validate = tool.validator.validate
        self.is_clean = tool.validator.is_clean
        self.normalize = tool.result_validator.normalize
        self.plain_results = tool.result_validator.compiled is None  # no output_schema to check
        self.category = spec.category
        redactor = Redactor(string for _, string in spec.interpolated)
        self.redact = redactor or None
        self.dangerous = spec.category == Category.DANGEROUS
        self.timeout = math.inf if bare else spec.timeout
        self.retries = not bare and may_retry_automatically(spec)
        cache = None if bare else spec.cache
        self.cache_scope = None if cache is None else CacheScope(cache.scope)
        self.ttl = None if cache is None else cache.ttl
        self.slots = None if bare or spec.concurrency is None else _Slots(spec.concurrency)
        self.depends_on = () if bare else spec.depends_on
        self.gated = bool(self.depends_on)  # Engine.call adds its allowlist
        # Filled in by the first call that resolves the implementation (a failure is tried again).
        self.function: Callable[..., Any] | None = None
        self.awaited = False  # an async implementation: awaited in the call's own task
        self.with_context = False


def _check_arguments(
    *,
    registry: object,
    plugins: object,
    allowlist: object,
    max_concurrency: object,
    max_threads: object,
    max_malformed: object,
    cache_path: object,
    clock: object,
) -> None:
    """The checks of :func:`open_engine`'s arguments (a wrong one would fail later, at a call)."""
    expect(registry, Registry, "open_engine: registry", "a toolflow.Registry (from toolflow.load_registry())")
    expect(plugins, (Plugins, type(None)), "open_engine: plugins", "a toolflow.Plugins or None")
    expect_names(allowlist, "open_engine: allowlist", what="tool names", optional=True)
    expect_count(max_concurrency, "open_engine: max_concurrency", minimum=1)
    expect_count(max_threads, "open_engine: max_threads", minimum=1, optional=True)
    expect_count(max_malformed, "open_engine: max_malformed", minimum=0)
    expect(cache_path, (str, os.PathLike, type(None)), "open_engine: cache_path", "a path or None")
    if not callable(clock):
        msg = f"open_engine: clock must be a function returning seconds, got {type(clock).__name__!r}"
        raise TypeError(msg)


class Engine:
    """Runs tool calls of one registry; made by :func:`open_engine`, valid inside its ``async with``."""

    _store_limiter: trio.CapacityLimiter
    """One operation of the persistent store at a time: a backend never sees two at once, and an
    abandoned operation keeps the place until it returns, so a hung backend holds one worker
    thread rather than one per call."""

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
        cache_backend: str | None = None,
        cache_options: Mapping[str, Any] | None = None,
        cache_timeout: float = DEFAULT_CACHE_TIMEOUT,
        bare: bool = False,
        policy: Policy | None = None,
        approve: Approver | None = None,
    ) -> None:
        if not bare:  # a bare engine is this module's own, made per call of toolflow.invoke()
            _check_arguments(
                registry=registry,
                plugins=plugins,
                allowlist=allowlist,
                max_concurrency=max_concurrency,
                max_threads=max_threads,
                max_malformed=max_malformed,
                cache_path=cache_path,
                clock=clock,
            )
            expect(cache_backend, (str, type(None)), "open_engine: cache_backend", "a backend's name or None")
            expect(cache_options, (Mapping, type(None)), "open_engine: cache_options", "a mapping or None")
        self.registry = registry
        self.plugins = plugins
        self.allowlist = None if allowlist is None else frozenset(allowlist)
        self.approve = approve
        """The caller's approver of calls whose category needs approval: asked first (see
        :mod:`toolflow._approval`); ``None``: the plugins and the request's asker decide."""
        self.policy = policy if policy is not None else Policy()
        self.max_malformed = max_malformed
        if cache_backend is not None and cache_backend != SQLITE_BACKEND:
            cache_backend_factory(cache_backend, plugins)  # an unknown backend fails here, not at a call
        self._clock = clock
        try:
            # The run's clock, looked up once: trio.current_time() finds it anew at every call, three
            # frames deep, and a call reads the time up to three times. An engine lives in one run.
            self._now: Callable[[], float] = trio.lowlevel.current_clock().current_time
        except RuntimeError:  # made outside trio.run: look the clock up when the time is read
            self._now = trio.current_time
        self._cache_path = cache_path
        self._cache_backend = cache_backend
        self._cache_options = cache_options
        self._cache_timeout = _positive_seconds("cache_timeout", cache_timeout)
        self._store: PersistentStore | None = None  # made, with _store_limiter, at the first persistent call
        # bare: the call steps alone, for toolflow.invoke (no timeout, one attempt, no caches,
        # no per-tool limits, no "attempts" key in results); gates are applied by call() only.
        self._bare = bare
        self._slots = _Slots(max_concurrency)
        self._threads = trio.CapacityLimiter(max_concurrency if max_threads is None else max_threads)
        self._plans: dict[str, _Plan] = {}
        self._caches: dict[CacheScope, MemoryCache] = {}  # tick and session
        self._stop_requested = False
        self._kills = 0  # kill() counts up; a call that sees it change was killed
        self._scopes: set[trio.CancelScope] = set()  # every scope a kill cancels
        self._stoppable: set[trio.CancelScope] = set()  # waits for a first slot, which a stop cancels
        self._succeeded_loop: set[str] = set()
        self._succeeded_session: set[str] = set()
        self._dangerous_this_tick = 0
        self._approval_lock = trio.Lock()
        self.dangerous_per_tick: int | None = 1
        """How many ``dangerous`` calls a batch dispatches per tick (``None``: no limit; the agent
        loop sets it from its policy, which gates every category itself)."""
        # Which call hooks exist, looked up once: most engines have none, and the look-up copies lists.
        hooks = plugins.manager.hook if plugins is not None else None
        self._observes_before = bool(hooks and hooks.toolflow_before_call.get_hookimpls())
        self._observes_after = bool(hooks and hooks.toolflow_after_call.get_hookimpls())
        self._wraps = bool(hooks and hooks.toolflow_wrap_call.get_hookimpls())
        self._asks_retryable = bool(hooks and hooks.toolflow_retryable.get_hookimpls())
        self._records = self._observes_before or self._observes_after or self._wraps or self._asks_retryable

    @property
    def policy(self) -> Policy:
        """The policy whose categories say which calls need approval (default: the defaults, none does)."""
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._policy = policy
        self._approving = frozenset(name for name, behaviour in policy.categories.items() if behaviour.approval)

    def needs_approval(self, name: str) -> bool:
        """Whether calls of tool *name* are approved before they run (False for an unknown tool)."""
        try:
            plan = self._plan(name)
        except UnknownToolError:
            return False
        return plan.category in self._approving and not self._bare

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
        """Stop this turn: calls not yet dispatched abort as ``stopped``; calls in flight finish.

        A call still waiting for its first concurrency slot counts as not dispatched: its wait
        ends at once (in a batch, the call is not run and the batch aborts as ``stopped``; a
        direct :meth:`call` returns the failure ``{"status": "aborted", "reason": "stopped"}``).
        """
        self._stop_requested = True
        for scope in tuple(self._stoppable):
            scope.cancel()

    def kill(self) -> None:
        """Cancel every call and batch in flight at once, and stop the turn.

        A batch aborts as ``killed``; a direct :meth:`call` (running, waiting for a slot or in a
        retry back-off) returns the failure ``{"status": "aborted", "reason": "killed"}``. A
        killed call's result is never cached nor returned.
        """
        self._stop_requested = True
        self._kills += 1
        for scope in tuple(self._scopes):
            scope.cancel()

    async def aclose(self) -> None:
        """Close every cache (done by :func:`open_engine` on exit).

        The persistent store is closed in a worker thread, waited for at most ``cache_timeout``;
        a store still busy with an abandoned operation then closes nothing.
        """
        for cache in self._caches.values():
            cache.close()
        self._caches.clear()
        store, self._store = self._store, None
        if store is not None:
            await self._off_loop(store.close, self._cache_timeout, killable=False)

    # --- one call --------------------------------------------------------------------------

    async def call(self, name: str, arguments: object, *, call_id: str = "call_0") -> ToolResult:
        """Run one call of tool *name* with *arguments* and return its result; only cancellation escapes.

        A :meth:`kill` while the call runs makes it the failure ``{"status": "aborted",
        "reason": "killed"}``; a :meth:`request_stop` while it waits for its first concurrency
        slot, the failure ``{"status": "aborted", "reason": "stopped"}`` (the tool did not run).
        """
        admitted = self._admit(name)
        if type(admitted) is _Plan:
            return await self._run(admitted, arguments, call_id)
        return cast("ToolResult", admitted)

    def _admit(self, name: str) -> _Plan | ToolResult:
        """The plan of tool *name* when it may run now, else the model-visible refusal (steps 1-2)."""
        plan = self._plans.get(name)
        if plan is None:
            try:
                plan = self._plan(name)
            except UnknownToolError as exc:
                # With an allowlist in force, suggest only what the model may call now.
                known = None if self.allowlist is None else [n for n in self.allowlist if n in self.registry]
                return ToolResult.failure(f"Error: {exc if known is None else UnknownToolError(name, known)}")
        if plan.gated:
            refusal = self._gate(plan)
            if refusal is not None:
                return refusal
        return plan

    def _plan(self, name: str) -> _Plan:
        """Work out (once) what the engine needs to know about tool *name*; UnknownToolError if none."""
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = _Plan(self.registry.get(name), bare=self._bare)
            plan.gated = bool(plan.depends_on) or (self.allowlist is not None and name not in self.allowlist)
        return plan

    def _gate(self, plan: _Plan) -> ToolResult | None:
        """The model-visible refusal of a call the allowlist or a ``depends_on`` rule does not allow yet."""
        name = plan.name
        if self.allowlist is not None and name not in self.allowlist:
            allowed = sorted(self.allowlist)
            listed = ", ".join(repr(n) for n in allowed) or "none"
            return ToolResult.failure(
                f"Error: tool {name!r} is not available now; allowed tools: {listed}",
                extra={"status": "blocked", "allowed": allowed},
            )
        missing = self._unmet_dependencies(plan)
        if missing:
            first = ", ".join(repr(n) for n in missing)
            return ToolResult.failure(
                f"Error: {name!r} cannot run yet - run {first} successfully first",
                extra={"status": "dependency", "requires": missing},
            )
        return None

    def _unmet_dependencies(self, plan: _Plan) -> list[str]:
        missing: list[str] = []
        for dependency in plan.depends_on:
            done = self._succeeded_session if dependency.scope == "session" else self._succeeded_loop
            if dependency.tool not in done:
                missing.append(dependency.tool)
        return missing

    async def _run(self, plan: _Plan, arguments: object, call_id: str) -> ToolResult:  # noqa: PLR0915 - see below
        """The call steps after the gates: validate, cache, attempts with retries, normalise, record.

        The attempts run in this coroutine itself, not in a helper: in a batch, every call in
        flight keeps its chain of coroutines alive, and one fewer per call keeps thousands of
        objects away from the garbage collector (``docs/performance.md``).
        """
        prepared = self._prepare(plan, arguments, call_id)
        if not isinstance(prepared, tuple):
            if isinstance(prepared, ToolResult):
                return prepared
            prepared = await self._look_up(plan, prepared, call_id)
            if isinstance(prepared, ToolResult):
                return prepared
        function, cleaned, warnings, call, cache, key = prepared
        del prepared  # not kept alive while the tool runs
        kills = self._kills
        if plan.category in self._approving and not self._bare:
            refusal = await self._approval(plan, cleaned, call_id)
            if refusal is not None:
                if refusal is _KILLED or refusal is _STOPPED:
                    return refusal  # the call never started: no hook saw it begin
                return self._finish(plan, refusal, call_id, cleaned, call, warnings=warnings)
        if self._observes_before:
            _observe(self.plugins, "toolflow_before_call", call=call)
        logs = logger.isEnabledFor(logging.INFO)
        started = self._now() if logs else 0.0
        per_tool, slots, scopes = plan.slots, self._slots, self._scopes
        attempt = 1
        while True:
            error: Exception | None = None
            if slots.free and (per_tool is None or per_tool.free):  # free slots are taken without a checkpoint
                slots.free -= 1
                if per_tool is not None:
                    per_tool.free -= 1
            elif not await self._wait_for_slots(plan, stoppable=attempt == 1):
                result = _KILLED if self._kills != kills else _STOPPED
                break
            try:
                # A bare cancel scope rather than trio.fail_after: the same deadline, without the
                # generator-based context manager. It is also the scope a kill() cancels.
                deadline = self._now() + plan.timeout
                kwargs = (
                    cleaned if not plan.with_context else self._with_context(plan, cleaned, call_id, attempt, deadline)
                )
                scope = trio.CancelScope(deadline=deadline)
                scopes.add(scope)
                try:
                    with scope:
                        if plan.awaited and not self._wraps:
                            value = await function(**kwargs)
                        else:
                            value = await self._dispatch(plan, function, kwargs, call)
                finally:
                    scopes.discard(scope)
                if scope.cancelled_caught:
                    message = f"timed out after {_seconds(plan.timeout)}"
                    result, error = self._failure(message, attempt), TimeoutError(message)
                else:
                    result = self._normalized(plan, value, attempt)
            except Exception as exc:  # noqa: BLE001 - a failing tool is a result the model sees; Cancelled is not an Exception
                result, error = self._failure(f"{type(exc).__name__}: {exc}", attempt), exc
            finally:
                slots.release()
                if per_tool is not None:
                    per_tool.release()
            if self._kills != kills:
                result = _KILLED
            if result is _KILLED or result.success or not plan.retries:
                break
            delay = self._retry_delay(plan, call, result, error, attempt, started=deadline - plan.timeout)
            if delay is None:
                break
            await self._back_off(delay)
            if self._kills != kills:
                result = _KILLED
                break
            attempt += 1
        if result is _KILLED or result is _STOPPED:
            # The tool's result (if any) is dropped: not cached, not logged; after_call still
            # sees how the call it saw start ended.
            return self._finish(plan, result, call_id, cleaned, call)
        if logs:
            elapsed_ms = (self._now() - started) * 1000
            logger.info("Function call completed: %s (%dms)", plan.name, round(elapsed_ms))
        if cache is not None and key is not None and result.success:
            if isinstance(cache, _Persistent):
                # Not killable: the tool has finished, and the wait is bounded. A store the call
                # stops waiting for still completes in its thread, unless the store hangs.
                if cache.allowance > 0:
                    store = cast("PersistentStore", cache.store)
                    await self._off_loop(functools.partial(store.set, key, result, plan.ttl), cache.allowance)
            else:
                cache.set(key, result, plan.ttl)
        return self._finish(plan, result, call_id, cleaned, call, warnings=warnings)

    def _prepare(
        self, plan: _Plan, arguments: object, call_id: str, missed: _Persistent | None = None
    ) -> _Prepared | _Persistent | ToolResult:
        """Validate, look the cache up, resolve the implementation.

        Returns what the attempts need, or the call's final result when nothing is to run, or,
        for a tool with a persistent cache, the look-up that :meth:`_look_up` does next; after
        a miss, it calls this again with the look-up as *missed*, to go on from there.
        """
        cleaned: Mapping[str, Any]
        warnings: tuple[str, ...]
        cache: MemoryCache | _Persistent | None = None
        key = None
        if missed is not None:
            cleaned, warnings, cache, key = missed.cleaned, missed.warnings, missed, missed.key
        else:
            if plan.is_clean(arguments):  # validate()'s happy path, without its result object
                cleaned, warnings = cast("dict[str, Any]", arguments), ()
            else:
                validation = plan.validate(arguments)
                if not validation.valid:
                    result = ToolResult.failure(validation.format_for_llm(plan.name), warnings=validation.warnings)
                    raw = dict(arguments) if isinstance(arguments, dict) else {}
                    return self._finish(plan, result, call_id, raw, None)
                cleaned, warnings = validation.cleaned, validation.warnings
            if plan.cache_scope is not None:
                key = cache_key(plan.spec, cleaned)
                if plan.cache_scope is CacheScope.PERSISTENT:
                    if key is not None:  # arguments without a key are neither looked up nor stored
                        return _Persistent(cleaned, warnings, key, self._cache_timeout)
                else:
                    memory = self._caches.get(plan.cache_scope)
                    if memory is None:
                        memory = self._caches[plan.cache_scope] = MemoryCache(clock=self._clock)
                    cache = memory
                    hit = None if key is None else memory.get(key)
                    if hit is not None:
                        return self._served(plan, hit, call_id, cleaned, warnings)
        function = plan.function
        if function is None:
            try:
                function = self._resolve(plan)
            except PluginError as exc:
                result = ToolResult.failure(str(exc), extra=None if self._bare else _ATTEMPT_EXTRAS[0])
                return self._finish(plan, result, call_id, cleaned, None, warnings=warnings)
        call = self._record(call_id, plan.name, cleaned) if self._records else None
        return function, cleaned, warnings, call, cache, key

    async def _approval(self, plan: _Plan, arguments: Mapping[str, Any], call_id: str) -> ToolResult | None:
        """``None`` when the call may run; else the result of the call that was not approved.

        Asks :attr:`approve`, the plugins' ``toolflow_approve_call``, then the request's asker
        (:func:`toolflow._approval.asking_approval`), one call at a time. A stop ends the wait
        (``_STOPPED``: not run), so does a kill (``_KILLED``).
        """
        if self._stop_requested:
            return _STOPPED
        call = self._record(call_id, plan.name, arguments)
        category = plan.category
        kills = self._kills
        verdict: bool | None = None
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            self._stoppable.add(scope)
            try:
                async with self._approval_lock:  # one question at a time, on any terminal or client
                    if self.approve is not None:
                        verdict = await answer_of(self.approve, call, category, "the approver")
                    if verdict is None:
                        verdict = first_verdict(self.plugins, "toolflow_approve_call", call=call, category=category)
                    asker = current_asker()
                    if verdict is None and asker is not None:
                        verdict = await answer_of(asker, call, category, "the client's approval")
            finally:
                self._scopes.discard(scope)
                self._stoppable.discard(scope)
        if scope.cancelled_caught or self._kills != kills:
            return _KILLED if self._kills != kills else _STOPPED
        if verdict is None:
            return no_approver(plan.name, category)
        return None if verdict else denied(plan.name)

    async def _look_up(self, plan: _Plan, persistent: _Persistent, call_id: str) -> _Prepared | ToolResult:
        """Step 4 for the persistent scope: the look-up in a worker thread; on a miss, the rest of :meth:`_prepare`.

        A kill while the look-up runs ends the call (``killed``); a store that does not answer
        within ``cache_timeout`` is a miss.
        """
        store = self._store
        if store is None:  # nothing is opened or read here: the store opens at its first operation
            self._store_limiter = trio.CapacityLimiter(1)
            store = self._store = persistent_store(
                backend=self._cache_backend,
                plugins=self.plugins,
                path=self._cache_path,
                options=self._cache_options,
                clock=self._clock,
                timeout=self._cache_timeout,
            )
        persistent.store = store
        kills = self._kills
        started = self._now()
        answered, hit = await self._off_loop(
            functools.partial(store.get, persistent.key), persistent.allowance, killable=True
        )
        persistent.allowance -= self._now() - started
        cleaned, warnings = persistent.cleaned, persistent.warnings
        if self._kills != kills:
            return _KILLED  # the call never started: no hook saw it begin, none sees it end
        if not answered:  # the call runs without the cache: say so, once per store
            store.report("busy", f"no answer within {_seconds(self._cache_timeout)}")
        if not answered or store.busy:  # a store would wait for the same lock or backend: skip it
            persistent.allowance = 0
        elif hit is not None:
            return self._served(plan, hit, call_id, cleaned, warnings)
        return cast("_Prepared | ToolResult", self._prepare(plan, cleaned, call_id, missed=persistent))

    def _served(
        self, plan: _Plan, hit: ToolResult, call_id: str, cleaned: Mapping[str, Any], warnings: tuple[str, ...]
    ) -> ToolResult:
        """The result of a cache hit: the stored result with ``attempts`` 0 and ``cached``."""
        # The stored result is a checked ToolResult already; only the two bookkeeping keys are new.
        extra = MappingProxyType({**hit.extra, "attempts": 0, "cached": True})
        result = _unchecked_result(
            success=hit.success, data=hit.data, error=hit.error, warnings=hit.warnings, extra=extra
        )
        return self._finish(plan, result, call_id, cleaned, None, warnings=warnings)

    def _finish(
        self,
        plan: _Plan,
        result: ToolResult,
        call_id: str,
        arguments: Mapping[str, Any],
        call: ToolCall | None,
        *,
        warnings: tuple[str, ...] = (),
    ) -> ToolResult:
        """Add the argument warnings, mask values from ``${...}``, record a success, run the after_call hooks."""
        if plan.redact is not None and (result.error or result.warnings):
            result = _redacted(result, plan.redact)
        if warnings:
            result = _unchecked_result(
                success=result.success,
                data=result.data,
                error=result.error,
                warnings=(*warnings, *result.warnings),
                extra=result.extra,
            )
        if result.success:
            self._succeeded_loop.add(plan.name)
            self._succeeded_session.add(plan.name)
        if self._observes_after:
            if call is None:
                call = self._record(call_id, plan.name, arguments)
            _observe(self.plugins, "toolflow_after_call", call=call, result=result)
        return result

    @staticmethod
    def _record(call_id: str, name: str, arguments: Mapping[str, Any]) -> ToolCall:
        """The call as the plugins' hooks see it; made only when a hook is there to see it."""
        return ToolCall(id=call_id, name=name, arguments=arguments, format="direct")

    def _resolve(self, plan: _Plan) -> Callable[..., Any]:
        """Import or build *plan*'s implementation (PluginError when that fails) and remember it."""
        function = plan.tool.resolve()
        plan.awaited = plan.tool.is_async
        # wants_context inspects each implementation once; afterwards it is a dict look-up.
        plan.with_context = wants_context(function)
        plan.function = function
        return function

    async def _off_loop(
        self, operation: Callable[[], _T], allowance: float, *, killable: bool = False
    ) -> tuple[bool, _T | None]:
        """Run *operation* of the persistent store in a worker thread; wait for it at most *allowance* seconds.

        Returns whether it answered in time, and its value. An operation the wait gave up on
        (the time ran out, or, if *killable*, a kill came) is abandoned: it runs on in its
        thread and holds the store's one place until it returns, and an operation still
        waiting for that place is not started. Cancellation from outside propagates (the
        operation is abandoned the same way).
        """
        scope = trio.CancelScope(deadline=self._now() + allowance)
        if killable:
            self._scopes.add(scope)
        with scope:
            try:
                value = await trio.to_thread.run_sync(operation, abandon_on_cancel=True, limiter=self._store_limiter)
            finally:
                self._scopes.discard(scope)
            return True, value
        return False, None

    @staticmethod
    def _with_context(
        plan: _Plan, arguments: Mapping[str, Any], call_id: str, attempt: int, deadline: float
    ) -> Mapping[str, Any]:
        """*arguments* plus this attempt's ``ctx`` (the context wins over an argument named ctx)."""
        context = CallContext.current(call_id=call_id, tool=plan.name, attempt=attempt, deadline=deadline)
        return {**arguments, "ctx": context}

    async def _dispatch(
        self, plan: _Plan, function: Callable[..., Any], arguments: Mapping[str, Any], call: ToolCall | None
    ) -> Any:
        """Run a sync implementation in a worker thread, and any inside the plugins' wrap_call wrappers."""
        if not self._wraps:
            return await self._in_thread(functools.partial(function, **arguments))
        async with contextlib.AsyncExitStack() as stack:
            for wrapper in _wrappers(self.plugins, cast("ToolCall", call)):
                await stack.enter_async_context(wrapper)
            if plan.awaited:
                return await function(**arguments)
            return await self._in_thread(functools.partial(function, **arguments))

    def _normalized(self, plan: _Plan, value: object, attempt: int) -> ToolResult:
        """*value* as a result (``ResultValidator.normalize``), with ``attempts`` unless bare."""
        if plan.plain_results and type(value) in _PLAIN_DATA:
            # normalize(value), without its checks and the attrs __init__.
            extra = _NO_EXTRA if self._bare else _ATTEMPT_EXTRAS[attempt]
            return _unchecked_result(success=True, data=value, error=None, warnings=(), extra=extra)
        result = plan.normalize(value)
        if self._bare:
            return result
        extra = MappingProxyType({**result.extra, "attempts": attempt}) if result.extra else _ATTEMPT_EXTRAS[attempt]
        return _unchecked_result(
            success=result.success, data=result.data, error=result.error, warnings=result.warnings, extra=extra
        )

    def _retry_delay(
        self,
        plan: _Plan,
        call: ToolCall | None,
        result: ToolResult,
        error: Exception | None,
        attempt: int,
        *,
        started: float,
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to stop (see :mod:`toolflow._retrying`).

        Logs the failed attempt and the decision at INFO on ``toolflow.attempts``.
        """
        policy = plan.spec.retry
        verdict = self._verdict(call, error) if self._asks_retryable else None
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
            elapsed_ms = round((self._now() - started) * 1000)
            attempt_logger.info(
                "Attempt %d of %s failed after %dms: %s; %s", attempt, plan.name, elapsed_ms, result.error, then
            )
        return delay

    async def _wait_for_slots(self, plan: _Plan, *, stoppable: bool) -> bool:
        """Take a slot of the tool's limit, then a global one, waiting as long as needed.

        False (and no slot held) when a kill or, if *stoppable*, a stop ended a wait.
        """
        per_tool = plan.slots
        if per_tool is not None:
            if per_tool.free:
                per_tool.free -= 1
            elif not await self._wait(per_tool, stoppable=stoppable):
                return False
        if self._slots.free:
            self._slots.free -= 1
        elif not await self._wait(self._slots, stoppable=stoppable):
            if per_tool is not None:
                per_tool.release()
            return False
        return True

    def _failure(self, error: str, attempt: int) -> ToolResult:
        return ToolResult.failure(error) if self._bare else ToolResult.failure(error, extra=_ATTEMPT_EXTRAS[attempt])

    async def _wait(self, slots: _Slots, *, stoppable: bool) -> bool:
        """Wait for a slot of *slots*; False when a kill (or, if *stoppable*, a stop) ended the wait."""
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            if stoppable:
                self._stoppable.add(scope)
            try:
                await slots.wait()
            finally:
                self._scopes.discard(scope)
                self._stoppable.discard(scope)
            return True
        return False

    async def _back_off(self, delay: float) -> None:
        """Sleep *delay* seconds before the next attempt, or until a kill."""
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                await trio.sleep(delay)
            finally:
                self._scopes.discard(scope)

    async def _in_thread(self, function: Callable[[], Any]) -> Any:
        slot = _ThreadSlot(self._threads)
        try:
            # trio takes any object with acquire_on_behalf_of/release_on_behalf_of as limiter.
            limiter = cast("trio.CapacityLimiter", slot)
            return await trio.to_thread.run_sync(function, abandon_on_cancel=True, limiter=limiter)
        finally:
            slot.abandon()  # a no-op unless the thread was abandoned

    def _verdict(self, call: ToolCall | None, error: Exception | None) -> bool | None:
        """The first decision of a plugin's ``toolflow_retryable`` hook about *error*, if any."""
        if error is None:
            return None
        return first_verdict(self.plugins, "toolflow_retryable", call=call, error=error)

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
        ones) run concurrently; then calls of ``dangerous`` tools and of tools that need approval
        run one at a time, in call order, and only the first ``dangerous`` call of the tick is
        dispatched. A pending stop aborts calls not yet dispatched (including
        calls still waiting for a concurrency slot); a kill cancels the whole batch. Only
        cancellation from outside escapes.
        """
        parsed = parse_tool_calls(raw_calls)
        if len(parsed) == 1 and type(parsed[0]) is ToolCall and not self._is_dangerous(parsed[0].name):
            # One call of a tool that is not dangerous, the agent loop's usual turn: the steps
            # below without the batch's lists, closure and events, which cost more than a quick call.
            call = parsed[0]
            if call.warnings or logger.isEnabledFor(logging.INFO):
                self._announce(parsed)
            kills = self._kills
            entry = await self._run_entry(call)
            if self._kills != kills:
                return Abort(reason="killed", message=_KILLED_BATCH, call_ids=(call.id,))
            if entry is None:
                return Abort(reason="stopped", message=_STOPPED_BATCH, call_ids=(call.id,))
            return (entry,)
        entries: list[HistoryEntry | None] = [None] * len(parsed)
        concurrent, one_by_one, malformed = self._sort_calls(parsed, entries)
        if malformed > self.max_malformed:
            message = f"{malformed} malformed tool calls in one batch (at most {self.max_malformed} allowed)"
            return Abort(reason="malformed_calls", message=message, call_ids=_ids(parsed))
        # No cancel scope of the batch's own: every wait of a call (its attempts, back-offs, waits
        # for a slot) is in a scope that kill() cancels, and a call that has not started yet sees
        # the stop kill() requests. The kill count tells a killed batch.
        kills = self._kills

        async def run_one(index: int, call: ToolCall) -> None:
            try:
                for earlier in after.get(index, ()):
                    await finished[earlier].wait()
                entries[index] = await self._run_entry(call)
            finally:
                if index in finished:  # however the call ended, the calls waiting for it go on
                    finished[index].set()

        after = self._batch_dependencies(concurrent) if len(concurrent) > 1 else _NO_WAITS
        finished = {index: trio.Event() for waits in after.values() for index in waits} if after else _NO_WAITS
        if len(concurrent) == 1:  # one call needs no nursery: a task and its switches cost more than the call
            await run_one(*concurrent[0])
        elif concurrent:
            async with trio.open_nursery() as nursery:
                for index, item in concurrent:
                    nursery.start_soon(run_one, index, item)
        for index, item in one_by_one:
            if self._stop_requested:
                continue  # not run: its entry stays None
            dangerous = self._is_dangerous(item.name)
            limit = self.dangerous_per_tick
            if dangerous and limit is not None and self._dangerous_this_tick >= limit:
                result = ToolResult.failure(ONE_DANGEROUS_PER_TURN.format(name=item.name), extra={"status": "blocked"})
                entries[index] = _entry(item, result)
                continue
            await run_one(index, item)
            entry = entries[index]
            if dangerous and entry is not None and entry.result.extra.get("attempts", 0):
                # Only a call that ran is the tick's dangerous action: one that the gates, the
                # validator or the cache answered, or that a stop kept from running, changed nothing.
                self._dangerous_this_tick += 1
        if self._kills != kills:
            return Abort(reason="killed", message=_KILLED_BATCH, call_ids=_ids(parsed))
        if any(entry is None for entry in entries):  # a stop kept some calls from running
            done = tuple(entry for entry in entries if entry is not None)
            return Abort(reason="stopped", message=_STOPPED_BATCH, call_ids=_ids(parsed), finished=done)
        return cast("tuple[HistoryEntry, ...]", tuple(entries))

    async def _run_entry(self, call: ToolCall) -> HistoryEntry | None:
        """Admit and run one call of a batch; ``None`` when a stop kept it from running."""
        if self._stop_requested:
            return None
        admitted = self._admit(call.name)
        duration = None
        if type(admitted) is _Plan:
            started = self._now()
            result = await self._run(admitted, call.arguments, call.id)
            duration = self._now() - started
        else:
            result = cast("ToolResult", admitted)
        if result is _STOPPED:
            return None
        if call.warnings:
            result = attrs.evolve(result, warnings=(*call.warnings, *result.warnings))
        return _new_entry(
            call_id=call.id, tool_name=call.name, call=call, result=result, success=result.success, duration=duration
        )

    def _sort_calls(
        self, parsed: list[ParsedCall], entries: list[HistoryEntry | None]
    ) -> tuple[list[tuple[int, ToolCall]], list[tuple[int, ToolCall]], int]:
        """Split a batch into concurrent calls and calls run one by one; answer the malformed ones in *entries*.

        Calls of ``dangerous`` tools and of tools whose category needs approval run one by one,
        in call order (approvals are asked in the order the model made the calls). Returns the
        concurrent and the one-by-one calls with their positions, and how many were malformed.
        Logs what seed 000's steps 1-2 log: what defensive parsing corrected (WARNING) and the
        model's decision, with its reasoning (INFO).
        """
        self._announce(parsed)
        concurrent: list[tuple[int, ToolCall]] = []
        one_by_one: list[tuple[int, ToolCall]] = []
        malformed = 0
        for index, item in enumerate(parsed):
            if isinstance(item, MalformedCall):
                malformed += 1
                entries[index] = _entry(item, item.to_result())
                continue
            (one_by_one if self._runs_alone(item.name) else concurrent).append((index, item))
        return concurrent, one_by_one, malformed

    @staticmethod
    def _announce(calls: list[ParsedCall]) -> None:
        """Log seed 000's steps 1-2: each decision with its reasoning (INFO), what parsing corrected (WARNING)."""
        if logger.isEnabledFor(logging.INFO):
            _log_decisions(calls)
        for call in calls:
            for note in getattr(call, "warnings", ()):
                logger.warning("Tool call %s (%s) was corrected: %s", call.id, call.name, note)

    def _batch_dependencies(self, calls: list[tuple[int, ToolCall]]) -> dict[int, list[int]]:
        """For each call whose tool ``depends_on`` the tool of an earlier call of *calls*, those calls.

        Such a call waits for them to finish, so that a model asking for ``login`` and then
        ``fetch`` in one turn gets the same answer however fast ``login`` is.
        """
        after: dict[int, list[int]] = {}
        for position, (index, call) in enumerate(calls):
            plan = self._plans.get(call.name)
            if plan is None or not plan.depends_on:
                continue
            needed = {dependency.tool for dependency in plan.depends_on}
            earlier = [other for other, item in calls[:position] if item.name in needed]
            if earlier:
                after[index] = earlier
        return after

    def _is_dangerous(self, name: str) -> bool:
        plan = self._plans.get(name)
        if plan is not None:
            return plan.dangerous
        try:
            return self._plan(name).dangerous
        except UnknownToolError:
            return False

    def _runs_alone(self, name: str) -> bool:
        """Whether calls of tool *name* run one by one in a batch: ``dangerous``, or in need of approval."""
        return self._is_dangerous(name) or self.needs_approval(name)


def _redacted(result: ToolResult, redact: Redactor) -> ToolResult:
    """*result* with the values of its tool's ``${...}`` strings masked in ``error`` and ``warnings``."""
    return _unchecked_result(
        success=result.success,
        data=result.data,
        error=None if result.error is None else redact(result.error),
        warnings=tuple(redact(warning) for warning in result.warnings),
        extra=result.extra,
    )


def _positive_seconds(name: str, value: float) -> float:
    """*value* when it is a positive, finite number of seconds; else ValueError naming *name*."""
    if not 0 < value < math.inf:
        msg = f"{name} must be a positive number of seconds, got {value!r}"
        raise ValueError(msg)
    return value


def _log_decisions(calls: Iterable[ParsedCall]) -> None:
    """Seed 000's step 2, at INFO: each call the model decided on, with its reasoning."""
    for call in calls:
        if isinstance(call, MalformedCall):
            logger.info("Malformed tool call %s: %s", call.id, call.error)
        elif call.reasoning:
            logger.info("Assistant decision: %s - %s", call.name, call.reasoning)
        else:
            logger.info("Assistant decision: %s", call.name)


def _ids(calls: Iterable[ParsedCall]) -> tuple[str, ...]:
    return tuple(call.id for call in calls)


def first_verdict(plugins: Plugins | None, hook_name: str, **kwargs: Any) -> bool | None:
    """The first ``True``/``False`` of a ``firstresult`` decision hook, in registration order.

    A hook implementation that raises is reported with a :class:`CallHookWarning` naming its
    plugin and counts as no answer; ``None`` when nobody decides.
    """
    if plugins is None:
        return None
    for impl in getattr(plugins.manager.hook, hook_name).get_hookimpls():
        try:
            verdict = impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - a hook must never fail the call or the loop
            message = f"{hook_name} of plugin {impl.plugin_name!r} raised {type(exc).__name__}: {exc}"
            warnings.warn(CallHookWarning(message), stacklevel=3)
            continue
        if isinstance(verdict, bool):
            return verdict
    return None


def _observe(plugins: Plugins | None, hook_name: str, **kwargs: Any) -> None:
    """Call every implementation of an observer hook, reporting (not raising) what fails."""
    if plugins is None:
        return
    for impl in getattr(plugins.manager.hook, hook_name).get_hookimpls():  # registration order
        try:
            impl.function(**{name: kwargs[name] for name in impl.argnames})
        except Exception as exc:  # noqa: BLE001 - an observer must never fail the call
            message = f"{hook_name} of plugin {impl.plugin_name!r} raised {type(exc).__name__}: {exc}"
            warnings.warn(CallHookWarning(message), stacklevel=2)


def _wrappers(plugins: Plugins | None, call: ToolCall) -> Iterator[Any]:
    """The wrap_call context managers for *call*, first registered first (outermost)."""
    if plugins is None:
        return
    for impl in plugins.manager.hook.toolflow_wrap_call.get_hookimpls():  # registration order
        wrapper = impl.function(**{name: call for name in impl.argnames if name == "call"})
        if wrapper is not None:
            yield wrapper


async def run_bare(tool: RegisteredTool, arguments: object, *, plugins: Plugins | None, call_id: str) -> ToolResult:
    """Run :meth:`Engine.call`'s steps for *tool* in a throwaway bare engine (``toolflow.invoke``).

    Bare: no timeout, one attempt, no caches, no gates, no concurrency limits, no ``attempts``
    key in the result; the call hooks of *plugins* take part as in any engine.
    """
    engine = Engine(
        _NO_TOOLS,
        plugins=plugins,
        allowlist=None,
        max_concurrency=1,
        cache_path=None,
        clock=time.time,
        max_threads=1,
        bare=True,
    )
    return await engine._run(_Plan(tool, bare=True), arguments, call_id)  # noqa: SLF001 - this module's own engine


_new_entry = unchecked_init(HistoryEntry)


def _entry(call: ParsedCall, result: ToolResult, duration: float | None = None) -> HistoryEntry:
    """``HistoryEntry(call_id=call.id, ...)``, without the frozen attrs ``__init__`` (twice the cost).

    ``tests/test_executor_fast_paths.py`` compares the two.
    """
    return _new_entry(
        call_id=call.id, tool_name=call.name or "", call=call, result=result, success=result.success, duration=duration
    )


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
    cache_backend: str | None = None,
    cache_options: Mapping[str, Any] | None = None,
    policy: Policy | None = None,
    approve: Approver | None = None,
    cache_timeout: float = DEFAULT_CACHE_TIMEOUT,
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
        cache_backend: The backend of the ``persistent`` cache: ``"sqlite"`` (the default, the
            file *cache_path*) or the name of a backend a plugin registered with
            ``toolflow_register_cache_backends``. It is opened at the first call of a tool with
            a persistent cache; one that fails to open gives a :class:`~toolflow.CacheWarning`
            and those calls run uncached.
        cache_options: Keyword arguments for a plugin backend's factory.
        policy: The policy whose categories say which calls are approved before they run
            (``approval: true``); default: the defaults, under which none is.
        approve: The caller's approver of those calls, asked before the plugins'
            ``toolflow_approve_call`` and the request's asker (see :class:`Engine`).
        cache_timeout: Seconds a call waits for the persistent cache, for its look-up and for its
            store (default 0.05). Its operations run in a worker thread, one at a time; one that
            takes longer (a lock held elsewhere, a slow disk, a hung plugin backend) makes the
            look-up a miss and skips the store, with one ``busy`` :class:`~toolflow.CacheWarning`.

    Raises:
        TypeError: An argument of the wrong type (the message names it and what it must be),
            such as a single tool name as *allowlist*.
        ValueError: *max_concurrency* or *max_threads* is less than 1, *max_malformed* is
            negative, or *cache_timeout* is not a positive number.
        ConfigError: No plugin registered *cache_backend*, or several did.
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
        cache_backend=cache_backend,
        cache_options=cache_options,
        policy=policy,
        approve=approve,
        cache_timeout=cache_timeout,
    )
    try:
        yield engine
    finally:
        with trio.CancelScope(shield=True):  # bounded: aclose waits at most the cache timeout
            await engine.aclose()
