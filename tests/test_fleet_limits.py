"""Limits across engines (issue 19): ``rate_limit``, and ``concurrency`` across a fleet of replicas on Redis.

Engines here are "replicas": two engines of this process on one state backend, the in-memory one
(one process: ``toolflow serve``'s sessions) or a real ``redis-server`` (the ``redis_server``
fixture, skipped, saying how to install it, where there is none). Times that matter are trio's
(the autojump clock) or a clock the test moves; nothing waits for real time.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
import yaml
from _mcp_wire import StdioServer, call
from _redis import RedisServer

import toolflow
from toolflow._attempts import Attempts, Hooks
from toolflow._cli import run
from toolflow._limits import LEASE_TTL, FleetLimits
from toolflow._state import MemoryState
from toolflow._state_redis import RedisState

SPEC = """\
toolflow: 1
tools:
  search:
    description: Searches; at most two calls a minute, across every engine that shares the state.
    rate_limit: {calls: 2, per: 1m}
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        q: {type: string, description: What to look for}
      required: [q]
    implementation: fleet.search
  lenient:
    description: Rate limited, but runs uncounted when the shared state is down.
    rate_limit: {calls: 1, per: 1h, on_outage: open}
    implementation: fleet.search_any
  strict:
    description: Rate limited, and refused when the shared state is down (the default).
    rate_limit: {calls: 1, per: 1h}
    implementation: fleet.search_any
  slow:
    description: At most two at once, across the fleet.
    concurrency: 2
    timeout: 1000s
    implementation: fleet.slow
  licensed:
    description: At most one at once across the fleet, and never more when the leases cannot be taken.
    concurrency: {limit: 1, on_outage: closed}
    implementation: fleet.search_any
"""


class Clock:
    """The state's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Fleet:
    """The plugin of the tools: counts the runs, and how many ``slow`` calls run at once."""

    def __init__(self) -> None:
        self.runs = 0
        self.running = 0
        self.most = 0
        self.hold = 1.0  # seconds (trio's) a slow call takes
        self.spans: list[tuple[float, float]] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """``fleet.search``, ``fleet.search_any`` and ``fleet.slow``."""

        async def search(q: str) -> str:
            self.runs += 1
            return f"found {q}"

        async def search_any() -> str:
            self.runs += 1
            return "found"

        async def slow() -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            started = trio.current_time()
            try:
                await trio.sleep(self.hold)
            finally:
                self.running -= 1
                self.spans.append((started, trio.current_time()))
            return "done"

        register("fleet.search", search)
        register("fleet.search_any", search_any)
        register("fleet.slow", slow)


def _setup(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Fleet]:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    fleet = Fleet()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(fleet, "fleet")
    return toolflow.load_registry([spec], plugins=plugins), plugins, fleet


# --------------------------------------------------------------------------- rate_limit


async def test_a_rate_limit_holds_across_the_engines_of_a_process(tmp_path: Path) -> None:
    registry, plugins, fleet = _setup(tmp_path)
    clock = Clock()
    state = MemoryState(clock=clock)
    path = tmp_path / "cache.sqlite3"
    with trio.fail_after(60):
        async with (
            toolflow.open_engine(registry, plugins=plugins, state=state, cache_path=path, cache_timeout=30) as one,
            toolflow.open_engine(registry, plugins=plugins, state=state, cache_path=path, cache_timeout=30) as two,
        ):
            first = [await one.call("search", {"q": "a"}), await two.call("search", {"q": "b"})]
            hit = await one.call("search", {"q": "a"})  # a cache hit costs the downstream nothing: not counted
            clock.now += 15
            refused = await two.call("search", {"q": "c"})
            clock.now += 45  # the first call leaves the window
            again = await one.call("search", {"q": "c"})
    assert [r.success for r in first] == [True, True]
    assert hit.extra.get("cached") is True
    assert not refused.success
    assert refused.error == "Error: tool 'search' is rate limited (at most 2 calls per 1m); try again in 45s"
    assert refused.extra["status"] == "rate_limited"
    assert refused.extra["retry_after"] == pytest.approx(45)
    assert again.success
    assert fleet.runs == 3


