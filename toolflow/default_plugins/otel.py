"""OpenTelemetry traces and metrics of tool calls, agent loops and model requests (the ``[otel]`` extra).

A default plugin with one hook, ``toolflow_wrap_operation``, which it implements only when
OpenTelemetry's API and semantic conventions are installed (looked up without importing them) and
``OTEL_SDK_DISABLED`` is not ``true``: without the extra the engine sees no hook, takes no tracing path and imports
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
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from toolflow import hookspecs

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from toolflow._telemetry import Operation
    from toolflow.default_plugins._otel_spans import Spans

__all__ = ["Telemetry", "enabled", "installed"]


def enabled(environ: Any = None) -> bool:
    """Whether the plugin traces: the extra is installed and ``OTEL_SDK_DISABLED`` is not ``true``."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    spec = importlib.util.find_spec("opentelemetry")
    return spec is not None and installed(spec.submodule_search_locations or ())


def installed(locations: Iterable[str]) -> bool:
    """Whether the ``opentelemetry`` namespace package at *locations* has what the spans need.

    The API (``opentelemetry.trace``) and the semantic conventions (``opentelemetry.semconv``): the
    API alone is installed by other packages too (the ``mcp`` SDK's dependencies bring it), without
    the extra's conventions. Looked up on disk: nothing is imported.
    """
    found = {
        name for location in locations for name in ("trace", "semconv") if os.path.isdir(os.path.join(location, name))
    }
    return found == {"trace", "semconv"}


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
