"""The spans and the duration histogram of the ``otel`` plugin (imported only once an operation is traced).

Names and attributes follow OpenTelemetry's GenAI semantic conventions, through the constants of
``opentelemetry-semantic-conventions``; toolflow's own attributes are under ``toolflow.``. What a
span never carries: arguments, results, error messages, prompts, answers (any of them may hold a
secret or a value from ``${...}``, see docs/security.md); a failure is told by ``error.type``, a
short class such as ``timeout`` or ``blocked``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from opentelemetry import context, metrics, trace
from opentelemetry.metrics import Histogram, MeterProvider
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics.gen_ai_metrics import create_gen_ai_client_operation_duration
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from toolflow import __version__
from toolflow._results import ToolResult
from toolflow._telemetry import EXECUTE_TOOL, INVOKE_AGENT, MODEL_REQUEST, Operation

__all__ = ["SCOPE", "Spans"]

SCOPE = "toolflow"
"""The instrumentation scope's name (the tracer's and the meter's)."""

TOOL_TYPE = "function"
"""``gen_ai.tool.type``: toolflow runs the tools the model asks for, on the agent's side."""

_TIMED_OUT = re.compile(r"Error: tool '[^']*' timed out after ")
"""How the engine words a call's timeout (toolflow._attempts)."""


class Spans:
    """Makes the scope (span and duration) of each operation, in the given or the global providers."""

    __slots__ = ("_histogram", "_tracer", "_tracer_provider")

    def __init__(self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None) -> None:
        self._tracer_provider = tracer_provider
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        self._histogram = create_gen_ai_client_operation_duration(meter)

    def configured(self) -> bool:
        """Whether spans go somewhere: a provider was given, or OpenTelemetry's global one was set."""
        return self._tracer_provider is not None or not isinstance(
            trace.get_tracer_provider(), trace.ProxyTracerProvider
        )

    def scope(self, operation: Operation) -> _Scope:
        """The scope of *operation*."""
        return _Scope(self._tracer, self._histogram, operation)


class _Scope:
    """The span of one operation: started and made current on enter, described and ended on exit."""

    __slots__ = ("_histogram", "_operation", "_span", "_started", "_token", "_tracer")

    def __init__(self, tracer: Tracer, histogram: Histogram, operation: Operation) -> None:
        self._tracer = tracer
        self._histogram = histogram
        self._operation = operation
        self._span: Span = trace.INVALID_SPAN
        self._token: Any = None
        self._started = 0.0

    def __enter__(self) -> None:
        name, kind, attributes = _start(self._operation)
        self._span = self._tracer.start_span(name, kind=kind, attributes=attributes)
        self._token = context.attach(trace.set_span_in_context(self._span))
        self._started = time.perf_counter()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        elapsed = time.perf_counter() - self._started
        operation, span = self._operation, self._span
        try:
            error = _finish(span, operation, exc)
            if operation.kind != INVOKE_AGENT:
                self._histogram.record(elapsed, _metric_attributes(operation, error))
        finally:
            context.detach(self._token)
            span.end()


def _start(operation: Operation) -> tuple[str, SpanKind, dict[str, Any]]:
    """The span's name, kind and first attributes."""
    details = operation.details
    if operation.kind == EXECUTE_TOOL:
        attributes: dict[str, Any] = {
            gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            gen_ai.GEN_AI_TOOL_NAME: operation.name,
            gen_ai.GEN_AI_TOOL_TYPE: TOOL_TYPE,
        }
        if operation.call_id is not None:
            attributes[gen_ai.GEN_AI_TOOL_CALL_ID] = operation.call_id
        if details.get("step"):
            attributes["toolflow.pipeline.step"] = True
        if details.get("approval"):
            attributes["toolflow.approval.required"] = True
        return f"{EXECUTE_TOOL} {operation.name}", SpanKind.INTERNAL, attributes
    attributes = {gen_ai.GEN_AI_OPERATION_NAME: operation.kind, gen_ai.GEN_AI_PROVIDER_NAME: details["provider"]}
    if operation.name:
        attributes[gen_ai.GEN_AI_REQUEST_MODEL] = operation.name
    if operation.kind == MODEL_REQUEST:
        name = f"{MODEL_REQUEST} {operation.name}" if operation.name else MODEL_REQUEST
        return name, SpanKind.CLIENT, attributes
    return INVOKE_AGENT, SpanKind.INTERNAL, attributes


def _finish(span: Span, operation: Operation, exc: BaseException | None) -> str | None:
    """Describe how *operation* ended on *span* (one ``set_attributes``); its ``error.type`` (``None``: a success)."""
    result = operation.result
    attributes: dict[str, Any] = {}
    error: str | None
    if exc is not None or result is None:
        status = getattr(exc, "status", None)  # a ProviderError's HTTP status, when there was one
        error = str(status) if isinstance(status, int) else type(exc).__qualname__ if exc is not None else "_OTHER"
    elif isinstance(result, ToolResult):
        error = _tool_outcome(attributes, result)
    elif operation.kind == MODEL_REQUEST:
        error = None
        _model_outcome(attributes, result)
    else:
        error = _loop_outcome(attributes, result)
    if error is not None:
        attributes[ERROR_TYPE] = error
        span.set_status(Status(StatusCode.ERROR, error))
    if attributes:
        span.set_attributes(attributes)
    return error


def _tool_outcome(attributes: dict[str, Any], result: ToolResult) -> str | None:
    extra = result.extra
    attempts = extra.get("attempts")
    if isinstance(attempts, int):
        attributes["toolflow.tool.attempts"] = attempts
    if extra.get("cached"):
        attributes["toolflow.cache.hit"] = True
    if result.steps:
        attributes["toolflow.pipeline.steps"] = len(result.steps)
    status = extra.get("status")
    if status == "denied":
        attributes["toolflow.approval.granted"] = False
    if result.success:
        return None
    if isinstance(status, str):
        reason = extra.get("reason")
        return f"{status}.{reason}" if isinstance(reason, str) and status == "aborted" else status
    if result.error is not None and _TIMED_OUT.match(result.error):
        return "timeout"
    return "tool_error"


def _model_outcome(attributes: dict[str, Any], response: Any) -> None:
    usage = getattr(response, "usage", None)
    if usage is not None:
        attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = usage.prompt_tokens
        attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.completion_tokens
    finish_reason = getattr(response, "finish_reason", None)
    if finish_reason:
        attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] = (finish_reason,)


def _loop_outcome(attributes: dict[str, Any], result: Any) -> str | None:
    usage = result.usage
    attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] = usage.prompt_tokens
    attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.completion_tokens
    attributes["toolflow.loop.reason"] = result.reason
    attributes["toolflow.loop.turns"] = len(result.turns)
    return "provider_error" if result.reason == "provider_error" else None


def _metric_attributes(operation: Operation, error: str | None) -> Mapping[str, Any]:
    """The histogram's attributes: few values each (no call ids)."""
    attributes: dict[str, Any] = {gen_ai.GEN_AI_OPERATION_NAME: operation.kind}
    if operation.kind == EXECUTE_TOOL:
        attributes[gen_ai.GEN_AI_TOOL_NAME] = operation.name
    else:
        attributes[gen_ai.GEN_AI_PROVIDER_NAME] = operation.details["provider"]
        if operation.name:
            attributes[gen_ai.GEN_AI_REQUEST_MODEL] = operation.name
    if error is not None:
        attributes[ERROR_TYPE] = error
    return attributes
