"""Seed 002's discriminated outcome: history entries, stop, kill, malformed batches, the thread pool, the invariant."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import pytest
import trio
import trio.testing

import toolflow
from toolflow._executor import Abort, HistoryEntry, open_engine

SPEC = """\
toolflow: 1
tools:
  ok:
    description: Succeeds after a delay.
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.ok
  fail:
    description: Returns a failure result after a delay.
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.fail
  boom:
    description: Raises a non-retryable error after a delay.
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.boom
  slow:
    description: Overruns its 2 s timeout.
    timeout: 2s
    retry: {attempts: 1}
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.slow
  hang:
    description: Hangs forever.
    timeout: 3s
    retry: {attempts: 1}
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.hang
  danger:
    description: A dangerous tool that succeeds after a delay.
    category: dangerous
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.ok
  flaky:
    description: Fails with a connection error after a delay; retried twice, 1 s then 2 s apart.
    retry: {attempts: 3, initial: 1s, jitter: false}
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.flaky
  cached:
    description: Succeeds after a delay; its results are kept for the session.
    cache: {scope: session}
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.ok
  limited:
    description: Succeeds after a delay, one call at a time.
    concurrency: 1
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.ok
  needs_ok:
    description: Succeeds once ok has succeeded in this loop.
    depends_on: [ok]
    parameters:
      type: object
      properties:
        delay: {type: number, description: Seconds}
    implementation: b.ok
  hang_sync:
    description: A sync tool that hangs until released.
    timeout: 1s
    retry: {attempts: 1}
    implementation: b.hang_sync
  quick_sync:
    description: A quick sync tool.
    timeout: 1s
    implementation: b.quick_sync
"""

KINDS = ("ok", "fail", "boom", "slow", "hang", "danger")
PROPERTY_KINDS = (*KINDS, "flaky", "cached", "limited", "needs_ok", "malformed", "unknown")
"""What the batch property test draws from: the kinds above, retries, a cache, a per-tool limit,
a ``depends_on`` gate, malformed JSON and an unknown tool."""


class Tools:
    """The implementations of SPEC; `release` ends the hung sync tools."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished: list[str] = []

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def ok(delay: float = 0) -> str:
            await trio.sleep(delay)
            self.finished.append("ok")
            return "done"

        async def fail(delay: float = 0) -> dict[str, Any]:
            await trio.sleep(delay)
            return {"success": False, "error": "nope"}

        async def boom(delay: float = 0) -> None:
            await trio.sleep(delay)
            msg = "bad input shape"
            raise ValueError(msg)

        async def slow(delay: float = 0) -> str:
            await trio.sleep(10 + delay)
            return "late"  # pragma: no cover - always times out

        async def flaky(delay: float = 0) -> None:
            await trio.sleep(delay)
            msg = "connection reset by peer"
            raise ConnectionError(msg)

        async def hang(delay: float = 0) -> None:
            await trio.sleep_forever()

        def hang_sync() -> None:
            self.release.wait(30)

        def quick_sync() -> str:
            return "quick"

        for name, function in {
            "b.ok": ok,
            "b.fail": fail,
            "b.boom": boom,
            "b.slow": slow,
            "b.hang": hang,
            "b.flaky": flaky,
            "b.hang_sync": hang_sync,
            "b.quick_sync": quick_sync,
        }.items():
            register(name, function)


Setup = tuple[toolflow.Registry, toolflow.Plugins, Tools]


def _setup(directory: Path) -> Setup:
    spec = directory / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "batch-tools")
    return toolflow.load_registry([spec], plugins=plugins), plugins, tools


@pytest.fixture(scope="module")
def module_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """One registry for the whole module (hypothesis runs many examples on it)."""
    setup = _setup(tmp_path_factory.mktemp("batches"))
    yield setup
    setup[2].release.set()


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    """A fresh registry and plugin; hung sync tools are released at the end."""
    setup = _setup(tmp_path)
    yield setup
    setup[2].release.set()


def _call(call_id: str, name: str, delay: float = 0) -> dict[str, Any]:
    if name == "malformed":
        return {"id": call_id, "type": "function", "function": {"name": "ok", "arguments": "{delay"}}
    if name == "unknown":
        return {"type": "tool_use", "id": call_id, "name": "teleport", "input": {}}
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"delay": delay}}


