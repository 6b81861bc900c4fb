"""The result caches: keys, the memory cache, the SQLite persistent cache on real files, the factory."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolflow._cache import (
    CacheWarning,
    MemoryCache,
    SQLiteCache,
    cache_key,
    default_cache_path,
    persistent_store,
)
from toolflow._errors import ConfigError
from toolflow._model import Implementation, ToolSpec
from toolflow._plugins import Plugins, make_manager
from toolflow._results import ToolResult
from toolflow.hookspecs import hookimpl

SPEC = ToolSpec(
    name="look",
    description="Look around.",
    parameters={"type": "object", "properties": {"where": {"type": "string"}, "n": {"type": "integer"}}},
    implementations=(Implementation(kind="implementation", config="demo.look"),),
)
OK = ToolResult(success=True, data={"seen": ["a", "b"]}, warnings=("dropped 'x'",), extra={"source": "eyes"})
FAILED = ToolResult.failure("connection refused")


class FakeClock:
    """A settable clock."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _caught(*operations: Callable[[], object]) -> list[str]:
    """Run *operations*, asserting every result is None, and return the cache warnings they emitted."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for operation in operations:
            assert operation() is None
    assert all(issubclass(w.category, CacheWarning) for w in record), [str(w.message) for w in record]
    return [str(w.message) for w in record]


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        count: int = conn.execute("SELECT count(*) FROM toolflow_cache").fetchone()[0]
    conn.close()
    return count


# --------------------------------------------------------------------------- keys


def test_key_is_canonical_json_of_the_arguments() -> None:
    """Argument order does not matter and non-ASCII text is kept as is."""
    one = cache_key(SPEC, {"where": "forêt", "n": 1})
    two = cache_key(SPEC, {"n": 1, "where": "forêt"})
    assert one == two
    assert one is not None
    assert one.startswith("look:")
    assert one.endswith(':{"n":1,"where":"forêt"}')


def test_key_differs_by_arguments() -> None:
    """Different arguments give different keys."""
    assert cache_key(SPEC, {"n": 1}) != cache_key(SPEC, {"n": 2})


def test_editing_what_the_tool_does_changes_the_key() -> None:
    """Parameters, output schema, implementation and timeout are part of the key."""
    base = cache_key(SPEC, {"n": 1})
    edits = [
        attrs.evolve(SPEC, parameters={"type": "object"}),
        attrs.evolve(SPEC, output_schema={"type": "object"}),
        attrs.evolve(SPEC, implementations=(Implementation(kind="implementation", config="demo.look2"),)),
        attrs.evolve(SPEC, timeout=5.0),
    ]
    keys = {cache_key(edited, {"n": 1}) for edited in edits}
    assert base not in keys
    assert len(keys) == len(edits)


def test_editing_the_description_keeps_the_key() -> None:
    """Cosmetic edits do not invalidate cached results."""
    assert cache_key(attrs.evolve(SPEC, description="Peek."), {"n": 1}) == cache_key(SPEC, {"n": 1})


@pytest.mark.parametrize("arguments", [{"when": object()}, {"x": float("nan")}, {"s": {1, 2}}])
def test_unserialisable_arguments_have_no_key(arguments: dict[str, Any]) -> None:
    """Arguments JSON cannot express give no key instead of an exception."""
    assert cache_key(SPEC, arguments) is None


def test_unserialisable_spec_config_still_gives_a_key() -> None:
    """A spec whose config holds odd values is still hashed."""
    odd = attrs.evolve(SPEC, implementations=(Implementation(kind="python", config=object),))
    assert cache_key(odd, {}) is not None


# --------------------------------------------------------------------------- memory


def test_memory_cache_hit_and_clear() -> None:
    """A stored result is returned until the cache is cleared (a new tick)."""
    cache = MemoryCache(clock=FakeClock())
    cache.set("k", OK, None)
    assert cache.get("k") is OK
    cache.clear()
    assert cache.get("k") is None


def test_memory_cache_honours_ttl() -> None:
    """An entry is live before its TTL runs out and gone from then on."""
    clock = FakeClock()
    cache = MemoryCache(clock=clock)
    cache.set("k", OK, 10.0)
    clock.now += 9.9
    assert cache.get("k") is OK
    clock.now += 0.1
    assert cache.get("k") is None
    assert len(cache) == 0


def test_memory_cache_never_stores_failures() -> None:
    """Setting a failure result does nothing."""
    cache = MemoryCache()
    cache.set("k", FAILED, None)
    assert cache.get("k") is None


# --------------------------------------------------------------------------- sqlite


def test_sqlite_round_trip_rebuilds_the_result(tmp_path: Path) -> None:
    """A hit is an equal ToolResult, with its warnings and extra keys."""
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    cache.set("k", OK, None)
    assert cache.get("k") == OK
    assert cache.get("other") is None
    cache.close()


def test_sqlite_uses_wal_mode(tmp_path: Path) -> None:
    """The file is in WAL mode so that engines in several processes can share it."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path)
    cache.set("k", OK, None)
    cache.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_sqlite_creates_missing_folders(tmp_path: Path) -> None:
    """The default layout's .toolflow folder is created on first use."""
    path = default_cache_path(tmp_path)
    assert path == tmp_path / ".toolflow" / "cache.sqlite3"
    cache = SQLiteCache(path)
    cache.set("k", OK, None)
    cache.close()
    assert path.is_file()


