"""Calibrate the executor's per-call target against the libraries issue 4 quotes, side by side in one run.

Issue 4 puts its per-call target (8 us through ``engine.call``) next to numbers "on the same
machine": a bare await under a trio cancel scope about 6.5 us, LangChain's
``StructuredTool.ainvoke`` about 196 us, the OpenAI Agents SDK's tool invocation about 12 us.
Machines differ from day to day (``docs/performance.md``), so this script measures all of them in
one process, round after round, and says what the target becomes when scaled by each reference:

- ``toolflow``: ``await engine.call("add", {"a": 1, "b": 2})`` on a trivial async tool with
  ``timeout: 5s`` (as ``bench_executor.py``), under ``trio.run``;
- trio: a bare ``await add(a=1, b=2)`` under ``trio.CancelScope()`` and under a scope with a
  deadline;
- LangChain: ``StructuredTool.from_function(coroutine=add).ainvoke({"a": 1, "b": 2})``, under
  ``asyncio.run`` (no timeout);
- OpenAI Agents SDK: ``function_tool(add).on_invoke_tool(ctx, '{"a": 1, "b": 2}')``, what its
  runner calls for a model's tool call (JSON arguments, validated), under ``asyncio.run`` (no
  timeout).

Each round runs every contender once (``--calls`` calls each); the first round is a warm-up.

With ``--loop``, also issue 5's loop benchmark against its reference: a scripted model making
200 tool calls, one per turn, through toolflow's ``Agent.run`` (openai format, as
``bench_loop.py``), through a minimal hand-written loop, and through LangChain's ``create_agent``
with a chat model that replays the same turns (issue 5: about 1,300 us a call there, 22 us for
the hand-written loop, target 50 us).

Run it from the repository root (not collected by pytest); it needs the ``bench`` extra::

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python tests/bench/bench_compare.py
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import trio
from bench_executor import _registry

import toolflow

try:
    from agents import function_tool
    from agents.tool_context import ToolContext
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - a usage message, not a test
    raise SystemExit(f"{exc}: install the bench extra first: .venv/bin/pip install -e '.[bench]'") from None

ISSUE = {"trio scope": 6.5, "LangChain": 196.0, "Agents SDK": 12.0}
"""The issue's reference numbers (us), by the row that measures the same thing here."""
TARGET = 8.0


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _timed(calls: int, make: Callable[[], Awaitable[Any]]) -> Callable[[], Coroutine[Any, Any, float]]:
    async def run() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await make()
        return (time.perf_counter() - start) / calls

    return run


async def _trio_round(engine: toolflow.Engine, calls: int, results: dict[str, list[float]]) -> None:
    arguments = {"a": 1, "b": 2}

    async def scope() -> None:
        with trio.CancelScope():
            await add(a=1, b=2)

    async def deadline() -> None:
        with trio.CancelScope(deadline=trio.current_time() + 5):
            await add(a=1, b=2)

    results["toolflow `engine.call`, with a timeout"].append(
        await _timed(calls, lambda: engine.call("add", arguments))()
    )
    results["trio: await under `CancelScope()` (trio scope)"].append(await _timed(calls, scope)())
    results["trio: await under a scope with a deadline"].append(await _timed(calls, deadline)())


