"""The call context: implementations that declare ``ctx`` get a CallContext per attempt, others are untouched."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow._context import CallContext, wants_context
from toolflow._executor import Abort, open_engine

SPEC = """\
toolflow: 1
tools:
  flaky:
    description: Fails once with a connection error, then succeeds.
    retry: {attempts: 3, initial: 1s, jitter: false}
    implementation: t.flaky
  sync_tool:
    description: A sync tool that wants the context.
    timeout: 4s
    implementation: t.sync_tool
  plain:
    description: Takes no context.
    parameters:
      type: object
      properties:
        x: {type: integer, description: Input}
      required: [x]
    implementation: t.plain
  loose:
    description: Takes anything by keyword.
    parameters:
      type: object
      properties:
        x: {type: integer, description: Input}
    implementation: t.loose
  stubborn:
    description: Works through a kill, then checks for cancellation.
    timeout: 60s
    implementation: t.stubborn
  clock:
    description: Watches its time run out.
    timeout: 10s
    implementation: t.clock
  named_ctx:
    description: Has a parameter called ctx.
    parameters:
      type: object
      properties:
        ctx: {type: string, description: Clashes with the context}
    implementation: t.named_ctx
"""


class Tools:
    """A test plugin whose implementations record what they were given."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        seen = self.seen

        async def flaky(ctx: CallContext) -> str:
            seen.append((ctx.call_id, ctx.tool, ctx.attempt))
            if ctx.attempt == 1:
                msg = "connection reset"
                raise ConnectionError(msg)
            return "ok"

        def sync_tool(ctx: CallContext) -> str:
            seen.append((ctx.tool, ctx.attempt, ctx.cancelled, ctx.time_left()))
            return "done"

        async def plain(x: int) -> int:
            return x

        async def loose(**kwargs: Any) -> list[str]:
            return sorted(kwargs)

        async def stubborn(*, ctx: CallContext) -> str:
            with trio.CancelScope(shield=True):  # work that does not notice the kill by itself
                await trio.sleep(5)
            seen.append(("cancelled", ctx.cancelled))
            await ctx.checkpoint()
            seen.append("after checkpoint")
            return "finished"

        async def clock(ctx: CallContext) -> str:
            seen.append((ctx.deadline - trio.current_time(), ctx.time_left()))
            await trio.sleep(3)
            seen.append(ctx.time_left())
            return "ok"

        async def named_ctx(ctx: Any = None) -> str:
            return type(ctx).__name__

        for name, function in {
            "flaky": flaky,
            "sync_tool": sync_tool,
            "plain": plain,
            "loose": loose,
            "stubborn": stubborn,
            "clock": clock,
            "named_ctx": named_ctx,
        }.items():
            register(f"t.{name}", function)


Setup = tuple[toolflow.Registry, toolflow.Plugins, Tools]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """The registry of SPEC, its plugins and the recording plugin."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "context-tools")
    return toolflow.load_registry([spec], plugins=plugins), plugins, tools


async def test_async_tool_gets_a_context_per_attempt(setup: Setup, autojump_clock: Any) -> None:
    """A retried async tool sees its call id and tool name, with attempt 1 and then attempt 2."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("flaky", {}, call_id="call_7")
    assert result.success
    assert result.extra["attempts"] == 2
    assert tools.seen == [("call_7", "flaky", 1), ("call_7", "flaky", 2)]


async def test_sync_tool_gets_the_context_in_its_thread(setup: Setup) -> None:
    """A sync tool running in a worker thread gets the context and can read it there."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("sync_tool", {})
    assert result.success
    [(tool, attempt, cancelled, left)] = tools.seen
    assert (tool, attempt, cancelled) == ("sync_tool", 1, False)
    assert 0 < left <= 4


async def test_tool_without_ctx_is_called_without_it(setup: Setup) -> None:
    """An implementation that declares no ctx is called with its arguments only."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("plain", {"x": 3})
    assert result.success, result.error
    assert result.data == 3


async def test_kwargs_implementation_does_not_get_the_context(setup: Setup) -> None:
    """``**kwargs`` is not a ctx parameter: the implementation gets only the call's arguments."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("loose", {"x": 1})
    assert result.success, result.error
    assert result.data == ["x"]


async def test_checkpoint_raises_when_the_engine_kills_the_batch(setup: Setup, autojump_clock: Any) -> None:
    """After a kill, ctx.cancelled is true and ctx.checkpoint() raises, so the tool stops there."""
    registry, plugins, tools = setup
    outcomes: list[Any] = []
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def run() -> None:
            outcomes.append(await engine.execute_batch([{"name": "stubborn", "args": {}}]))

        nursery.start_soon(run)
        await trio.sleep(1)
        engine.kill()
    [outcome] = outcomes
    assert isinstance(outcome, Abort)
    assert outcome.reason == "killed"
    assert tools.seen == [("cancelled", True)]


async def test_time_left_shrinks_to_the_deadline(setup: Setup, autojump_clock: Any) -> None:
    """time_left() starts at the tool's timeout and shrinks as trio time passes."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("clock", {})
    assert result.success, result.error
    assert tools.seen == [(10.0, 10.0), 7.0]


async def test_context_wins_over_an_argument_named_ctx(setup: Setup) -> None:
    """A tool parameter called ctx is replaced by the call context (TF403 is the lint side of this)."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("named_ctx", {"ctx": "from the model"})
    assert result.success, result.error
    assert result.data == "CallContext"


async def test_invoke_passes_a_context_with_the_tools_deadline(setup: Setup) -> None:
    """toolflow.invoke gives attempt 1 and the time left of the tool's own 4 s timeout."""
    registry, plugins, tools = setup
    result = await toolflow.invoke(registry.get("sync_tool"), {}, plugins=plugins, call_id="call_3")
    assert result.success, result.error
    [(tool, attempt, cancelled, left)] = tools.seen
    assert (tool, attempt, cancelled) == ("sync_tool", 1, False)
    assert 0 < left <= 4


def test_wants_context_is_inspected_once_per_callable() -> None:
    """The answer for a callable is cached: a signature changed afterwards is not looked at again."""

    def tool(ctx: Any) -> None:
        del ctx

    def loose(**ctx: Any) -> None:
        del ctx

    def positional(ctx: Any, /) -> None:
        del ctx

    assert wants_context(tool)
    assert not wants_context(loose)
    assert not wants_context(positional)
    tool.__signature__ = inspect.Signature()  # type: ignore[attr-defined]
    assert wants_context(tool)


def test_context_outside_trio_is_never_cancelled() -> None:
    """A context read outside any trio run reports no cancellation and an infinite time without a deadline."""
    context = CallContext(call_id="c", tool="t", attempt=1, deadline=math.inf, clock=trio.testing.MockClock())
    assert not context.cancelled
    assert context.time_left() == math.inf
