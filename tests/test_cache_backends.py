"""A plugin's cache backend behind the engine's ``persistent`` scope: chosen by name, guarded, optional."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolflow
from toolflow._cache import MemoryCache

SPEC = """\
toolflow: 1
tools:
  double:
    description: Doubles x; its results are kept in the persistent cache.
    cache: {scope: persistent, ttl: 1h}
    parameters:
      type: object
      properties:
        x: {type: integer, description: The number}
      required: [x]
    implementation: b.double
"""


class Shelf:
    """A plugin with a cache backend ``shelf`` (a memory store it keeps) and the tool ``double``."""

    def __init__(self, *, broken: str | None = None) -> None:
        self.broken = broken  # "open", or the store operation that raises
        self.stores: list[MemoryCache] = []
        self.options: list[dict[str, Any]] = []
        self.runs = 0

    def _open(self, **options: Any) -> MemoryCache:
        self.options.append(options)
        if self.broken == "open":
            msg = "no server at 127.0.0.1:1"
            raise ConnectionError(msg)
        store = MemoryCache()
        if self.broken is not None:

            def fail(*_: object) -> None:
                msg = f"{self.broken} went wrong"
                raise RuntimeError(msg)

            setattr(store, self.broken, fail)
        self.stores.append(store)
        return store

    @toolflow.hookimpl
    def toolflow_register_cache_backends(self, register: Callable[[str, Any], None]) -> None:
        """The backend ``shelf``."""
        register("shelf", self._open)

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """The tool's implementation."""

        async def double(x: int) -> int:
            self.runs += 1
            return 2 * x

        register("b.double", double)


def _setup(tmp_path: Path, shelf: Shelf) -> tuple[toolflow.Registry, toolflow.Plugins]:
    spec = tmp_path / "b.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(shelf, "acme-shelf")
    return toolflow.load_registry([spec], plugins=plugins), plugins


async def test_engine_stores_persistent_results_in_the_named_backend(tmp_path: Path) -> None:
    """cache_backend="shelf": the plugin's store holds the result, the second call is a hit, no SQLite file."""
    shelf = Shelf()
    registry, plugins = _setup(tmp_path, shelf)
    sqlite_file = tmp_path / "cache.sqlite3"
    async with toolflow.open_engine(
        registry, plugins=plugins, cache_path=sqlite_file, cache_backend="shelf", cache_options={"url": "mem://"}
    ) as engine:
        first = await engine.call("double", {"x": 4})
        second = await engine.call("double", {"x": 4})
        assert len(shelf.stores[0]) == 1
    assert (first.data, second.data, second.extra["cached"]) == (8, 8, True)
    assert shelf.runs == 1
    assert shelf.options == [{"url": "mem://"}]
    assert not sqlite_file.exists()


async def test_unknown_backend_fails_when_the_engine_opens(tmp_path: Path) -> None:
    """A backend no plugin registered is a ConfigError with a suggestion, before any call runs."""
    registry, plugins = _setup(tmp_path, Shelf())
    with pytest.raises(toolflow.ConfigError, match=r"unknown cache backend 'shelve'; did you mean 'shelf'\?"):
        async with toolflow.open_engine(registry, plugins=plugins, cache_backend="shelve"):
            pass  # pragma: no cover - never entered


FAILING = "cache backend 'shelf' of plugin 'acme-shelf' is failing ({op} raised RuntimeError: {op} went wrong)"


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (
            "open",
            (
                "cache backend 'shelf' of plugin 'acme-shelf' failed to open: no server at 127.0.0.1:1; "
                "calls run without the persistent cache"
            ),
        ),
        ("get", FAILING.format(op="get") + "; calls run without it"),
        ("set", FAILING.format(op="set") + "; calls run without it"),
    ],
)
async def test_a_crashing_backend_is_one_warning_naming_its_plugin(tmp_path: Path, broken: str, message: str) -> None:
    """A backend that cannot open, or whose get or set raises, gives one warning; every call still runs."""
    shelf = Shelf(broken=broken)
    registry, plugins = _setup(tmp_path, shelf)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with toolflow.open_engine(registry, plugins=plugins, cache_backend="shelf") as engine:
            results = [await engine.call("double", {"x": n}) for n in (1, 1, 2)]
    assert [(r.success, r.data) for r in results] == [(True, 2), (True, 2), (True, 4)]
    assert shelf.runs == 3  # nothing was served from the broken cache
    assert [str(w.message) for w in caught] == [message]
    assert all(issubclass(w.category, toolflow.CacheWarning) for w in caught)


async def test_a_backend_never_caches_failures_or_serves_non_results(tmp_path: Path) -> None:
    """Whatever a plugin's store would do, failures are not written and non-results are misses."""
    shelf = Shelf()
    registry, plugins = _setup(tmp_path, shelf)
    async with toolflow.open_engine(registry, plugins=plugins, cache_backend="shelf") as engine:
        invalid = await engine.call("double", {"x": "many"})
        await engine.call("double", {"x": 3})
        (key,) = shelf.stores[0]._entries  # the store the plugin handed over
        shelf.stores[0]._entries[key] = (None, "not a result")  # type: ignore[assignment]
        again = await engine.call("double", {"x": 3})
    assert invalid.success is False
    assert (again.data, "cached" in again.extra, shelf.runs) == (6, False, 2)