async def test_execute_returns_a_history_entry(setup: Setup, autojump_clock: Any) -> None:
    """A successful call is a history entry carrying the call id, the tool, the call and its result."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        outcome = await engine.execute(_call("toolu_1", "ok", 1))
    assert isinstance(outcome, HistoryEntry)
    assert (outcome.call_id, outcome.tool_name, outcome.success) == ("toolu_1", "ok", True)
    assert outcome.call.id == "toolu_1"
    assert outcome.result.data == "done"


async def test_entries_say_how_long_each_dispatched_call_took(setup: Setup, autojump_clock: Any) -> None:
    """An entry's duration is the call's time on the run's clock; calls answered without dispatch have none."""
    registry, plugins, _ = setup
    bad = {"id": "m", "type": "function", "function": {"name": "ok", "arguments": "{oops"}}
    calls = [
        _call("a", "ok", 1.5),
        _call("b", "slow"),
        _call("c", "nope"),
        bad,
        _call("d", "danger", 0.25),
        _call("e", "danger"),
    ]
    async with open_engine(registry, plugins=plugins) as engine:
        outcome = await engine.execute_batch(calls)
    assert isinstance(outcome, tuple)
    durations = {entry.call_id: entry.duration for entry in outcome}
    # a and b run concurrently (b times out after 2 s); the dangerous d runs after them; c is an
    # unknown tool, m malformed and e the second dangerous call of the tick: none of them ran.
    assert durations == {
        "a": pytest.approx(1.5),
        "b": pytest.approx(2.0),
        "c": None,
        "m": None,
        "d": pytest.approx(0.25),
        "e": None,
    }


async def test_batch_logs_the_decisions_with_their_reasoning(
    setup: Setup, autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed 000, steps 1-2: each decision is logged with the model's reasoning; corrections are warnings."""
    registry, plugins, _ = setup
    caplog.set_level(logging.INFO, logger="toolflow")
    calls = [
        {"tool": "ok", "parameters": {"delay": 0}, "reasoning": "to check it works"},
        {"tool": "ok", "delay": 0},  # parameters at the top level: accepted, with a warning
        {"type": "function", "id": "m", "function": {"name": "ok", "arguments": "{oops"}},
    ]
    async with open_engine(registry, plugins=plugins) as engine:
        await engine.execute_batch(calls)
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "toolflow"]
    assert ("INFO", "Assistant decision: ok - to check it works") in logged
    assert ("INFO", "Assistant decision: ok") in logged
    assert (
        "WARNING",
        "Tool call call_1 (ok) was corrected: parameters were sent at the top level of the call; accepted: 'delay'",
    ) in logged
    assert any(
        level == "INFO" and m.startswith("Malformed tool call m: Error: Invalid JSON arguments") for level, m in logged
    )


async def test_plain_timeout_is_a_failure_entry(setup: Setup, autojump_clock: Any) -> None:
    """A timeout without a kill is a history entry the model sees: success false, `Error: tool 'slow' timed out after 2s`."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        outcome = await engine.execute(_call("t", "slow"))
    assert isinstance(outcome, HistoryEntry)
    assert (outcome.success, outcome.result.error) == (False, "Error: tool 'slow' timed out after 2s")


async def test_stop_before_dispatch_aborts_stopped(setup: Setup, autojump_clock: Any) -> None:
    """A pending stop aborts every call of a batch before anything runs; tick() clears it."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        engine.request_stop()
        outcome = await engine.execute_batch([_call("a", "ok"), _call("b", "ok")])
        engine.tick()
        after = await engine.execute(_call("c", "ok"))
    assert isinstance(outcome, Abort)
    assert (outcome.reason, outcome.call_ids, outcome.finished) == ("stopped", ("a", "b"), ())
    assert isinstance(after, HistoryEntry)
    assert tools.finished == ["ok"]


async def test_stop_lets_in_flight_calls_finish(setup: Setup, autojump_clock: Any) -> None:
    """A stop mid-batch lets the running call finish and aborts the not yet dispatched dangerous call."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def stopper() -> None:
            await trio.sleep(1)
            engine.request_stop()

        nursery.start_soon(stopper)
        outcome = await engine.execute_batch([_call("a", "ok", 5), _call("b", "danger")])
        results = await engine.run_batch([_call("c", "ok")])
    assert isinstance(outcome, Abort)
    assert (outcome.reason, outcome.call_ids) == ("stopped", ("a", "b"))
    assert [(entry.call_id, entry.result.data) for entry in outcome.finished] == [("a", "done")]
    assert tools.finished == ["ok"]  # the dangerous call never ran
    assert (results[0].success, results[0].extra["reason"]) == (False, "stopped")


async def test_kill_cancels_in_flight_calls_at_once(setup: Setup, autojump_clock: Any) -> None:
    """kill() during a batch cancels it at once: one abort naming every call, no entries, no result kept."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def killer() -> None:
            await trio.sleep(1)
            engine.kill()

        nursery.start_soon(killer)
        start = trio.current_time()
        outcome = await engine.execute_batch([_call("a", "ok", 0.5), _call("b", "hang"), _call("c", "ok", 5)])
        elapsed = trio.current_time() - start
    assert isinstance(outcome, Abort)
    assert (outcome.reason, outcome.call_ids, outcome.finished) == ("killed", ("a", "b", "c"), ())
    assert elapsed == pytest.approx(1.0)
    assert tools.finished == ["ok"]  # call a had finished; its result is dropped with the batch


