"""Benchmark the executor (issue 15, section 1): per-call cost, invoke, batches that grow linearly.

1. Per call: ``await engine.call("add", {"a": 1, "b": 2})`` on a trivial async tool with a
   timeout, ``await toolflow.invoke(...)`` of the same tool, and the floor, a bare
   ``await add(a=1, b=2)`` under a cancel scope with a deadline (the engine cannot time a call
   out with less), plus ``trio.fail_after`` and a scope without a deadline for reference. They
   run interleaved in short rounds in one ``trio.run`` so that they share the machine's noise;
   the table reports the median and the best round. Targets: ``engine.call`` at most 2x the
   floor; ``invoke`` not slower than ``engine.call``.
2. Batches: N calls that each ``await trio.sleep(0.05)`` in one ``engine.run_batch`` with
   ``max_concurrency=N``, against a bare nursery running the same sleeps, for N = 1,000 and
   10,000. The contenders take turns, run after run; wall time is the median of the runs;
   memory is the ``tracemalloc`` peak of a separate run. Targets: the cost per call above the
   50 ms floor at 10,000 calls at most 1.3x that at 1,000; peak memory at most 4 KiB per call
   above the bare nursery's. The same growth is printed for the bare nursery (trio's own) and
   for the engine's own part of a call, its cost above the nursery's; ``--collector-off`` times the
   batches with the garbage collector off, which sets its passes apart from the code's own cost;
   ``--count-calls`` counts the function calls per call of each batch (``sys.setprofile``), which
   are flat if the engine's work per call does not grow with the batch.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_executor.py
    .venv/bin/python tests/bench/bench_executor.py --rounds 50 --calls 2000 --repeats 5
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import toolflow
from toolflow._executor import Engine, open_engine

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
  nap:
    description: Sleep 50 ms.
    parameters: {type: object, properties: {}}
    timeout: 5s
    implementation: bench.nap
"""

BATCHES = (1_000, 10_000)
NAP = 0.05


async def add(a: int, b: int) -> int:
    """The trivial tool of the overhead benchmark."""
    return a + b


async def nap() -> str:
    """The tool of the batch benchmark."""
    await trio.sleep(NAP)
    return "ok"


class Bench:
    """The plugin binding ``bench.add`` and ``bench.nap``."""

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """Bind the two tools."""
        register("bench.add", add)
        register("bench.nap", nap)


