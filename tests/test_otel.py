"""OpenTelemetry (issue 18, section 3): spans and the duration histogram of real calls, loops and pipelines.

The ``otel`` default plugin's :class:`~toolflow.default_plugins.otel.Telemetry` is registered with an
SDK tracer provider that exports to the SDK's in-memory exporter and a meter provider read by the
SDK's in-memory reader (the global providers stay untouched, so no other test is traced). The
default instance, which would use the global providers, is disabled in these plugin sets.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from _mcp_wire import answers, call, open_session
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import toolflow
from toolflow import Engine, hookimpl, load_plugins, load_registry, open_engine
from toolflow._loop import Agent
from toolflow._serve import Lifecycle, ToolService, build_server
from toolflow._serve_http import HTTPSettings, listen, serve_http
from toolflow._telemetry import remote_parent
from toolflow.default_plugins._scripted import open_scripted
from toolflow.default_plugins.otel import Telemetry

SPEC = """\
toolflow: 1
tools:
  add:
    description: Add two integers.
    parameters:
      type: object
      properties:
        a: {type: integer, description: The first}
        b: {type: integer, description: The second}
      required: [a, b]
    cache: {scope: session}
    implementation: t.add
  broken:
    description: Always fails.
    retry: {attempts: 2, initial: 1s}
    idempotent: true
    implementation: t.broken
  slow:
    description: Never answers in time.
    timeout: 2s
    retry: false
    implementation: t.slow
  in_thread:
    description: A sync tool that reports the trace context it sees in its worker thread.
    implementation: t.in_thread
  env:
    description: Prints its trace context variables.
    command: ["{{ python }}", "-c", "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('TRACEPARENT', 'TRACESTATE')}))"]
    parameters:
      type: object
      properties:
        python: {type: string, description: The interpreter}
      required: [python]
  twice:
    description: Adds, then adds again.
    parameters:
      type: object
      properties:
        n: {type: integer, description: A number}
      required: [n]
    pipeline:
      steps:
        first: {tool: add, with: {a: "{{ n }}", b: 1}}
        second: {tool: add, with: {a: "{{ steps.first }}", b: 1}}
"""


class Tools:
    """The implementations of SPEC."""

    @hookimpl
    def toolflow_register_implementations(self, register: Any) -> None:
        async def add(a: int, b: int) -> int:
            return a + b

        async def broken() -> None:
            msg = "the secret token sk-123 was refused"
            raise ConnectionError(msg)

        async def slow() -> None:
            await trio.sleep(60)

        def in_thread() -> dict[str, str]:
            return toolflow.trace_context()

        for name, function in {"t.add": add, "t.broken": broken, "t.slow": slow, "t.in_thread": in_thread}.items():
            register(name, function)


class Traced:
    """Plugins with SPEC's tools and a Telemetry plugin writing to in-memory SDK providers."""

    def __init__(self, tmp_path: Path) -> None:
        self.exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer_provider = tracer_provider
        self.reader = InMemoryMetricReader()
        self.plugins = load_plugins(
            entry_points=False, environ={"TOOLFLOW_DISABLE_PLUGINS": "toolflow.default_plugins.otel"}
        )
        self.plugins.register(Tools(), "test-tools")
        self.plugins.register(Telemetry(tracer_provider, MeterProvider(metric_readers=[self.reader])), "otel-test")
        spec = tmp_path / "tools.yaml"
        spec.write_text(SPEC, encoding="utf-8")
        self.registry = load_registry([spec], plugins=self.plugins)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def durations(self) -> list[tuple[Mapping[str, Any], int]]:
        """``(attributes, count)`` of each point of ``gen_ai.client.operation.duration``."""
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), point.count)  # type: ignore[union-attr]
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "gen_ai.client.operation.duration"
            for point in metric.data.data_points
        ]


