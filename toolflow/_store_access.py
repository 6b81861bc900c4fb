"""An engine's use of the persistent store: off the event loop, one operation at a time, each bounded.

The ``persistent`` cache scope keeps results in a SQLite file or a plugin's backend, either of
which may block (a lock held by another process, a slow disk, a hung network backend). So the
engine never calls the store on the event loop: :class:`StoreAccess` runs each operation in a
worker thread, one at a time (a backend never sees two at once, and an abandoned operation keeps
the place until it returns, so a hung backend holds one worker thread rather than one per call),
and a call waits for the store at most ``cache_timeout`` seconds in all, look-up and store
together (:class:`Pending`). A look-up that does not answer in time is a miss, with one ``busy``
:class:`~toolflow.CacheWarning` per store, and the call runs without the store.

The store opens at its first operation, never before: an engine whose tools have no persistent
cache never touches the file. With a state backend whose caches outlive the process (Redis,
issue 19), the store is the backend's ``persistent`` namespace (:class:`toolflow._state.StateCache`)
instead of the SQLite file or a plugin's backend, reached the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import trio

from toolflow._attempts import Attempts
from toolflow._cache import PersistentStore, persistent_store
from toolflow._model import format_duration
from toolflow._plugins import Plugins
from toolflow._results import ToolResult
from toolflow._state import StateBackend, StateCache

__all__ = ["Pending", "StoreAccess"]

_T = TypeVar("_T")


class Pending:
    """One call's use of the persistent store: what to look up, and how long the call may still wait for it.

    The look-up and the store share one allowance of ``cache_timeout`` seconds, so that a call
    waits at most that long for the store in all: after a look-up that used it up (a lock, a
    hung backend), the store is skipped.
    """

    __slots__ = ("allowance", "cleaned", "key", "warnings")

    def __init__(self, cleaned: Mapping[str, Any], warnings: tuple[str, ...], key: str, allowance: float) -> None:
        self.cleaned = cleaned
        self.warnings = warnings
        self.key = key
        self.allowance = allowance


class StoreAccess:
    """The persistent store of one engine, reached from worker threads (see the module documentation)."""

    def __init__(
        self,
        *,
        backend: str | None,
        plugins: Plugins | None,
        path: Any,
        options: Mapping[str, Any] | None,
        clock: Callable[[], float],
        timeout: float,
        attempts: Attempts,
        state: StateBackend | None = None,
    ) -> None:
        self.timeout = timeout
        self._open: Callable[[], PersistentStore]
        if state is not None and state.shared:
            self._open = functools.partial(StateCache, state)
        else:
            self._open = functools.partial(
                persistent_store,
                backend=backend,
                plugins=plugins,
                path=path,
                options=options,
                clock=clock,
                timeout=timeout,
            )
        self._attempts = attempts
        self._store: PersistentStore | None = None
        self._limiter: trio.CapacityLimiter | None = None

    def pending(self, cleaned: Mapping[str, Any], warnings: tuple[str, ...], key: str) -> Pending:
        """A call's use of the store, with the whole allowance still to spend."""
        return Pending(cleaned, warnings, key, self.timeout)

    async def get(self, pending: Pending) -> ToolResult | None:
        """The stored result of *pending*'s key, or ``None`` (a miss, or no answer in time).

        A kill while the look-up runs ends the wait (the caller tells it by the kill count).
        """
        store = self._opened()
        kills = self._attempts.kills
        started = trio.current_time()
        answered, hit = await self._off_loop(
            functools.partial(store.get, pending.key), pending.allowance, killable=True
        )
        pending.allowance -= trio.current_time() - started
        if self._attempts.kills != kills:
            return None  # the call ends as killed: nothing to report
        if not answered:  # the call runs without the cache: say so, once per store
            store.report("busy", f"no answer within {format_duration(self.timeout)}")
        if not answered or store.busy:  # a store would wait for the same lock or backend: skip it
            pending.allowance = 0
            return None
        return hit

    async def set(self, pending: Pending, result: ToolResult, ttl: float | None) -> None:
        """Keep *result* under *pending*'s key, unless the look-up used the allowance up.

        Not killable: the tool has finished, and the wait is bounded. A store the call stops
        waiting for still completes in its thread, unless the store hangs.
        """
        if pending.allowance > 0:
            store = self._opened()
            await self._off_loop(functools.partial(store.set, pending.key, result, ttl), pending.allowance)

    async def close(self) -> None:
        """Close the store, if it was opened, waiting at most ``cache_timeout`` (a busy store then closes nothing)."""
        store, self._store = self._store, None
        if store is not None:
            await self._off_loop(store.close, self.timeout)

    def _opened(self) -> PersistentStore:
        if self._store is None:  # nothing is opened or read here: the store opens at its first operation
            self._limiter = trio.CapacityLimiter(1)
            self._store = self._open()
        return self._store

    async def _off_loop(
        self, operation: Callable[[], _T], allowance: float, *, killable: bool = False
    ) -> tuple[bool, _T | None]:
        """Run *operation* of the store in a worker thread; wait for it at most *allowance* seconds.

        Returns whether it answered in time, and its value. An operation the wait gave up on
        (the time ran out, or, if *killable*, a kill came) is abandoned: it runs on in its
        thread and holds the store's one place until it returns, and an operation still
        waiting for that place is not started. Cancellation from outside propagates (the
        operation is abandoned the same way).
        """
        scope = trio.CancelScope(deadline=trio.current_time() + allowance)
        with self._attempts.guarded(scope, stoppable=False) if killable else scope:
            value = await trio.to_thread.run_sync(operation, abandon_on_cancel=True, limiter=self._limiter)
            return True, value
        return False, None
