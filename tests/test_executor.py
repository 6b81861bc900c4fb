"""The trio executor: timeouts, retries, caches, gates, batches and cancellation, with real specs and plugins."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import toolflow
from toolflow._executor import Engine, open_engine
from toolflow._model import format_duration

SPEC = """\
toolflow: 1
tools:
  hang_async:
    description: Hangs forever (async).
    timeout: 2s
    retry: {attempts: 1}
    implementation: t.hang_async
  hang_sync:
    description: Hangs forever (sync).
    timeout: 3s
    retry: {attempts: 1}
    implementation: t.hang_sync
  flaky:
    description: Fails twice with a connection error, then succeeds.
    retry: {attempts: 4, initial: 1s, multiplier: 2, max: 10s, jitter: false}
    implementation: t.flaky
  broken:
    description: Raises a non-retryable error.
    retry: {jitter: false}
    implementation: t.broken
  launch:
    description: A dangerous, non-idempotent tool that fails with a connection error.
    category: dangerous
    retry: {jitter: false}
    implementation: t.launch
  delete:
    description: A dangerous tool.
    category: dangerous
    parameters:
      type: object
      properties:
        n: {type: integer, description: Which}
    implementation: t.delete
  counted_tick:
    description: Counts its runs; tick cache.
    cache: {scope: tick}
    parameters:
      type: object
      properties:
        x: {type: integer, description: Input}
      required: [x]
    implementation: t.counted
  counted_session:
    description: Counts its runs; session cache.
    cache: {scope: session}
    parameters:
      type: object
      properties:
        x: {type: integer, description: Input}
      required: [x]
    implementation: t.counted
  counted_persistent:
    description: Counts its runs; persistent cache.
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        x: {type: integer, description: Input}
      required: [x]
    implementation: t.counted
  failing_cached:
    description: Always fails, with a session cache.
    cache: {scope: session}
    retry: {attempts: 1}
    implementation: t.fail_result
  login:
    description: Logs in.
    implementation: t.ok
  fetch:
    description: Needs a login in this loop.
    depends_on: [login]
    implementation: t.ok
  login_slow:
    description: Logs in, taking a second.
    implementation: t.nap
  fetch_slow:
    description: Needs the slow login first.
    depends_on: [login_slow]
    implementation: t.ok
  picky:
    description: Raises a ValueError, which only a plugin's retryable hook may call retryable.
    retry: {attempts: 2, initial: 1s, jitter: false}
    implementation: t.picky
  limited:
    description: Rate-limited the first time, asking to wait retry_after seconds.
    retry: {attempts: 3, initial: 100ms, jitter: false}
    parameters:
      type: object
      properties:
        retry_after: {type: string, description: What the rate limit says}
      required: [retry_after]
    implementation: t.limited
  echo:
    description: Echoes after a delay.
    parameters:
      type: object
      properties:
        text: {type: string, description: Text}
        delay: {type: number, description: Seconds}
      required: [text]
    implementation: t.echo
