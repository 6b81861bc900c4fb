"""What plugins may trace, and the trace context that tools pass on and MCP clients send in.

Three seams, none of which imports OpenTelemetry (only the ``otel`` default plugin does):

- :class:`Operation` and :func:`operation_scope`: the engine wraps each whole tool call, the agent
  loop each run and each model request, in the context managers of the plugins'
  ``toolflow_wrap_operation`` hook. A plugin reads what the operation is from the record when the
  scope opens and what came of it (:attr:`Operation.result`) when it closes.
- :func:`trace_context`: the W3C ``traceparent`` and ``tracestate`` of the span active in the
  calling task (or worker thread), for a tool to send on (the ``http`` kind's headers, the
  ``command`` kind's ``TRACEPARENT``/``TRACESTATE``). Empty when no span is active, and always
  when OpenTelemetry has not been imported: nothing can have started a span then.
- :func:`remote_parent`: makes a trace context that came in (an MCP request's ``_meta``) the parent
  of the spans started inside it. Imports OpenTelemetry only when the carrier holds a
  ``traceparent`` and OpenTelemetry is installed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, cast

import attrs

from toolflow._errors import error_text
from toolflow._plugins import Plugins

__all__ = [
    "EXECUTE_TOOL",
    "INVOKE_AGENT",
    "MODEL_REQUEST",
    "Operation",
    "OperationHookWarning",
    "Wrapper",
    "active_wrappers",
    "model_operation",
    "operation_scope",
    "remote_parent",
    "trace_context",
]

EXECUTE_TOOL = "execute_tool"
"""The kind of a whole tool call: gates, validation, caches, approval, attempts (a pipeline's steps)."""

INVOKE_AGENT = "invoke_agent"
"""The kind of one :meth:`toolflow.Agent.run`."""

MODEL_REQUEST = "chat"
"""The kind of one request to a model provider (each retry is a request of its own)."""

_PROPAGATED = ("traceparent", "tracestate")
"""The W3C trace context fields handed on; baggage is not (it may carry what a tool must not see)."""

HOOK = "toolflow_wrap_operation"


class OperationHookWarning(UserWarning):
    """A plugin's ``toolflow_wrap_operation`` raised; the operation went on without its scope."""


@attrs.define(kw_only=True, slots=True)
class Operation:
    """An operation that ``toolflow_wrap_operation`` wrappers see.

    Attributes:
        kind: :data:`EXECUTE_TOOL`, :data:`INVOKE_AGENT` or :data:`MODEL_REQUEST`.
        name: The tool's name, the agent's name or the model's name.
        call_id: A tool call's id (``None`` for the other kinds).
        details: What else is known when the operation starts: for a tool call ``step`` (a
            pipeline's step) and ``approval`` (its category needs approval); for a model request
            and a run ``provider`` and ``model``, and ``turn`` for a request.
        result: What the operation ended with, set before its scope closes: a
            :class:`~toolflow.ToolResult`, a :class:`~toolflow.LoopResult` or a
            :class:`~toolflow.ModelResponse`. ``None`` when an exception (a provider's error,
            cancellation) ends it; the wrapper's ``__exit__`` sees that exception.
    """

    kind: str
    name: str
    call_id: str | None = None
    details: Mapping[str, Any] = attrs.field(factory=dict)
    result: Any = None


def model_operation(kind: str, provider: str, model: str, turn: int | None = None) -> Operation:
    """The :class:`Operation` of a loop's run (:data:`INVOKE_AGENT`) or of one model request (:data:`MODEL_REQUEST`)."""
    details: dict[str, Any] = {"provider": provider, "model": model}
    if turn is not None:
        details["turn"] = turn
    return Operation(kind=kind, name=model, details=details)


Wrapper = tuple[str, Callable[..., Any]]
"""A plugin's name and its ``toolflow_wrap_operation`` function."""


def active_wrappers(plugins: Plugins | None) -> tuple[Wrapper, ...]:
    """The ``toolflow_wrap_operation`` implementations that will wrap operations, asked once (an engine's, a loop's).

    Each is called with ``operation=None``; one that answers ``None`` is left out, so a tracer
    that is not configured costs nothing per call. One that raises is reported with an
    :class:`OperationHookWarning` and left out too.
    """
    if plugins is None:
        return ()
    active = []
    for impl in getattr(plugins.manager.hook, HOOK).get_hookimpls():  # registration order
        function = impl.function
        if "operation" not in impl.argnames:
            function = functools.partial(_without_operation, function)
        try:
            answer = function(operation=None)
        except Exception as exc:  # noqa: BLE001 - a tracer must never fail an engine
            _warn(impl.plugin_name, exc)
            continue
        if answer is not None:
            active.append((impl.plugin_name, function))
    return tuple(active)


def _without_operation(function: Callable[[], Any], *, operation: Operation | None) -> Any:
    return function()


def operation_scope(
    wrappers: tuple[Wrapper, ...], operation: Operation
) -> contextlib.AbstractContextManager[Operation]:
    """The context managers of *wrappers* (see :func:`active_wrappers`) around *operation*, first outermost.

    A wrapper that raises, or whose context manager raises on entry or exit, is reported with an
    :class:`OperationHookWarning` naming its plugin and left out: tracing never fails a call.
    Exceptions of the body pass through every context manager, which cannot swallow them.
    """
    return _Scopes(wrappers, operation)


class _Scopes:
    """What :func:`operation_scope` returns: a plain class, since a traced call enters one per call."""

    __slots__ = ("_entered", "_operation", "_wrappers")

    def __init__(self, wrappers: tuple[Wrapper, ...], operation: Operation) -> None:
        self._wrappers = wrappers
        self._operation = operation
        self._entered: list[tuple[str, contextlib.AbstractContextManager[Any]]] = []

    def __enter__(self) -> Operation:
        operation, entered = self._operation, self._entered
        for plugin, function in self._wrappers:
            try:
                wrapper = function(operation=operation)
                if wrapper is not None:
                    wrapper.__enter__()
                    entered.append((plugin, wrapper))
            except Exception as exc:  # noqa: BLE001 - a tracer must never fail the operation
                _warn(plugin, exc)
        return operation

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for plugin, wrapper in reversed(self._entered):
            try:
                wrapper.__exit__(exc_type, exc, traceback)
            except Exception as error:  # noqa: BLE001 - nor end it with an error of its own
                _warn(plugin, error)


def _warn(plugin: str, exc: Exception) -> None:
    message = f"{HOOK} of plugin {plugin!r} raised {error_text(exc)}"
    warnings.warn(OperationHookWarning(message), stacklevel=3)


def trace_context() -> dict[str, str]:
    """The W3C trace context (``traceparent``, ``tracestate``) of the span active here, for a tool to pass on.

    Empty when no span is active, or when OpenTelemetry was never imported in this process (then
    nothing can have started one): the check costs a dictionary look-up. Works in trio tasks and
    in the worker threads of sync tools alike (both run in a copy of the caller's context). Uses
    the propagator OpenTelemetry is configured with (``OTEL_PROPAGATORS``; W3C trace context by
    default) and keeps only the two W3C fields.
    """
    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry import propagate, trace  # noqa: PLC0415 - only once someone else imported it

    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {key: carrier[key] for key in _PROPAGATED if key in carrier}


@contextlib.contextmanager
def remote_parent(carrier: object) -> Iterator[None]:
    """Make the trace context in *carrier* (``traceparent``, ``tracestate``) the parent of the spans started inside.

    *carrier* is what a client sent (an MCP request's ``_meta``): anything but a mapping with a
    string ``traceparent``, or a process without OpenTelemetry, changes nothing, and so does a
    malformed ``traceparent`` (the propagator ignores it).
    """
    if not _carries_context(carrier) or not _installed():
        yield
        return
    from opentelemetry import context, propagate  # noqa: PLC0415 - the extra is optional

    meta = cast("Mapping[str, object]", carrier)
    fields = {key: value for key in _PROPAGATED if isinstance(value := meta.get(key), str)}
    token = context.attach(propagate.extract(fields))
    try:
        yield
    finally:
        context.detach(token)


def _carries_context(carrier: object) -> bool:
    return isinstance(carrier, Mapping) and isinstance(carrier.get("traceparent"), str)


@functools.cache
def _installed() -> bool:
    """Whether OpenTelemetry's API can be imported (looked up once, without importing it)."""
    return importlib.util.find_spec("opentelemetry") is not None