def _registry(folder: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    spec = folder / "bench.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Bench(), "bench")
    return toolflow.load_registry([spec], plugins=plugins), plugins


# --- 1. per-call overhead -------------------------------------------------------------------


async def _engine_round(engine: Engine, calls: int) -> float:
    arguments = {"a": 1, "b": 2}
    start = time.perf_counter()
    for _ in range(calls):
        await engine.call("add", arguments)
    return (time.perf_counter() - start) / calls


async def _invoke_round(tool: toolflow.RegisteredTool, calls: int) -> float:
    arguments = {"a": 1, "b": 2}
    start = time.perf_counter()
    for _ in range(calls):
        await toolflow.invoke(tool, arguments)
    return (time.perf_counter() - start) / calls


async def _deadline_round(calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        with trio.CancelScope(deadline=trio.current_time() + 5):
            await add(a=1, b=2)
    return (time.perf_counter() - start) / calls


async def _fail_after_round(calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        with trio.fail_after(5):
            await add(a=1, b=2)
    return (time.perf_counter() - start) / calls


async def _scope_round(calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        with trio.CancelScope():
            await add(a=1, b=2)
    return (time.perf_counter() - start) / calls


ENGINE = "engine.call"
INVOKE = "toolflow.invoke"
FLOOR = "bare await under CancelScope(deadline=now + 5)"


async def _overhead(
    registry: toolflow.Registry, plugins: toolflow.Plugins, rounds: int, calls: int
) -> dict[str, list[float]]:
    async with open_engine(registry, plugins=plugins) as engine:
        check = await engine.call("add", {"a": 1, "b": 2})
        assert check.success and check.data == 3, check  # noqa: PT018 - a script, not a test
        tool = registry.get("add")
        contenders: dict[str, Callable[[int], Awaitable[float]]] = {
            ENGINE: lambda n: _engine_round(engine, n),
            INVOKE: lambda n: _invoke_round(tool, n),
            FLOOR: _deadline_round,
            "bare await under trio.fail_after(5)": _fail_after_round,
            "bare await under CancelScope() (no deadline)": _scope_round,
        }
        for round_ in contenders.values():  # warm up: resolve the binding, fill caches
            await round_(calls)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, round_ in contenders.items():
                gc.collect()
                times[name].append(await round_(calls))
    return times


# --- 2. batches of concurrent sleeps ----------------------------------------------------------


def _bare_batch(size: int) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(size):
                nursery.start_soon(trio.sleep, NAP)

    return run


def _engine_batch(registry: toolflow.Registry, plugins: toolflow.Plugins, size: int) -> Callable[[], Awaitable[None]]:
    calls = [{"tool": "nap", "parameters": {}} for _ in range(size)]

    async def run() -> None:
        # One batch of `size` calls, as an application's own bulk run: the policy lets a turn make that many.
        policy = toolflow.Policy(max_calls_per_turn=size)
        async with open_engine(registry, plugins=plugins, max_concurrency=size, policy=policy) as engine:
            results = await engine.run_batch(calls)
        assert len(results) == size
        assert all(r.success for r in results), next(r for r in results if not r.success)

    return run


def _walls(contenders: dict[str, Callable[[], Awaitable[None]]], repeats: int, *, collector: bool) -> dict[str, float]:
    """The median wall time of each contender; they take turns so that they share the noise.

    With *collector* false, the garbage collector is off during each run: what is left is the
    code's own cost, without the collector's passes over the calls in flight.
    """
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, run in contenders.items():
            gc.collect()
            if not collector:
                gc.disable()
            try:
                start = time.perf_counter()
                trio.run(run)
                times[name].append(time.perf_counter() - start)
            finally:
                gc.enable()
    return {name: statistics.median(values) for name, values in times.items()}


def _calls_made(run: Callable[[], Awaitable[None]]) -> int:
    """The Python and C function calls of one run of *run* (after a warm-up), with the collector off."""
    made = 0

    def count(_frame: object, event: str, _arg: object) -> None:
        nonlocal made
        if event in ("call", "c_call"):
            made += 1

    trio.run(run)
    gc.collect()
    gc.disable()
    sys.setprofile(count)
    try:
        trio.run(run)
    finally:
        sys.setprofile(None)
        gc.enable()
    return made


def _peak(run: Callable[[], Awaitable[None]]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        trio.run(run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def main() -> None:
    """Run both benchmarks and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of the overhead benchmark (default 30)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each batch for its median wall time")
    parser.add_argument(
        "--collector-off",
        action="store_true",
        help="time the batches with the garbage collector off, to set its passes apart from the code's own cost",
    )
    parser.add_argument(
        "--count-calls",
        action="store_true",
        help="also count the function calls per call of each batch (a profile: is the engine's work per call flat?)",
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        registry, plugins = _registry(Path(folder))
        times = trio.run(_overhead, registry, plugins, options.rounds, options.calls)
        print(
            f"Python {platform.python_version()}, trio {trio.__version__}, "
            f"{options.rounds} rounds of {options.calls:,} calls\n"
        )
        print("| per call | median (µs) | best round (µs) |")
        print("|---|---:|---:|")
        for name, values in times.items():
            print(f"| {name} | {statistics.median(values) * 1e6:.2f} | {min(values) * 1e6:.2f} |")
        engine_median = statistics.median(times[ENGINE])
        floor_median = statistics.median(times[FLOOR])
        print(f"\nengine overhead over the floor: {(engine_median - floor_median) * 1e6:.2f} µs per call\n")

        invoke_median = statistics.median(times[INVOKE])
        print(f"engine.call / floor: {engine_median / floor_median:.2f}x (target at most 2x)")
        print(f"invoke / engine.call: {invoke_median / engine_median:.2f}x (target at most 1x)\n")

        contenders: dict[str, Callable[[], Awaitable[None]]] = {}
        for size in BATCHES:
            contenders[f"bare nursery, {size:,}"] = _bare_batch(size)
            contenders[f"run_batch, {size:,}"] = _engine_batch(registry, plugins, size)
        walls = _walls(contenders, options.repeats, collector=not options.collector_off)
        peaks = {name: _peak(run) for name, run in contenders.items()}
        print(
            f"concurrent calls of `trio.sleep({NAP})`, max_concurrency at the batch size, median of {options.repeats} runs"
            f"{', the garbage collector off' if options.collector_off else ''}\n"
        )
        print(
            "| calls | nursery (s) | run_batch (s) | vs nursery | per call above 50 ms (µs) | extra memory per call (KiB) |"
        )
        print("|---:|---:|---:|---:|---:|---:|")
        above: dict[int, float] = {}
        for size in BATCHES:
            bare, engine = f"bare nursery, {size:,}", f"run_batch, {size:,}"
            above[size] = (walls[engine] - NAP) / size
            extra = (peaks[engine] - peaks[bare]) * 1024 / size
            print(
                f"| {size:,} | {walls[bare]:.3f} | {walls[engine]:.3f} | {walls[engine] / walls[bare]:.2f}x | "
                f"{above[size] * 1e6:.1f} | {extra:.2f} |"
            )
        small, large = BATCHES
        print(
            f"\nper call above the floor, {large:,} / {small:,}: {above[large] / above[small]:.2f}x (target at most 1.3x)"
        )
        nursery = {size: (walls[f"bare nursery, {size:,}"] - NAP) / size for size in BATCHES}
        print(f"the same for the bare nursery (trio's own growth): {nursery[large] / nursery[small]:.2f}x")
        own = {size: above[size] - nursery[size] for size in BATCHES}
        print(
            f"the engine's own cost per call (run_batch less the nursery), {large:,} / {small:,}: "
            f"{own[large] / own[small]:.2f}x ({own[small] * 1e6:.1f} and {own[large] * 1e6:.1f} µs)"
        )
        if options.count_calls:
            made = {size: _calls_made(contenders[f"run_batch, {size:,}"]) / size for size in BATCHES}
            print(
                f"function calls per call of run_batch: {made[small]:,.1f} at {small:,}, {made[large]:,.1f} at "
                f"{large:,} ({made[large] / made[small]:.3f}x)"
            )


if __name__ == "__main__":
    main()
