"""Persistent cache I/O never blocks the event loop, and a call waits for it at most ``cache_timeout`` (issue 14, section 4).

Real SQLite files locked by real connections, and plugin backends that block on real thread
events; trio's autojump clock wherever the wait is the subject, so that no test sleeps.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from _cache_support import Looker, answer, call_all, setup

import toolflow
from toolflow._cache import MemoryCache


class Backend(MemoryCache):
    """A plugin's store that records the threads that call it, and can be made to hang until released."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.hang: str | None = None  # an operation that waits for `release` ("get", "set", "close")
        self.release = threading.Event()
        self.entered = threading.Event()
        self._count = threading.Lock()

    def _enter(self, operation: str) -> None:
        with self._count:
            self.threads.append(threading.get_ident())
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if operation == self.hang:
            self.entered.set()
            assert self.release.wait(timeout=30), "the test never released the backend"

    def _leave(self) -> None:
        with self._count:
            self.in_flight -= 1

    def get(self, key: str) -> toolflow.ToolResult | None:
        self._enter("get")
        try:
            return super().get(key)
        finally:
            self._leave()

    def set(self, key: str, result: toolflow.ToolResult, ttl: float | None) -> None:
        self._enter("set")
        try:
            super().set(key, result, ttl)
        finally:
            self._leave()


class Vault:
    """A plugin with the cache backend ``vault``: one :class:`Backend` per engine, or a factory that hangs."""

    def __init__(self, *, hang_open: bool = False) -> None:
        self.backends: list[Backend] = []
        self.hang_open = hang_open
        self.release = threading.Event()
        self.opened = threading.Event()

    def _open(self) -> Backend:
        if self.hang_open:
            assert self.release.wait(timeout=30), "the test never released the factory"
        self.backends.append(Backend())
        self.opened.set()
        return self.backends[-1]

    @toolflow.hookimpl
    def toolflow_register_cache_backends(self, register: Callable[[str, Any], None]) -> None:
        """The backend ``vault``."""
        register("vault", self._open)


class Observer:
    """A plugin that records the arguments of the calls its before_call and after_call hooks see."""

    def __init__(self) -> None:
        self.before: list[dict[str, Any]] = []
        self.after: list[dict[str, Any]] = []

    @toolflow.hookimpl
    def toolflow_before_call(self, call: toolflow.ToolCall) -> None:
        """Record a call that starts."""
        self.before.append(dict(call.arguments))

    @toolflow.hookimpl
    def toolflow_after_call(self, call: toolflow.ToolCall) -> None:
        """Record a call that ended."""
        self.after.append(dict(call.arguments))


@pytest.fixture
def recorded() -> Iterator[list[warnings.WarningMessage]]:
    """The warnings given while the test runs (all of them cache warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    assert all(issubclass(w.category, toolflow.CacheWarning) for w in caught), [str(w.message) for w in caught]


async def test_the_store_runs_in_worker_threads_one_operation_at_a_time(tmp_path: Path) -> None:
    """A batch of 20 concurrent calls: every backend operation ran off the trio thread, never two at once."""
    vault = Vault()
    registry, plugins, looker = setup(tmp_path, vault)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins, cache_backend="vault", cache_timeout=10) as engine:
            calls = [{"id": f"c{n}", "name": "look", "arguments": {"n": n % 10}} for n in range(20)]
            first = await engine.run_batch(calls)
            again = await engine.run_batch(calls)
    (backend,) = vault.backends
    assert [r.data for r in first] == [r.data for r in again] == [answer(n % 10) for n in range(20)]
    assert all(r.extra["cached"] for r in again)
    assert len(backend.threads) >= 60  # 20 look-ups and up to 20 stores, then 20 hits
    assert threading.get_ident() not in backend.threads
    assert backend.most_in_flight == 1
    assert sum(looker.runs.values()) <= 20


@contextlib.asynccontextmanager
async def _hanging_get(
    tmp_path: Path, seconds: float, *others: object
) -> AsyncIterator[tuple[toolflow.Engine, Backend, Looker]]:
    """An engine (cache timeout *seconds*) on the backend ``vault`` and *others*, whose gets hang until released."""
    vault = Vault()
    registry, plugins, looker = setup(tmp_path, vault, *others)
    with trio.fail_after(30):
        async with toolflow.open_engine(
            registry, plugins=plugins, cache_backend="vault", cache_timeout=seconds
        ) as engine:
            await engine.call("look", {"n": 7})  # opens the backend
            (backend,) = vault.backends
            backend.hang = "get"
            try:
                yield engine, backend, looker
            finally:
                backend.release.set()


async def test_a_look_up_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """While the backend's get waits, another task runs: here it is the task that lets the get finish."""
    results: list[toolflow.ToolResult] = []
    async with _hanging_get(tmp_path, 20) as (engine, backend, _), trio.open_nursery() as nursery:
        nursery.start_soon(_call, engine, 7, results)
        await trio.to_thread.run_sync(backend.entered.wait)  # the get is running, in its thread
        backend.release.set()
    assert results[0].extra["cached"] is True
    assert results[0].data == answer(7)


