"""What ``toolflow serve`` hands an MCP client, in process: results, progress reports, tool selection."""

from __future__ import annotations

import datetime as dt
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from mcp import types

import toolflow
from toolflow._context import reporting_progress
from toolflow._executor import open_engine
from toolflow._registry import without_caches as without_cache
from toolflow._results import DEFAULT_MAX_RESULT_CHARS
from toolflow._serve import call_result, exposed_tools

Report = tuple[float, float | None, str | None]


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


# --- results -----------------------------------------------------------------------------------


def test_a_string_result_is_the_text() -> None:
    """A success with string data is that text, with no structured content."""
    mapped = call_result(toolflow.ToolResult(success=True, data="Hello, Ada!"))
    assert (texts(mapped), mapped.structured_content, mapped.is_error) == (["Hello, Ada!"], None, False)


def test_a_mapping_result_is_structured_content_and_its_json() -> None:
    """A success with a mapping is structuredContent, and its compact JSON is the text."""
    mapped = call_result(toolflow.ToolResult(success=True, data={"sum": 5, "note": "é"}, extra={"attempts": 1}))
    assert mapped.structured_content == {"sum": 5, "note": "é"}
    assert texts(mapped) == ['{"sum":5,"note":"é"}']


def test_a_flat_result_dictionary_is_structured_without_the_engine_bookkeeping() -> None:
    """A result dictionary without data gives its own keys, not the engine's attempts and cached."""
    result = toolflow.ToolResult(success=True, extra={"location": "#2", "attempts": 0, "cached": True})
    mapped = call_result(result)
    assert mapped.structured_content == {"location": "#2"}
    assert texts(mapped) == ['{"location":"#2"}']


def test_other_data_is_json_text() -> None:
    """Lists, numbers and null become JSON text, without structured content."""
    assert texts(call_result(toolflow.ToolResult(success=True, data=[1, 2]))) == ["[1,2]"]
    assert texts(call_result(toolflow.ToolResult(success=True, data=None))) == ["null"]
    assert call_result(toolflow.ToolResult(success=True, data=[1, 2])).structured_content is None


def test_a_tool_with_an_output_schema_always_has_structured_content() -> None:
    """With structured=True, a success without a payload still sends an (empty) object."""
    mapped = call_result(toolflow.ToolResult(success=True, data=None), structured=True)
    assert mapped.structured_content == {}


def test_a_failure_is_a_tool_error_with_the_message() -> None:
    """A failure is isError with its error text, and no structured content even with data."""
    result = toolflow.ToolResult.failure("timed out after 300ms", data={"partial": 1})
    mapped = call_result(result)
    assert (mapped.is_error, texts(mapped), mapped.structured_content) == (True, ["Error: timed out after 300ms"], None)


def test_warnings_follow_in_a_second_text_block() -> None:
    """The warnings of a call are a second text block, one line each."""
    result = toolflow.ToolResult(success=True, data="ok", warnings=("ignored unknown parameter 'x'", "slow"))
    assert texts(call_result(result)) == ["ok", "Warnings:\n  - ignored unknown parameter 'x'\n  - slow"]


def test_values_json_cannot_express_become_text() -> None:
    """Dates, sets and NaN in a result become strings in both the text and the structured content."""
    when = dt.date(2026, 1, 2)
    mapped = call_result(toolflow.ToolResult(success=True, data={"when": when, "ratio": math.nan}))
    assert mapped.structured_content == {"when": "2026-01-02", "ratio": "nan"}
    mapped.model_dump_json()  # the result can be sent


def test_long_text_is_capped_with_a_marker() -> None:
    """The text is capped at the model-text limit and says how much was cut; structured content is whole."""
    data = {"blob": "x" * (DEFAULT_MAX_RESULT_CHARS * 2)}
    mapped = call_result(toolflow.ToolResult(success=True, data=data))
    (text,) = texts(mapped)
    assert len(text) == DEFAULT_MAX_RESULT_CHARS
    assert text.endswith("characters]")
    assert mapped.structured_content == data


# --- progress ----------------------------------------------------------------------------------

SPEC = """\
toolflow: 1
tools:
  async_steps:
    description: Report progress from trio.
    implementation: p.async_steps
  sync_steps:
    description: Report progress from a worker thread.
    implementation: p.sync_steps
  own_thread:
    description: Report progress from a thread the tool starts itself.
    implementation: p.own_thread
  greet:
    description: Greet.
    category: safe_chain
    template: hello
toolsets:
  quiet:
    tools: [greet]
"""