@pytest.fixture
def traced(tmp_path: Path) -> Traced:
    return Traced(tmp_path)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def traceparent(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` that names *span*."""
    context = span.context
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


async def test_a_call_is_an_execute_tool_span_with_the_genai_attributes(traced: Traced) -> None:
    """`execute_tool add`: operation, tool name, call id, type, attempts; no arguments, no result; OK status."""
    with trio.fail_after(10):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("add", {"a": 1, "b": 2}, call_id="call_7")
    assert result.data == 3
    (span,) = traced.spans()
    assert span.name == "execute_tool add"
    assert span.kind is SpanKind.INTERNAL
    assert attributes(span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_7",
        "gen_ai.tool.type": "function",
        "toolflow.tool.attempts": 1,
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent is None
    assert traced.durations() == [({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add"}, 1)]


async def test_a_cache_hit_is_an_attribute(traced: Traced) -> None:
    """The second call of a session-cached tool: `toolflow.cache.hit`, no attempts."""
    with trio.fail_after(10):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            await engine.call("add", {"a": 1, "b": 2})
            await engine.call("add", {"a": 1, "b": 2})
    first, second = traced.spans()
    assert "toolflow.cache.hit" not in attributes(first)
    assert attributes(second)["toolflow.cache.hit"] is True
    assert attributes(second)["toolflow.tool.attempts"] == 0


async def test_failures_set_error_type_and_error_status_without_the_message(
    traced: Traced, autojump_clock: trio.testing.MockClock
) -> None:
    """A raising tool (after its retry), a timeout, a blocked call, invalid arguments: error.type and ERROR."""
    with trio.fail_after(300):
        async with open_engine(traced.registry, plugins=traced.plugins, allowlist=["broken", "slow", "add"]) as engine:
            await engine.call("broken", {})
            await engine.call("slow", {})
            await engine.call("in_thread", {})
            await engine.call("add", {"a": "one"})
    errors = {span.name: (attributes(span).get("error.type"), span.status) for span in traced.spans()}
    assert {name: (kind, status.status_code) for name, (kind, status) in errors.items()} == {
        "execute_tool broken": ("tool_error", StatusCode.ERROR),
        "execute_tool slow": ("timeout", StatusCode.ERROR),
        "execute_tool in_thread": ("blocked", StatusCode.ERROR),
        "execute_tool add": ("tool_error", StatusCode.ERROR),
    }
    assert attributes(traced.named("execute_tool broken")[0])["toolflow.tool.attempts"] == 2
    for span in traced.spans():
        assert "sk-123" not in json.dumps(attributes(span)) + str(span.status.description) + str(span.events)
    failed = {(a["gen_ai.tool.name"], a.get("error.type")) for a, _ in traced.durations()}
    assert ("slow", "timeout") in failed


async def test_approvals_are_attributes_of_the_call(traced: Traced) -> None:
    """A call whose category needs approval says so; a refused one is `denied` with `approval.granted` false."""
    policy = toolflow.Policy.from_mapping({"categories": {"safe_chain": {"approval": True}}})
    answers = iter([True, False])
    with trio.fail_after(10):
        async with open_engine(
            traced.registry, plugins=traced.plugins, policy=policy, approve=lambda call, category: next(answers)
        ) as engine:
            granted = await engine.call("in_thread", {})
            refused = await engine.call("in_thread", {})
    assert granted.success
    assert not refused.success
    first, second = (attributes(span) for span in traced.spans())
    assert first["toolflow.approval.required"] is True
    assert "toolflow.approval.granted" not in first
    assert "error.type" not in first
    assert second["toolflow.approval.granted"] is False
    assert second["error.type"] == "denied"


async def test_pipeline_steps_are_child_spans_of_the_pipeline(traced: Traced) -> None:
    """`execute_tool twice` is the parent of its two steps' `execute_tool add` spans, in one trace."""
    with trio.fail_after(10):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("twice", {"n": 1})
    assert result.success, result.error
    (pipeline,) = traced.named("execute_tool twice")
    steps = traced.named("execute_tool add")
    assert len(steps) == 2
    for step in steps:
        assert step.parent is not None
        assert step.parent.span_id == pipeline.context.span_id
        assert step.context.trace_id == pipeline.context.trace_id
        assert attributes(step)["toolflow.pipeline.step"] is True
    assert attributes(pipeline)["toolflow.pipeline.steps"] == 2


async def test_a_loop_is_invoke_agent_over_chat_and_execute_tool_spans(traced: Traced, tmp_path: Path) -> None:
    """`invoke_agent` holds each `chat {model}` request and each tool call; usage and finish reasons recorded."""
    transcript = tmp_path / "session.yaml"
    transcript.write_text(
        json.dumps(
            {
                "turns": [
                    {
                        "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 2}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                    },
                    {"text": "It is 4.", "usage": {"prompt_tokens": 20, "completion_tokens": 4}},
                ]
            }
        ),
        encoding="utf-8",
    )
    provider = open_scripted(str(transcript))
    with trio.fail_after(10):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            agent = Agent(engine, provider, format="openai", model="m-1")
            result = await agent.run("what is 2 + 2?")
    assert result.final_answer == "It is 4."
    (agent_span,) = traced.named("invoke_agent")
    chats = traced.named("chat m-1")
    (tool,) = traced.named("execute_tool add")
    assert len(chats) == 2
    for child in (*chats, tool):
        assert child.parent is not None
        assert child.parent.span_id == agent_span.context.span_id
    assert chats[0].kind is SpanKind.CLIENT
    assert attributes(chats[0]) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "m-1",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert attributes(agent_span)["gen_ai.usage.input_tokens"] == 30
    assert attributes(agent_span)["toolflow.loop.reason"] == "final_answer"
    assert agent_span.parent is None
    operations = {a["gen_ai.operation.name"] for a, _ in traced.durations()}
    assert operations == {"chat", "execute_tool"}


async def test_command_tools_get_traceparent_in_their_environment(traced: Traced) -> None:
    """A `command:` tool run inside its span sees TRACEPARENT naming that span."""
    with trio.fail_after(30):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("env", {"python": sys.executable})
    assert result.success, result.error
    (span,) = traced.spans()
    assert json.loads(result.data["stdout"]) == {"TRACEPARENT": traceparent(span), "TRACESTATE": None}


async def test_sync_tools_see_the_trace_context_in_their_worker_thread(traced: Traced) -> None:
    """`toolflow.trace_context()` in a worker thread gives the call's span; outside any span it is empty."""
    assert toolflow.trace_context() == {}
    with trio.fail_after(10):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("in_thread", {})
    (span,) = traced.spans()
    assert result.data == {"traceparent": traceparent(span)}


async def test_untraced_calls_pass_no_trace_context(tmp_path: Path) -> None:
    """Without a tracer provider (the default instance finds none set), a command tool gets no TRACEPARENT."""
    plugins = load_plugins(entry_points=False)
    plugins.register(Tools(), "test-tools")
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    registry = load_registry([spec], plugins=plugins)
    with trio.fail_after(30), pytest.MonkeyPatch.context() as patch:
        patch.delenv("TRACEPARENT", raising=False)
        async with open_engine(registry, plugins=plugins) as engine:
            assert engine._wrappers == ()  # the otel plugin said no when the engine opened: no tracing step
            result = await engine.call("env", {"python": sys.executable})
    assert json.loads(result.data["stdout"]) == {"TRACEPARENT": None, "TRACESTATE": None}


class Raising:
    """A tracing plugin whose hook raises."""

    @hookimpl
    def toolflow_wrap_operation(self, operation: toolflow.Operation) -> Any:
        msg = "tracer down"
        raise RuntimeError(msg)


async def test_a_raising_operation_hook_is_a_warning_not_a_failure(traced: Traced) -> None:
    """The call runs and the other tracer still records it; the broken plugin is named in a warning."""
    traced.plugins.register(Raising(), "raising")
    with trio.fail_after(10), pytest.warns(UserWarning, match="'raising' raised RuntimeError: tracer down"):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("add", {"a": 1, "b": 1})
    assert result.data == 2
    assert [span.name for span in traced.spans()] == ["execute_tool add"]


# --- trace context from MCP clients ------------------------------------------------------------

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


async def test_serve_makes_the_clients_span_the_parent_of_the_call(traced: Traced) -> None:
    """A `tools/call` whose `params._meta` has a traceparent: the call's span joins the client's trace under its span.

    `toolflow serve`'s HTTP server, in process, with a real HTTP client; a call without `_meta`
    starts a trace of its own.
    """

    @contextlib.asynccontextmanager
    async def traced_engine() -> AsyncIterator[Engine]:
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            yield engine

    service = ToolService(registry=traced.registry, open_engine=traced_engine)
    lifecycle = Lifecycle()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery, httpx.AsyncClient() as client:
            url = await nursery.start(
                functools.partial(
                    serve_http,
                    build_server(service, lifecycle),
                    listen(HTTPSettings(port=0)),
                    closing=lifecycle.closing,
                )
            )
            session = await open_session(client, url)
            request = call(1, "add", {"a": 1, "b": 2})
            request["params"]["_meta"] = {
                "traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01",
                "tracestate": "vendor=1",
            }
            joined = await client.post(url, json=request, headers=session)
            alone = await client.post(url, json=call(2, "add", {"a": 2, "b": 2}), headers=session)
            lifecycle.stop()
    assert answers(joined)[0]["result"]["content"][0]["text"] == "3"
    assert answers(alone)[0]["result"]["content"][0]["text"] == "4"
    first, second = traced.named("execute_tool add")
    assert first.parent is not None
    assert first.parent.is_remote
    assert f"{first.parent.span_id:016x}" == CLIENT_SPAN
    assert f"{first.context.trace_id:032x}" == CLIENT_TRACE
    assert first.context.trace_state.get("vendor") == "1"
    assert attributes(first)["gen_ai.tool.call.id"] == "mcp_1"
    assert second.parent is None
    assert f"{second.context.trace_id:032x}" != CLIENT_TRACE


@pytest.mark.parametrize("meta", [{"traceparent": "not-a-traceparent"}, {"traceparent": 7}, "x", None])
async def test_a_malformed_traceparent_is_ignored(traced: Traced, meta: object) -> None:
    """`remote_parent` with a carrier it cannot read changes nothing: the call starts its own trace."""
    with trio.fail_after(10), remote_parent(meta):
        async with open_engine(traced.registry, plugins=traced.plugins) as engine:
            result = await engine.call("add", {"a": 1, "b": 2})
    assert result.success
    (span,) = traced.spans()
    assert span.parent is None


# --- configured by OTEL_* ---------------------------------------------------------------------


def test_opentelemetry_instrument_configures_the_sdk_from_the_environment(tmp_path: Path) -> None:
    """`opentelemetry-instrument toolflow call` with OTEL_TRACES_EXPORTER=console prints the call's span."""
    spec = tmp_path / "specs" / "tools.yaml"
    spec.parent.mkdir()
    spec.write_text(
        "toolflow: 1\ntools:\n  hello:\n    description: Say hello.\n    template: hello\n", encoding="utf-8"
    )
    environment = {
        **os.environ,
        "OTEL_SERVICE_NAME": "toolflow-test",
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    command = [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, "-m", "toolflow"]
    result = subprocess.run(
        [*command, "call", "hello", "{}", "--specs", str(spec.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert '"name": "execute_tool hello"' in result.stdout
    assert '"gen_ai.tool.name": "hello"' in result.stdout
    assert '"service.name": "toolflow-test"' in result.stdout


# --- without the extra -------------------------------------------------------------------------

ABSENT = """\
import sys, json, trio
sys.modules["opentelemetry"] = None  # as if the [otel] extra were not installed: importing it fails
import toolflow
from toolflow._loop import Agent
from toolflow.default_plugins._scripted import open_scripted
from toolflow.default_plugins import otel

async def main():
    plugins = toolflow.load_plugins(entry_points=False)
    registry = toolflow.load_registry([sys.argv[1]], plugins=plugins)
    async with toolflow.open_engine(registry, plugins=plugins) as engine:
        called = await engine.call("env", {"python": sys.executable})
        agent = Agent(engine, open_scripted(sys.argv[2]), format="openai")
        ran = await agent.run("go")
    loaded = sorted(m for m, module in sys.modules.items() if m.startswith("opentelemetry") and module is not None)
    print(json.dumps({
        "called": called.success, "answer": ran.final_answer, "trace": toolflow.trace_context(),
        "loaded": loaded, "hook": hasattr(otel, "toolflow_wrap_operation"),
    }))

if __name__ == "__main__":  # trio-parallel's workers import this file again
    trio.run(main)
"""


def test_without_opentelemetry_nothing_of_it_is_imported(tmp_path: Path) -> None:
    """With `opentelemetry` unimportable, calls and loops run, the plugin has no hook and no OpenTelemetry module loads."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        SPEC.split("  add:", maxsplit=1)[0] + "  env:" + SPEC.split("  env:")[1].split("  twice:", maxsplit=1)[0],
        encoding="utf-8",
    )
    transcript = tmp_path / "session.yaml"
    transcript.write_text(json.dumps({"turns": [{"text": "done"}]}), encoding="utf-8")
    script = tmp_path / "absent.py"
    script.write_text(ABSENT, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script), str(spec), str(transcript)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"called": True, "answer": "done", "trace": {}, "loaded": [], "hook": False}


def test_the_api_alone_without_the_conventions_is_not_the_extra(tmp_path: Path) -> None:
    """The `mcp` SDK's dependencies install OpenTelemetry's API without the semantic conventions: no hook then."""
    from toolflow.default_plugins.otel import installed

    api_only, extra = tmp_path / "api" / "opentelemetry", tmp_path / "extra" / "opentelemetry"
    (api_only / "trace").mkdir(parents=True)
    (extra / "trace").mkdir(parents=True)
    (extra / "semconv").mkdir()
    assert not installed([str(api_only)])
    assert installed([str(extra)])
    assert installed([str(api_only), str(tmp_path / "extra" / "opentelemetry")])  # portions of one namespace
