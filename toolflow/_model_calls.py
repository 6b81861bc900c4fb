"""The agent loop's model side: one request to the provider, retried, in a cancel scope of its own.

:meth:`ModelCalls.ask` asks the provider for a response; provider errors that are ``retryable``
are retried with backoff (:mod:`toolflow._retrying`), honouring ``retry_after``. Each request is
wrapped in the ``toolflow_wrap_operation`` wrappers' scopes (:mod:`toolflow._telemetry`), when a
plugin installs one: without a wrapper no :class:`~toolflow._telemetry.Operation` is built.

A stop ends a retry back-off at once and keeps the model from being asked again; a kill also
cancels the request in flight. Both come from :class:`toolflow.Agent`, which shares its
:class:`Halt` with this module: the loop reads the same two flags between its steps.
"""

from __future__ import annotations

import logging

import trio

from toolflow._model import RetryPolicy
from toolflow._providers import ModelProvider, ModelRequest, ModelResponse, ProviderError
from toolflow._retrying import Decision, next_delay
from toolflow._telemetry import MODEL_REQUEST, Wrapper, model_operation, operation_scope

__all__ = ["Halt", "ModelCalls"]

logger = logging.getLogger("toolflow")


class Halt:
    """Whether the agent was asked to stop (``stop``) or killed (``killed``, which implies ``stop``).

    One mutable record that the loop and its model calls share, rather than copies that could
    disagree.
    """

    __slots__ = ("killed", "stop")

    def __init__(self) -> None:
        self.stop = False
        self.killed = False

    def clear(self) -> None:
        """Neither: a new run (or a resumed one) begins."""
        self.stop = self.killed = False


class ModelCalls:
    """The requests of one agent to its *provider*, retried by *retry*, in *wrappers*' scopes; see the module."""

    __slots__ = ("_halt", "_provider_scope", "_wait_scope", "_wrappers", "provider", "retry")

    def __init__(self, provider: ModelProvider, retry: RetryPolicy, wrappers: tuple[Wrapper, ...], halt: Halt) -> None:
        self.provider = provider
        self.retry = retry
        self._wrappers = wrappers
        self._halt = halt
        self._provider_scope: trio.CancelScope | None = None
        self._wait_scope: trio.CancelScope | None = None

    def cancel_wait(self) -> None:
        """End a retry back-off at once (a stop or a kill)."""
        if self._wait_scope is not None:
            self._wait_scope.cancel()

    def cancel(self) -> None:
        """Cancel the request in flight and end a retry back-off at once (a kill)."""
        if self._provider_scope is not None:
            self._provider_scope.cancel()
        self.cancel_wait()

    async def ask(self, request: ModelRequest) -> ModelResponse | None:
        """The provider's response, retrying retryable errors, in a cancel scope of its own that a kill cancels.

        ``None`` when a kill cancelled the request meanwhile, or when a stop (or a kill) came
        before a retry: the back-off ends at once and the model is not asked again.

        Raises:
            ProviderError: The provider failed, and retrying did not help or is not allowed.
        """
        with trio.CancelScope() as scope:
            self._provider_scope = scope
            if self._halt.killed:
                scope.cancel()
            try:
                attempt = 0
                while True:
                    attempt += 1
                    try:
                        # No wrapper, no scope: the Operation is built only for a wrapper to read.
                        response = await (self._traced(request) if self._wrappers else self.provider.complete(request))
                    except ProviderError as exc:
                        await self._back_off(self._delay(exc, attempt))
                        if self._halt.stop:
                            return None
                    else:
                        # A provider that answered all the same (it shielded the request, say) is not
                        # heard: the kill ends the loop, and the next checkpoint in the cancelled scope
                        # would cut the turn short anyway.
                        return None if self._halt.killed else response
            finally:
                self._provider_scope = None
        return None  # killed while the model was answering

    def _delay(self, exc: ProviderError, attempt: int) -> float:
        """How long to wait before retrying after *attempt* failed with *exc*; raises *exc* when it is not retried."""
        decision = Decision(retryable=exc.retryable, reason=str(exc), retry_after=exc.retry_after)
        delay = next_delay(self.retry, attempt, decision)
        if delay is None:
            raise exc
        logger.warning("%s; retrying in %.1fs (attempt %d)", exc, delay, attempt + 1)
        return delay

    async def _traced(self, request: ModelRequest) -> ModelResponse:
        """The provider's response to *request*, in the wrappers' scopes."""
        request_op = model_operation(MODEL_REQUEST, self.provider.name, request.model, request.turn)
        with operation_scope(self._wrappers, request_op) as op:
            response: ModelResponse = await self.provider.complete(request)
            op.result = response
        return response

    async def _back_off(self, delay: float) -> None:
        """Sleep *delay* seconds before a retry, in a cancel scope that a stop or a kill cancels."""
        if self._halt.stop:
            return
        with trio.CancelScope() as scope:
            self._wait_scope = scope
            try:
                await trio.sleep(delay)
            finally:
                self._wait_scope = None
