"""Benchmark the agent loop (issue 5, section 6): microseconds per tool call through ``Agent.run``.

A scripted model issues 200 sequential tool calls, one per turn, to a trivial async tool
``add(a: int, b: int)`` (with a ``timeout`` in its spec), then a final answer. Each round runs
that whole session through :meth:`toolflow.Agent.run` (policy ``max_iterations: 1000``) and
reports the loop's wall time divided by the 200 calls. Everything a turn does is measured: the
``scripted`` provider writing its next turn in the history format (it renders the assistant
message anew each turn, as a real provider decodes one), reading the calls back, the engine
running them, the result messages, the continuation decision and the turn record.

Side by side, in the same ``trio.run``, a minimal hand-written loop does the same work the
simplest honest way: a list of pre-made OpenAI-style assistant messages with one tool call
each; per turn it asks its model for the next message (an async function that checkpoints once,
as trio asks of every async function and as the ``scripted`` provider does: issue 15), ``json.loads``
the arguments, checks the two ints by hand, awaits the tool under ``trio.fail_after``, and
appends the assistant message and a ``{"role": "tool", ...}`` message with ``json.dumps`` of the
result to a history list. A second hand-written row does the same with each model request in a
``trio.CancelScope`` of its own, the scope a kill cancels, which toolflow's loop gives every
request (issue 15): the last column compares each row with it.

A row runs the openai session again under a policy with one rule of each kind (issue 20), all of
which the session keeps (``first``, ``after``, ``max_calls``, ``before_exit``), so that each turn
pays for the rules' bookkeeping (what to offer, each call counted, the answer checked) without a
call refused (target: at most 1.2x the same loop without rules).

Two more rows show the engine's part of a turn on its own: ``Engine.execute_batch`` of one
parsed call (as the loop runs it) and ``Engine.call``, 200 calls each.

The contenders run interleaved, one session each per round, so that they share the machine's
noise; the table reports the median and the best round of the wall time, and the median CPU
time of the thread (less disturbed by the other work on a shared machine). Target: toolflow at
most 50 us per call (issue 5 puts the hand-written loop at about 22 us here). ``--profile``
adds where the time of the openai loop goes, step by step, from a cProfile of 5 sessions.

``--long-run`` measures instead whether a turn's cost grows with the length of the run (issue
15): one session of 5,000 turns through ``Agent.run``, each turn timed from the end of the one
before (``on_turn``), and the hand-written loop over as many turns; it reports the median turn
of turns 1-100 and of the last 100, and their ratio (target: at most 1.15x), for each of
``--rounds`` sessions and their median. To set another version of toolflow beside this one, run
the same command with ``PYTHONPATH`` pointing at its checkout, alternately.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_loop.py
    .venv/bin/python tests/bench/bench_loop.py --long-run --rounds 3
    .venv/bin/python tests/bench/bench_loop.py --rounds 40 --format openai --format text
    .venv/bin/python tests/bench/bench_loop.py --profile loop.prof   # also profile the openai loop
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import itertools
import json
import os
import platform
import pstats
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import yaml

import toolflow
from toolflow._calls import ToolCall
from toolflow._executor import Abort, Engine, open_engine
from toolflow._loop import Agent
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import ScriptedProvider

CALLS = 200
TIMEOUT = 5.0
FORMATS = ("openai", "anthropic", "fallback", "text")

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
    timeout: 5s
    implementation: bench.add
policy:
  max_iterations: 1000
"""


async def add(a: int, b: int) -> int:
    """The trivial tool."""
    return a + b


class Bench:
    """The plugin binding ``bench.add``."""

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """Bind the tool."""
        register("bench.add", add)


def _setup(folder: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Policy]:
    spec = folder / "bench.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Bench(), "bench")
    specs = toolflow.load_specs([spec], kinds=plugins.kind_schemas())
    assert specs.ok, [d.render() for d in specs.diagnostics]
    return toolflow.Registry.build(specs, plugins), plugins, Policy.from_specs(specs)