"""


class Tools:
    """A test plugin binding the implementations of SPEC, recording what they do."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.flaky_failures = 2

    def _count(self, name: str) -> int:
        self.runs[name] = self.runs.get(name, 0) + 1
        return self.runs[name]

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def hang_async() -> None:
            self._count("hang_async")
            await trio.sleep_forever()

        release = threading.Event()
        self.release = release

        def hang_sync() -> None:
            self._count("hang_sync")
            release.wait(60)

        async def flaky() -> str:
            if self._count("flaky") <= self.flaky_failures:
                msg = "connection reset by peer"
                raise ConnectionError(msg)
            return "ok"

        def broken() -> None:
            self._count("broken")
            msg = "bad input shape"
            raise ValueError(msg)

        async def launch() -> None:
            self._count("launch")
            msg = "connection reset"
            raise ConnectionError(msg)

        async def delete(n: int = 0) -> int:
            self._count("delete")
            return n

        async def counted(x: int) -> int:
            return self._count("counted") * 0 + x * 10

        async def fail_result() -> dict[str, Any]:
            self._count("fail_result")
            return {"success": False, "error": "nope"}

        async def ok() -> str:
            return "ok"

        async def nap() -> str:
            await trio.sleep(1)
            return "ok"

        async def picky() -> None:
            self._count("picky")
            msg = "picky"
            raise ValueError(msg)

        async def limited(retry_after: str) -> dict[str, Any]:
            if self._count("limited") == 1:
                return {"success": False, "error": "429 Too Many Requests", "retry_after": retry_after}
            return {"success": True, "data": "served"}

        async def echo(text: str, delay: float = 0.0) -> str:
            await trio.sleep(delay)
            self._count("echo")
            return text

        for name, function in {
            "t.hang_async": hang_async,
            "t.hang_sync": hang_sync,
            "t.flaky": flaky,
            "t.broken": broken,
            "t.launch": launch,
            "t.delete": delete,
            "t.counted": counted,
            "t.fail_result": fail_result,
            "t.ok": ok,
            "t.nap": nap,
            "t.picky": picky,
            "t.limited": limited,
            "t.echo": echo,
        }.items():
            register(name, function)


def _registry(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Tools]:
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "test-tools")
    return toolflow.load_registry([spec], plugins=plugins), plugins, tools


@pytest.fixture
def setup(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Tools]:
    """The registry of SPEC, its plugins and the test plugin."""
    return _registry(tmp_path)


Setup = tuple[toolflow.Registry, toolflow.Plugins, Tools]


async def test_async_tool_that_hangs_times_out_at_its_timeout(setup: Setup, autojump_clock: Any) -> None:
    """A hung async tool fails with `Error: tool 'hang_async' timed out after 2s` exactly at its 2 s timeout."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        result = await engine.call("hang_async", {})
    assert (result.success, result.error) == (False, "Error: tool 'hang_async' timed out after 2s")
    assert result.extra["attempts"] == 1
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_sync_tool_that_hangs_is_abandoned_at_its_timeout(setup: Setup, autojump_clock: Any) -> None:
    """A hung sync tool is abandoned in its thread and fails at its 3 s timeout."""
    registry, plugins, tools = setup
    try:
        with trio.fail_after(10):
            async with open_engine(registry, plugins=plugins) as engine:
                start = trio.current_time()
                result = await engine.call("hang_sync", {})
    finally:
        tools.release.set()
    assert (result.success, result.error) == (False, "Error: tool 'hang_sync' timed out after 3s")
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_connection_errors_are_retried_with_backoff(setup: Setup, autojump_clock: Any) -> None:
    """Two connection errors then success: attempt 3 succeeds after waiting 1 s + 2 s."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        result = await engine.call("flaky", {})
    assert (result.success, result.data, result.extra["attempts"]) == (True, "ok", 3)
    assert tools.runs["flaky"] == 3
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_retries_stop_after_the_last_attempt(setup: Setup, autojump_clock: Any) -> None:
    """A tool that keeps failing retryably runs its 4 attempts, waiting 1 + 2 + 4 s, and fails."""
    registry, plugins, tools = setup
    tools.flaky_failures = 100
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        result = await engine.call("flaky", {})
    assert (result.success, result.error) == (
        False,
        "Error: tool 'flaky' raised ConnectionError: connection reset by peer",
    )
    assert result.extra["attempts"] == 4
    assert trio.current_time() - start == pytest.approx(7.0)


async def test_non_retryable_error_is_not_retried(setup: Setup) -> None:
    """A raising implementation is a failure result, tried once when its error is not retryable."""
    # A sync tool runs in a thread: the autojump clock would jump to its timeout while it runs.
    registry, plugins, tools = setup
    with trio.fail_after(10):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("broken", {})
    assert (result.success, result.error) == (False, "Error: tool 'broken' raised ValueError: bad input shape")
    assert (result.extra["attempts"], tools.runs["broken"]) == (1, 1)


