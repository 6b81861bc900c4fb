"""A tool with a persistent cache, and real engines to fill and read its SQLite file (the cache tests' helpers)."""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import trio

import toolflow
from toolflow._cache import cache_key

SPEC = """\
toolflow: 1
tools:
  look:
    description: Says what was looked at; its results are kept in the persistent cache.
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        n: {type: integer, description: What to look at}
      required: [n]
    implementation: cachetest.look
"""


def answer(n: int) -> dict[str, Any]:
    """What ``look(n)`` returns: different for every *n*, of varied length so that rows spread over pages."""
    return {"n": n, "seen": f"thing {n}", "pad": "x" * (n * 37 % 300)}


class Looker:
    """The plugin of the tool ``look``; counts how often each ``n`` really ran."""

    def __init__(self) -> None:
        self.runs: dict[int, int] = {}

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """The implementation ``cachetest.look``."""

        async def look(n: int) -> dict[str, Any]:
            self.runs[n] = self.runs.get(n, 0) + 1
            return answer(n)

        register("cachetest.look", look)


def setup(folder: Path, *plugins: object) -> tuple[toolflow.Registry, toolflow.Plugins, Looker]:
    """The registry of ``look`` (spec written to *folder*) and the plugins, with *plugins* registered too."""
    spec = folder / "look.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    looker = Looker()
    loaded = toolflow.load_plugins(entry_points=False)
    loaded.register(looker, "cachetest")
    for index, plugin in enumerate(plugins):
        loaded.register(plugin, f"cachetest-{index}")
    return toolflow.load_registry([spec], plugins=loaded), loaded, looker


def key_of(registry: toolflow.Registry, n: int) -> bytes:
    """The bytes of the cache key of ``look(n)``, as the SQLite file holds them."""
    key = cache_key(registry.get("look").spec, {"n": n})
    assert key is not None
    return key.encode()


async def call_all(
    registry: toolflow.Registry, plugins: toolflow.Plugins, path: Path, numbers: Iterable[int], **options: Any
) -> tuple[list[toolflow.ToolResult], list[str]]:
    """Call ``look(n)`` for each of *numbers* through a new engine on the cache file *path*.

    Returns the results and the messages of the warnings the engine gave (all of them cache
    warnings: anything else fails the test).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with trio.fail_after(60):
            async with toolflow.open_engine(registry, plugins=plugins, cache_path=path, **options) as engine:
                results = [await engine.call("look", {"n": n}) for n in numbers]
    assert all(issubclass(w.category, toolflow.CacheWarning) for w in caught), [str(w.message) for w in caught]
    return results, [str(w.message) for w in caught]


def checkpoint(path: Path) -> None:
    """Move everything from the file's write-ahead log into the file itself, as a closed cache is left."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