def test_sqlite_survives_a_new_process(tmp_path: Path) -> None:
    """An entry written by another process is read back here."""
    path = tmp_path / "c.sqlite3"
    code = """
        import sys
        from toolflow._cache import SQLiteCache
        from toolflow._results import ToolResult
        cache = SQLiteCache(sys.argv[1])
        cache.set("k", ToolResult(success=True, data=[1, "é"], extra={"source": "child"}), 3600.0)
        cache.close()
    """
    done = _run(code, str(path))
    assert done.returncode == 0, done.stderr
    cache = SQLiteCache(path)
    assert cache.get("k") == ToolResult(success=True, data=[1, "é"], extra={"source": "child"})
    cache.close()


def test_sqlite_expires_after_ttl_and_deletes_lazily(tmp_path: Path) -> None:
    """An expired entry is a miss and is deleted from the file when read."""
    path = tmp_path / "c.sqlite3"
    clock = FakeClock()
    cache = SQLiteCache(path, clock=clock)
    cache.set("k", OK, 60.0)
    clock.now += 59.0
    assert cache.get("k") == OK
    clock.now += 1.0
    assert _rows(path) == 1
    assert cache.get("k") is None
    assert _rows(path) == 0
    cache.close()


def test_sqlite_ttl_is_read_by_another_engine(tmp_path: Path) -> None:
    """The expiry is stored, so a second engine on the same file honours it too."""
    path = tmp_path / "c.sqlite3"
    clock = FakeClock()
    writer, reader = SQLiteCache(path, clock=clock), SQLiteCache(path, clock=clock)
    writer.set("k", OK, 5.0)
    assert reader.get("k") == OK
    clock.now += 5.0
    assert reader.get("k") is None
    writer.close()
    reader.close()


def test_sqlite_never_stores_failures(tmp_path: Path) -> None:
    """Setting a failure result leaves the file empty."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path)
    cache.set("k", FAILED, None)
    assert cache.get("k") is None
    cache.close()
    assert _rows(path) == 0


def test_sqlite_skips_results_json_cannot_express(tmp_path: Path) -> None:
    """A result whose data is not JSON is not stored, and nothing raises."""
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    cache.set("k", ToolResult(success=True, data=object()), None)
    assert cache.get("k") is None
    cache.close()


def test_sqlite_clear(tmp_path: Path) -> None:
    """clear drops every entry, expired or not."""
    path = tmp_path / "c.sqlite3"
    clock = FakeClock()
    cache = SQLiteCache(path, clock=clock)
    cache.set("short", OK, 1.0)
    cache.set("long", OK, None)
    clock.now += 2.0
    assert _rows(path) == 2
    cache.clear()
    assert _rows(path) == 0
    cache.close()


def test_sqlite_two_processes_write_concurrently(tmp_path: Path) -> None:
    """Two processes writing the same file at once lose nothing and warn about nothing."""
    path = tmp_path / "c.sqlite3"
    code = """
        import sys
        from toolflow._cache import SQLiteCache
        from toolflow._results import ToolResult
        cache = SQLiteCache(sys.argv[1], busy_timeout=30.0)
        for i in range(300):
            cache.set(f"{sys.argv[2]}-{i}", ToolResult(success=True, data=i), None)
            cache.get(f"{sys.argv[2]}-{i // 2}")
        cache.close()
    """
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(path), name],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert _rows(path) == 600
    cache = SQLiteCache(path)
    assert cache.get("a-299") == ToolResult(success=True, data=299)
    assert cache.get("b-0") == ToolResult(success=True, data=0)
    cache.close()


def test_sqlite_corrupt_file_warns_once_and_misses(tmp_path: Path) -> None:
    """A file of random bytes gives one warning; gets miss and sets do nothing."""
    path = tmp_path / "c.sqlite3"
    path.write_bytes(os.urandom(8192))
    cache = SQLiteCache(path)
    caught = _caught(lambda: cache.get("k"), lambda: cache.set("k", OK, None), lambda: cache.get("k"), cache.clear)
    assert len(caught) == 1
    assert "is corrupt" in caught[0]
    assert repr(str(path)) in caught[0]
    cache.close()


def test_sqlite_write_lock_held_elsewhere(tmp_path: Path) -> None:
    """While another connection holds an exclusive transaction, reads still hit and a set warns once."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path, busy_timeout=0.05)
    cache.set("k", OK, None)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        assert cache.get("k") == OK
        caught = _caught(lambda: cache.set("k2", OK, None), lambda: cache.set("k3", OK, None))
        assert len(caught) == 1
        assert "is busy (database is locked)" in caught[0]
        assert cache.get("k2") is None
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache.set("k2", OK, None)
        assert cache.get("k2") == OK
    cache.close()


