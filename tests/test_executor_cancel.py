"""kill() and request_stop() reach every call: direct calls, retry back-offs and calls waiting for a slot."""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow._executor import Abort, Engine, open_engine

SPEC = """\
toolflow: 1
tools:
  nap:
    description: Sleeps, then answers; session-cached.
    timeout: 60s
    cache: {scope: session}
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: k.nap
  flaky:
    description: Fails once with a connection error, then succeeds; session-cached.
    cache: {scope: session}
    retry: {attempts: 3, initial: 10s, jitter: false}
    implementation: k.flaky
  single:
    description: One call at a time.
    concurrency: 1
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: k.nap
  hang_sync:
    description: A sync tool that blocks until released.
    timeout: 60s
    retry: {attempts: 1}
    implementation: k.hang_sync
"""

KILLED = {"status": "aborted", "reason": "killed"}
STOPPED = {"status": "aborted", "reason": "stopped"}


class Tools:
    """The implementations of SPEC, counting their runs; records the after_call hook."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.after: list[tuple[str, bool, dict[str, Any]]] = []
        self.release = threading.Event()
        self.started = trio.Event()

    def _count(self, name: str) -> int:
        self.runs[name] = self.runs.get(name, 0) + 1
        return self.runs[name]

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def nap(delay: float = 0) -> str:
            self._count("nap")
            await trio.sleep(delay)
            return "rested"

        async def flaky() -> str:
            if self._count("flaky") == 1:
                msg = "connection reset by peer"
                raise ConnectionError(msg)
            return "ok"

        def hang_sync() -> str:
            self._count("hang_sync")
            trio.from_thread.run_sync(self.started.set)
            self.release.wait(30)
            return "late"

        register("k.nap", nap)
        register("k.flaky", flaky)
        register("k.hang_sync", hang_sync)

    @toolflow.hookimpl
    def toolflow_after_call(self, call: toolflow.ToolCall, result: toolflow.ToolResult) -> None:
        self.after.append((call.name, result.success, dict(result.extra)))


Setup = tuple[toolflow.Registry, toolflow.Plugins, Tools]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    """The registry of SPEC with its plugin; a hung sync tool is released at the end."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "kill-tools")
    yield toolflow.load_registry([spec], plugins=plugins), plugins, tools
    tools.release.set()


async def _at(seconds: float, action: Callable[[], None]) -> None:
    await trio.sleep(seconds)
    action()


async def _collect(
    results: list[tuple[float, toolflow.ToolResult]], call: Callable[[], Awaitable[toolflow.ToolResult]]
) -> None:
    result = await call()
    results.append((trio.current_time(), result))


# --- kill -------------------------------------------------------------------------------------


