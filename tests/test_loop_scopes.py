"""What the agent loop sets up around a turn only when it is configured, and keeps when it is.

A ``toolflow_wrap_operation`` wrapper sees every model request (each retry its own), and without
a wrapper no request builds an :class:`~toolflow.Operation`; the agent's context reaches every
call of a run, of a reflection and of a deferred call, and no other context does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import pytest
import trio
import trio.testing
import yaml
from _loop_support import Setup, call

import toolflow
from toolflow._context import providing_context
from toolflow._loop import Agent
from toolflow._telemetry import model_operation
from toolflow.default_plugins._scripted import open_scripted


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


class _Scope:
    def __init__(self, seen: list[tuple[str, Any, str]], operation: toolflow.Operation) -> None:
        self.seen, self.operation = seen, operation

    def __enter__(self) -> None:
        pass

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        ended = type(exc if exc is not None else self.operation.result).__name__
        self.seen.append((self.operation.kind, self.operation.details.get("turn"), ended))


class Recorder:
    """A tracing plugin: what each operation was and how it ended, in the order they end."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, str]] = []

    @toolflow.hookimpl
    def toolflow_wrap_operation(self, operation: toolflow.Operation | None) -> Any:
        return True if operation is None else _Scope(self.seen, operation)


async def test_a_wrapper_sees_every_model_request_and_each_retry(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """Each request is a `chat` operation of its turn, a retried one too; the run holds them."""
    recorder = Recorder()
    setup.plugins.register(recorder, "recorder")
    turns = [
        {"error": {"message": "overloaded", "status": 503, "retry_after": 1}},
        {"tool_calls": [call("look")]},
        {"text": "done"},
    ]
    with trio.fail_after(60):
        result, provider = await setup.run(turns)
    assert result.reason == "final_answer"
    assert len(provider.requests) == 3
    assert recorder.seen == [
        ("chat", 1, "ProviderError"),
        ("chat", 1, "ModelResponse"),
        ("execute_tool", None, "ToolResult"),
        ("chat", 2, "ModelResponse"),
        ("invoke_agent", None, "LoopResult"),
    ]


def _operations_built(kinds: list[str]) -> Callable[[FrameType, str, object], None]:
    code = model_operation.__code__

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is code:
            kinds.append(frame.f_locals["kind"])

    return profile


async def test_without_a_wrapper_no_model_request_builds_an_operation(setup: Setup) -> None:
    """No wrapper, no scope: of the `Operation`s only the run's is built, however many requests."""
    kinds: list[str] = []
    provider = setup.transcript([{"tool_calls": [call("look")]}, {"tool_calls": [call("look")]}, {"text": "done"}])
    with trio.fail_after(30):
        async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
            agent = Agent(engine, provider, policy=setup.policy)
            sys.setprofile(_operations_built(kinds))
            try:
                result = await agent.run("go")
            finally:
                sys.setprofile(None)
    assert (result.reason, len(provider.requests)) == ("final_answer", 3)
    assert kinds == ["invoke_agent"]


# --- the caller's context ----------------------------------------------------------------------

SPEC = """\
toolflow: 1
tools:
  whose:
    description: Whose turn it is.
    context: {user: user.id}
    parameters:
      type: object
      properties:
        user: {type: string, description: Who}
    template: "{% if user is defined %}{{ user }}{% else %}nobody{% endif %}"
  later:
    description: Answered by the application.
    deferred: true
    context: {user: user.id}
    parameters:
      type: object
      properties:
        user: {type: string, description: Who}
      required: [user]
    template: "not run: the application answers"
"""


@pytest.fixture
def registry(tmp_path: Path) -> toolflow.Registry:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    specs = toolflow.load_specs([tmp_path / "tools.yaml"])
    assert specs.ok, [d.render() for d in specs.diagnostics]
    return toolflow.Registry.build(specs, toolflow.load_plugins(entry_points=False))


def _provider(tmp_path: Path, turns: list[Any]) -> toolflow.ModelProvider:
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    return open_scripted(str(tmp_path / "session.yaml"))


@pytest.mark.parametrize(("context", "expected"), [({"user": {"id": "u-1"}}, "u-1"), (None, "nobody")])
async def test_the_agents_context_and_no_other_reaches_the_calls_of_a_run(
    registry: toolflow.Registry, tmp_path: Path, context: dict[str, Any] | None, expected: str
) -> None:
    """Inside another caller's context, a run's calls see the agent's (none: the empty context)."""
    turns = [{"tool_calls": [call("whose")]}, {"tool_calls": [call("whose")]}, {"text": "done"}]
    with trio.fail_after(30), providing_context({"user": {"id": "outsider"}}):
        async with toolflow.open_engine(registry) as engine:
            result = await Agent(engine, _provider(tmp_path, turns), context=context).run("whose?")
    assert [turn.entries[0].result.data for turn in result.turns[:2]] == [expected, expected]


async def test_a_reflection_and_a_deferred_call_see_the_agents_context(
    registry: toolflow.Registry, tmp_path: Path
) -> None:
    """`reflect()` runs its calls in the agent's context; a deferred call is checked in it (its bound user)."""
    turns = [{"tool_calls": [call("whose")]}, {"tool_calls": [call("later")]}]
    with trio.fail_after(30):
        async with toolflow.open_engine(registry) as engine:
            agent = Agent(engine, _provider(tmp_path, turns), context={"user": {"id": "u-2"}})
            record = await agent.reflect("whose?")
            result = await agent.run("later, then")
    assert record.entries[0].result.data == "u-2"
    assert result.reason == "deferred"
    (pending,) = result.pending
    assert pending.arguments == {"user": "u-2"}