async def test_dangerous_non_idempotent_tool_is_not_retried(setup: Setup, autojump_clock: Any) -> None:
    """A dangerous tool that is not idempotent runs once even on a retryable error."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("launch", {})
    assert (result.success, result.extra["attempts"], tools.runs["launch"]) == (False, 1, 1)


async def test_tick_cache_hits_until_the_next_tick(setup: Setup) -> None:
    """A tick-cached result is reused in the same tick and recomputed after tick()."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        first = await engine.call("counted_tick", {"x": 1})
        second = await engine.call("counted_tick", {"x": 1})
        other = await engine.call("counted_tick", {"x": 2})
        engine.tick()
        third = await engine.call("counted_tick", {"x": 1})
    assert (first.data, second.data, other.data, third.data) == (10, 10, 20, 10)
    assert second.extra["cached"] is True
    assert "cached" not in third.extra
    assert tools.runs["counted"] == 3


async def test_session_cache_survives_ticks_but_not_the_engine(setup: Setup) -> None:
    """A session-cached result is reused across ticks; a new engine computes it again."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        await engine.call("counted_session", {"x": 1})
        engine.tick()
        hit = await engine.call("counted_session", {"x": "1"})  # cleaned to the same arguments
    async with open_engine(registry, plugins=plugins) as engine:
        await engine.call("counted_session", {"x": 1})
    assert hit.extra["cached"] is True
    assert tools.runs["counted"] == 2


async def test_persistent_cache_survives_a_new_engine(setup: Setup, tmp_path: Path) -> None:
    """A persistent-cached result is read back by a new engine on the same file."""
    registry, plugins, tools = setup
    path = tmp_path / "cache.sqlite3"
    with trio.fail_after(10):
        async with open_engine(registry, plugins=plugins, cache_path=path) as engine:
            await engine.call("counted_persistent", {"x": 3})
        async with open_engine(registry, plugins=plugins, cache_path=path) as engine:
            hit = await engine.call("counted_persistent", {"x": 3})
    assert (hit.success, hit.data, hit.extra["cached"]) == (True, 30, True)
    assert tools.runs["counted"] == 1
    assert path.is_file()


async def test_failures_are_never_cached(setup: Setup) -> None:
    """A failed result of a cached tool is computed again on the next call."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        first = await engine.call("failing_cached", {})
        second = await engine.call("failing_cached", {})
    assert (first.success, second.success) == (False, False)
    assert "cached" not in second.extra
    assert tools.runs["fail_result"] == 2


async def test_unknown_tool_is_a_failure_naming_the_nearest(setup: Setup) -> None:
    """An unknown tool gives a model-readable error with a suggestion."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("ech", {"text": "x"})
    assert (result.error or "").startswith("Error: Unknown tool: 'ech' (did you mean 'echo'")


async def test_allowlist_blocks_without_dispatch(setup: Setup) -> None:
    """A tool outside the allowlist gets a blocked result listing the allowed tools and never runs."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins, allowlist=["login", "echo"]) as engine:
        blocked = await engine.call("delete", {"n": 1})
        allowed = await engine.call("echo", {"text": "hi"})
    assert blocked.success is False
    assert dict(blocked.extra) == {"status": "blocked", "allowed": ["echo", "login"]}
    assert "delete" not in tools.runs
    assert (allowed.success, allowed.data) == (True, "hi")


async def test_an_allowlist_changed_later_holds_for_tools_that_ran_before(setup: Setup) -> None:
    """The allowlist is read at each call: a tool that ran under a wider one is blocked once it is narrowed."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins, allowlist=["echo", "delete"]) as engine:
        first = await engine.call("delete", {"n": 1})
        engine.allowlist = frozenset({"echo"})
        blocked = await engine.call("delete", {"n": 2})
        engine.allowlist = None
        again = await engine.call("delete", {"n": 3})
    assert first.success
    assert dict(blocked.extra) == {"status": "blocked", "allowed": ["echo"]}
    assert again.success
    assert tools.runs["delete"] == 2


async def test_depends_on_requires_an_earlier_success_in_the_loop(setup: Setup) -> None:
    """fetch needs login first; a new loop resets the loop-scoped dependency."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        early = await engine.call("fetch", {})
        await engine.call("login", {})
        later = await engine.call("fetch", {})
        engine.new_loop()
        again = await engine.call("fetch", {})
    assert early.success is False
    assert early.error == "Error: 'fetch' cannot run yet - run 'login' successfully first"
    assert later.success is True
    assert again.success is False


