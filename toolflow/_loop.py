"""The agent loop: model turns, tool batches through the engine, and the continuation policy (issue 5).

Each turn of :meth:`Agent.run`:

1. ask the provider for a response, given the history and the definitions of the exposed tools
   that the policy's rules allow now (:mod:`toolflow._rules`; provider errors that are
   ``retryable`` are retried with backoff, honouring ``retry_after``);
2. read the response's tool calls with the history format; no calls: the text is the final
   answer and the loop ends (``final_answer``), unless a ``before_exit`` rule is unmet: then the
   model is told what to call first and gets another turn (``before_exit``);
3. gate the calls by category: calls beyond a category's ``per_turn`` and calls that need an
   approval nobody gives get a model-visible result and are not run;
4. run the rest as one batch through the engine (the engine's batch, :func:`toolflow._batch.execute_batch`); calls
   of a ``background`` category are answered ``started`` and run on as tasks of the run, their
   outcomes noted before a later request (:mod:`toolflow._background`);
5. append one result per call to the history (a token or iteration advisory rides on the last
   result of the turn), whatever happened: a killed batch gives each call a ``cancelled``
   result, a stop gives the calls that were not run a ``stopped`` result, and an exception or a
   cancellation from outside that ends :meth:`Agent.run` meanwhile gives each call a
   ``cancelled`` result before it propagates, so providers never see an orphaned tool call
   (the assistant message kept in the history carries the ids the results answer, which
   :func:`toolflow.parse_tool_calls` may have made unique or invented);
6. decide whether to go on (:class:`toolflow.LoopDecision`): ``killed``, ``stopped``,
   ``terminal`` (a call whose category ends the loop), ``error_cap``
   (``max_consecutive_errors`` failed calls in a row, across all tools; calls refused by a
   ``per_turn`` limit or kept from running by a stop count neither way), ``token_critical``
   (the model first gets one last turn without tools to answer, even after the last
   iteration), ``max_iterations``, else ``token_warning`` or ``normal``; or ``restart``, when a
   result asks for it and the loop would go on: the model's message leaves the history and the
   tool's context comes in as a user message (``toolflow._restart``).

:meth:`Agent.request_stop` lets the calls in flight finish and ends the loop after them;
:meth:`Agent.kill` cancels them (and a provider request in flight) at once. Either ends a wait
for an approval or a provider retry back-off at once. Either way every tool call in the
history has exactly one result.

:meth:`Agent.reflect` runs one turn in reflection mode (seed 000, step 3): its calls run, but
neither the prompt, the model's answer nor the results enter the history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolflow._approval import Approver, defer_approval
from toolflow._background import BackgroundCalls, running
from toolflow._batch import entry as _entry
from toolflow._batch import execute_batch
from toolflow._calls import MalformedCall, ParsedCall, ToolCall, parse_tool_calls
from toolflow._context import providing_context
from toolflow._deferred import (
    DEFERRED,
    HeldTurn,
    PendingCall,
    awaiting,
    defer_calls,
    deferred_tools,
    run_approved,
    supplied_results,
    waiting_decision,
)
from toolflow._deliberate import DeliberateTools
from toolflow._errors import UsageError, expect_count
from toolflow._executor import Abort, Engine, HistoryEntry
from toolflow._history import HistoryFormat, get_format
from toolflow._loop_parts import (
    Offer,
    advise,
    answer_aborted,
    check_arguments,
    check_format,
    stopped_decision,
    with_call_ids,
)
from toolflow._loop_records import LoopResult, RunState, TurnRecord, add_usage
from toolflow._loop_texts import ENDED as _ENDED
from toolflow._loop_texts import KILLED_BEFORE as _KILLED_BEFORE
from toolflow._loop_texts import LAST_TURN, NO_TOOLS_NOW, exit_refused, must_call_last, over_per_turn
from toolflow._loop_texts import STOPPED_BEFORE as _STOPPED_BEFORE
from toolflow._model import RetryPolicy
from toolflow._model_calls import Halt, ModelCalls
from toolflow._policy import LoopDecision, LoopReason, Policy, check_loop_continuation
from toolflow._provenance import masked
from toolflow._providers import (
    HistoryView,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderError,
)
from toolflow._restart import Restarts
from toolflow._results import ToolResult
from toolflow._rules import describe_rules
from toolflow._run_state import SavedRun, check_resumable, counters, restored
from toolflow._telemetry import INVOKE_AGENT, active_wrappers, model_operation, operation_scope

__all__ = ["Agent", "Approver", "LoopResult", "SavedRun", "TurnRecord"]

PROVIDER_RETRY = RetryPolicy(attempts=4, initial=1.0, max=30.0)
"""How often and how patiently a retryable provider error is retried by default."""

_NOTHING: frozenset[str] = frozenset()


class Agent:
    """An agent loop over one engine and one model provider.

    Args:
        engine: Runs the tool calls (its registry is the set of tools; the agent sets its
            ``allowlist`` to the exposed tools).
        provider: The model.
        policy: The loop policy (default: :meth:`Policy` defaults).
        format: The history format: ``openai``, ``anthropic``, ``fallback`` or ``text``.
        system: The system prompt (default: the policy's ``system_prompt``).
        deliberate: Deliberate mode: expose only the policy's ``deliberate`` allowlist, a tool
            with ``triggers`` only once a user message asks for it (``toolflow._deliberate``).
        approve: Decides on calls whose category requires approval; it becomes the engine's
            approver (:attr:`Engine.approve`), asked before the plugins'
            ``toolflow_approve_call`` hook; when nobody answers, the call is refused. The
            agent also sets the engine's :attr:`~Engine.policy` to *policy*, so the engine
            knows which categories need approval.
        model: The model name, passed on in each request.
        max_result_chars: The longest result text the model is shown (default: the policy's).
        provider_retry: How retryable provider errors are retried.
        on_turn: Called with each :class:`TurnRecord` as the turn ends (for live traces).
        context: The caller's context (the user, the channel): fills the parameters tools bind
            under ``context:``, which the model is never shown (``toolflow._bound``).

    Raises:
        TypeError: An argument of the wrong type (the message names it and what it must be).
        ValueError: *max_result_chars* is less than 1.
        UsageError: The provider cannot speak *format*, or the policy names a toolset or tools
            that do not exist, or *deliberate* is set without a ``deliberate`` allowlist.
    """

    def __init__(
        self,
        engine: Engine,
        provider: ModelProvider,
        *,
        policy: Policy | None = None,
        format: str = "openai",  # noqa: A002 - the CLI option's name
        system: str | None = None,
        deliberate: bool = False,
        approve: Approver | None = None,
        model: str = "",
        max_result_chars: int | None = None,
        provider_retry: RetryPolicy = PROVIDER_RETRY,
        on_turn: Callable[[TurnRecord], None] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        check_arguments(locals())  # the parameters, by name
        expect_count(max_result_chars, "Agent: max_result_chars", minimum=1, optional=True)
        check_format(format, provider)
        self.engine = engine
        self.policy = policy if policy is not None else Policy()
        # The policy's prompt texts are shown to the model: a string from ${...} shows its reference.
        self.format: HistoryFormat = get_format(format, text_protocol_template=masked(self.policy.text_protocol))
        self.tools = tuple(engine.registry.exposed(self.policy, deliberate=deliberate))
        self._allowlist = frozenset(tool.name for tool in self.tools)
        # Each tool's category and what the policy makes of it, looked up once rather than per call.
        self._categories = {tool.name: (tool.category, self.policy.category(tool.category)) for tool in engine.registry}
        self._restricted = len(self._allowlist) != len(engine.registry)
        # The tools whose successful (failed) calls end the loop, and the first turn to advise on.
        # A background call's result says only that it started: it ends nothing (TF258).
        ends = {n: b.ends for n, (_, b) in self._categories.items() if not b.background}
        self._end_on_success = frozenset(n for n, b in ends.items() if b(success=True))
        self._end_on_failure = frozenset(n for n, b in ends.items() if b(success=False))
        self._soft_warn_at = self.policy.soft_warn_at
        self._writes_ids = self.format.name in ("openai", "anthropic", "gemini")  # fallback and text have no call ids
        self._base_system = masked(system if system is not None else self.policy.system_prompt)
        # The rules are described wherever tools are offered; the turn without tools needs no rules.
        self._rules_system = "\n\n".join(filter(None, (self._base_system, describe_rules(self.policy.rules))))
        self._offers: dict[frozenset[str], Offer] = {}
        self._specs = [tool.spec for tool in self.tools]
        self._prompted = False
        self.system = ""
        """The system prompt, written by the first :meth:`run` or :meth:`reflect`."""
        self._answer_system = ""
        self._definitions = tuple(self.format.tool_definitions(self._specs))
        # Deliberate mode's triggers hide tools until a user message asks for them; restarts (toolflow._restart).
        self._deliberate = DeliberateTools.of(self.policy, self._allowlist, deliberate=deliberate)
        self._hide(self._deliberate.hidden())
        self._retains = self._deliberate.has_triggers()  # decided once: most agents have no triggers
        self._restarts = Restarts.of(engine.registry, self.policy.max_restarts, engine.plugins)
        # Deferred calls wait for the application's results, and their turn's results with them (issue 21).
        self._deferred, self._deliberate_mode = deferred_tools(engine.registry, self.policy), deliberate
        self._deferring: list[ToolCall] = []
        self._waiting: tuple[PendingCall, ...] = ()
        self._held: HeldTurn | None = None
        self._last_run: tuple[RunState, LoopDecision] | None = None
        engine.policy = self.policy
        if approve is not None:
            engine.approve = approve
        self.model = model
        self.max_result_chars = self.policy.max_result_chars if max_result_chars is None else max_result_chars
        self.on_turn = on_turn
        self.context = context
        self._wrappers = active_wrappers(engine.plugins)  # toolflow_wrap_operation: runs and requests in their scopes
        self._halt = Halt()  # request_stop() and kill(): the loop and its model calls read them
        self._model = ModelCalls(provider, provider_retry, self._wrappers, self._halt)
        self._messages: list[Mapping[str, Any]] = []
        self._background = BackgroundCalls.of(
            self.policy, self._categories, self._allowlist, self.format, self._messages
        )

    @property
    def provider(self) -> ModelProvider:
        """The model provider the loop asks (settable: the next request goes to the new one)."""
        return self._model.provider

    @provider.setter
    def provider(self, provider: ModelProvider) -> None:
        self._model.provider = provider

    @property
    def provider_retry(self) -> RetryPolicy:
        """How retryable provider errors are retried (settable: the next error is retried by the new policy)."""
        return self._model.retry

    @provider_retry.setter
    def provider_retry(self, retry: RetryPolicy) -> None:
        self._model.retry = retry

    # --- control -------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Mapping[str, Any], ...]:
        """The history so far, in the format's shape (without the system prompt)."""
        return tuple(self._messages)

    def request_stop(self) -> None:
        """End the loop after the calls in flight (a model request in flight is answered first).

        A wait for an approval or a provider retry back-off ends at once: the call waiting for
        approval is not run (``stopped``), and the model is not asked again.
        """
        self._halt.stop = True
        self.engine.request_stop()
        self._model.cancel_wait()

    def kill(self) -> None:
        """Cancel the calls in flight, a model request in flight and a wait for approval at once; end the loop."""
        self._halt.stop = self._halt.killed = True
        self.engine.kill()
        if self._background is not None:
            self._background.cancel()
        self._model.cancel()

    # --- the loop --------------------------------------------------------------------------

    def _hide(self, hidden: frozenset[str]) -> None:
        """Offer the model the exposed tools but *hidden* (deliberate mode's triggers) from now on."""
        self._hidden = hidden
        self._offerable = self._allowlist - hidden if hidden else self._allowlist
        # The engine's gate lists what is offered: a refusal must not name a hidden tool.
        self._engine_allowlist = self._offerable if self._restricted or hidden else None
        # Whether a turn may offer fewer tools than all: the rules may allow fewer, or tools are hidden.
        self._narrows = bool(hidden or self.policy.rules)

    async def _write_system_prompts(self) -> None:
        """Write the system prompts, once: the text format renders its template in a template worker.

        Raises:
            UsageError: The text format's template failed to render.
        """
        if self._prompted:
            return
        self.system = await self.format.system_prompt(self._rules_system, self._specs)
        # The turn without tools must not describe tools (fallback, text) the model may no longer call.
        self._answer_system = await self.format.system_prompt(self._base_system, ())
        self._prompted = True

    async def _start(self, prompt: str) -> RunState:
        """Begin a :meth:`run`: the tools *prompt* exposes, the system prompts, a new loop, the user's *prompt*."""
        self._halt.clear()
        state = RunState(triggers=self._deliberate.hear(prompt))
        self._hide(self._deliberate.hidden())
        await self._write_system_prompts()
        self.engine.new_loop()
        self._messages.append(self.format.user_message(prompt))
        return state

    async def run(self, prompt: str) -> LoopResult:
        """Run the loop on the user's *prompt* until the policy ends it.

        Only outside cancellation and the approver's exceptions escape; before they do, every
        call of the turn gets a ``cancelled`` result, so a later :meth:`run` continues from a
        valid history. The first :meth:`run` (or :meth:`reflect`) writes the system prompt, and
        raises :class:`~toolflow.UsageError` when the text format's template fails to render.
        """
        if self._held is not None:
            msg = "the run waits for the results of its deferred calls: resume() it with them first"
            raise UsageError(msg)
        with operation_scope(self._wrappers, model_operation(INVOKE_AGENT, self.provider.name, self.model)) as op:
            state = await self._start(prompt)
            op.result = await self._go_on(state, None)
        return op.result  # type: ignore[no-any-return]

    async def _go_on(self, state: RunState, decision: LoopDecision | None) -> LoopResult:
        """Run turns until the policy ends the loop (unless *decision* did already); the run's result."""
        background = self._background
        # The caller's context, for the calls of the run (a context variable: the engine may serve other callers).
        with providing_context(self.context):
            async with running(background, self.engine, self.context, self.max_result_chars):
                if decision is not None and background is not None:  # a resumed turn ended the run: on_exit, notes
                    decision = await background.settle(decision, state, self.max_result_chars)
                while decision is None:
                    decision = await self._turn(state)
                    if decision is not None and background is not None:
                        decision = await background.settle(decision, state, self.max_result_chars)
        self._last_run = (state, decision)
        return LoopResult(
            final_answer=state.final_answer,
            reason=decision.reason,
            decision=decision,
            turns=tuple(state.turns),
            messages=tuple(self._messages),
            system=self.system,
            format=self.format.name,
            usage=state.usage,
            pending=() if self._held is None else self._held.pending,
            outcomes=() if background is None else background.exit_outcomes,
        )

    def snapshot(self) -> SavedRun:
        """The run's state after :meth:`run` or :meth:`resume`, to resume it later, here or elsewhere."""
        state, decision = self._last_run or (RunState(), None)
        held = self._held
        return SavedRun(
            format=self.format.name,
            system=self._base_system,
            deliberate=self._deliberate_mode,
            history=tuple(self._messages),
            run=counters(state),
            decision=None if decision is None else decision.to_dict(),
            pending=() if held is None else held.pending,
            held=None if held is None else held.to_dict(),
            gates=self.engine.gates.dump(),
            retention=self._deliberate.dump(),
            tasks_started=0 if self._background is None else self._background.tasks_started,
            background=() if self._background is None else self._background.saved(),
        )

    async def resume(
        self, saved: SavedRun, *, results: Mapping[str, object] | None = None, prompt: str | None = None
    ) -> LoopResult:
        """Take up *saved* (from :meth:`snapshot`, :meth:`SavedRun.load`) and go on (``toolflow._run_state``).

        A run that ended ``deferred`` goes on with *results*, one per waiting call (``{call_id:
        value}``, see :func:`toolflow._deferred.supplied_results`; ``True`` or ``False`` for a call
        awaiting approval); a run that ended another way takes the next user message, *prompt*.

        Raises:
            UsageError: *saved* is in another format; results that do not fit (see above); a
                *prompt* for a run waiting for results, or none for a run that does not.
        """
        state = self._restore(saved, waits=results is not None or prompt is None)
        if self._held is None:
            return await self.run(str(prompt))
        answered = supplied_results(self._held.pending, results or {}, self.engine.registry)
        await run_approved(self.engine, self._held.pending, answered, self.context)  # with the approval given
        with operation_scope(self._wrappers, model_operation(INVOKE_AGENT, self.provider.name, self.model)) as op:
            await self._write_system_prompts()
            self._halt.clear()
            op.result = await self._go_on(state, self._answer_held(state, answered))
        return op.result  # type: ignore[no-any-return]

    def _restore(self, saved: SavedRun, *, waits: bool) -> RunState:
        """Take up *saved*'s history and bookkeeping; its counters. *waits*: the caller gives results, not a prompt."""
        check_resumable(saved, self.format.name, waits=waits)
        self._messages[:] = saved.history  # in place: the background calls append their notes to this list
        if self._background is not None:
            self._background.go_on_from(saved.tasks_started, saved.background)
        self.engine.gates.restore(saved.gates)
        self._deliberate.restore(saved.retention)
        self._hide(self._deliberate.hidden())
        self._held = HeldTurn.from_dict(saved.held, saved.pending) if saved.held is not None else None
        return restored(saved.run)

    def _answer_held(self, state: RunState, answered: Mapping[str, ToolResult]) -> LoopDecision | None:
        """End the turn kept back, its deferred calls answered by *answered*, as it would have ended then."""
        held, self._held = self._held, None
        assert held is not None  # resume() made sure
        entries = held.completed(answered, self.engine.gates)
        entries, decision, ended_by = self._conclude(state, entries, held.uncounted - answered.keys(), held.tokens)
        return self._end_turn(state, TurnRecord.resumed(held, entries, decision, ended_by))

    async def _turn(self, state: RunState) -> LoopDecision | None:
        """One turn of :meth:`run`: ask the model, run its calls, decide; ``None``: the model gets another turn.

        Returns the decision that ends the loop, which the turn's record also carries when the
        model was asked.
        """
        state.iteration += 1
        iteration, tools_offered = state.iteration, state.tools_offered
        started = time.perf_counter()
        if self._halt.stop:
            return self._stopped(iteration - 1)
        outcomes = self._background.deliver(state, self.max_result_chars) if self._background is not None else ()
        try:
            response = await self._model.ask(await self._request(state))
        except ProviderError as exc:
            remaining = max(0, self.policy.max_iterations - iteration + 1)
            return LoopDecision(
                should_continue=False, reason="provider_error", message=str(exc), iterations_remaining=remaining
            )
        if response is None:  # killed while the model was answering
            return self._stopped(iteration - 1)
        state.usage = add_usage(state.usage, response.usage)
        text, raw_calls = self.format.read_response(response.message)
        state.final_answer = text
        calls = parse_tool_calls(raw_calls, max_argument_bytes=self.policy.max_argument_bytes)
        message = with_call_ids(response.message, raw_calls, calls) if self._writes_ids else dict(response.message)
        self._messages.append(message)
        if calls:
            entries, decision, ended_by = await self._answer(state, calls, response)
        else:
            entries, ended_by = (), ()
            decision = self._answered(state)
        duration = time.perf_counter() - started
        record = TurnRecord(
            turn=iteration,
            text=text,
            entries=entries,
            usage=response.usage,
            decision=decision,
            duration=duration,
            tools_offered=tools_offered,
            ended_by=ended_by,
            triggers=state.triggers if iteration == 1 else (),
            outcomes=outcomes,
        )
        return self._end_turn(state, record)

    def _end_turn(self, state: RunState, record: TurnRecord) -> LoopDecision | None:
        """Record the turn; the decision that ends the loop, or ``None``: the model gets another turn."""
        state.turns.append(record)
        if self.on_turn is not None:
            self.on_turn(record)
        decision = record.decision
        if decision.should_continue:
            return None
        # After a turn with tools, the token budget's critical level (and the iteration limit, with
        # answer_at_limit) gives the model one last turn without tools to answer.
        if record.tools_offered and (
            decision.reason == "token_critical" or (decision.reason == "max_iterations" and self.policy.answer_at_limit)
        ):
            state.tools_offered, state.last_turn = False, decision.reason
            state.required = self._required()  # but with the tools a before_exit rule still waits for
            return None
        return decision

    async def _answer(
        self, state: RunState, calls: list[ParsedCall], response: ModelResponse
    ) -> tuple[tuple[HistoryEntry, ...], LoopDecision, tuple[str, ...]]:
        """Run (or refuse) the turn's *calls*, decide, and append one result per call to the history.

        Returns the entries, the decision and the calls that ended the loop.
        """
        tokens = response.usage.total_tokens if response.usage is not None else None
        try:
            if state.tools_offered:
                entries, uncounted = await self._run_calls(calls)
            else:  # the turn without tools: none of them runs, but those a before_exit rule waits for
                entries, uncounted = await self._last_calls(state, calls)
            if self.engine.approve is defer_approval:  # calls awaiting approval wait as deferred ones do
                self._waiting, uncounted = awaiting(entries, uncounted, self._waiting)
            if not self._waiting:
                return self._conclude(state, entries, uncounted, tokens)
        except BaseException:
            # An approver that raised, or a cancel scope outside run() (a timeout, a nursery
            # failing): answer the calls all the same, or the next run() would send the provider
            # a history with orphaned tool calls.
            self._waiting = ()
            self._messages.extend(self.format.result_messages([_entry(call, _ENDED) for call in calls]))
            raise
        # Deferred calls wait: so do the turn's results (toolflow._deferred).
        pending, self._waiting = self._waiting, ()
        self._held = HeldTurn(
            turn=state.iteration,
            text=state.final_answer,
            tokens=tokens,
            tools_offered=state.tools_offered,
            entries=entries,
            uncounted=uncounted,
            pending=pending,
        )
        return entries, waiting_decision(pending, max(0, self.policy.max_iterations - state.iteration)), ()

    def _conclude(
        self, state: RunState, entries: tuple[HistoryEntry, ...], uncounted: frozenset[str], tokens: int | None
    ) -> tuple[tuple[HistoryEntry, ...], LoopDecision, tuple[str, ...]]:
        """Decide after the turn's *entries*, and append one result per call to the history (or restart the turn)."""
        if state.tools_offered and self._retains:
            self._deliberate.retain(entries)
        decision, ended_by = self._decide(state, entries, tokens, uncounted)
        restart = self._restarts.take(entries, decision, state, self.max_result_chars)
        if restart is not None:  # the model's message leaves the history, and its results never enter it
            self._messages[-1:] = [self.format.user_message(restart.note)]
            return entries, restart.decision, restart.call_ids
        entries = advise(entries, decision, self.policy.max_iterations, self._soft_warn_at)
        self._messages.extend(self.format.result_messages(entries, max_chars=self.max_result_chars))
        return entries, decision, ended_by

    async def reflect(self, prompt: str) -> TurnRecord:
        """Run one turn in reflection mode: its calls run, but nothing of it enters the history."""
        await self._write_system_prompts()
        started = time.perf_counter()
        response = await self._model.ask(await self._request(RunState(), then=prompt))
        decision = LoopDecision(should_continue=True, reason="normal", message="reflection")
        text, usage = "", None
        entries: tuple[HistoryEntry, ...] = ()
        if response is not None:  # not killed meanwhile
            text, raw_calls = self.format.read_response(response.message)
            calls = parse_tool_calls(raw_calls, max_argument_bytes=self.policy.max_argument_bytes)
            with providing_context(self.context):
                entries, usage = (await self._run_calls(calls))[0] if calls else (), response.usage
        duration = time.perf_counter() - started
        return TurnRecord(
            turn=0, text=text, entries=entries, usage=usage, decision=decision, duration=duration, reflection=True
        )

    # --- steps -----------------------------------------------------------------------------

    def _stopped(self, iteration: int) -> LoopDecision:
        """The decision of a loop that a stop or a kill ended after turn *iteration*."""
        return stopped_decision(killed=self._halt.killed, remaining=max(0, self.policy.max_iterations - iteration))

    async def _request(self, state: RunState, then: str | None = None) -> ModelRequest:
        """The request of *state*'s turn: the history, then the user's message *then*, with the turn's offer.

        A turn with tools offers the exposed tools the rules allow now (:meth:`_offered`). The turn
        without tools offers only the tools a ``before_exit`` rule still waits for, if any, and its
        user message asks for the answer (:meth:`_last_words`).
        """
        if not state.tools_offered:
            offer = await self._offer(state.required) if state.required else (self._answer_system, ())
            then = self._last_words(state)
        elif self._narrows and (names := self._offered()) is not None:
            offer = await self._offer(names)
        else:
            offer = self.system, self._definitions
        system, definitions = offer
        # The history through a view rather than a copy, so that a turn costs the same however long the
        # run: the history is only ever appended to, so the view keeps showing this turn's messages.
        tail = () if then is None else (self.format.user_message(then),)
        return ModelRequest(
            format=self.format.name,
            system=system,
            messages=HistoryView(self._messages, tail),
            tools=definitions,
            turn=state.iteration,
            model=self.model,
        )

    async def _offer(self, names: frozenset[str]) -> Offer:
        """The system prompt and the tool definitions of a turn that offers only *names*, written once and kept."""
        offer = self._offers.get(names)
        if offer is None:
            specs = [spec for spec in self._specs if spec.name in names]
            system = await self.format.system_prompt(self._rules_system, specs)
            offer = self._offers[names] = (system, tuple(self.format.tool_definitions(specs)))
        return offer

    def _offered(self) -> frozenset[str] | None:
        """The exposed tools offered (deliberate mode) that the rules allow as a turn's first call; ``None``: all."""
        rules = self.engine.rules
        allowed = self._offerable if rules is None else rules.allowed(self._offerable, new_turn=True)
        return None if len(allowed) == len(self._allowlist) else allowed

    def _required(self) -> frozenset[str]:
        """The exposed tools of the ``before_exit`` rules still unmet."""
        rules = self.engine.rules
        missing = () if rules is None else rules.missing()
        return frozenset(
            name for rule in missing for name in rule.tools if name in self._allowlist and name not in self._hidden
        )

    def _last_words(self, state: RunState) -> str:
        """The user message that asks for the answer in the turn without tools."""
        if state.required:
            return must_call_last(state.last_turn, sorted(state.required))
        return LAST_TURN[state.last_turn]

    def _answered(self, state: RunState) -> LoopDecision:
        """The decision after an answer without tool calls: final, unless a ``before_exit`` rule refuses it.

        A refused answer gets one user message saying what to call first, and the model another
        turn; at the last turn, the loop ends (``max_iterations``), or gives the model its answer
        turn with the tools still required (``answer_at_limit``).
        """
        remaining = max(0, self.policy.max_iterations - state.iteration)
        missing = self.engine.rules.missing() if state.tools_offered and self.engine.rules is not None else ()
        if not missing:
            reason: LoopReason = "final_answer" if state.tools_offered else state.last_turn
            message = "the model answered without calling tools"
            return LoopDecision(should_continue=False, reason=reason, message=message, iterations_remaining=remaining)
        unmet = "; ".join(rule.describe() for rule in missing)
        if remaining:
            self._messages.append(self.format.user_message(exit_refused(unmet)))
            message = f"final answer refused by the rules: {unmet}"
            return LoopDecision(
                should_continue=True, reason="before_exit", message=message, iterations_remaining=remaining
            )
        message = f"reached the limit of {self.policy.max_iterations} iterations with a rule unmet: {unmet}"
        return LoopDecision(should_continue=False, reason="max_iterations", message=message)

    async def _last_calls(
        self, state: RunState, calls: list[ParsedCall]
    ) -> tuple[tuple[HistoryEntry, ...], frozenset[str]]:
        """The calls of the turn without tools: those of the tools still required run, the others are refused."""
        refused = NO_TOOLS_NOW[state.last_turn]
        allowed = [call for call in calls if call.name in state.required]
        ran, uncounted = await self._run_calls(allowed) if allowed else ((), _NOTHING)
        answered = {entry.call_id: entry for entry in ran}
        return tuple(answered.get(call.id) or _entry(call, refused) for call in calls), uncounted

    async def _run_calls(self, calls: Sequence[ParsedCall]) -> tuple[tuple[HistoryEntry, ...], frozenset[str]]:
        """Gate *calls* by category, run the rest as one batch; one entry per call, in order.

        Also returns the ids of the calls that no error of the model's kept from running: those
        over a category's ``per_turn`` and those a stop or a kill kept from running.
        """
        engine = self.engine
        engine.tick()
        if self._halt.stop:
            engine.request_stop()
        engine.allowlist = self._engine_allowlist
        engine.dangerous_per_tick = None  # the category gate applies the policy's per_turn
        to_run, decided, uncounted = self._gate(calls)
        aside = self._background.admit if self._background is not None else None
        # Parsed once, in _turn: the batch runs them through the engine without parsing them again.
        outcome = await execute_batch(engine, to_run, aside) if to_run else ()
        # Deferred calls after the batch, so that the rules count them after the calls before them.
        self._waiting = ()
        if self._deferring:
            stopped = (_KILLED_BEFORE if self._halt.killed else _STOPPED_BEFORE) if self._halt.stop else None
            self._waiting = defer_calls(engine, self._deferring, decided, uncounted, stopped)
        if self._background is not None:  # a started call counts when its outcome comes
            uncounted.update(self._background.launch(killed=isinstance(outcome, Abort) and outcome.reason == "killed"))
        if isinstance(outcome, Abort):
            answer_aborted(outcome, to_run, decided, uncounted, killed=self._halt.killed)
        elif not decided and not uncounted:
            return outcome, _NOTHING  # every call ran, and the engine answers in call order
        else:
            decided.update((entry.call_id, entry) for entry in outcome)
        return tuple(decided[call.id] for call in calls), frozenset(uncounted)

    def _gate(self, calls: Sequence[ParsedCall]) -> tuple[list[ParsedCall], dict[str, HistoryEntry], set[str]]:
        """The calls to run, the answers of those over a ``per_turn`` limit (no error of the model's).

        The calls count in their order. Approval is the engine's: it asks only about calls that
        pass its gates (the allowlist, ``depends_on``), the validator and the cache.
        """
        decided: dict[str, HistoryEntry] = {}
        uncounted: set[str] = set()
        to_run: list[ParsedCall] = []
        counts: dict[str, int] = {}
        self._deferring = []
        for call in calls:
            if isinstance(call, MalformedCall):
                to_run.append(call)  # the engine answers it (and counts it towards max_malformed)
                continue
            known = self._categories.get(call.name)
            if known is None or call.name not in self._allowlist:
                to_run.append(call)  # the engine's look-up and gate answer it
                continue
            if call.name in self._hidden:  # deliberate mode: no user message asked for it
                decided[call.id] = _entry(call, self._deliberate.refusal(call.name))
                continue
            category, behaviour = known
            if behaviour.per_turn is not None:
                seen = counts.get(category, 0)
                if seen >= behaviour.per_turn:
                    decided[call.id] = _entry(call, over_per_turn(behaviour.per_turn, category, call.name))
                    uncounted.add(call.id)
                    continue
                counts[category] = seen + 1
            if call.name in self._deferred:  # not run: it waits for the application's result (toolflow._deferred)
                decided[call.id] = _entry(call, DEFERRED)
                self._deferring.append(call)
                continue
            to_run.append(call)
        return to_run, decided, uncounted

    def _decide(
        self, state: RunState, entries: tuple[HistoryEntry, ...], tokens: int | None, uncounted: frozenset[str]
    ) -> tuple[LoopDecision, tuple[str, ...]]:
        """The decision after a turn and the calls that ended the loop; counts the failed calls in a row in *state*."""
        policy = self.policy
        ends: list[HistoryEntry] = []
        for entry in entries:
            if entry.call_id not in uncounted:
                state.errors = 0 if entry.success else state.errors + 1
            if entry.tool_name in (self._end_on_success if entry.success else self._end_on_failure):
                ends.append(entry)
        base = check_loop_continuation(policy=policy, iteration=state.iteration, tokens_used=tokens)
        if self._halt.stop:
            return self._stopped(state.iteration), ()
        if ends:
            reason: LoopReason = "terminal"
            message = f"{', '.join(repr(entry.tool_name) for entry in ends)} ended the loop"
        elif state.errors >= policy.max_consecutive_errors:
            reason = "error_cap"
            message = f"{state.errors} failed tool calls in a row (at most {policy.max_consecutive_errors})"
        elif not state.tools_offered:
            reason, message = state.last_turn, "the model used its last turn for tool calls"
        else:
            return base, ()
        advisory, remaining = base.advisory, base.iterations_remaining
        decision = LoopDecision(
            should_continue=False, reason=reason, message=message, advisory=advisory, iterations_remaining=remaining
        )
        return decision, tuple(entry.call_id for entry in ends)