def test_sqlite_database_locked_exclusively_elsewhere(tmp_path: Path) -> None:
    """A database another connection locks exclusively is a miss with a warning, and is retried later."""
    path = tmp_path / "c.sqlite3"
    writer = SQLiteCache(path)
    writer.set("k", OK, None)
    writer.close()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    cache = SQLiteCache(path, busy_timeout=0.05)
    try:
        caught = _caught(lambda: cache.get("k"), lambda: cache.set("k", OK, None))
        assert len(caught) == 1
        assert "is busy (database is locked)" in caught[0]
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert cache.get("k") == OK
    cache.close()


def test_sqlite_busy_says_whether_the_last_operation_met_a_lock(tmp_path: Path) -> None:
    """busy is true after an operation that gave up on another connection's lock, false after one that did not."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path, busy_timeout=0.01)
    cache.set("k", OK, None)
    assert cache.busy is False
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        assert cache.get("k") == OK  # WAL: a reader does not wait for a writer
        assert cache.busy is False
        assert _caught(lambda: cache.set("k2", OK, None)) == [
            f"cache {str(path)!r} is busy (database is locked); calls that cannot wait run without it"
        ]
        assert cache.busy is True
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert cache.get("k") == OK
    assert cache.busy is False
    cache.close()


def test_sqlite_unwritable_location_warns_and_misses(tmp_path: Path) -> None:
    """A path whose folder cannot be created gives one warning; the cache is then a no-op."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = SQLiteCache(blocker / "cache.sqlite3")
    caught = _caught(lambda: cache.set("k", OK, None), lambda: cache.get("k"))
    assert len(caught) == 1
    assert "is unusable ([Errno 17] File exists" in caught[0]
    cache.close()


def test_sqlite_closed_cache_is_a_no_op(tmp_path: Path) -> None:
    """After close, gets miss and sets do nothing, without reopening the file."""
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    cache.set("k", OK, None)
    cache.close()
    cache.set("k2", OK, None)
    assert cache.get("k") is None


# --------------------------------------------------------------------------- factory


def _plugins_with(factory: Callable[..., Any], *owners: str) -> Plugins:
    plugins = Plugins(manager=make_manager())

    class Plugin:
        @hookimpl
        def toolflow_register_cache_backends(self, register: Callable[[str, Any], None]) -> None:
            register("shelf", factory)

    for owner in owners:
        assert plugins.register(Plugin(), owner)
    return plugins


def test_persistent_store_default_path(tmp_path: Path) -> None:
    """The persistent scope defaults to SQLite at .toolflow/cache.sqlite3 under the project root, busy timeout 40ms."""
    cache = persistent_store(project_root=tmp_path)
    assert isinstance(cache, SQLiteCache)
    assert cache.path == tmp_path / ".toolflow" / "cache.sqlite3"
    assert cache._busy_timeout == pytest.approx(0.04)  # four fifths of the 50ms a call waits
    cache.close()
    assert not cache.path.exists()  # made, never used: nothing was opened


def test_persistent_store_plugin_backend() -> None:
    """A backend name picks the plugin's factory, called with the options at the first operation."""
    seen: list[dict[str, Any]] = []
    stores: list[MemoryCache] = []

    def factory(**options: Any) -> MemoryCache:
        seen.append(options)
        stores.append(MemoryCache())
        return stores[-1]

    cache = persistent_store(backend="shelf", plugins=_plugins_with(factory, "acme"), options={"url": "x"})
    assert seen == []
    cache.set("k", OK, None)
    assert seen == [{"url": "x"}]
    assert stores[0].get("k") == OK  # the plugin's store holds what is cached
    assert cache.get("k") == OK


def test_persistent_store_unknown_or_conflicting_backend() -> None:
    """An unknown backend name, or one two plugins register, is a configuration error."""
    plugins = _plugins_with(MemoryCache, "acme")
    with pytest.raises(ConfigError, match=r"unknown cache backend 'shelve'; did you mean 'shelf'\?"):
        persistent_store(backend="shelve", plugins=plugins)
    with pytest.raises(ConfigError, match="several plugins"):
        persistent_store(backend="shelf", plugins=_plugins_with(MemoryCache, "a", "b"))


def _broken() -> MemoryCache:
    msg = "no server"
    raise RuntimeError(msg)


@pytest.mark.parametrize(
    ("factory", "problem"),
    [(_broken, "failed to open: no server"), (dict, "returned {}, which is not a cache backend")],
)
def test_persistent_store_backend_that_cannot_open(factory: Callable[..., Any], problem: str) -> None:
    """A factory that raises or returns a non-backend: one warning at the first operation, then a store that keeps nothing."""
    cache = persistent_store(backend="shelf", plugins=_plugins_with(factory, "acme"))
    caught = _caught(lambda: cache.get("k"), lambda: cache.set("k", OK, None), lambda: cache.get("k"), cache.close)
    assert caught == [f"cache backend 'shelf' of plugin 'acme' {problem}; calls run without the persistent cache"]