async def test_invalid_arguments_are_a_failure_result(setup: Setup) -> None:
    """Arguments that fail validation give a failure and run nothing."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("echo", {})
    assert result.success is False
    assert "text" in (result.error or "")
    assert "echo" not in tools.runs


async def test_batch_results_in_call_order_and_one_dangerous_per_tick(setup: Setup, autojump_clock: Any) -> None:
    """Safe calls run concurrently, results keep call order, and only the first dangerous call runs per tick."""
    registry, plugins, tools = setup
    calls = [
        {"id": "a", "type": "function", "function": {"name": "echo", "arguments": '{"text": "slow", "delay": 5}'}},
        {"id": "b", "type": "function", "function": {"name": "delete", "arguments": '{"n": 1}'}},
        {"id": "c", "type": "function", "function": {"name": "echo", "arguments": '{"text": "fast", "delay": 1}'}},
        {"id": "d", "type": "function", "function": {"name": "delete", "arguments": '{"n": 2}'}},
        {"id": "e", "type": "function", "function": {"name": "echo", "arguments": "{not json"}},
    ]
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        results = await engine.run_batch(calls)
        elapsed = trio.current_time() - start
        engine.tick()
        next_turn = await engine.run_batch([calls[3]])
    assert len(results) == 5
    assert [r.data for r in results[:3]] == ["slow", 1, "fast"]
    assert results[3].success is False
    assert "one dangerous action per turn" in (results[3].error or "")
    assert (results[4].error or "").startswith("Error: Invalid JSON arguments")
    assert elapsed == pytest.approx(5.0)  # the two echoes overlapped
    assert (next_turn[0].success, next_turn[0].data) == (True, 2)
    assert tools.runs["delete"] == 2


async def test_completion_is_logged_at_info(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    """Every dispatched call logs `Function call completed: name (Nms)` at INFO."""
    registry, plugins, _ = setup
    caplog.set_level(logging.INFO, logger="toolflow")
    async with open_engine(registry, plugins=plugins) as engine:
        await engine.call("echo", {"text": "x"})
    messages = [r.getMessage() for r in caplog.records if r.name == "toolflow" and r.levelno == logging.INFO]
    assert any(m.startswith("Function call completed: echo (") and m.endswith("ms)") for m in messages)


async def test_cancellation_propagates_and_is_not_retried(setup: Setup, autojump_clock: Any) -> None:
    """Cancelling an engine.call from outside propagates Cancelled; the tool ran once, nothing is swallowed."""
    registry, plugins, tools = setup
    tools.flaky_failures = 100
    reached: list[str] = []

    async def caller(engine: Engine) -> None:
        try:
            await engine.call("hang_async", {})
        except trio.Cancelled:
            reached.append("cancelled")
            raise
        reached.append("returned")  # pragma: no cover - must not happen

    async with open_engine(registry, plugins=plugins) as engine:
        with trio.move_on_after(1) as scope:
            await caller(engine)
    assert scope.cancelled_caught
    assert reached == ["cancelled"]
    assert tools.runs["hang_async"] == 1


async def test_per_tool_concurrency_limit(tmp_path: Path, autojump_clock: Any) -> None:
    """A tool with `concurrency: 1` runs its calls one at a time, others are not held back."""
    spec = tmp_path / "c.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  one:\n    description: One at a time.\n    concurrency: 1\n"
        "    implementation: c.wait\n  many:\n    description: Unlimited.\n    implementation: c.wait\n",
        encoding="utf-8",
    )

    class Plugin:
        @toolflow.hookimpl
        def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
            async def wait() -> None:
                await trio.sleep(1)

            register("c.wait", wait)

    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Plugin(), "c")
    registry = toolflow.load_registry([spec], plugins=plugins)
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        await engine.run_batch([{"tool": "one"}] * 3)
        serial = trio.current_time() - start
        start = trio.current_time()
        await engine.run_batch([{"tool": "many"}] * 3)
        parallel = trio.current_time() - start
    assert serial == pytest.approx(3.0)
    assert parallel == pytest.approx(1.0)


def _openai(call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


async def test_batch_call_waits_for_its_dependency_in_the_same_batch(setup: Setup, autojump_clock: Any) -> None:
    """[login_slow, fetch_slow] in one turn: fetch_slow runs after login_slow, however slow it is."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        outcome = await engine.execute_batch([_openai("a", "login_slow"), _openai("b", "fetch_slow")])
    assert isinstance(outcome, tuple)
    assert [(entry.call_id, entry.success) for entry in outcome] == [("a", True), ("b", True)]
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_batch_dependency_on_a_later_call_is_still_refused(setup: Setup, autojump_clock: Any) -> None:
    """fetch_slow before login_slow in one turn: the model asked in the wrong order, and is told so."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        results = await engine.run_batch([_openai("b", "fetch_slow"), _openai("a", "login_slow")])
    assert results[0].error == "Error: 'fetch_slow' cannot run yet - run 'login_slow' successfully first"
    assert results[1].success is True


async def test_dangerous_call_answered_without_running_leaves_the_turns_slot(setup: Setup) -> None:
    """A dangerous call blocked by the allowlist or invalid arguments is not the turn's dangerous action."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins, allowlist=["delete"]) as engine:
        blocked_first = await engine.run_batch([_openai("a", "launch"), _openai("b", "delete", '{"n": 1}')])
        engine.tick()
        invalid_first = await engine.run_batch(
            [_openai("c", "delete", '{"n": "x"}'), _openai("d", "delete", '{"n": 2}')]
        )
        engine.tick()
        two_valid = await engine.run_batch([_openai("e", "delete", '{"n": 3}'), _openai("f", "delete", '{"n": 4}')])
    assert blocked_first[0].extra["status"] == "blocked"
    assert (blocked_first[1].success, blocked_first[1].data) == (True, 1)
    assert invalid_first[0].success is False
    assert (invalid_first[1].success, invalid_first[1].data) == (True, 2)
    assert (two_valid[0].success, two_valid[0].data) == (True, 3)
    assert "one dangerous action per turn" in (two_valid[1].error or "")
    assert tools.runs["delete"] == 3
    assert "launch" not in tools.runs


