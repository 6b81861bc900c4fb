"""The trio executor: every tool call looked up, gated, validated, cached, timed out, retried and recorded.

:func:`open_engine` yields an :class:`Engine`. :meth:`Engine.call` runs one call through
issue 4's flow (seed 000, steps 3-8):

1. look the tool up (unknown: a failure result naming the nearest tools);
2. gate it (:mod:`toolflow._gates`): an allowlist in force blocks a tool outside it (a
   model-visible ``blocked`` result, nothing dispatched), so do the policy's order rules and
   call limits; a ``depends_on`` tool that has not yet succeeded (in this loop, see
   :meth:`Engine.new_loop`, or in this session) makes a result saying what must run first;
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
5. run attempts, each behind the concurrency limits (global, then the tool's ``concurrency``)
   and under a cancel scope with the tool's deadline: async implementations are awaited, sync
   ones run in a worker thread that is abandoned at the timeout; a timeout is the failure
   ``timed out after 30s``;
6. retry what :mod:`toolflow._retrying` says may be retried, sleeping the backoff with
   ``trio.sleep``; a ``dangerous`` tool is retried only when ``idempotent``; the result's
   ``extra["attempts"]`` says how many attempts ran;
7. normalise, cache a success, run the plugins' ``after_call`` hooks and log the duration at
   INFO (``Function call completed: name (12ms)``). A result's ``error`` and ``warnings`` never
   echo a value the tool's spec took from ``${...}`` (an exception naming a URL with a key in
   it, say): such values are replaced by their ``${...}`` references
   (``toolflow._provenance.Redactor``).

The engine does steps 1-4a and the caches itself; steps 5-6 are :mod:`toolflow._attempts`'
(which :func:`toolflow.invoke` uses without an engine); a model turn's calls are a batch of
:mod:`toolflow._batch` (:meth:`Engine.execute_batch`); a pipeline's steps are calls through the
same engine (:mod:`toolflow._pipelines`). Nothing escapes :meth:`Engine.call` but cancellation:
``trio.Cancelled`` (and other ``BaseException``) is never caught, retried or cached.

Stop and kill reach every call (:meth:`Engine.kill`, :meth:`Engine.request_stop`). Sync tools run
in worker threads behind ``max_threads`` tokens (see :func:`open_engine`). An engine opened for a
conversation serves one segment of it (:class:`toolflow._store_access.ConversationStore`). What a
tool's spec implies is worked out once per engine and tool (:class:`~toolflow._attempts.Plan`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple, cast

import attrs
import trio

from toolflow._approval import Approvals, Approver
from toolflow._attempts import (
    KILLED,
    STOPPED,
    Attempts,
    CallHookWarning,
    Checked,
    Hooks,
    Plan,
    SharedLimits,
    Slots,
    after_call,
    checked_arguments,
    finished,
    record,
)
from toolflow._batch import (
    ONE_DANGEROUS_PER_TURN,
    Abort,
    AbortReason,
    BatchOutcome,
    HistoryEntry,
    Outcome,
    entry,
    execute_batch,
)
from toolflow._cache import (
    DEFAULT_CACHE_TIMEOUT,
    MemoryCache,
    cache_key,
    check_cache_backend,
)
from toolflow._calls import ToolCall, arguments_problem, parse_tool_calls
from toolflow._conversation import DEFAULT_TTL as DEFAULT_CONVERSATION_TTL
from toolflow._engine_arguments import check_arguments, positive_seconds
from toolflow._gates import Gates
from toolflow._limits import FleetLimits
from toolflow._model import CacheScope
from toolflow._pipeline_plan import CompiledPipeline, covered_steps
from toolflow._pipelines import run_pipeline
from toolflow._plugins import PluginError, Plugins
from toolflow._policy import Policy
from toolflow._registry import Registry, UnknownToolError
from toolflow._results import ToolResult
from toolflow._retrying import may_retry_automatically
from toolflow._rules import RuleBook
from toolflow._state import MemoryState, StateBackend
from toolflow._store_access import Pending, engine_stores
from toolflow._telemetry import EXECUTE_TOOL, Operation, active_wrappers, operation_scope

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


class _Prepared(NamedTuple):
    """What the attempts of a call need once the validator and the caches have let it through."""

    function: Callable[..., Any] | None  # None for a pipeline, whose steps the engine runs
    cleaned: Mapping[str, Any]
    warnings: tuple[str, ...]
    cache: MemoryCache | Pending | None
    key: str | None


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
        cache_backend: str | None = None,
        cache_options: Mapping[str, Any] | None = None,
        cache_timeout: float = DEFAULT_CACHE_TIMEOUT,
        policy: Policy | None = None,
        approve: Approver | None = None,
        state: StateBackend | None = None,
        conversation: str | None = None,
        conversation_ttl: float = DEFAULT_CONVERSATION_TTL,
    ) -> None:
        check_arguments(locals())  # the parameters, by name
        self.registry = registry
        self.plugins = plugins
        self.allowlist = None if allowlist is None else frozenset(allowlist)
        self.approve = approve
        """The caller's approver of calls that need approval, asked first (:mod:`toolflow._approval`)."""
        self.max_malformed = max_malformed
        check_cache_backend(cache_backend, plugins)  # an unknown backend fails here, not at a call
        self._clock = clock
        self._hooks = Hooks(plugins)
        self._wrappers = active_wrappers(plugins)  # toolflow_wrap_operation: each call in their scopes
        threads = trio.CapacityLimiter(max_concurrency if max_threads is None else max_threads)
        self._attempts = Attempts(self._hooks, threads=threads, slots=Slots(max_concurrency), counted=True)
        shared = state is not None and state.shared  # a fleet's: concurrency by leases too
        state = state if state is not None else MemoryState()
        self._limits = FleetLimits(state, shared=shared, attempts=self._attempts)
        self._stores, self.conversation = engine_stores(  # with a conversation: its segment, the session cache
            state, conversation, conversation_ttl, backend=cache_backend, plugins=plugins, path=cache_path,
            options=cache_options, clock=clock, timeout=positive_seconds("cache_timeout", cache_timeout),
            attempts=self._attempts,
        )  # fmt: skip
        self._plans: dict[str, Plan] = {}
        self._caches: dict[CacheScope, MemoryCache] = {}  # tick and session
        self._stop_requested = False
        self._gates = Gates()
        self._dangerous_this_tick = 0
        self._approvals = Approvals(plugins, self._attempts)
        self.policy = policy if policy is not None else Policy()
        self.dangerous_per_tick: int | None = 1
        """How many ``dangerous`` calls a batch dispatches per tick (``None``: no limit; the agent
        loop sets it from its policy, which gates every category itself)."""

    @property
    def policy(self) -> Policy:
        """The policy whose categories say which calls need approval and whose rules the model's calls follow.

        Setting it starts the rules' counts afresh (default: the defaults: no approval, no rules).
        """
        return self._policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self._policy = policy
        self._ignore_bound = policy.bound_arguments == "ignore"  # a value sent for a bound parameter: dropped
        self._approving = frozenset(name for name, behaviour in policy.categories.items() if behaviour.approval)
        self._gates.follow(policy.rules)

    @property
    def rules(self) -> RuleBook | None:
        """The policy's rules and what the calls so far did under them (``None``: the policy has none)."""
        return self._gates.rules

    @property
    def gates(self) -> Gates:
        """The gates' state (the rules' counts, the tools that succeeded): a saved run keeps it (issue 21)."""
        return self._gates

    def needs_approval(self, name: str) -> bool:
        """Whether every call of tool *name* is approved before it runs (False for an unknown tool)."""
        plan = self._known(name)
        return plan is not None and (plan.category in self._approving or plan.spec.approval is True)

    def _pipeline_of(self, name: str) -> CompiledPipeline | None:
        plan = self._known(name)
        return None if plan is None else plan.pipeline

    # --- lifecycle -----------------------------------------------------------------------

    def tick(self) -> None:
        """Start a new tick (model turn): clear the tick cache, allow one dangerous call again, clear a stop.

        The rules' ``per_turn`` counts start again too.
        """
        self._stop_requested = False
        self._gates.tick()
        tick_cache = self._caches.get(CacheScope.TICK)
        if tick_cache is not None:
            tick_cache.clear()
        self._dangerous_this_tick = 0

    def new_loop(self) -> None:
        """Start a new agent loop: ``depends_on`` of scope ``loop`` must be met again; the rules count afresh."""
        self._gates.new_loop()

    def request_stop(self) -> None:
        """Stop this turn: calls not yet dispatched abort as ``stopped``; calls in flight finish.

        A call still waiting for its first concurrency slot counts as not dispatched: its wait
        ends at once (in a batch, the call is not run and the batch aborts as ``stopped``; a
        direct :meth:`call` returns the failure ``{"status": "aborted", "reason": "stopped"}``).
        """
        self._stop_requested = True
        self._attempts.stop()

    def kill(self) -> None:
        """Cancel every call and batch in flight at once, and stop the turn.

        A batch aborts as ``killed``; a direct :meth:`call` (running, waiting for a slot or in a
        retry back-off) returns the failure ``{"status": "aborted", "reason": "killed"}``. A
        killed call's result is never cached nor returned.
        """
        self._stop_requested = True
        self._attempts.kill()

    async def aclose(self) -> None:
        """Close every cache (done by :func:`open_engine` on exit).

        The persistent store is closed in a worker thread, waited for at most ``cache_timeout``;
        a store still busy with an abandoned operation then closes nothing.
        """
        if self.conversation is not None:  # what this engine's calls did, into the conversation's state
            await self.conversation.commit(self._gates)
        for cache in self._caches.values():
            cache.close()
        self._caches.clear()
        for store in self._stores.values():
            await store.close()

    # --- one call --------------------------------------------------------------------------

    async def call(self, name: str, arguments: object, *, call_id: str = "call_0") -> ToolResult:
        """Run one call of tool *name* with *arguments* and return its result; only cancellation escapes.

        A :meth:`kill` while the call runs makes it the failure ``{"status": "aborted",
        "reason": "killed"}``; a :meth:`request_stop` while it waits for its first concurrency
        slot, the failure ``{"status": "aborted", "reason": "stopped"}`` (the tool did not run).
        Arguments over the policy's ``max_argument_bytes`` are refused as a batch refuses them.
        """
        if (problem := arguments_problem(arguments, self.policy.max_argument_bytes)) is not None:
            return ToolResult.failure(problem)  # a malformed call: it neither runs nor counts
        if self._wrappers:
            result = await self._in_scope(name, arguments, call_id, ruled=True)
        else:
            admitted = self._admit(name, ruled=True)
            result = admitted if isinstance(admitted, ToolResult) else await self._run(admitted, arguments, call_id)
        self._gates.answered(name, result)
        return result

    async def _in_scope(
        self,
        name: str,
        arguments: object,
        call_id: str,
        *,
        step: bool = False,
        approved: bool = False,
        ruled: bool = False,
    ) -> ToolResult:
        """A call (:meth:`call`, a batch's, a pipeline's step) inside the plugins' ``toolflow_wrap_operation`` scopes.

        The same steps as an untraced call; the scope sees the call from its admission to its result.
        """
        details = {"step": step, "approval": self.needs_approval(name)}
        with operation_scope(
            self._wrappers, Operation(kind=EXECUTE_TOOL, name=name, call_id=call_id, details=details)
        ) as op:
            admitted = self._admit(name, step=step, ruled=ruled)
            if isinstance(admitted, ToolResult):
                op.result = admitted
            else:
                op.result = await self._run(admitted, arguments, call_id, approved=approved)
        return cast("ToolResult", op.result)

    def _admit(self, name: str, *, step: bool = False, ruled: bool = False) -> Plan | ToolResult:
        """The plan of tool *name* when it may run now, else the model-visible refusal (steps 1-2).

        A pipeline's *step* is not held to the allowlist (the pipeline was), but to the policy's
        ``deny`` list, and to ``depends_on`` like any call. *ruled*: a call of the model, which the
        policy's rules count or refuse here (a batch asks them in call order beforehand).
        """
        try:
            plan = self._plan(name)
        except UnknownToolError as exc:
            # With an allowlist in force, suggest only what the model may call now.
            known = None if self.allowlist is None or step else [n for n in self.allowlist if n in self.registry]
            return ToolResult.failure(f"Error: {exc if known is None else UnknownToolError(name, known)}")
        if ruled and self._gates.rules is not None and (refusal := self.rule_refusal(name)) is not None:
            return refusal
        # The allowlist is read at each call: the agent loop changes it (deliberate mode's triggers).
        if step or plan.gated or (self.allowlist is not None and name not in self.allowlist):
            refusal = self._gates.refusal(plan, self.allowlist, step=step, deny=self.policy.deny)
            if refusal is not None:
                return refusal
        return plan

    def _plan(self, name: str) -> Plan:
        """Work out (once) what the engine needs to know about tool *name*; UnknownToolError if none."""
        plan = self._plans.get(name)
        if plan is None:
            plan = Plan(self.registry.get(name))
            concurrency = plan.spec.concurrency
            plan.slots = None if concurrency is None else Slots(concurrency)
            plan.limits = self._limits.for_tool(plan.spec)  # rate_limit; concurrency's leases
            plan.leased = plan.limits is not None and plan.limits.leases
            plan.gated = bool(plan.depends_on)
            plan.retries = may_retry_automatically(plan.spec)
            self._plans[name] = plan
        return plan

    def _known(self, name: str) -> Plan | None:
        """The plan of tool *name*, or ``None`` for a tool the registry does not have."""
        try:
            return self._plan(name)
        except UnknownToolError:
            return None

    async def _run(self, plan: Plan, arguments: object, call_id: str, *, approved: bool = False) -> ToolResult:
        """The call steps after the gates: validate, cache, approval, attempts (or a pipeline's steps), record.

        *approved*: a pipeline's approval covered this call (one of its steps).
        """
        prepared = self._prepare(plan, arguments, call_id)
        if isinstance(prepared, Pending):
            prepared = await self._look_up(plan, prepared, call_id)
        if isinstance(prepared, ToolResult):
            return prepared
        cleaned, warnings = prepared.cleaned, prepared.warnings
        if plan.limits is not None and (refused := await self._over_limit(plan, prepared, call_id)) is not None:
            return refused
        if not approved and self._approvals.may_ask(plan.spec, self._approving):
            outcome = await self._approval(plan, cleaned, call_id, warnings)
            if isinstance(outcome, ToolResult):
                return outcome  # refused; or stopped or killed before it started: no hook saw it begin
            approved = outcome
        call = record(call_id, plan.name, cleaned) if self._hooks.records else None
        if self._hooks.before:
            self._hooks.observe("toolflow_before_call", call=call)
        if prepared.function is not None:
            result = await self._attempts.run(plan, prepared.function, cleaned, call, call_id)
        else:  # a pipeline; an awaited helper for both would add a coroutine frame to every call
            result = await self._pipeline(plan, cleaned, call_id, approved=approved)
        if result is KILLED or result is STOPPED:
            # The tool's result (if any) is dropped, not cached; after_call sees how the call it saw start ended.
            return self._finish(plan, result, call_id, cleaned, call, ())
        if result.success and prepared.key is not None:
            await self._store_result(plan, prepared, result)
        return self._finish(plan, result, call_id, cleaned, call, warnings)

    async def _over_limit(self, plan: Plan, prepared: _Prepared, call_id: str) -> ToolResult | None:
        """The result of a call its ``rate_limit`` refuses (or KILLED); ``None`` when it may run (see _limits)."""
        refused = await cast("SharedLimits", plan.limits).admit()
        if refused is None or refused is KILLED:
            return refused
        return self._finish(plan, refused, call_id, prepared.cleaned, None, prepared.warnings)

    async def _pipeline(self, plan: Plan, cleaned: Mapping[str, Any], call_id: str, *, approved: bool) -> ToolResult:
        """Run a pipeline tool's steps, behind the tool's own ``concurrency``; once: its steps retry on their own."""
        pipeline = cast("CompiledPipeline", plan.pipeline)
        # A step is approved with the pipeline when it, or (a pipeline itself) one of its own steps, is covered.
        covered: frozenset[str] = frozenset()
        if approved:
            steps = covered_steps(pipeline, self._pipeline_of, self.needs_approval)
            covered = frozenset(step.split(".", 1)[0] for step, _ in steps)
        # The tool's own `concurrency` holds; no global slot is taken (see toolflow._pipelines).
        kills = self._attempts.kills
        if plan.slots is not None and not await self._attempts.take(plan.slots, stoppable=True):
            return KILLED if self._attempts.kills != kills else STOPPED
        try:
            result = await run_pipeline(self, plan.spec, pipeline, cleaned, call_id=call_id, approved=covered)
        finally:
            if plan.slots is not None:
                plan.slots.release()
        return attrs.evolve(result, extra={**result.extra, "attempts": 1})

    async def _store_result(self, plan: Plan, prepared: _Prepared, result: ToolResult) -> None:
        """Keep a success in the call's cache, if it has one."""
        cache, key = prepared.cache, cast("str", prepared.key)
        if isinstance(cache, MemoryCache):
            cache.set(key, result, plan.ttl)
        elif cache is not None:
            await cache.access.set(cache, result, plan.ttl)

    def _prepare(
        self, plan: Plan, arguments: object, call_id: str, missed: Pending | None = None
    ) -> _Prepared | Pending | ToolResult:
        """Validate, look the cache up, resolve the implementation.

        Returns what the attempts need, or the call's final result when nothing is to run, or,
        for a tool with a persistent cache, the look-up that :meth:`_look_up` does next; after
        a miss, it calls this again with the look-up as *missed*, to go on from there.
        """
        cache: MemoryCache | Pending | None = None
        key = None
        if missed is not None:
            cleaned, warnings, cache, key = missed.cleaned, missed.warnings, missed, missed.key
        else:
            checked = checked_arguments(plan, arguments, self._hooks, call_id, ignore_bound=self._ignore_bound)
            if isinstance(checked, ToolResult):
                raw = dict(arguments) if isinstance(arguments, dict) else {}
                return self._finish(plan, checked, call_id, raw, None, ())
            cleaned, warnings = checked
            if plan.cache_scope is not None:
                key = cache_key(plan.spec, cleaned)
                if (store := self._stores.get(plan.cache_scope)) is not None:  # persistent; a conversation's session
                    if key is not None:  # arguments without a key are neither looked up nor stored
                        return store.pending(cleaned, warnings, key)
                else:
                    memory = self._caches.get(plan.cache_scope)
                    if memory is None:
                        memory = self._caches[plan.cache_scope] = MemoryCache(clock=self._clock)
                    cache = memory
                    hit = None if key is None else memory.get(key)
                    if hit is not None:
                        return self._served(plan, hit, call_id, cleaned, warnings)
        if plan.pipeline is not None:
            return _Prepared(None, cleaned, warnings, cache, key)
        try:
            function = plan.resolve()
        except PluginError as exc:
            result = ToolResult.failure(str(exc), extra={"attempts": 0})
            return self._finish(plan, result, call_id, cleaned, None, warnings)
        return _Prepared(function, cleaned, warnings, cache, key)

    async def _approval(
        self, plan: Plan, arguments: Mapping[str, Any], call_id: str, warnings: tuple[str, ...]
    ) -> ToolResult | bool:
        """True: approved; False: nobody asked (a false condition); else the call's final result (see Approvals)."""
        if self._stop_requested:
            return STOPPED
        call = record(call_id, plan.name, arguments)
        if plan.pipeline is not None:
            covered = covered_steps(plan.pipeline, self._pipeline_of, self.needs_approval)
            call = attrs.evolve(call, approves=tuple(f"{step} ({tool})" for step, tool in covered))
        answer = await self._approvals.check(call, plan.spec, plan.category in self._approving, self.approve)
        if answer is KILLED or answer is STOPPED or isinstance(answer, bool):
            return answer
        return self._finish(plan, answer, call_id, arguments, None, warnings)

    async def _look_up(self, plan: Plan, persistent: Pending, call_id: str) -> _Prepared | ToolResult:
        """Step 4 for the persistent scope: the look-up off the event loop; on a miss, the rest of :meth:`_prepare`.

        A kill while the look-up runs ends the call (``killed``); a store that does not answer
        within ``cache_timeout`` is a miss.
        """
        kills = self._attempts.kills
        hit = await persistent.access.get(persistent)
        if self._attempts.kills != kills:
            return KILLED  # the call never started: no hook saw it begin, none sees it end
        if hit is not None:
            return self._served(plan, hit, call_id, persistent.cleaned, persistent.warnings)
        return cast("_Prepared | ToolResult", self._prepare(plan, persistent.cleaned, call_id, missed=persistent))

    def admit_waiting(self, call: ToolCall) -> Checked:
        """Steps 2-3 for a model's call that runs elsewhere (a deferred one): ``depends_on``, then the arguments.

        The loop asked the allowlist and the rules. Raises :class:`UnknownToolError` for an unknown tool.
        """
        plan = self._plan(call.name)
        refusal = self._gates.refusal(plan, None, step=False)
        if refusal is not None:
            return refusal
        return checked_arguments(plan, call.arguments, self._hooks, call.id, ignore_bound=self._ignore_bound)

    def _served(
        self, plan: Plan, hit: ToolResult, call_id: str, cleaned: Mapping[str, Any], warnings: tuple[str, ...]
    ) -> ToolResult:
        """The result of a cache hit: the stored result with ``attempts`` 0 and ``cached`` (and no pipeline steps)."""
        result = attrs.evolve(hit, extra={**hit.extra, "attempts": 0, "cached": True}, steps=())
        return self._finish(plan, result, call_id, cleaned, None, warnings)

    def _finish(  # noqa: PLR0917 - a call's whole ending
        self,
        plan: Plan,
        result: ToolResult,
        call_id: str,
        arguments: Mapping[str, Any],
        call: ToolCall | None,
        warnings: tuple[str, ...],
    ) -> ToolResult:
        """Add the argument warnings, mask values from ``${...}``, record a success, run the after_call hooks."""
        result = finished(plan, result, warnings)
        if result.success:
            self._gates.succeeded(plan.name)
        return after_call(self._hooks, plan, result, call_id, arguments, call)

    # --- batches ---------------------------------------------------------------------------

    async def run_batch(self, calls: Iterable[object] | None) -> list[ToolResult]:
        """Run the raw tool calls of one model turn; return one result per call, in their order.

        The simple path over :meth:`execute_batch`: when the batch aborts, each call that did
        not finish gets a failure result with the abort's message and ``extra`` ``{"status":
        "aborted", "reason": ...}``.
        """
        outcome = await self.execute_batch(calls)
        if not isinstance(outcome, Abort):
            return [item.result for item in outcome]
        done = {item.call_id: item.result for item in outcome.finished}
        aborted = ToolResult.failure(outcome.message, extra={"status": "aborted", "reason": outcome.reason})
        return [done.get(call_id, aborted) for call_id in outcome.call_ids]

    async def execute(self, raw_call: object) -> Outcome:
        """Run one raw tool call; return its :class:`HistoryEntry` or an :class:`Abort`."""
        outcome = await self.execute_batch([raw_call])
        return outcome if isinstance(outcome, Abort) else outcome[0]

    async def execute_batch(
        self, raw_calls: Iterable[object] | None, *, aside: Callable[[ToolCall], HistoryEntry | None] | None = None
    ) -> BatchOutcome:
        """Run the tool calls of one model turn; return seed 002's discriminated outcome.

        *raw_calls* are raw calls (parsed under the policy's ``max_argument_bytes``) or parsed
        ones. One :class:`HistoryEntry` per call, in call order, or one :class:`Abort` naming every
        call id once: more calls than the policy's ``max_calls_per_turn``, or more malformed ones
        than ``max_malformed``, abort the batch before anything runs (a malformed call is
        answered with its error). Calls of non-dangerous tools (and unknown ones) run
        concurrently; then calls of ``dangerous`` tools and of tools that need approval one at a
        time, in call order, only the first ``dangerous`` call of the tick dispatched. A pending
        stop aborts calls not yet dispatched (waiting for a slot too); a kill cancels the whole
        batch. Only outside cancellation escapes. *aside*: the calls it answers after the rules
        (the agent loop's background calls) are not run here.
        """
        calls = parse_tool_calls(raw_calls, max_argument_bytes=self.policy.max_argument_bytes)
        return await execute_batch(self, calls, aside)

    # What a batch needs of its runner (toolflow._batch.Runner).

    @property
    def kills(self) -> int:
        """How many kills came so far."""
        return self._attempts.kills

    @property
    def max_calls_per_turn(self) -> int:
        """The policy's ``max_calls_per_turn``: a batch with more calls runs none."""
        return self._policy.max_calls_per_turn

    @property
    def stopping(self) -> bool:
        """Whether a stop (or a kill) is pending; :meth:`tick` clears it."""
        return self._stop_requested

    @property
    def dangerous_this_tick(self) -> int:
        """How many ``dangerous`` calls ran in this tick."""
        return self._dangerous_this_tick

    def ran_dangerous(self) -> None:
        """Count a ``dangerous`` call that ran in this tick."""
        self._dangerous_this_tick += 1

    def is_dangerous(self, name: str) -> bool:
        """Whether *name* is a ``dangerous`` tool (False for an unknown one)."""
        return (plan := self._known(name)) is not None and plan.dangerous

    def runs_alone(self, name: str) -> bool:
        """Whether calls of tool *name* run one by one in a batch: ``dangerous``, or in need of approval."""
        plan = self._known(name)
        return plan is not None and (plan.dangerous or plan.category in self._approving or bool(plan.spec.approval))

    def concurrency(self, name: str) -> int | None:
        """The tool's own ``concurrency`` limit (``None``: none, or an unknown tool)."""
        return None if (plan := self._known(name)) is None else plan.spec.concurrency

    def rule_refusal(self, name: str) -> ToolResult | None:
        """Count the model's call of *name* under the policy's rules, or refuse it (a ``blocked`` result).

        An unknown tool, or one outside the allowlist, is not the rules' to count: the gates answer it.
        """
        outside = self.allowlist is not None and name not in self.allowlist
        if self._gates.rules is None or outside or self._known(name) is None:
            return None
        return self._gates.ruled(name, self.registry.names() if self.allowlist is None else self.allowlist)

    def dependencies(self, name: str) -> frozenset[str]:
        """The tools *name* ``depends_on`` (none for an unknown tool)."""
        return frozenset() if (plan := self._plans.get(name)) is None else plan.needs

    async def run_entry(self, call: ToolCall) -> HistoryEntry | None:
        """Admit and run one call of a batch; ``None`` when a stop kept it from running."""
        if self._stop_requested:
            return None
        admitted = self._admit(call.name) if not self._wrappers else None
        if isinstance(admitted, ToolResult):
            result, duration = admitted, None
        else:
            started = trio.current_time()
            if admitted is None:
                result = await self._in_scope(call.name, call.arguments, call.id)
            else:
                result = await self._run(admitted, call.arguments, call.id)
            duration = trio.current_time() - started
        if result is STOPPED:
            return None
        self._gates.answered(call.name, result)
        if call.warnings:
            result = attrs.evolve(result, warnings=(*call.warnings, *result.warnings))
        return entry(call, result, duration)

    # What a pipeline needs of its runner (toolflow._pipelines.StepRunner).

    def guarded(self, scope: trio.CancelScope) -> contextlib.AbstractContextManager[trio.CancelScope]:
        """Enter *scope* as one that :meth:`kill` cancels."""
        return self._attempts.guarded(scope, stoppable=False)

    async def call_step(self, name: str, arguments: Mapping[str, Any], call_id: str, *, approved: bool) -> ToolResult:
        """One call of a pipeline's step: as :meth:`call`, but not held to the allowlist (see :meth:`_admit`).

        *approved*: the pipeline's approval covered it. :data:`~toolflow._attempts.STOPPED` when
        a stop kept it from running.
        """
        if self._wrappers:
            return await self._in_scope(name, arguments, call_id, step=True, approved=approved)
        admitted = self._admit(name, step=True)
        if isinstance(admitted, ToolResult):
            return admitted
        return await self._run(admitted, arguments, call_id, approved=approved)


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
    state: StateBackend | None = None,
    conversation: str | None = None,
    conversation_ttl: float = DEFAULT_CONVERSATION_TTL,
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
        state: The state the engines of a process or a fleet share (``toolflow.open_state``:
            Redis for a fleet). A backend whose caches outlive the process (Redis) holds the
            ``persistent`` cache instead of *cache_path* or *cache_backend*, and the tools'
            ``concurrency`` leases and ``rate_limit`` counts; default: this engine's memory. The
            engine does not close it: its opener does, after every engine that uses it.
        conversation: The id of a conversation kept in *state* that this engine serves a segment of
            (serve: a request): its ``session`` cache, ``depends_on`` successes and rules' counts,
            loaded on entry, merged back on exit (:class:`toolflow._store_access.ConversationStore`).
        conversation_ttl: Seconds the conversation's state lives after each exit (default 30 min).

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
        state=state,
        conversation=conversation,
        conversation_ttl=conversation_ttl,
    )
    try:
        if engine.conversation is not None:
            await engine.conversation.begin(engine.gates)
        yield engine
    finally:
        with trio.CancelScope(shield=True):  # bounded: aclose waits at most the cache timeout
            await engine.aclose()