def _transcript(calls: int) -> dict[str, Any]:
    """The scripted session: *calls* turns of one ``add`` call each, then the final answer."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "add", "arguments": {"a": n, "b": 1}}]} for n in range(calls)
    ]
    turns.append({"text": f"The last sum is {calls}."})
    return {"prompt": "Add them up.", "turns": turns}


# --- toolflow -------------------------------------------------------------------------------

Round = Callable[[int], Awaitable[tuple[float, float]]]
"""One session of *calls* tool calls; returns its (wall, CPU) seconds per call."""


def _toolflow_round(
    engine: Engine,
    policy: Policy,
    path: str,
    document: Mapping[str, Any],
    history_format: str,
    profiler: cProfile.Profile | None = None,
) -> Round:
    async def run(calls: int) -> tuple[float, float]:
        # Reading the transcript and building the agent are set-up, outside the timing.
        provider = ScriptedProvider(path, document)
        agent = Agent(engine, provider, policy=policy, format=history_format)
        if profiler is not None:
            profiler.enable()
        start, cpu = time.perf_counter(), time.thread_time()
        result = await agent.run(str(document["prompt"]))
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
        if profiler is not None:
            profiler.disable()
        _check_toolflow(result, calls)
        return elapsed / calls, cpu / calls

    return run


def _check_toolflow(result: toolflow.LoopResult, calls: int) -> None:
    if result.reason != "final_answer" or len(result.turns) != calls + 1:
        msg = f"the loop ended with {result.reason!r} after {len(result.turns)} turns: {result.decision.message}"
        raise AssertionError(msg)
    sums = [entry.result.data for turn in result.turns for entry in turn.entries]
    if sums != [n + 1 for n in range(calls)]:
        msg = f"wrong results: {sums[:5]!r}..."
        raise AssertionError(msg)


def _batch_round(engine: Engine) -> Round:
    """The engine's part of a turn alone: ``execute_batch`` of one parsed call, as the loop calls it."""

    async def run(calls: int) -> tuple[float, float]:
        batches = [
            [ToolCall(id=f"call_{n}", name="add", arguments={"a": n, "b": 1}, format="openai")] for n in range(calls)
        ]
        engine.policy = Policy()  # no rules: the engine on its own, whatever policy the last agent set
        start, cpu = time.perf_counter(), time.thread_time()
        for batch in batches:
            engine.tick()
            outcome = await engine.execute_batch(batch)
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
        if isinstance(outcome, Abort) or outcome[0].result.data != calls:
            msg = f"execute_batch went wrong: {outcome!r}"
            raise AssertionError(msg)
        return elapsed / calls, cpu / calls

    return run


def _call_round(engine: Engine) -> Round:
    """One call through the engine without a batch: ``Engine.call``."""

    async def run(calls: int) -> tuple[float, float]:
        engine.policy = Policy()  # no rules: the engine on its own, whatever policy the last agent set
        start, cpu = time.perf_counter(), time.thread_time()
        for n in range(calls):
            result = await engine.call("add", {"a": n, "b": 1}, call_id=f"call_{n}")
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
        if result.data != calls:
            msg = f"Engine.call went wrong: {result!r}"
            raise AssertionError(msg)
        return elapsed / calls, cpu / calls

    return run


# --- the hand-written loop ------------------------------------------------------------------


def _assistant_messages(calls: int) -> list[dict[str, Any]]:
    """The pre-made model turns: one OpenAI tool call each, then the final answer."""
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"a": n, "b": 1})},
                }
            ],
        }
        for n in range(calls)
    ]
    messages.append({"role": "assistant", "content": f"The last sum is {calls}."})
    return messages


async def _hand_model(message: dict[str, Any]) -> dict[str, Any]:
    """The hand-written loop's model: the next pre-made message, after one checkpoint (a model call always has one)."""
    await trio.lowlevel.checkpoint()
    return message


async def _hand_loop(turns: list[dict[str, Any]], *, killable: bool = False) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Add them up."}]
    tools = {"add": add}
    for turn in turns:
        if killable:  # a scope a kill can cancel, around each model request, as toolflow's loop has (issue 15)
            with trio.CancelScope():
                message = await _hand_model(turn)
        else:
            message = await _hand_model(turn)
        history.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            function = call["function"]
            arguments = json.loads(function["arguments"])
            if not isinstance(arguments, dict):
                arguments = {}
            a, b = arguments.get("a"), arguments.get("b")
            if type(a) is not int or type(b) is not int:
                content = json.dumps({"success": False, "error": "a and b must be integers"})
            else:
                with trio.fail_after(TIMEOUT):
                    value = await tools[function["name"]](a=a, b=b)
                content = json.dumps({"success": True, "data": value})
            history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return history


def _hand_round(turns: list[dict[str, Any]], *, killable: bool = False) -> Round:
    async def run(calls: int) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.thread_time()
        history = await _hand_loop(turns, killable=killable)
        elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
        if len(history) != 2 * calls + 2 or json.loads(history[-2]["content"])["data"] != calls:
            msg = f"the hand-written loop went wrong: {history[-3:]!r}"
            raise AssertionError(msg)
        return elapsed / calls, cpu / calls

    return run