async def test_unknown_tool_suggests_only_allowed_tools(setup: Setup) -> None:
    """With an allowlist in force, the unknown-tool error names only tools the model may call."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins, allowlist=["echo", "login"]) as engine:
        near = await engine.call("ech", {"text": "x"})
        far = await engine.call("delet", {})
    assert near.error == "Error: Unknown tool: 'ech' (did you mean 'echo'?)"
    assert far.error == "Error: Unknown tool: 'delet' (available: 'echo', 'login')"


async def test_failed_attempts_are_logged_with_the_retry_decision(
    setup: Setup, autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Each failed attempt of a retryable tool logs its duration, its error and what happens next."""
    registry, plugins, tools = setup
    tools.flaky_failures = 100
    caplog.set_level(logging.INFO, logger="toolflow.attempts")
    async with open_engine(registry, plugins=plugins) as engine:
        await engine.call("flaky", {})
        await engine.call("picky", {})
    reset = "tool 'flaky' raised ConnectionError: connection reset by peer"
    why = "(ConnectionError is a connection error)"
    on = "['timeout', 'connection', 'network', 'temporary', 'rate_limit']"
    assert [r.getMessage() for r in caplog.records if r.name == "toolflow.attempts"] == [
        f"Attempt 1 of flaky failed after 0ms: {reset}; retrying in 1.00s {why}",
        f"Attempt 2 of flaky failed after 0ms: {reset}; retrying in 2.00s {why}",
        f"Attempt 3 of flaky failed after 0ms: {reset}; retrying in 4.00s {why}",
        f"Attempt 4 of flaky failed after 0ms: {reset}; no attempts left (4 of 4)",
        f"Attempt 1 of picky failed after 0ms: tool 'picky' raised ValueError: picky; not retried: ValueError is none of retry.on {on}",
    ]


