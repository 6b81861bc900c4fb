"""Benchmark persistent cache hits through the engine against the same SQLite read in a worker thread (issue 14, §4).

Target: a persistent hit through ``Engine.call`` costs at most 1.5x the same SQLite read done in
a worker thread. The contenders, on a file of 10,000 results of a small ``look(where, n)`` tool:

- ``Engine.call`` hit: ``await engine.call("look", ARGS)`` on a tool whose cache scope is
  ``persistent``; everything a hit costs (validation, the key, the look-up in a worker thread
  under the call's cache timeout, checking the row's key and checksum, decoding the result);
- the same read in a worker thread: ``await trio.to_thread.run_sync(read)``, where ``read``
  runs the engine's ``SELECT`` for the same key on its own connection to the same file;
- for scale, the synchronous parts: ``cache_key`` alone, a ``MemoryCache`` hit, a
  ``SQLiteCache.get`` hit and miss on the calling thread.

The contenders run interleaved in short rounds (the first round is a warm-up), in ``--runs``
separate runs; each run reports the median per call, and its ratio is the median over its
rounds of the hit against the bare read of the same round (the machine's load changes from
round to round). The result is the median of the runs' ratios.

Then the real cost of a lock: misses (the tool runs) on the file, then the same while another
connection holds an exclusive lock on it (``locking_mode = EXCLUSIVE`` and ``BEGIN
EXCLUSIVE``): the look-up gives up, the tool runs, the store is skipped. Target: the lock costs
a call at most the 50ms cache timeout. Run it from the repository
root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_cache.py
    .venv/bin/python tests/bench/bench_cache.py --runs 5 --rounds 60 --calls 500
"""

from __future__ import annotations

import argparse
import gc
import platform
import sqlite3
import statistics
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import toolflow
from toolflow._cache import MemoryCache, SQLiteCache, cache_key
from toolflow._executor import Engine, open_engine
from toolflow._results import ToolResult

SPEC = """\
toolflow: 1
tools:
  look:
    description: Look around.
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        where: {type: string, description: Where to look}
        n: {type: integer, description: How many things}
      required: [where, n]
    implementation: bench.look
"""
ARGS = {"where": "kitchen", "n": 3}
DATA = {"location": "kitchen", "items": ["kettle", "knife", "bread"], "exits": ["hall", "garden"]}
FILLER = ToolResult(success=True, data=DATA)
HIT = "Engine.call, persistent hit"
READ = "the same SQLite read in a worker thread"
SELECT = (
    "SELECT key, CASE WHEN length(value) <= ? THEN value END, expires_at, checksum FROM toolflow_cache WHERE key = ?"
)


class Bench:
    """The plugin of the tool ``look``."""

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """The implementation ``bench.look``."""

        async def look(where: str, n: int) -> dict[str, Any]:
            return {**DATA, "location": where, "n": n}

        register("bench.look", look)