# --- the run --------------------------------------------------------------------------------

HAND = "hand-written loop (openai messages)"
KILLABLE = "hand-written loop, a cancel scope around each model request"
BATCH = "part of it: `Engine.execute_batch([call])` alone"
CALL = "part of it: `Engine.call` alone"


RULES = (
    toolflow.ToolRule(kind="first", tools=("add",)),
    toolflow.ToolRule(kind="after", tool="add", tools=("add",)),
    toolflow.ToolRule(kind="max_calls", tool="add", per_turn=5, per_run=1_000_000),
    toolflow.ToolRule(kind="before_exit", tools=("add",)),
)
"""One rule of each kind, all of which the bench's session keeps."""

RULED = "toolflow `Agent.run`, format openai, with policy rules"


def _label(history_format: str) -> str:
    return f"toolflow `Agent.run`, format {history_format}"


async def _measure(
    registry: toolflow.Registry,
    plugins: toolflow.Plugins,
    policy: Policy,
    path: str,
    formats: list[str],
    rounds: int,
    calls: int,
) -> dict[str, list[tuple[float, float]]]:
    document = _transcript(calls)
    async with open_engine(registry, plugins=plugins) as engine:
        contenders: dict[str, Round] = {
            _label(name): _toolflow_round(engine, policy, path, document, name) for name in formats
        }
        ruled = attrs.evolve(policy, rules=RULES)
        contenders[RULED] = _toolflow_round(engine, ruled, path, document, "openai")
        contenders[HAND] = _hand_round(_assistant_messages(calls))
        contenders[KILLABLE] = _hand_round(_assistant_messages(calls), killable=True)
        contenders[BATCH] = _batch_round(engine)
        contenders[CALL] = _call_round(engine)
        for round_ in contenders.values():  # warm up: resolve the binding, fill the formats' memos
            await round_(calls)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, round_ in contenders.items():
                gc.collect()
                times[name].append(await round_(calls))
    return times


# --- the long run -----------------------------------------------------------------------------

WINDOW = 100
"""Turns at each end of a long run whose median is compared."""


_clock = time.thread_time
"""The CPU time of the thread: the other tenants of a shared machine disturb it less than wall time,
and a window of 100 turns at the start and one at the end of a session cannot be interleaved."""


def _turn_costs(stamps: list[float]) -> list[float]:
    """The seconds of each turn, from the time stamps of the start and of each turn's end."""
    return [later - earlier for earlier, later in itertools.pairwise(stamps)]


def _ends(costs: list[float]) -> tuple[float, float]:
    """The median turn of the first and of the last :data:`WINDOW` turns (the final answer left out)."""
    return statistics.median(costs[:WINDOW]), statistics.median(costs[-WINDOW:])


async def _long_toolflow(engine: Engine, policy: Policy, path: str, document: Mapping[str, Any]) -> list[float]:
    stamps: list[float] = []
    provider = ScriptedProvider(path, document)
    agent = Agent(engine, provider, policy=policy, format="openai", on_turn=lambda _: stamps.append(_clock()))
    gc.collect()
    stamps.append(_clock())
    result = await agent.run(str(document["prompt"]))
    _check_toolflow(result, len(document["turns"]) - 1)
    return _turn_costs(stamps)[:-1]


async def _long_hand(turns: list[dict[str, Any]]) -> list[float]:
    """The hand-written loop of :func:`_hand_loop`, each turn timed."""
    stamps = [_clock()]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Add them up."}]
    for turn in turns[:-1]:
        message = await _hand_model(turn)
        history.append(message)
        for call in message["tool_calls"]:
            function = call["function"]
            arguments = json.loads(function["arguments"])
            a, b = arguments.get("a"), arguments.get("b")
            if type(a) is not int or type(b) is not int:
                content = json.dumps({"success": False, "error": "a and b must be integers"})
            else:
                with trio.fail_after(TIMEOUT):
                    value = await add(a=a, b=b)
                content = json.dumps({"success": True, "data": value})
            history.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        stamps.append(_clock())
    return _turn_costs(stamps)