class Judge:
    """A plugin whose ``toolflow_retryable`` hook decides by the exception's class."""

    def __init__(self, retryable: dict[type[Exception], bool]) -> None:
        self.retryable = retryable
        self.asked: list[tuple[str, str]] = []

    @toolflow.hookimpl
    def toolflow_retryable(self, call: toolflow.ToolCall, error: Exception) -> bool | None:
        """The verdict for *error*'s class, if any."""
        self.asked.append((call.name, type(error).__name__))
        return self.retryable.get(type(error))


async def test_retryable_hook_decides_for_the_engine(setup: Setup, autojump_clock: Any) -> None:
    """A plugin's verdict overrides retry.on: a ValueError is retried, a ConnectionError is not."""
    registry, plugins, tools = setup
    judge = Judge({ValueError: True, ConnectionError: False})
    plugins.register(judge, "judge")
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        picky = await engine.call("picky", {})
        picky_elapsed = trio.current_time() - start
        flaky = await engine.call("flaky", {})
    assert (picky.success, picky.extra["attempts"], tools.runs["picky"]) == (False, 2, 2)
    assert picky_elapsed == pytest.approx(1.0)
    assert (flaky.success, flaky.extra["attempts"], tools.runs["flaky"]) == (False, 1, 1)
    assert judge.asked == [("picky", "ValueError"), ("picky", "ValueError"), ("flaky", "ConnectionError")]


async def test_sync_tool_sees_its_cancellation_after_the_timeout(tmp_path: Path) -> None:
    """A sync tool abandoned at its timeout finds ctx.cancelled true in its thread and can stop."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  poll:\n    description: Polls ctx.cancelled.\n    timeout: 100ms\n"
        "    retry: {attempts: 1}\n    implementation: s.poll\n",
        encoding="utf-8",
    )
    saw_cancel = threading.Event()

    def poll(ctx: toolflow.CallContext) -> str:
        while not ctx.cancelled:
            time.sleep(0.01)
        saw_cancel.set()
        return "stopped"

    class Poll:
        @toolflow.hookimpl
        def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
            register("s.poll", poll)

    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Poll(), "poll")
    registry = toolflow.load_registry([spec], plugins=plugins)
    with trio.fail_after(10):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("poll", {})
        assert (result.success, result.error) == (False, "Error: tool 'poll' timed out after 100ms")
        assert await trio.to_thread.run_sync(saw_cancel.wait, 5)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.3, "300ms"), (0.0015, "1.5ms"), (1, "1s"), (1.5, "1.5s"), (30, "30s"), (1e6, "1000000s")],
)
def test_timeouts_are_written_as_a_spec_writes_them(seconds: float, text: str) -> None:
    """`timed out after ...` never shows float noise or an exponent."""
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("retry_after", "attempts", "waited"), [("5", 2, 5.0), ("90", 1, 0.0)])
async def test_retry_after_sets_the_wait_or_stops_the_retries(
    setup: Setup, autojump_clock: Any, retry_after: str, attempts: int, waited: float
) -> None:
    """A result's retry_after replaces the 100 ms backoff; over 60 s the call fails at once."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        start = trio.current_time()
        result = await engine.call("limited", {"retry_after": retry_after})
    assert (result.success, result.extra["attempts"]) == (attempts == 2, attempts)
    assert trio.current_time() - start == pytest.approx(waited)