async def test_too_many_malformed_calls_abort(setup: Setup) -> None:
    """More than max_malformed malformed calls abort the batch before any call runs."""
    registry, plugins, tools = setup
    bad = {"type": "function", "function": {"name": "ok", "arguments": "{oops"}}
    async with open_engine(registry, plugins=plugins, max_malformed=1) as engine:
        one_bad = await engine.execute_batch([bad, _call("x", "ok")])
        outcome = await engine.execute_batch([bad, bad, _call("x", "ok")])
        results = await engine.run_batch([bad, bad])
    assert isinstance(one_bad, tuple)
    assert [entry.success for entry in one_bad] == [False, True]
    assert isinstance(outcome, Abort)
    assert outcome.reason == "malformed_calls"
    assert outcome.call_ids == ("call_0", "call_1", "x")
    assert [r.extra["reason"] for r in results] == ["malformed_calls", "malformed_calls"]
    assert tools.finished == ["ok"]


async def test_a_batch_over_the_policys_max_calls_per_turn_runs_nothing(setup: Setup) -> None:
    """More calls than ``max_calls_per_turn``: the batch aborts before anything runs, each call told the limit."""
    registry, plugins, tools = setup
    policy = toolflow.Policy(max_calls_per_turn=2)
    async with open_engine(registry, plugins=plugins, policy=policy) as engine:
        at_limit = await engine.execute_batch([_call("a", "ok"), _call("b", "ok")])
        over = await engine.execute_batch([_call("c", "ok"), _call("d", "ok"), _call("e", "ok")])
        results = await engine.run_batch([_call("f", "ok"), _call("g", "ok"), _call("h", "ok")])
    assert isinstance(at_limit, tuple)
    assert [entry.success for entry in at_limit] == [True, True]
    assert isinstance(over, Abort)
    assert (over.reason, over.call_ids) == ("malformed_calls", ("c", "d", "e"))
    said = "Error: 3 tool calls in one turn, more than the 2 allowed: none ran; make at most 2"
    assert [(r.error, r.extra["reason"]) for r in results] == [(said, "malformed_calls")] * 3
    assert tools.finished == ["ok", "ok"]


def test_max_calls_per_turn_is_at_least_one(tmp_path: Path) -> None:
    """The policy refuses a limit below one, from Python and from a spec file."""
    with pytest.raises(ValueError, match="max_calls_per_turn"):
        toolflow.Policy(max_calls_per_turn=0)
    spec = tmp_path / "tools.yaml"
    spec.write_text("toolflow: 1\ntools: {}\npolicy:\n  max_calls_per_turn: 0\n", encoding="utf-8")
    assert [d.code for d in toolflow.load_specs([spec]).diagnostics] == ["TF104"]  # the schema's minimum
    spec.write_text("toolflow: 1\ntools: {}\npolicy:\n  max_calls_per_turn: 16\n", encoding="utf-8")
    assert toolflow.Policy.from_specs(toolflow.load_specs([spec])).max_calls_per_turn == 16


async def test_hung_sync_tools_do_not_exhaust_the_thread_pool(setup: Setup) -> None:
    """With 2 threads, three hung sync tools time out and a quick sync tool still runs."""
    registry, plugins, _ = setup
    with trio.fail_after(10):
        async with open_engine(registry, plugins=plugins, max_threads=2) as engine:
            hung = await engine.run_batch([{"tool": "hang_sync"}] * 3)
            quick = await engine.call("quick_sync", {})
    assert [(r.success, r.error) for r in hung] == [(False, "Error: tool 'hang_sync' timed out after 1s")] * 3
    assert (quick.success, quick.data) == (True, "quick")


_CALL = st.tuples(st.sampled_from(PROPERTY_KINDS), st.sampled_from([0, 0.5, 1, 2.5, 4]))
_ACTION = st.one_of(
    st.just(None),
    st.tuples(st.sampled_from(["stop", "kill"]), st.floats(min_value=0, max_value=6, allow_nan=False)),
)


