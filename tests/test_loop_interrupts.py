"""A stop or a kill while the loop waits rather than works: for an approval, or in a provider's retry back-off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from _loop_support import Setup, call, check_openai_history

import toolflow
from toolflow._loop import Agent, LoopResult

APPROVAL = "policy:\n  categories:\n    notify: {approval: true}\n"


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


async def _later(seconds: float, action: Callable[[], None]) -> None:
    await trio.sleep(seconds)
    action()


async def _run_interrupted(setup: Setup, turns: list[object], action: str, **options: object) -> LoopResult:
    """Run *turns*, calling the agent's *action* (``request_stop`` or ``kill``) after 5 s."""
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, **options)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_later, 5, getattr(agent, action))
            return await agent.run("go")


async def _never_answers(call: toolflow.ToolCall, category: str) -> bool:
    await trio.sleep_forever()
    raise AssertionError  # pragma: no cover


@pytest.mark.parametrize(("action", "status"), [("request_stop", "stopped"), ("kill", "cancelled")])
async def test_a_stop_or_kill_ends_a_wait_for_approval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, action: str, status: str
) -> None:
    """An approval nobody gives is abandoned at the stop or kill, and its call does not run.

    The engine asks about calls that need approval after the turn's other calls ran (they run
    one by one, after the concurrent ones), so `look` has run: a stop keeps its result, a kill
    drops it (a killed batch's results never reach the history).
    """
    setup = Setup(tmp_path, APPROVAL)
    turns: list[object] = [{"tool_calls": [call("notify"), call("look")]}, {"text": "never"}]
    with trio.fail_after(60):
        start = trio.current_time()
        result = await _run_interrupted(setup, turns, action, approve=_never_answers)
    assert trio.current_time() - start == pytest.approx(5)
    assert result.reason == ("stopped" if action == "request_stop" else "killed")
    notify, look = result.turns[0].entries
    assert notify.result.extra["status"] == status
    assert look.result.extra.get("status") == (None if action == "request_stop" else "cancelled")
    assert setup.tools.runs == ["look"]
    check_openai_history(result.messages)


async def test_nobody_is_asked_after_a_stop(tmp_path: Path) -> None:
    """A stop that comes while the model answers keeps the turn's calls from being put to the approver."""
    setup = Setup(tmp_path, APPROVAL)
    asked: list[str] = []

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        asked.append(call.name)
        return True

    provider = setup.transcript([{"tool_calls": [call("notify")]}, {"text": "never"}])
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy, approve=approve)
        answer = provider.complete

        async def answer_then_stop(request: toolflow.ModelRequest) -> toolflow.ModelResponse:
            response = await answer(request)
            agent.request_stop()  # the user's Ctrl-C, while the model was answering
            return response

        provider.complete = answer_then_stop  # type: ignore[method-assign]
        with trio.fail_after(60):
            result = await agent.run("go")
    assert result.reason == "stopped"
    assert asked == []
    assert result.turns[0].entries[0].result.extra["status"] == "stopped"
    assert setup.tools.runs == []


@pytest.mark.parametrize(("action", "reason"), [("request_stop", "stopped"), ("kill", "killed")])
async def test_a_stop_ends_a_provider_back_off_at_once(
    setup: Setup, autojump_clock: trio.testing.MockClock, action: str, reason: str
) -> None:
    """A stop during the wait before a retry ends the loop at once, and the model is not asked again."""
    turns: list[object] = [{"error": {"message": "busy", "status": 429, "retry_after": 50}}, {"text": "never"}]
    provider = setup.transcript(turns)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_later, 1, getattr(agent, action))
                start = trio.current_time()
                result = await agent.run("go")
    assert trio.current_time() - start == pytest.approx(1)
    assert result.reason == reason
    assert len(provider.requests) == 1
    assert result.turns == ()


class _SlowModel:
    """The transcript's answers, each after *seconds* of thinking (a provider waiting for the network)."""

    name = "slow"
    formats: tuple[str, ...] = ("openai",)

    def __init__(self, provider: toolflow.ModelProvider, seconds: float) -> None:
        self._provider = provider
        self._seconds = seconds
        self.asked = 0

    async def complete(self, request: toolflow.ModelRequest) -> toolflow.ModelResponse:
        self.asked += 1
        await trio.sleep(self._seconds)
        return await self._provider.complete(request)

    async def aclose(self) -> None:
        await self._provider.aclose()


async def test_a_kill_cancels_the_model_request_of_any_turn(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """A kill while the model thinks about a later turn cancels that request at once; the earlier turns stay."""
    provider = _SlowModel(setup.transcript([{"tool_calls": [call("look")]}, {"text": "never"}]), seconds=3)
    async with toolflow.open_engine(setup.registry, plugins=setup.plugins) as engine:
        agent = Agent(engine, provider, policy=setup.policy)
        with trio.fail_after(600):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_later, 4, agent.kill)  # the second request began at 3 s
                result = await agent.run("go")
                ended = trio.current_time()
    assert ended == pytest.approx(4)
    assert provider.asked == 2
    assert (result.reason, len(result.turns)) == ("killed", 1)
    check_openai_history(result.messages)
