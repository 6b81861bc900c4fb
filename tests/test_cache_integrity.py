"""The persistent cache never serves a wrong answer (issue 14, section 4): real SQLite files, damaged on purpose, read through real engines."""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from _cache_support import answer, call_all, checkpoint, key_of, setup

import toolflow
from toolflow._cache import MAX_STORED_BYTES, SQLiteCache, cache_key
from toolflow._results import ToolResult

N = 100


async def test_a_page_out_of_order_never_serves_a_neighbours_result(tmp_path: Path) -> None:
    """One stored key edited so that it sorts after its page's other keys: no look-up returns its row for another key.

    SQLite finds a key by a binary search that trusts the page's order and skips the final
    comparison once it has met an equal key; on this page it stopped at the edited row while
    looking for the row next to it, so that call got the other call's result as a hit.
    """
    registry, plugins, looker = setup(tmp_path)
    path = tmp_path / "cache.sqlite3"
    await call_all(registry, plugins, path, range(N))
    checkpoint(path)
    data = bytearray(path.read_bytes())
    for victim in (17, 50, 83):  # one per leaf page, at least
        at = data.find(key_of(registry, victim))
        assert at > 0
        data[at + 3] = ord("o")  # "look:..." becomes "looo:...": now larger than every other key
    path.write_bytes(bytes(data))

    results, caught = await call_all(registry, plugins, path, range(N))

    assert [r.data for r in results] == [answer(n) for n in range(N)]
    assert all(r.success for r in results)
    assert len(caught) == 1
    assert "is corrupt (the look-up of one key returned the row of another)" in caught[0]
    assert all(looker.runs[n] == 2 for n in (17, 50, 83))  # the edited rows are misses: the tool ran


async def test_a_file_is_reported_once_per_process_however_many_engines_read_it(tmp_path: Path) -> None:
    """A damaged row gives one warning in the first engine and none in the next ones; every call is answered right."""
    registry, plugins, _ = setup(tmp_path)
    path = tmp_path / "cache.sqlite3"
    await call_all(registry, plugins, path, [1, 2])
    with sqlite3.connect(path) as conn:  # call 1's row now holds call 2's result
        conn.execute(
            "UPDATE toolflow_cache SET value = (SELECT value FROM toolflow_cache WHERE key = ?) WHERE key = ?",
            (key_of(registry, 2), key_of(registry, 1)),
        )
    conn.close()
    first, caught_first = await call_all(registry, plugins, path, [1, 2])
    second, caught_second = await call_all(registry, plugins, path, [1, 2])

    assert [r.data for r in first + second] == [answer(1), answer(2)] * 2
    assert [r.extra.get("cached", False) for r in first] == [False, True]
    assert [r.extra.get("cached", False) for r in second] == [True, True]  # the store replaced the bad row
    assert len(caught_first) == 1
    assert "is corrupt (a row does not match its checksum)" in caught_first[0]
    assert caught_second == []


async def test_a_foreign_database_is_never_written(tmp_path: Path) -> None:
    """Another program's SQLite file at the cache path: calls run uncached, one warning, and its bytes are unchanged."""
    registry, plugins, looker = setup(tmp_path)
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()
    before = path.read_bytes()

    results, caught = await call_all(registry, plugins, path, [1, 1, 2])

    assert [r.data for r in results] == [answer(1), answer(1), answer(2)]
    assert looker.runs == {1: 2, 2: 1}
    assert path.read_bytes() == before
    assert len(caught) == 1
    assert "is not a toolflow cache (its application_id is 0x0, not toolflow's 0x74666c77)" in caught[0]
    assert "delete it or choose another cache path" in caught[0]


def test_a_key_with_a_lone_surrogate_is_stored_and_found(tmp_path: Path) -> None:
    """Arguments decoded from JSON may hold lone surrogates; such a key round-trips instead of raising."""
    cache = SQLiteCache(tmp_path / "c.sqlite3")
    result = ToolResult(success=True, data="\ud800 alone")
    cache.set('look:0:{"s":"\ud800"}', result, None)
    assert cache.get('look:0:{"s":"\ud800"}') == result
    assert cache.get('look:0:{"s":"\ud801"}') is None
    cache.close()