async def _call(engine: toolflow.Engine, n: int, results: list[toolflow.ToolResult]) -> None:
    results.append(await engine.call("look", {"n": n}))


def _lock(path: Path) -> sqlite3.Connection:
    """Another connection, holding an exclusive lock on *path* until it rolls back: readers wait too."""
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("PRAGMA locking_mode = EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    return locker


async def test_a_sqlite_look_up_waits_for_a_lock_off_the_event_loop(tmp_path: Path) -> None:
    """A file locked by another connection: the look-up waits in its thread while this loop releases the lock, then hits."""
    registry, plugins, looker = setup(tmp_path)
    path = tmp_path / "cache.sqlite3"
    await call_all(registry, plugins, path, [1])
    locker = _lock(path)
    results: list[toolflow.ToolResult] = []

    async def call(engine: toolflow.Engine) -> None:
        results.append(await engine.call("look", {"n": 1}))

    with trio.fail_after(30):
        async with (
            toolflow.open_engine(registry, plugins=plugins, cache_path=path, cache_timeout=20) as engine,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(call, engine)
            await trio.testing.wait_all_tasks_blocked()  # the call waits for its look-up's thread
            locker.execute("ROLLBACK")
            locker.close()
    assert results[0].extra["cached"] is True
    assert looker.runs == {1: 1}


async def test_a_locked_file_is_a_miss_with_one_warning_per_process(tmp_path: Path) -> None:
    """An exclusive lock held elsewhere: every call of two engines is answered by the tool, with one warning in all."""
    registry, plugins, looker = setup(tmp_path)
    path = tmp_path / "cache.sqlite3"
    await call_all(registry, plugins, path, [1])
    locker = _lock(path)
    # A wait long enough that SQLite's busy timeout (0.8 of it) always ends first, even on a loaded
    # machine: with the default 50 ms, a stalled worker thread let the engine's timeout win.
    patient = {"cache_timeout": 1.0}
    try:
        first, caught_first = await call_all(registry, plugins, path, [1, 2, 1], **patient)
        second, caught_second = await call_all(registry, plugins, path, [1, 2], **patient)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert [r.data for r in first + second] == [answer(1), answer(2), answer(1), answer(1), answer(2)]
    assert looker.runs == {1: 4, 2: 2}
    assert len(caught_first) == 1
    assert f"cache {str(path)!r} is busy (database is locked)" in caught_first[0]
    assert caught_second == []


@pytest.mark.parametrize("hang", ["get", "open"])
async def test_a_hung_backend_costs_a_call_its_cache_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, recorded: list[warnings.WarningMessage], hang: str
) -> None:
    """A backend whose get (or factory) never returns: each call waits 50ms for it, then runs the tool; one warning."""
    vault = Vault(hang_open=hang == "open")
    registry, plugins, looker = setup(tmp_path, vault)
    durations: list[float] = []
    results: list[toolflow.ToolResult] = []
    try:
        async with toolflow.open_engine(registry, plugins=plugins, cache_backend="vault") as engine:
            if hang == "get":
                await engine.call("look", {"n": 7})  # opens the backend (the clock may jump before it is open)
                await trio.to_thread.run_sync(vault.opened.wait)
                vault.backends[0].hang = "get"
            for n in (1, 2, 1):
                started = trio.current_time()
                results.append(await engine.call("look", {"n": n}))
                durations.append(trio.current_time() - started)
    finally:
        vault.release.set()
        for backend in vault.backends:
            backend.release.set()
    assert [r.data for r in results] == [answer(1), answer(2), answer(1)]
    assert looker.runs.get(1) == 2  # no hit: the store was skipped, the look-up timed out
    assert durations == [pytest.approx(0.05)] * 3  # the look-up's wait; no wait left for the store
    where = "backend 'vault' of plugin 'cachetest-0'"
    assert [str(w.message) for w in recorded] == [
        f"cache {where} is busy (no answer within 50ms); calls that cannot wait run without it"
    ]


async def test_a_kill_ends_a_call_waiting_for_its_look_up(tmp_path: Path) -> None:
    """Engine.kill() while the call's look-up hangs: the call ends at once as killed; neither the tool nor a hook saw it."""
    results: list[toolflow.ToolResult] = []
    observer = Observer()
    async with _hanging_get(tmp_path, 60, observer) as (engine, backend, looker), trio.open_nursery() as nursery:
        nursery.start_soon(_call, engine, 1, results)
        await trio.to_thread.run_sync(backend.entered.wait)
        engine.kill()
    assert results[0].extra == {"status": "aborted", "reason": "killed"}
    assert 1 not in looker.runs
    assert observer.before == observer.after == [{"n": 7}]  # the call that opened the backend


async def test_cancelling_a_call_during_its_look_up_cancels_it(tmp_path: Path) -> None:
    """A caller's cancel scope cancelled while the look-up hangs: the cancellation propagates, nothing else runs."""
    results: list[toolflow.ToolResult] = []
    async with _hanging_get(tmp_path, 60) as (engine, backend, looker):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_call, engine, 1, results)
                await trio.to_thread.run_sync(backend.entered.wait)
                scope.cancel()
    assert scope.cancelled_caught
    assert results == []
    assert 1 not in looker.runs