async def test_a_rate_limit_holds_across_two_replicas_on_redis(tmp_path: Path, redis_server: RedisServer) -> None:
    registry, plugins, fleet = _setup(tmp_path)
    replicas = [RedisState(redis_server.url, timeout=10) for _ in range(2)]
    results: list[toolflow.ToolResult] = []

    async def one(index: int) -> None:
        async with toolflow.open_engine(registry, plugins=plugins, state=replicas[index % 2], cache_timeout=30) as e:
            results.append(await e.call("search", {"q": f"q{index}"}))

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for index in range(10):
                    nursery.start_soon(one, index)
    finally:
        for replica in replicas:
            replica.close()
    assert sorted(r.success for r in results) == [False] * 8 + [True] * 2
    assert fleet.runs == 2
    refused = next(r for r in results if not r.success)
    assert refused.extra["status"] == "rate_limited"
    assert 59 < refused.extra["retry_after"] <= 60


async def test_redis_down_a_rate_limit_fails_as_the_spec_says(tmp_path: Path, redis_server: RedisServer) -> None:
    registry, plugins, fleet = _setup(tmp_path)
    state = RedisState(redis_server.url, timeout=10)
    try:
        with trio.fail_after(60):
            async with toolflow.open_engine(registry, plugins=plugins, state=state) as engine:
                redis_server.kill()
                lenient = [await engine.call("lenient", {}) for _ in range(3)]
                strict = await engine.call("strict", {})
                redis_server.start()  # back, empty: counting again
                back = [await engine.call("strict", {}) for _ in range(2)]
    finally:
        state.close()
    assert [r.success for r in lenient] == [True, True, True]  # open: uncounted
    assert not strict.success
    assert strict.extra == {"status": "rate_limited", "retry_after": None}
    assert strict.error == (
        "Error: tool 'strict' is rate limited (at most 1 call per 1h) and its calls cannot be counted now;"
        " try again later"
    )
    assert [r.success for r in back] == [True, False]
    assert fleet.runs == 4


# --------------------------------------------------------------------------- concurrency across a fleet


