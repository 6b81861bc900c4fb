"""The call's trace context reaches the server: a W3C ``traceparent`` header while the call is traced (issue 18)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import trio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolflow import Registry, open_engine
from toolflow.default_plugins.otel import Telemetry
from toolflow.testing import IsolatedPlugins


class Server(Protocol):
    base: str
    requests: list[tuple[str, str, dict[str, str], bytes]]


def spec(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    http: dict[str, Any] = {"url": url}
    if headers:
        http["headers"] = headers
    return {"tools": {"fetch": {"description": "Fetch something.", "http": http}}}


async def test_a_traced_call_sends_traceparent(
    server: Server, make_registry: Callable[..., Registry], http_plugins: IsolatedPlugins
) -> None:
    """The header names the call's `execute_tool fetch` span; an untraced call sends none."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = make_registry(spec(f"{server.base}/echo"))
    with trio.fail_after(10):
        async with open_engine(registry, plugins=http_plugins) as engine:
            untraced = await engine.call("fetch", {})
        http_plugins.register(Telemetry(provider), "otel-test")
        async with open_engine(registry, plugins=http_plugins) as engine:
            traced = await engine.call("fetch", {})
    assert untraced.success, untraced.error
    assert "traceparent" not in untraced.data["headers"]
    (span,) = exporter.get_finished_spans()
    context = span.context
    assert context is not None
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
    assert traced.data["headers"]["traceparent"] == expected


async def test_a_traceparent_header_of_the_spec_wins(
    server: Server, make_registry: Callable[..., Registry], http_plugins: IsolatedPlugins
) -> None:
    """A spec that sets `traceparent` itself keeps its value."""
    http_plugins.register(Telemetry(TracerProvider()), "otel-test")
    fixed = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    registry = make_registry(spec(f"{server.base}/echo", {"traceparent": fixed}))
    with trio.fail_after(10):
        async with open_engine(registry, plugins=http_plugins) as engine:
            result = await engine.call("fetch", {})
    assert result.data["headers"]["traceparent"] == fixed