async def _long_runs(
    registry: toolflow.Registry, plugins: toolflow.Plugins, policy: Policy, path: str, rounds: int, turns: int
) -> dict[str, list[tuple[float, float]]]:
    """*rounds* long sessions of each contender, interleaved: (first, last) median turn of each."""
    document = _transcript(turns)
    policy = attrs.evolve(policy, max_iterations=turns + 1)
    hand_turns = _assistant_messages(turns)
    ends: dict[str, list[tuple[float, float]]] = {"toolflow `Agent.run`, format openai": [], HAND: []}
    async with open_engine(registry, plugins=plugins) as engine:
        await _toolflow_round(engine, policy, path, _transcript(CALLS), "openai")(CALLS)  # warm up
        for _ in range(rounds):
            ends["toolflow `Agent.run`, format openai"].append(
                _ends(await _long_toolflow(engine, policy, path, document))
            )
            gc.collect()
            ends[HAND].append(_ends(await _long_hand(hand_turns)))
    return ends


def _print_long_runs(ends: dict[str, list[tuple[float, float]]], turns: int) -> None:
    print(
        f"Python {platform.python_version()}, trio {trio.__version__}, toolflow from "
        f"{Path(toolflow.__file__).parent.parent}; {len(next(iter(ends.values())))} interleaved sessions of "
        f"{turns} turns of one tool call each; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    print(
        f"| median turn, CPU | turns 1-{WINDOW} (µs) | turns {turns - WINDOW + 1}-{turns} (µs) "
        "| last / first, each session | median ratio |"
    )
    print("|---|---:|---:|---|---:|")
    for name, values in ends.items():
        first = statistics.median(f for f, _ in values)
        last = statistics.median(la for _, la in values)
        ratios = [la / f for f, la in values]
        each = ", ".join(f"{r:.2f}x" for r in ratios)
        print(f"| {name} | {_us(first)} | {_us(last)} | {each} | **{statistics.median(ratios):.2f}x** |")


# --- the profile ----------------------------------------------------------------------------

Function = tuple[str, str]
"""A profiled function: (file name, function name)."""

# The steps of a turn: (label, [(function, its callers to count, or () for all)]). Each entry is
# the cumulative time of the function when called from those callers, so a function the engine
# also calls (parse_tool_calls) is counted once, where the loop calls it.
_TURN: Function = ("_loop.py", "_turn")
_ANSWER: Function = ("_loop.py", "_answer")
_BATCH: Function = ("_executor.py", "execute_batch")
_RUN_ONE: Function = ("_executor.py", "run_one")
STEPS: tuple[tuple[str, tuple[tuple[Function, tuple[Function, ...]], ...]], ...] = (
    (
        "provider: `ScriptedProvider.complete` (writes the turn's assistant message)",
        ((("_scripted.py", "complete"), ()),),
    ),
    ("request: `Agent._request` (a view of the history, `ModelRequest`)", ((("_loop.py", "_request"), ()),)),
    (
        "parse: `format.read_response` + `parse_tool_calls`",
        ((("_history.py", "read_response"), (_TURN,)), (("_calls.py", "parse_tool_calls"), (_TURN,))),
    ),
    ("gate: `Agent._run_calls` without the engine (`tick`, category gate)", ((("_loop.py", "_run_calls"), ()),)),
    (
        "engine: `Engine.execute_batch` (and the batch's task: `Engine.call`)",
        ((("_executor.py", "execute_batch"), (("_loop.py", "_run_calls"),)), (("_executor.py", "run_one"), ())),
    ),
    ("history: `format.result_messages` (the result JSON)", ((("_history.py", "result_messages"), (_ANSWER,)),)),
    ("decision: `Agent._decide` + `Agent._advise`", ((("_loop.py", "_decide"), ()), (("_loop.py", "_advise"), ()))),
)
# What to subtract from a step's time: its callees that are steps of their own.
_MINUS: dict[str, tuple[tuple[Function, Function], ...]] = {
    "gate": ((("_executor.py", "execute_batch"), ("_loop.py", "_run_calls")),),
}


def _cumulative(
    stats: Any, function: Function, callers: tuple[Function, ...] = (), *, but: tuple[Function, ...] = ()
) -> float:
    """The cumulative seconds of *function*: of its calls from *callers* if given, else of all but those from *but*."""
    total = 0.0
    for (filename, _, name), (_, _, _, cumulative, by_caller) in stats.stats.items():
        if (Path(filename).name, name) != function:
            continue
        if not callers and not but:
            total += cumulative
            continue
        for (caller_file, _, caller_name), (_, _, _, caller_cumulative) in by_caller.items():
            caller = (Path(caller_file).name, caller_name)
            if (caller in callers) if callers else (caller not in but):
                total += caller_cumulative
    return total