async def test_concurrency_holds_across_two_replicas_under_fifty_calls(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    registry, plugins, fleet = _setup(tmp_path)
    fleet.hold = 0.01  # real time: trio's autojump clock would race ahead while Redis answers in threads
    replicas = [RedisState(redis_server.url, timeout=10) for _ in range(2)]
    results: list[toolflow.ToolResult] = []
    try:
        with trio.fail_after(120):
            async with (
                toolflow.open_engine(registry, plugins=plugins, state=replicas[0]) as one,
                toolflow.open_engine(registry, plugins=plugins, state=replicas[1]) as two,
                trio.open_nursery() as nursery,
            ):
                for index in range(50):
                    engine = one if index % 2 else two

                    async def run(engine: toolflow.Engine = engine) -> None:
                        results.append(await engine.call("slow", {}))

                    nursery.start_soon(run)
    finally:
        for replica in replicas:
            replica.close()
    assert [r.success for r in results] == [True] * 50
    assert fleet.most == 2  # each engine alone would have allowed two of its own: four
    # The leases were given back: the tool's set in Redis is empty.
    state = RedisState(redis_server.url, timeout=10)
    try:
        assert state.acquire("slow", 2, "after-1", 30)
        assert state.acquire("slow", 2, "after-2", 30)
    finally:
        state.close()


async def test_redis_down_concurrency_fails_as_the_spec_says(tmp_path: Path, redis_server: RedisServer) -> None:
    """``concurrency: N`` runs under the engine's own limit while the leases cannot be taken; ``on_outage: closed`` refuses."""
    registry, plugins, fleet = _setup(tmp_path)
    fleet.hold = 0.01
    state = RedisState(redis_server.url, timeout=10)
    try:
        with trio.fail_after(60):
            async with toolflow.open_engine(registry, plugins=plugins, state=state) as engine:
                assert (await engine.call("licensed", {})).success  # a lease taken and given back
                redis_server.kill()
                opened = await engine.call("slow", {})
                closed = await engine.call("licensed", {})
                redis_server.start()
                back = await engine.call("licensed", {})
    finally:
        state.close()
    assert opened.success
    assert not closed.success
    assert closed.error == (
        "Error: tool 'licensed' may run at most 1 at once across the fleet, and the fleet's leases cannot be"
        " taken now; try again later"
    )
    assert closed.extra == {"status": "unavailable", "retry_after": None}
    assert back.success
    assert fleet.runs == 2  # the refused call never ran


def test_concurrency_takes_a_number_or_a_limit_with_on_outage(tmp_path: Path) -> None:
    registry, _plugins, _fleet = _setup(tmp_path)
    assert (registry.get("slow").spec.concurrency, registry.get("slow").spec.concurrency_on_outage) == (2, "open")
    assert (registry.get("licensed").spec.concurrency, registry.get("licensed").spec.concurrency_on_outage) == (
        1,
        "closed",
    )


async def test_a_lease_is_renewed_while_its_call_runs(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    """A call longer than a lease's TTL keeps its lease: another replica waits for the call's end, not the TTL's."""
    registry, plugins, fleet = _setup(tmp_path)
    clock = mock_clock  # moved by hand: the test says when the renewals are due
    acquired: list[float] = []

    class Recording(MemoryState):
        shared = True  # as Redis is: this engine's concurrency takes leases

        def acquire(self, name: str, limit: int, holder: str, ttl: float) -> bool:
            taken = super().acquire(name, limit, holder, ttl)
            acquired.append(clock.current_time())
            return taken

    state = Recording(clock=clock.current_time)
    fleet.hold = 10 * LEASE_TTL

    async def renewed(count: int) -> None:
        """Wait (in real time, a few seconds at most) until *count* acquisitions reached the backend."""
        deadline = time.monotonic() + 30
        while len(acquired) < count:
            assert time.monotonic() < deadline, acquired
            await trio.lowlevel.checkpoint()

    async with toolflow.open_engine(registry, plugins=plugins, state=state) as engine, trio.open_nursery() as nursery:
        nursery.start_soon(engine.call, "slow", {})
        for step in range(5):  # the lease; then past its TTL, renewals at 10s, 20s, 30s and 40s
            if step:
                clock.jump(LEASE_TTL / 3)
            await renewed(1 + step)
            # Until the renewer sleeps again: every task waits, and no thread's answer is on its way.
            await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert not state.acquire("slow", 1, "another replica", LEASE_TTL)  # still held: renewed
        clock.jump(10 * LEASE_TTL)  # the call ends, and gives its lease back
    assert len(fleet.spans) == 1
    assert state.acquire("slow", 1, "another replica", LEASE_TTL)


def test_leases_are_taken_only_with_a_shared_backend() -> None:
    attempts = Attempts(Hooks(None), threads=trio.CapacityLimiter(1), slots=None, counted=True)
    spec = toolflow.ToolSpec(name="slow", concurrency=2)
    limited = toolflow.ToolSpec(name="search", rate_limit=toolflow.RateLimit(calls=1, per=60))
    assert FleetLimits(MemoryState(), shared=False, attempts=attempts).for_tool(spec) is None
    shared = FleetLimits(MemoryState(), shared=True, attempts=attempts).for_tool(spec)
    assert shared is not None
    assert shared.leases
    by_rate = FleetLimits(MemoryState(), shared=False, attempts=attempts).for_tool(limited)
    assert by_rate is not None
    assert not by_rate.leases
    assert FleetLimits(MemoryState(), shared=True, attempts=attempts).for_tool(toolflow.ToolSpec(name="x")) is None


# --------------------------------------------------------------------------- through the doors


def _greet_project(root: Path) -> None:
    """*root* as a project whose one tool, ``greet``, may run once an hour."""
    (root / "pyproject.toml").write_text('[project]\nname = "fleet"\n', encoding="utf-8")
    (root / "specs").mkdir()
    (root / "specs" / "greet.yaml").write_text(
        "toolflow: 1\ntools:\n  greet:\n    description: Greets.\n    rate_limit: {calls: 1, per: 1h}\n"
        '    template: "Hello!"\n',
        encoding="utf-8",
    )


def test_toolflow_call_keeps_the_rate_limit_across_processes(tmp_path: Path, redis_server: RedisServer) -> None:
    _greet_project(tmp_path)
    env = {**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none", "TOOLFLOW_STATE": redis_server.url}
    done = [
        subprocess.run(
            [sys.executable, "-m", "toolflow", "call", "greet", "{}"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        for _ in range(2)
    ]
    assert done[0].returncode == 0, done[0].stderr
    assert done[1].returncode == 1, done[1].stderr
    assert "is rate limited (at most 1 call per 1h); try again in" in done[1].stdout + done[1].stderr


async def test_a_redis_restart_mid_run_costs_documented_warnings_only(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Calls in flight on two replicas while Redis restarts empty: all answer, rightly; only cache warnings."""
    registry, plugins, fleet = _setup(tmp_path)
    fleet.hold = 0.05
    replicas = [RedisState(redis_server.url, timeout=10) for _ in range(2)]
    results: list[tuple[str, toolflow.ToolResult]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with trio.fail_after(120):
                async with (
                    toolflow.open_engine(registry, plugins=plugins, state=replicas[0], cache_timeout=30) as one,
                    toolflow.open_engine(registry, plugins=plugins, state=replicas[1], cache_timeout=30) as two,
                    trio.open_nursery() as nursery,
                ):
                    for index in range(20):
                        engine = one if index % 2 else two

                        async def run(engine: toolflow.Engine = engine, index: int = index) -> None:
                            results.append(("slow", await engine.call("slow", {})))
                            results.append((f"q{index % 3}", await engine.call("search", {"q": f"q{index % 3}"})))

                        nursery.start_soon(run)
                    await trio.sleep(0.1)
                    await trio.to_thread.run_sync(redis_server.restart)
        finally:
            for replica in replicas:
                replica.close()
    assert all(issubclass(w.category, toolflow.CacheWarning) for w in caught), [str(w.message) for w in caught]
    slow = [result for name, result in results if name == "slow"]
    assert [r.success for r in slow] == [True] * 20
    searched = [(name, result) for name, result in results if name != "slow"]
    assert len(searched) == 20
    for name, result in searched:  # answered, or refused by the rate limit; never another call's data
        assert result.data == f"found {name}" if result.success else result.extra["status"] == "rate_limited"


def test_toolflow_serve_keeps_the_rate_limit(tmp_path: Path) -> None:
    """Through serve's door: the second call of a session is refused, and the client reads why."""
    _greet_project(tmp_path)
    server = StdioServer(tmp_path, "--specs", "specs", env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"})
    try:
        server.start()
        answers = []
        for request_id in (1, 2):
            server.send(call(request_id, "greet"))
            answers.append(server.receive(timeout=60))
        assert server.stop() == 0
    finally:
        server.kill()
    first, second = (answer["result"] for answer in answers if answer is not None)
    assert first.get("isError") is not True, first
    assert second["isError"] is True
    assert "is rate limited (at most 1 call per 1h); try again in" in second["content"][0]["text"]


def test_toolflow_run_keeps_the_rate_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through run's door: the model's second call in the hour is refused, and the model reads when to try again."""
    _greet_project(tmp_path)
    session = tmp_path / "session.yaml"
    turns = [{"tool_calls": [{"name": "greet", "arguments": {}}]}] * 2 + [{"text": "Done."}]
    session.write_text(yaml.safe_dump({"prompt": "Greet twice.", "turns": turns}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    monkeypatch.delenv("TOOLFLOW_STATE", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", "--model", f"scripted:{session}", "--output-format", "json"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    calls = [call for turn in json.loads(out.getvalue())["turns"] for call in turn["calls"]]
    assert [call["result"]["success"] for call in calls] == [True, False]
    refused = calls[1]["result"]
    assert refused["status"] == "rate_limited"
    assert 3599 < refused["retry_after"] <= 3600


async def test_a_pipelines_steps_keep_the_rate_limit(tmp_path: Path) -> None:
    """Through a pipeline: its steps are calls like any other, counted under their tool's rate_limit."""
    spec = tmp_path / "pipe.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  greet:\n    description: Greets.\n    rate_limit: {calls: 2, per: 1h}\n"
        '    template: "Hello!"\n'
        "  greet_all:\n    description: Greets three times.\n    pipeline:\n      steps:\n"
        "        each:\n          tool: greet\n          for_each: '{{ [1, 2, 3] }}'\n          concurrency: 1\n"
        "          on_error: continue\n",
        encoding="utf-8",
    )
    registry = toolflow.load_registry([spec], plugins=toolflow.load_plugins(entry_points=False))
    with trio.fail_after(60):
        async with toolflow.open_engine(registry) as engine:
            result = await engine.call("greet_all", {})
    assert result.success, result.error
    outcomes = [step.result is not None and step.result.success for step in result.steps if step.tool == "greet"]
    assert sorted(outcomes) == [False, True, True]
