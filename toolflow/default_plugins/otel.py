"""OpenTelemetry traces and metrics of tool calls, agent loops and model requests (the ``[otel]`` extra).

A default plugin with one hook, ``toolflow_wrap_operation``, which it implements only when
OpenTelemetry's API is installed (looked up without importing it) and ``OTEL_SDK_DISABLED`` is
not ``true``: without the extra the engine sees no hook, takes no tracing path and imports
nothing of OpenTelemetry. OpenTelemetry's API is imported when the first engine opens.

Spans follow the GenAI semantic conventions (``opentelemetry-semantic-conventions``' constants):
``execute_tool {tool}`` for every tool call, ``invoke_agent`` for a loop's run and
``chat {model}`` for each model request; the histogram ``gen_ai.client.operation.duration``
measures tool calls and model requests. The providers are OpenTelemetry's global ones, which the
SDK configures from the ``OTEL_*`` variables (``opentelemetry-instrument``) or the application
sets. An engine (or agent) made while no tracer provider is set asks the hook once and then
never again: it records nothing and its calls take the untraced path.
Neither arguments nor results nor error messages are recorded (see docs/telemetry.md).
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from toolflow import hookspecs

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from toolflow._telemetry import Operation
    from toolflow.default_plugins._otel_spans import Spans

__all__ = ["Telemetry", "enabled"]


def enabled(environ: Any = None) -> bool:
    """Whether the plugin traces: OpenTelemetry's API is installed and ``OTEL_SDK_DISABLED`` is not ``true``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return importlib.util.find_spec("opentelemetry") is not None


class Telemetry:
    """The plugin object behind the hook: a span (and a duration) for each operation.

    Args:
        tracer_provider: Where spans go (default: OpenTelemetry's global provider; an engine
            opened while none is set is not traced).
        meter_provider: Where the duration histogram goes (default: the global one).
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
    ) -> None:
        self._providers = (tracer_provider, meter_provider)
        self._spans: Spans | None = None

    @hookspecs.hookimpl
    def toolflow_wrap_operation(self, operation: Operation | None) -> Any:
        """A span around *operation*; asked with ``None`` when an engine opens: ``None`` while no provider is set."""
        spans = self._spans
        if spans is None:
            from toolflow.default_plugins._otel_spans import Spans  # noqa: PLC0415 - imports OpenTelemetry

            spans = self._spans = Spans(*self._providers)
        if operation is None:
            return True if spans.configured() else None
        return spans.scope(operation)


if enabled():

    @hookspecs.hookimpl
    def toolflow_wrap_operation(operation: Operation | None) -> Any:
        """The span of *operation*, in OpenTelemetry's global providers (see :class:`Telemetry`)."""
        return _GLOBAL.toolflow_wrap_operation(operation)

    _GLOBAL = Telemetry()