class Steps:
    """A test plugin whose tools report progress three times."""

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def async_steps(ctx: toolflow.CallContext) -> str:
            for step in (1, 2, 3):
                ctx.report_progress(step, 3, f"step {step}")
                await trio.lowlevel.checkpoint()
            return "done"

        def sync_steps(ctx: toolflow.CallContext) -> str:
            for step in (1, 2, 3):
                ctx.report_progress(step, 3)
            return "done"

        def own_thread(ctx: toolflow.CallContext) -> str:
            worker = threading.Thread(target=ctx.report_progress, args=(7,))
            worker.start()
            worker.join()
            return "done"

        register("p.async_steps", async_steps)
        register("p.sync_steps", sync_steps)
        register("p.own_thread", own_thread)


@pytest.fixture
def registry(tmp_path: Path) -> toolflow.Registry:
    """The registry of SPEC with the Steps plugin."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Steps(), "steps")
    return toolflow.load_registry([spec], plugins=plugins)


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("async_steps", [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]),
        ("sync_steps", [(1.0, 3.0, None), (2.0, 3.0, None), (3.0, 3.0, None)]),
        ("own_thread", [(7.0, None, None)]),
    ],
)
async def test_reports_reach_the_sink_in_force(registry: toolflow.Registry, tool: str, expected: list[Report]) -> None:
    """Async tools, sync tools in their worker thread and threads a tool starts all report to the sink."""
    reports: list[Report] = []
    with trio.fail_after(10):
        async with open_engine(registry) as engine:
            with reporting_progress(lambda *report: reports.append(report)):
                result = await engine.call(tool, {})
            await engine.call(tool, {})  # outside the with: nobody listens
    assert result.success, result.error
    assert reports == expected


async def test_report_progress_without_a_sink_does_nothing(registry: toolflow.Registry) -> None:
    """Outside reporting_progress a report is a no-op, and the call succeeds."""
    with trio.fail_after(10):
        async with open_engine(registry) as engine:
            result = await engine.call("sync_steps", {})
    assert (result.success, result.data) == (True, "done")


@pytest.mark.parametrize(
    ("progress", "total", "error"),
    [("5", None, TypeError), (True, None, TypeError), (math.nan, None, ValueError), (1, math.inf, ValueError)],
)
def test_report_progress_refuses_what_is_not_a_finite_number(progress: Any, total: Any, error: type[Exception]) -> None:
    """A progress or total that is not a finite number raises, naming it."""
    context = toolflow.CallContext(
        call_id="c", tool="t", attempt=1, deadline=math.inf, clock=trio.testing.MockClock(), progress=print
    )
    with pytest.raises(error, match=r"(progress|total) must be"):
        context.report_progress(progress, total)


# --- selection ---------------------------------------------------------------------------------


def test_exposed_tools_by_toolset_and_name(registry: toolflow.Registry) -> None:
    """Toolsets and tool names select the union of their tools, in load order; neither selects all."""
    policy = toolflow.Policy()
    assert exposed_tools(registry, policy).names() == registry.names()
    assert exposed_tools(registry, policy, toolsets=["quiet"]).names() == ("greet",)
    assert exposed_tools(registry, policy, toolsets=["quiet"], tools=["sync_steps"]).names() == ("sync_steps", "greet")
    with pytest.raises(toolflow.UnknownToolsetError):
        exposed_tools(registry, policy, toolsets=["loud"])
    with pytest.raises(toolflow.UnknownToolError):
        exposed_tools(registry, policy, tools=["gret"])


def test_exposed_tools_follow_the_policy(registry: toolflow.Registry) -> None:
    """The policy's toolset, allow and deny decide, as in the agent loop; a named tool the policy keeps out is an error."""
    assert exposed_tools(registry, toolflow.Policy(toolset="quiet")).names() == ("greet",)
    assert exposed_tools(registry, toolflow.Policy(deny=["greet"])).names() == tuple(
        name for name in registry.names() if name != "greet"
    )
    assert exposed_tools(registry, toolflow.Policy(allow=["greet", "sync_steps"])).names() == ("sync_steps", "greet")
    # The operator's selection replaces the policy's toolset; allow and deny still apply.
    assert exposed_tools(registry, toolflow.Policy(toolset="quiet"), tools=["sync_steps"]).names() == ("sync_steps",)
    with pytest.raises(toolflow.UsageError, match="policy keeps 'greet' from the model"):
        exposed_tools(registry, toolflow.Policy(deny=["greet"]), tools=["greet"])
    with pytest.raises(toolflow.UsageError, match="policy 'deny' names tools that do not exist: 'gret'"):
        exposed_tools(registry, toolflow.Policy(deny=["gret"]))


def test_without_cache_drops_every_cache(tmp_path: Path) -> None:
    """--no-cache serves the same tools with no cache policy."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  now:\n    description: The time.\n    cache: {scope: session}\n    template: t\n",
        encoding="utf-8",
    )
    registry = toolflow.load_registry([spec], plugins=toolflow.load_plugins(entry_points=False))
    assert registry.get("now").spec.cache is not None
    assert without_cache(registry).get("now").spec.cache is None
