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

An engine opened for a conversation (``open_engine(conversation=...)``, issue 19) reaches the
state the same way for the conversation's part of it (:class:`ConversationStore`): its
``session`` cache (the state's namespace of the conversation's id) and its stored document,
loaded when the engine opens and merged back when it closes (:mod:`toolflow._conversation`).
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import trio

from toolflow._attempts import Attempts
from toolflow._cache import CacheWarning, PersistentStore, persistent_store
from toolflow._conversation import empty_part, merged, part_of
from toolflow._gates import Gates
from toolflow._model import CacheScope, format_duration
from toolflow._plugins import Plugins
from toolflow._results import ToolResult
from toolflow._state import Conversation, StateBackend, StateCache

__all__ = ["COMMIT_ATTEMPTS", "CONVERSATION_WAIT", "ConversationStore", "Pending", "StoreAccess", "engine_stores"]

_T = TypeVar("_T")


class Pending:
    """One call's use of the persistent store: what to look up, and how long the call may still wait for it.

    The look-up and the store share one allowance of ``cache_timeout`` seconds, so that a call
    waits at most that long for the store in all: after a look-up that used it up (a lock, a
    hung backend), the store is skipped.
    """

    __slots__ = ("access", "allowance", "cleaned", "key", "warnings")

    def __init__(
        self, cleaned: Mapping[str, Any], warnings: tuple[str, ...], key: str, allowance: float, access: StoreAccess
    ) -> None:
        self.cleaned = cleaned
        self.warnings = warnings
        self.key = key
        self.allowance = allowance
        self.access = access
        """The store it looks up and stores in (the persistent store, or a conversation's session cache)."""


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
        namespace: str | None = None,
    ) -> None:
        self.timeout = timeout
        self._open: Callable[[], PersistentStore]
        if state is not None and namespace is not None:  # a conversation's session cache
            self._open = functools.partial(StateCache, state, namespace)
        elif state is not None and state.shared:
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
        return Pending(cleaned, warnings, key, self.timeout, self)

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


def engine_stores(
    state: StateBackend, conversation: str | None, lifetime: float, **settings: Any
) -> tuple[dict[CacheScope, StoreAccess], ConversationStore | None]:
    """An engine's stores by cache scope, and its conversation's segment (``None``: it serves none).

    The ``persistent`` scope's store from *settings* (:class:`StoreAccess`'s arguments); with a
    *conversation*, its :class:`ConversationStore` is the ``session`` scope's.
    """
    stores = {CacheScope.PERSISTENT: StoreAccess(state=state, **settings)}
    if conversation is None:
        return stores, None
    segment = ConversationStore(
        state,
        conversation,
        lifetime=lifetime,
        clock=settings["clock"],
        timeout=settings["timeout"],
        attempts=settings["attempts"],
    )
    stores[CacheScope.SESSION] = segment
    return stores, segment


# --------------------------------------------------------------------------- a conversation's state

CONVERSATION_WAIT = 2.0
"""The fewest seconds an engine waits for each load or store of its conversation's document (then: unavailable).

It waits this long or the engine's ``cache_timeout``, whichever is longer
(:attr:`ConversationStore.wait`): longer than the default ``cache_timeout`` (50 ms), because a
miss of the document is not a cache miss but a conversation run from nothing (``depends_on``
refuses until its dependency runs again), so only a store that does not answer, not a busy
moment, should cost it; and a loaded machine that raises ``cache_timeout`` raises it too.
"""

COMMIT_ATTEMPTS = 5
"""How often a commit reads, merges and stores again after losing the race to another of the conversation."""


class _Outage:
    """Whether a state backend's conversation documents are out of reach: one warning per outage."""

    def __init__(self) -> None:
        self._down = False
        self._lock = threading.Lock()

    def failed(self) -> bool:
        """Note a failure; whether it is the first of an outage (then the caller warns)."""
        with self._lock:
            first, self._down = not self._down, True
        return first

    def recovered(self) -> None:
        self._down = False


_OUTAGES: weakref.WeakKeyDictionary[StateBackend, _Outage] = weakref.WeakKeyDictionary()
_OUTAGES_LOCK = threading.Lock()