def _profile(
    registry: toolflow.Registry, plugins: toolflow.Plugins, policy: Policy, path: str, calls: int, out: str
) -> tuple[list[tuple[str, float]], str]:
    """Profile a few openai sessions; save the stats to *out*.

    Returns:
        The share of the profiled time of each step of a turn (the rest: trio's scheduler and the
        loop's own lines), and the top functions by own time.
    """
    document = _transcript(calls)
    sessions = 5
    profiler = cProfile.Profile()

    async def run() -> None:
        async with open_engine(registry, plugins=plugins) as engine:
            await _toolflow_round(engine, policy, path, document, "openai")(calls)  # warm up, unprofiled
            round_ = _toolflow_round(engine, policy, path, document, "openai", profiler)
            for _ in range(sessions):
                await round_(calls)

    trio.run(run)
    profiler.dump_stats(out)
    stats = pstats.Stats(profiler)
    total: float = stats.total_tt  # type: ignore[attr-defined]
    shares: list[tuple[str, float]] = []
    for label, functions in STEPS:
        value = sum(
            # run_one is the batch's task; should execute_batch ever await it directly, it is counted there.
            _cumulative(stats, function, callers, but=(_BATCH,) if function == _RUN_ONE else ())
            for function, callers in functions
        )
        for callee, caller in _MINUS.get(label.split(":")[0], ()):
            value -= _cumulative(stats, callee, (caller,))
        shares.append((label, value / total))
    shares.append(
        ("the rest: trio's scheduler (the batch's task switch), the loop's own lines", 1 - sum(s for _, s in shares))
    )
    text = io.StringIO()
    top = pstats.Stats(profiler, stream=text)
    top.strip_dirs().sort_stats("tottime").print_stats(20)
    return shares, text.getvalue()


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def main() -> None:
    """Run the benchmark and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=20, help="timed sessions of each contender (default 20)")
    parser.add_argument("--calls", type=int, default=CALLS, help=f"tool calls per session (default {CALLS})")
    parser.add_argument(
        "--format",
        dest="formats",
        action="append",
        choices=FORMATS,
        help="history format of toolflow's loop; repeat for several (default: all four)",
    )
    parser.add_argument("--profile", metavar="OUT", help="also profile the openai loop; save the pstats to OUT")
    parser.add_argument(
        "--long-run",
        metavar="TURNS",
        type=int,
        nargs="?",
        const=5000,
        help="instead: is a turn's cost flat over one session of TURNS turns (default 5000)? --rounds sessions",
    )
    options = parser.parse_args()
    formats = options.formats or list(FORMATS)
    with tempfile.TemporaryDirectory() as folder:
        registry, plugins, policy = _setup(Path(folder))
        path = str(Path(folder) / "session.yaml")
        if options.long_run:
            ends = trio.run(_long_runs, registry, plugins, policy, path, options.rounds, options.long_run)
            _print_long_runs(ends, options.long_run)
            return
        Path(path).write_text(yaml.safe_dump(_transcript(options.calls)), encoding="utf-8")
        times = trio.run(_measure, registry, plugins, policy, path, formats, options.rounds, options.calls)
        print(
            f"Python {platform.python_version()}, trio {trio.__version__}; {options.rounds} rounds of one session "
            f"of {options.calls} tool calls (one per turn) and a final answer; load average "
            f"{', '.join(f'{load:.1f}' for load in os.getloadavg())}\n"
        )
        print(
            "| per tool call | median wall (µs) | best wall (µs) | median CPU (µs) | vs hand-written (wall) "
            "| vs hand-written with a scope per request (wall) |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        hand = statistics.median(wall for wall, _ in times[HAND])
        killable = statistics.median(wall for wall, _ in times[KILLABLE])
        for name, values in times.items():
            wall = statistics.median(w for w, _ in values)
            best = min(w for w, _ in values)
            cpu = statistics.median(c for _, c in values)
            print(f"| {name} | {_us(wall)} | {_us(best)} | {_us(cpu)} | {wall / hand:.2f}x | {wall / killable:.2f}x |")
        if options.profile:
            shares, top = _profile(registry, plugins, policy, path, options.calls, options.profile)
            cpu = statistics.median(c for _, c in times[_label("openai")])
            print(
                f"\nWhere the time of the openai loop goes: shares of a cProfile of 5 sessions (saved to "
                f"{options.profile}), applied to the median CPU time per call above ({_us(cpu)} µs)\n"
            )
            print("| step of a turn | share | ≈ µs per call |")
            print("|---|---:|---:|")
            for label, share in shares:
                print(f"| {label} | {share:.0%} | {_us(share * cpu)} |")
            print(f"\n```text\n{top.strip()}\n```")


if __name__ == "__main__":
    main()