async def test_memory_caches_answer_on_the_event_loop(tmp_path: Path) -> None:
    """A session-cached hit is a dictionary look-up: the call completes without a checkpoint (no thread)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  look:\n    description: Looks.\n    cache: {scope: session}\n"
        "    parameters:\n      type: object\n      properties:\n        n: {type: integer, description: What}\n"
        "      required: [n]\n    implementation: cachetest.look\n",
        encoding="utf-8",
    )
    _, plugins, _ = setup(tmp_path)
    registry = toolflow.load_registry([spec], plugins=plugins)
    async with toolflow.open_engine(registry, plugins=plugins) as engine:
        await engine.call("look", {"n": 1})
        with trio.CancelScope() as scope:
            scope.cancel()  # any checkpoint in the call would raise Cancelled now
            hit = await engine.call("look", {"n": 1})
    assert hit.extra["cached"] is True
    assert not scope.cancelled_caught


@pytest.mark.parametrize("seconds", [0, -1, math.nan, math.inf])
async def test_cache_timeout_must_be_a_positive_number(tmp_path: Path, seconds: float) -> None:
    """A cache_timeout that is not a positive, finite number of seconds is refused when the engine opens."""
    registry, plugins, _ = setup(tmp_path)
    with pytest.raises(ValueError, match=r"cache_timeout must be a positive number of seconds, got "):
        async with toolflow.open_engine(registry, plugins=plugins, cache_timeout=seconds):
            pass  # pragma: no cover - never entered