class ConversationStore(StoreAccess):
    """One engine's segment of a conversation kept in a state backend (``open_engine(conversation=...)``).

    As a :class:`StoreAccess` it is the engine's ``session`` cache: the backend's namespace of the
    conversation's id, each entry kept for the tool's ``ttl`` or the conversation's *lifetime*,
    whichever is shorter. :meth:`begin` loads the conversation's document and restores the
    engine's gates from it; :meth:`commit` merges what the engine's calls did into the document
    as it is by then (:func:`toolflow._conversation.merged`) and stores it with a compare-and-set,
    retrying a lost race up to :data:`COMMIT_ATTEMPTS` times; the document then expires
    *lifetime* seconds on.

    The state unavailable (:class:`ConnectionError`, or no answer within :attr:`wait`): the
    engine runs on an empty conversation (fail closed: a
    ``depends_on`` dependency must run again), its session cache is not used, and one
    :class:`~toolflow.CacheWarning` per outage of the backend says so.
    """

    def __init__(
        self,
        state: StateBackend,
        conversation: str,
        *,
        lifetime: float,
        clock: Callable[[], float],
        timeout: float,
        attempts: Attempts,
    ) -> None:
        super().__init__(
            backend=None,
            plugins=None,
            path=None,
            options=None,
            clock=clock,
            timeout=timeout,
            attempts=attempts,
            state=state,
            namespace=conversation,
        )
        self.conversation = conversation
        self.lifetime = lifetime
        self.wait = max(CONVERSATION_WAIT, timeout)
        """Seconds each load or store of the document may take: :data:`CONVERSATION_WAIT`, or *timeout* if longer."""
        self._state = state
        self._offline = False
        self._loaded: Conversation | None = None
        self._before: dict[str, Any] | None = None  # the part the segment began from; None: not begun
        with _OUTAGES_LOCK:
            self._outage = _OUTAGES.setdefault(state, _Outage())

    async def get(self, pending: Pending) -> ToolResult | None:
        return None if self._offline else await super().get(pending)

    async def set(self, pending: Pending, result: ToolResult, ttl: float | None) -> None:
        if not self._offline:
            await super().set(pending, result, self.lifetime if ttl is None else min(ttl, self.lifetime))

    async def begin(self, gates: Gates) -> None:
        """Load the conversation and restore *gates* (the engine's) from it."""
        loaded = await self._reach(functools.partial(self._state.load, self.conversation))
        part = empty_part() if loaded is None else part_of(loaded.data)
        if part["gates"] is not None:
            gates.restore(part["gates"])
        self._offline, self._loaded = loaded is None, loaded
        self._before = {"turns": part["turns"], "gates": gates.dump()}

    async def commit(self, gates: Gates) -> None:
        """Merge what the calls did to *gates* into the stored conversation (nothing if :meth:`begin` did not finish).

        Never raises but cancellation: a store out of reach was warned of, and after
        :data:`COMMIT_ATTEMPTS` lost races a warning says the segment's bookkeeping is lost.
        """
        before, self._before = self._before, None
        if before is None:
            return
        after = {"turns": before["turns"] + 1, "gates": gates.dump()}  # a segment is one turn
        current = self._loaded
        for _ in range(COMMIT_ATTEMPTS):
            if current is None:
                current = await self._reach(functools.partial(self._state.load, self.conversation))
                if current is None:
                    return
            store = functools.partial(
                self._state.store,
                self.conversation,
                merged(current.data, before, after),
                current.version,
                self.lifetime,
            )
            stored = await self._reach(store)
            if stored is None or stored:
                return
            current = None  # another segment of the conversation stored since: read it again
        text = (
            f"the conversation state: a request lost the race to store its bookkeeping {COMMIT_ATTEMPTS} times"
            " to others of the same conversation; its calls do not count for the conversation"
        )
        warnings.warn(CacheWarning(text), stacklevel=2)

    async def _reach(self, operation: Callable[[], _T]) -> _T | None:
        """*operation*'s value, from a worker thread within :attr:`wait`; ``None`` if out of reach."""
        try:
            answered, value = await self._off_loop(operation, self.wait)
        except ConnectionError as exc:
            answered, value, detail = False, None, str(exc)
        else:
            detail = f"no answer within {format_duration(self.wait)}"
        if answered:
            self._outage.recovered()
            return value
        if self._outage.failed():
            text = (
                f"the conversation state is unavailable ({detail}); requests run on an empty conversation until"
                " it is back: a depends_on dependency must run again, and the session cache is not used"
            )
            warnings.warn(CacheWarning(text), stacklevel=2)
        return None