class _ReplayedChat(FakeMessagesListChatModel):
    """LangChain's fake chat model, answering with the transcript's turns whatever tools it is given."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> _ReplayedChat:
        return self


async def _langchain_agent_per_call(calls: int) -> float:
    """Seconds per tool call of a create_agent session of *calls* tool calls, then a final answer."""
    turns: list[BaseMessage] = [
        AIMessage(
            content="", tool_calls=[{"name": "add", "args": {"a": n, "b": 1}, "id": f"call_{n}", "type": "tool_call"}]
        )
        for n in range(calls)
    ]
    turns.append(AIMessage(content=f"The last sum is {calls}."))
    agent = create_agent(_ReplayedChat(responses=turns), tools=[add])
    start = time.perf_counter()
    state = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Add them up."}]}, {"recursion_limit": 4 * calls}
    )
    elapsed = time.perf_counter() - start
    if state["messages"][-1].content != f"The last sum is {calls}.":
        msg = f"the LangChain agent went wrong: {state['messages'][-1]!r}"
        raise AssertionError(msg)
    return elapsed / calls


def _compare_loop(rounds: int) -> None:
    """Issue 5's loop benchmark: toolflow, the hand-written loop and LangChain's create_agent."""
    import bench_loop

    calls = bench_loop.CALLS
    times: dict[str, list[float]] = {
        "toolflow `Agent.run`, openai": [],
        "hand-written loop": [],
        "LangChain `create_agent`": [],
    }

    async def trio_round() -> None:
        with tempfile.TemporaryDirectory() as folder:
            registry, plugins, policy = bench_loop._setup(Path(folder))
            document = bench_loop._transcript(calls)
            async with toolflow.open_engine(registry, plugins=plugins) as engine:
                toolflow_round = bench_loop._toolflow_round(
                    engine, policy, str(Path(folder) / "t.yaml"), document, "openai"
                )
                hand_round = bench_loop._hand_round(bench_loop._assistant_messages(calls))
                await toolflow_round(calls)
                await hand_round(calls)
                times["toolflow `Agent.run`, openai"].append((await toolflow_round(calls))[0])
                times["hand-written loop"].append((await hand_round(calls))[0])

    for _ in range(rounds):
        trio.run(trio_round)
        times["LangChain `create_agent`"].append(asyncio.run(_langchain_agent_per_call(calls)))
    print()
    print(f"Issue 5's loop, {calls} tool calls a session, {rounds - 1} rounds after a warm-up")
    print()
    print("| per tool call | median (us) | issue (us) | machine factor | the 50 us target here (us) |")
    print("|---|---:|---:|---:|---:|")
    reference = {"hand-written loop": 22.0, "LangChain `create_agent`": 1300.0}
    for name, values in times.items():
        median = statistics.median(values[1:] or values) * 1e6
        issue = reference.get(name)
        if issue is None:
            print(f"| {name} | {median:.1f} | - | - | - |")
        else:
            factor = issue / median
            print(f"| {name} | {median:.1f} | {issue:g} | {factor:.2f}x | {50 / factor:.1f} |")


def main() -> None:
    """Measure, then print the table and the target scaled by each reference."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12, help="rounds, the first a warm-up (default 12)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per contender and round (default 2000)")
    parser.add_argument("--loop", action="store_true", help="also compare issue 5's loop with LangChain's create_agent")
    args = parser.parse_args()

    langchain = StructuredTool.from_function(coroutine=add, name="add", description="Add two integers.")
    sdk = function_tool(add)
    context = ToolContext(context=None, tool_name="add", tool_call_id="call_1", tool_arguments='{"a": 1, "b": 2}')
    results: dict[str, list[float]] = {
        "toolflow `engine.call`, with a timeout": [],
        "trio: await under `CancelScope()` (trio scope)": [],
        "trio: await under a scope with a deadline": [],
        "LangChain `StructuredTool.ainvoke` (LangChain)": [],
        "Agents SDK `FunctionTool.on_invoke_tool` (Agents SDK)": [],
    }

    async def trio_main() -> None:
        with tempfile.TemporaryDirectory() as folder:
            registry, plugins = _registry(Path(folder))
            async with toolflow.open_engine(registry, plugins=plugins) as engine:
                await engine.call("add", {"a": 1, "b": 2})
                await _trio_round(engine, args.calls, results)

    for _ in range(args.rounds):
        trio.run(trio_main)
        lc = _timed(args.calls, lambda: langchain.ainvoke({"a": 1, "b": 2}))
        results["LangChain `StructuredTool.ainvoke` (LangChain)"].append(asyncio.run(lc()))
        agents = _timed(args.calls, lambda: sdk.on_invoke_tool(context, '{"a": 1, "b": 2}'))
        results["Agents SDK `FunctionTool.on_invoke_tool` (Agents SDK)"].append(asyncio.run(agents()))

    print(
        f"Python {platform.python_version()}, trio {trio.__version__}; {args.rounds - 1} rounds of {args.calls} calls"
    )
    print()
    print("| per call | median (us) | best round (us) |")
    print("|---|---:|---:|")
    medians: dict[str, float] = {}
    for name, times in results.items():
        kept = times[1:] or times
        medians[name] = statistics.median(kept) * 1e6
        print(f"| {name} | {medians[name]:.2f} | {min(kept) * 1e6:.2f} |")
    print()
    ours = medians["toolflow `engine.call`, with a timeout"]
    print("| reference | issue (us) | here (us) | machine factor | the 8 us target here (us) | met |")
    print("|---|---:|---:|---:|---:|---|")
    for name, measured in medians.items():
        for label, issue in ISSUE.items():
            if name.endswith(f"({label})"):
                factor = issue / measured
                target = TARGET / factor
                print(
                    f"| {label} | {issue:g} | {measured:.2f} | {factor:.2f}x | {target:.2f} | "
                    f"{'yes' if ours <= target else 'no'} ({ours:.2f}) |"
                )
    if args.loop:
        _compare_loop(max(2, args.rounds // 2))


if __name__ == "__main__":
    main()