def test_results_larger_than_the_cap_are_neither_stored_nor_read(tmp_path: Path) -> None:
    """A result over MAX_STORED_BYTES is not stored; such a row in the file is a miss with a warning, never loaded."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path)
    cache.set("big", ToolResult(success=True, data="x" * MAX_STORED_BYTES), None)
    cache.set("small", ToolResult(success=True, data="x"), None)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM toolflow_cache").fetchone()[0] == 1
    conn.execute("UPDATE toolflow_cache SET value = zeroblob(?)", (MAX_STORED_BYTES + 1,))
    conn.commit()
    conn.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get("small") is None
    cache.close()
    expected = (
        f"cache {str(path)!r} is corrupt (a row is larger than {MAX_STORED_BYTES:,} bytes or has no value); "
        "its damaged entries are misses; the file may be deleted while no engine uses it"
    )
    assert [str(w.message) for w in caught] == [expected]


@pytest.mark.parametrize("ttl", [None, 60, 0.25])
def test_a_row_verifies_whatever_its_expiry(tmp_path: Path, ttl: float | None) -> None:
    """The checksum covers the expiry as stored, whether the TTL is none, whole seconds or a fraction."""
    cache = SQLiteCache(tmp_path / "c.sqlite3", clock=lambda: 1_000)
    result = ToolResult(success=True, data=[1, 2])
    cache.set("k", result, ttl)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get("k") == result
    cache.close()


def test_an_edited_expiry_does_not_verify(tmp_path: Path) -> None:
    """A row whose expiry was pushed into the future is not served: the checksum covers it."""
    path = tmp_path / "c.sqlite3"
    clock = [1_000.0]
    cache = SQLiteCache(path, clock=lambda: clock[0])
    cache.set("k", ToolResult(success=True, data=1), 10.0)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE toolflow_cache SET expires_at = expires_at + 3600")
    conn.commit()
    conn.close()
    clock[0] += 20
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get("k") is None
    cache.close()
    assert len(caught) == 1
    assert "a row does not match its checksum" in str(caught[0].message)


def test_the_key_is_stored_as_given(tmp_path: Path) -> None:
    """The file holds the exact key (its UTF-8 bytes), so that a hit can be checked against it."""
    path = tmp_path / "c.sqlite3"
    cache = SQLiteCache(path)
    spec_key = cache_key(setup(tmp_path)[0].get("look").spec, {"n": 5})
    assert spec_key is not None
    cache.set(spec_key, ToolResult(success=True, data=5), None)
    cache.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT key FROM toolflow_cache").fetchall() == [(spec_key.encode(),)]
    conn.close()


_ECHO = """\
toolflow: 1
tools:
  echo:
    description: Echoes its text; its results are kept in the persistent cache.
    cache: {scope: persistent}
    parameters:
      type: object
      properties:
        text: {type: string, description: The text}
      required: [text]
    implementation: cachetest.echo
"""


class _Echo:
    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def echo(text: str) -> str:
            return text

        register("cachetest.echo", echo)


async def test_arguments_with_a_lone_surrogate_are_cached(tmp_path: Path) -> None:
    """JSON arguments may decode to a lone surrogate: the call is stored and then found, instead of raising from the cache."""
    spec = tmp_path / "echo.yaml"
    spec.write_text(_ECHO, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(_Echo(), "cachetest")
    registry = toolflow.load_registry([spec], plugins=plugins)
    arguments = json.loads('{"text": "\\ud800 alone"}')
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins, cache_path=tmp_path / "c.sqlite3") as engine:
            first = await engine.call("echo", arguments)
            second = await engine.call("echo", arguments)
    assert (first.data, second.data) == ("\ud800 alone", "\ud800 alone")
    assert second.extra["cached"] is True


async def test_a_schema_page_whose_error_text_is_not_utf8(tmp_path: Path) -> None:
    """A damaged schema makes SQLite's message hold a byte that is not UTF-8: one warning, and the calls run."""
    registry, plugins, looker = setup(tmp_path)
    path = tmp_path / "cache.sqlite3"
    await call_all(registry, plugins, path, [1])
    data = bytearray(path.read_bytes())
    at = data.find(b"CREATE TABLE toolflow_cache")
    assert 0 < at < 4096
    data[at + 5] = ord("X")  # "CREATX": the schema no longer parses, and SQLite's message names the table
    start = data.find(b"toolflow_cache")
    while 0 <= start < 4096:
        data[start] = 0xFF  # the table's name, in the schema's name columns and its text
        start = data.find(b"toolflow_cache", start)
    path.write_bytes(bytes(data))

    results, caught = await call_all(registry, plugins, path, [1, 2])

    assert [r.data for r in results] == [answer(1), answer(2)]
    assert looker.runs == {1: 2, 2: 1}
    assert len(caught) == 1
    assert "is corrupt ('utf-8' codec can't decode byte 0xff" in caught[0]