async def test_kill_cancels_a_direct_call_at_once(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A kill during engine.call returns the aborted failure at once; nothing is cached, the next call runs."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_at, 1, engine.kill)
            killed = await engine.call("nap", {"delay": 30})
        elapsed = trio.current_time() - start
        again = await engine.call("nap", {"delay": 30})
    assert (killed.success, dict(killed.extra)) == (False, KILLED)
    assert elapsed == pytest.approx(1.0)
    assert (again.success, again.data, again.extra["attempts"]) == (True, "rested", 1)
    assert "cached" not in again.extra
    assert tools.runs["nap"] == 2


async def test_kill_during_the_retry_backoff_of_a_direct_call(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """A kill in the 10 s back-off after attempt 1 aborts the call at once, with no second attempt."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_at, 4, engine.kill)
            killed = await engine.call("flaky", {})
        elapsed = trio.current_time() - start
        assert tools.runs["flaky"] == 1
        later = await engine.call("flaky", {})
    assert (killed.success, dict(killed.extra)) == (False, KILLED)
    assert elapsed == pytest.approx(4.0)
    assert (later.success, later.extra["attempts"], "cached" in later.extra) == (True, 1, False)
    assert tools.runs["flaky"] == 2


async def test_kill_reaches_a_direct_call_waiting_for_a_slot(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """With one slot, a kill aborts both the running call and the one waiting for the slot."""
    registry, plugins, tools = setup
    results: list[tuple[float, toolflow.ToolResult]] = []
    async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, results, functools.partial(engine.call, "nap", {"delay": 5}))
            nursery.start_soon(_collect, results, functools.partial(engine.call, "nap", {"delay": 6}))
            nursery.start_soon(_at, 2, engine.kill)
        after = await engine.call("nap", {"delay": 1})
    assert [(when, result.success, dict(result.extra)) for when, result in results] == [
        (2.0, False, KILLED),
        (2.0, False, KILLED),
    ]
    assert tools.runs["nap"] == 2  # the waiting call never ran; the call after the kill did
    assert after.success


async def test_kill_abandons_a_sync_tool_in_its_thread(setup: Setup) -> None:
    """A kill while a sync tool blocks in its worker thread returns at once; the thread is abandoned."""
    registry, plugins, tools = setup

    async def kill_once_started(engine: Engine) -> None:
        await tools.started.wait()
        engine.kill()

    with trio.fail_after(10):
        async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:
            nursery.start_soon(kill_once_started, engine)
            killed = await engine.call("hang_sync", {})
    assert (killed.success, dict(killed.extra)) == (False, KILLED)
    assert tools.runs["hang_sync"] == 1
    assert not tools.release.is_set()  # the thread is still blocked: the call did not wait for it


async def test_after_call_sees_the_killed_result(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """The after_call hook of a call that started sees how it ended, killed included."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:
        nursery.start_soon(_at, 1, engine.kill)
        await engine.call("nap", {"delay": 30})
    assert tools.after == [("nap", False, KILLED)]


async def test_a_kill_before_a_call_does_not_reach_it(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """kill() cancels calls in flight only: a direct call made afterwards runs."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        engine.kill()
        result = await engine.call("nap", {"delay": 1})
    assert (result.success, result.data) == (True, "rested")


# --- stop -------------------------------------------------------------------------------------


async def _batch(engine: Engine, calls: list[dict[str, Any]], box: list[object]) -> None:
    box.append(await engine.execute_batch(calls))


def _call(call_id: str, name: str, delay: float) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"delay": delay}}


async def test_stop_reaches_batch_calls_waiting_for_a_global_slot(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """With one slot, a stop keeps the waiting calls from running; the running one finishes; the batch stops."""
    registry, plugins, tools = setup
    box: list[object] = []
    async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine:
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_batch, engine, [_call("a", "nap", 5), _call("b", "nap", 5), _call("c", "nap", 5)], box)
            nursery.start_soon(_at, 1, engine.request_stop)
        elapsed = trio.current_time() - start
    [outcome] = box
    assert isinstance(outcome, Abort)
    assert (outcome.reason, outcome.call_ids) == ("stopped", ("a", "b", "c"))
    assert [entry.result.data for entry in outcome.finished] == ["rested"]  # whichever call got the slot
    assert tools.runs["nap"] == 1
    assert elapsed == pytest.approx(5.0)


async def test_stop_reaches_batch_calls_waiting_for_a_per_tool_slot(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """A tool with `concurrency: 1`: the call waiting for its slot is not dispatched after a stop."""
    registry, plugins, tools = setup
    box: list[object] = []
    async with open_engine(registry, plugins=plugins) as engine:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_batch, engine, [_call("a", "single", 3), _call("b", "single", 3)], box)
            nursery.start_soon(_at, 1, engine.request_stop)
        engine.tick()
        next_turn = await engine.run_batch([_call("c", "single", 1)])
    [outcome] = box
    assert isinstance(outcome, Abort)
    assert outcome.reason == "stopped"
    assert len(outcome.finished) == 1
    assert tools.runs["nap"] == 2  # a, then c in the next turn
    assert next_turn[0].success


async def test_stop_ends_a_direct_call_waiting_for_a_slot(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A direct call waiting for a slot returns the stopped failure; the call holding the slot finishes."""
    registry, plugins, tools = setup
    results: list[tuple[float, toolflow.ToolResult]] = []
    async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine, trio.open_nursery() as nursery:
        nursery.start_soon(_collect, results, functools.partial(engine.call, "nap", {"delay": 5}))
        await trio.sleep(1)  # the first call holds the slot
        nursery.start_soon(_collect, results, functools.partial(engine.call, "nap", {"delay": 1}))
        nursery.start_soon(_at, 1, engine.request_stop)
    assert [(when, result.success, dict(result.extra)) for when, result in results] == [
        (2.0, False, STOPPED),
        (5.0, True, {"attempts": 1}),
    ]
    assert tools.runs["nap"] == 1


async def test_stop_lets_a_retry_wait_for_its_slot(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A call already dispatched is not stopped: its retry waits for the slot and runs."""
    registry, plugins, tools = setup
    results: list[tuple[float, toolflow.ToolResult]] = []
    async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine, trio.open_nursery() as nursery:
        nursery.start_soon(_collect, results, functools.partial(engine.call, "flaky", {}))  # fails, waits 10 s
        await trio.sleep(5)
        nursery.start_soon(_collect, results, functools.partial(engine.call, "nap", {"delay": 20}))  # slot until 25
        nursery.start_soon(_at, 7, engine.request_stop)  # at 12, while the retry waits for the slot
    assert [(when, result.success, result.data) for when, result in results] == [
        (25.0, True, "rested"),
        (25.0, True, "ok"),
    ]
    assert tools.runs["flaky"] == 2


async def test_slots_survive_kills_of_holders_and_waiters(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """Killing a slot's holder and its waiters together, again and again, never loses the slot."""
    registry, plugins, tools = setup
    with trio.fail_after(1000):
        async with open_engine(registry, plugins=plugins, max_concurrency=1) as engine:
            for _ in range(20):  # trio resumes the killed tasks in random order: try both orders
                async with trio.open_nursery() as nursery:
                    for delay in (5, 6, 7):
                        nursery.start_soon(functools.partial(engine.call, "nap", {"delay": delay}))
                    nursery.start_soon(_at, 1, engine.kill)
                engine.tick()
            after = await engine.call("nap", {"delay": 1})
    assert after.success
    assert tools.runs["nap"] == 21
