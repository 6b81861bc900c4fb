"""Benchmark cache hits: the persistent SQLite cache against the in-memory one (issue 4: SQLite ≤ 50 us median).

Each contender does ``cache.get(cache_key(spec, args))`` for a stored result of a small
``look(where, n)`` tool, the work the executor does before it skips a call: building the key
(canonical JSON) and the look-up (for SQLite: one indexed SELECT, ``json.loads`` and rebuilding
the ``ToolResult``). A bare ``cache_key`` is measured too. The contenders run interleaved in
short rounds so that they share the machine's noise; the table reports the median and the
fastest round per call. Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_cache.py
    .venv/bin/python tests/bench/bench_cache.py --rounds 50 --calls 5000
"""

from __future__ import annotations

import argparse
import gc
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from toolflow._cache import MemoryCache, SQLiteCache, cache_key
from toolflow._model import Implementation, ToolSpec
from toolflow._results import ToolResult

SPEC = ToolSpec(
    name="look",
    description="Look around.",
    parameters={"type": "object", "properties": {"where": {"type": "string"}, "n": {"type": "integer"}}},
    implementations=(Implementation(kind="implementation", config="demo.look"),),
)
ARGS = {"where": "kitchen", "n": 3}
RESULT = ToolResult(
    success=True,
    data={"location": "kitchen", "items": ["kettle", "knife", "bread"], "exits": ["hall", "garden"]},
)


def _lookup(cache: MemoryCache | SQLiteCache) -> ToolResult | None:
    key = cache_key(SPEC, ARGS)
    return cache.get(key) if key is not None else None


def _contenders(folder: Path) -> tuple[dict[str, Callable[[], object]], list[SQLiteCache]]:
    key = cache_key(SPEC, ARGS)
    assert key is not None
    memory = MemoryCache()
    memory.set(key, RESULT, 3600.0)
    sqlite = SQLiteCache(folder / "cache.sqlite3")
    # A realistically filled file: the hit is one B-tree look-up among many keys.
    for i in range(10_000):
        sqlite.set(f"look:{i:016x}:{{}}", RESULT, 3600.0)
    sqlite.set(key, RESULT, 3600.0)
    assert memory.get(key) == RESULT
    assert sqlite.get(key) == RESULT
    return {
        "cache_key only": lambda: cache_key(SPEC, ARGS),
        "MemoryCache hit": lambda: _lookup(memory),
        "SQLiteCache hit": lambda: _lookup(sqlite),
        "SQLiteCache miss": lambda: sqlite.get("look:none:{}"),
    }, [sqlite]


def main() -> None:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        contenders, stores = _contenders(Path(folder))
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        gc.disable()
        try:
            for _ in range(options.rounds):
                for name, run in contenders.items():
                    start = time.perf_counter()
                    for _ in range(options.calls):
                        run()
                    samples[name].append((time.perf_counter() - start) / options.calls * 1e6)
        finally:
            gc.enable()
            for store in stores:
                store.close()
    print(
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {platform.machine()}; "
        f"{options.rounds} rounds x {options.calls} calls\n"
    )
    print("| operation | median (us) | best round (us) |")
    print("|---|---:|---:|")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} |")


if __name__ == "__main__":
    main()