@hypothesis.settings(max_examples=300, deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(calls=st.lists(_CALL, max_size=8), action=_ACTION, limit=st.sampled_from([1, 2, 64]))
def test_every_call_gets_one_result_or_the_batch_aborts_whole(
    module_setup: Setup, calls: list[tuple[str, float]], action: tuple[str, float] | None, limit: int
) -> None:
    """Any batch, stopped or killed at any virtual moment: one entry per call in order, or one abort naming every call."""
    registry, plugins, _ = module_setup
    raw = [_call(f"id{n}", kind, delay) for n, (kind, delay) in enumerate(calls)]
    ids = tuple(f"id{n}" for n in range(len(calls)))
    box: dict[str, Any] = {}

    async def main() -> None:
        async with (
            open_engine(registry, plugins=plugins, max_concurrency=limit) as engine,
            trio.open_nursery() as nursery,
        ):

            async def interrupt(kind: str, delay: float) -> None:
                await trio.sleep(delay)
                box["at"] = trio.current_time()
                engine.kill() if kind == "kill" else engine.request_stop()

            if action is not None:
                nursery.start_soon(interrupt, *action)
            box["outcome"] = await engine.execute_batch(raw)
            box["end"] = trio.current_time()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    outcome = box["outcome"]
    hypothesis.event(f"abort: {outcome.reason}" if isinstance(outcome, Abort) else "entries")
    interrupted = "at" in box and box["at"] <= box["end"]
    malformed = sum(kind == "malformed" for kind, _ in calls)
    if isinstance(outcome, Abort) and outcome.reason == "malformed_calls":
        assert (outcome.call_ids, outcome.finished, malformed > 3) == (ids, (), True)
        return
    assert malformed <= 3
    if isinstance(outcome, Abort):
        assert outcome.call_ids == ids
        assert len(set(outcome.call_ids)) == len(ids)
        assert interrupted
        assert outcome.reason == action[0] + ("ed" if action[0] == "kill" else "ped")  # type: ignore[index]
        if outcome.reason == "killed":
            assert outcome.finished == ()
        assert {entry.call_id for entry in outcome.finished} <= set(ids)
        return
    assert tuple(entry.call_id for entry in outcome) == ids
    first_danger = next((n for n, (kind, _) in enumerate(calls) if kind == "danger"), None)
    first_ok = next((n for n, (kind, _) in enumerate(calls) if kind == "ok"), len(calls))
    for n, (entry, (kind, _)) in enumerate(zip(outcome, calls, strict=True)):
        succeeds = kind in {"ok", "cached", "limited"} or n == first_danger or (kind == "needs_ok" and first_ok < n)
        assert entry.success is succeeds, (n, kind, entry.result)
        if kind == "flaky":
            assert entry.result.extra["attempts"] == 3
        if kind in {"malformed", "unknown"}:
            assert (entry.result.error or "").startswith(("Error: Invalid JSON arguments", "Error: Unknown tool"))
        if kind == "danger" and n != first_danger:
            assert "one dangerous action per turn" in (entry.result.error or "")
        if kind in {"slow", "hang"}:
            assert (entry.result.error or "").startswith(f"Error: tool {entry.tool_name!r} timed out after")


async def test_calls_of_a_tool_with_a_concurrency_limit_run_in_call_order(tmp_path: Path) -> None:
    """`concurrency: 1`: a turn's calls of the tool run one at a time in the order the model made them."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        """\
toolflow: 1
tools:
  log:
    description: Appends to a log, one call at a time.
    concurrency: 1
    parameters:
      type: object
      properties:
        n: {type: integer, description: Which call.}
      required: [n]
    implementation: order.log
  free:
    description: No limit.
    implementation: order.free
""",
        encoding="utf-8",
    )
    seen: list[int] = []

    class Order:
        @toolflow.hookimpl
        def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
            async def log(n: int) -> int:
                await trio.sleep(0.01)
                seen.append(n)
                return n

            async def free() -> str:
                return "ok"

            register("order.log", log)
            register("order.free", free)

    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Order(), "order")
    registry = toolflow.load_registry([spec], plugins=plugins)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            for _ in range(20):  # trio starts tasks in a random order: one lucky run proves nothing
                seen.clear()
                calls = [{"id": f"c{n}", "name": "log", "arguments": {"n": n}} for n in range(6)]
                results = await engine.run_batch([*calls[:3], {"id": "f", "name": "free", "arguments": {}}, *calls[3:]])
                assert seen == list(range(6))
                assert [result.data for result in results] == [0, 1, 2, "ok", 3, 4, 5]