def _registry(folder: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    spec = folder / "bench.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Bench(), "bench")
    return toolflow.load_registry([spec], plugins=plugins), plugins


async def _filled(engine: Engine, registry: toolflow.Registry, path: Path) -> str:
    """Fill *path* with 10,000 other results and store ARGS's through the engine; return its key."""
    spec = registry.get("look").spec
    filler = SQLiteCache(path)
    for i in range(10_000):  # a realistically filled file: the hit is one B-tree look-up among many keys
        key = cache_key(spec, {"where": f"room {i}", "n": i})
        assert key is not None
        filler.set(key, FILLER, 3600.0)
    filler.close()
    stored = await engine.call("look", ARGS)
    hit = await engine.call("look", ARGS)
    assert stored.success
    assert hit.extra["cached"] is True
    key = cache_key(spec, ARGS)
    assert key is not None
    return key


async def _round(run: Callable[[], Awaitable[object]], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await run()
    return (time.perf_counter() - start) / calls * 1e6


async def _one_run(folder: Path, rounds: int, calls: int) -> tuple[dict[str, float], float]:
    """One run: every contender round after round; the median per call (us) of each, and the hit's ratio.

    The ratio is the median over rounds of the engine's hit against the bare read of the same
    round, so that a change in the machine's load between rounds cancels out.
    """
    registry, plugins = _registry(folder)
    path = folder / "cache.sqlite3"
    async with open_engine(registry, plugins=plugins, cache_path=path) as engine:
        key = await _filled(engine, registry, path)
        stored_key = key.encode()
        reader = sqlite3.connect(path, check_same_thread=False)
        memory = MemoryCache()
        memory.set(key, FILLER, 3600.0)
        direct = SQLiteCache(path)
        spec = registry.get("look").spec

        def read() -> object:
            return reader.execute(SELECT, (16 * 1024 * 1024, stored_key)).fetchone()

        async def engine_hit() -> object:
            return await engine.call("look", ARGS)

        async def thread_read() -> object:
            return await trio.to_thread.run_sync(read)

        async def sync(function: Callable[[], object]) -> object:
            return function()

        contenders: dict[str, Callable[[], Awaitable[object]]] = {
            HIT: engine_hit,
            READ: thread_read,
            "cache_key only": lambda: sync(lambda: cache_key(spec, ARGS)),
            "MemoryCache hit": lambda: sync(lambda: memory.get(key)),
            "SQLiteCache.get hit, calling thread": lambda: sync(lambda: direct.get(key)),
            "SQLiteCache.get miss, calling thread": lambda: sync(lambda: direct.get("look:none:{}")),
        }
        assert read() is not None
        assert direct.get(key) is not None
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        gc.disable()
        try:
            for index in range(rounds + 1):
                for name, run in contenders.items():
                    value = await _round(run, calls)
                    if index:  # the first round warms up
                        samples[name].append(value)
        finally:
            gc.enable()
            reader.close()
            direct.close()
    pairs = zip(samples[HIT], samples[READ], strict=True)
    return {name: statistics.median(values) for name, values in samples.items()}, statistics.median(
        hit / read for hit, read in pairs
    )


async def _misses(engine: Engine, calls: int, first: int) -> list[float]:
    """Milliseconds each of *calls* new calls (misses: the tool runs) takes."""
    waits: list[float] = []
    for n in range(first, first + calls):
        start = time.perf_counter()
        result = await engine.call("look", {"where": "hall", "n": n})
        waits.append((time.perf_counter() - start) * 1000)
        assert result.success
        assert "cached" not in result.extra
    return waits


async def _locked_waits(folder: Path, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds each miss takes on the cache file, then while another connection holds an exclusive lock on it."""
    registry, plugins = _registry(folder)
    path = folder / "locked.sqlite3"
    async with open_engine(registry, plugins=plugins, cache_path=path) as engine:
        await engine.call("look", ARGS)
        unlocked = await _misses(engine, calls, 0)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", toolflow.CacheWarning)
            async with open_engine(registry, plugins=plugins, cache_path=path) as engine:
                locked = await _misses(engine, calls, calls)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    return unlocked, locked


def main() -> None:
    """Run the benchmark and print markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="separate runs (default 3)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds per run (default 40)")
    parser.add_argument("--calls", type=int, default=500, help="calls per round (default 500)")
    parser.add_argument("--locked-calls", type=int, default=20, help="calls on the locked file (default 20)")
    options = parser.parse_args()
    runs: list[dict[str, float]] = []
    ratios: list[float] = []
    for _ in range(options.runs):
        with tempfile.TemporaryDirectory() as folder:
            medians, ratio = trio.run(_one_run, Path(folder), options.rounds, options.calls)
        runs.append(medians)
        ratios.append(ratio)
    with tempfile.TemporaryDirectory() as folder:
        unlocked, locked = trio.run(_locked_waits, Path(folder), options.locked_calls)
    print(
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, trio {trio.__version__}, "
        f"{platform.machine()}; {options.runs} runs of {options.rounds} rounds x {options.calls} calls\n"
    )
    print("| per call | " + " | ".join(f"run {i + 1} (µs)" for i in range(len(runs))) + " | median (µs) |")
    print("|---|" + "---:|" * (len(runs) + 1))
    for name in runs[0]:
        values = [run[name] for run in runs]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {statistics.median(values):.2f} |")
    print(
        "\nEngine.call hit / the same read in a worker thread, median of each run's rounds: "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + f"; median {statistics.median(ratios):.2f}x (target: at most 1.5x)"
    )
    cost = statistics.median(locked) - statistics.median(unlocked)
    print(
        f"\nA miss ({len(locked)} calls each): {statistics.median(unlocked):.1f} ms median on the file, "
        f"{statistics.median(locked):.1f} ms (longest {max(locked):.1f} ms) while another connection holds an "
        f"exclusive lock on it; the lock costs a call {cost:.1f} ms (target: at most 50 ms)"
    )


if __name__ == "__main__":
    main()
