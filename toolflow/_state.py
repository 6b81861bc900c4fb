"""The state backend: what the engines of one process, or a fleet of ``toolflow serve`` replicas, share (issue 19).

Each engine keeps some state in its own memory (the ``session`` and ``tick`` caches, the
``depends_on`` successes and the rules' counts in :class:`toolflow._gates.Gates`, the per-tool
``concurrency`` slots) and the persistent cache is a local SQLite file. Issue 19 puts it behind
one interface, :class:`StateBackend`, with two implementations: :class:`MemoryState` for one
process, and :class:`toolflow._state_redis.RedisState` for a fleet (docs/design.md "State
backends"). Wired in so far: the persistent cache (:class:`StateCache`, when the backend's
:attr:`~StateBackend.shared` is true). ``tests/test_state.py`` runs the contract's tests over
every backend.

The interface is synchronous: the engine calls a backend from worker threads, as it calls the
persistent store, because the chosen client (redis-py, measured against coredis in
``tests/bench/bench_redis.py``) is synchronous. Every operation is one round trip to the store
(a Redis Lua script where it must be atomic).

What it covers:

- **caches** (:meth:`StateBackend.cache_get`, :meth:`StateBackend.cache_set`): the persistent
  cache (namespace :data:`PERSISTENT`) and each conversation's session cache (its conversation
  id as the namespace). Values are sealed with a checksum of their key, expiry and bytes
  (:func:`seal`), and an entry that does not verify is a miss.
- **conversation state** (:meth:`StateBackend.load`, :meth:`StateBackend.store`): a small JSON
  document per conversation (the tick, the ``depends_on`` successes, the rules' counts, and what
  later issues keep per conversation), versioned: a store names the version it read and fails if
  another replica stored since (compare-and-set), so two replicas never silently lose each
  other's counts; the caller reads again and retries.
- **leases** (:meth:`StateBackend.acquire`, :meth:`StateBackend.release`): a tool's
  ``concurrency`` across the fleet. A lease expires on its own (a replica that dies holds its
  leases only until then).
- **rate counters** (:meth:`StateBackend.admit_rate`): at most *limit* calls of a tool in any
  *period* seconds across the fleet (a sliding window).
- **the keys of conversation handles** (:class:`HandleKeys`): from a secret the fleet shares,
  never from the store (whoever can read the store must not be able to forge handles); two keys
  at once for rotation.

This module is in the registry layer beside :mod:`toolflow._cache`: no trio, no I/O of its own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import re
import secrets
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from toolflow._cache import MAX_STORED_BYTES, _checksum, _encode, _result_from_json, _stored_json, _Warner
from toolflow._results import ToolResult

__all__ = [
    "LEASE_TTL",
    "MIN_LEASE_TTL",
    "PERSISTENT",
    "Conversation",
    "HandleKeys",
    "Limits",
    "MemoryState",
    "StateBackend",
    "StateCache",
    "masked_url",
    "new_conversation_id",
    "seal",
    "tag_of",
    "tagged",
    "unseal",
]

PERSISTENT = "persistent"
"""The cache namespace of the persistent cache; any other namespace is a conversation's id."""

LEASE_TTL = 30.0
"""Seconds a ``concurrency`` lease lives unless renewed (the longest a dead replica holds one), by default.

A shared backend says how long the leases its process takes live in its ``lease_ttl``
(:class:`toolflow._state_redis.RedisLimits`); the engine renews them every third of it."""

MIN_LEASE_TTL = 1.0
"""The shortest lease TTL allowed: a lease is renewed every third of it, and a renewal that comes later
than the TTL (a stalled process, a slow Redis) lets another replica take the lease of a call that
still runs."""

_HEADER = 16  # the checksum's length at the head of a sealed value
_NO_EXPIRY = "-"


# --------------------------------------------------------------------------- sealed values


def seal(key: str, result: ToolResult, expires: float | None, secrets: tuple[bytes, ...] = ()) -> bytes | None:
    """*result* as stored bytes that :func:`unseal` verifies; ``None`` if it must not be stored.

    Failures, results that are not JSON and results over the cache's size cap are not stored.
    The bytes are the tag, the expiry and the result's JSON. The tag is BLAKE2b-128 of key, expiry
    and value (as the SQLite store's rows), keyed with ``secrets[0]`` when there are *secrets*
    (:meth:`HandleKeys.derived`: the fleet's shared secret): a value read under another key, with
    another expiry, damaged anywhere, or, with a secret, written by anyone who does not hold it,
    does not verify.
    """
    if not result.success:
        return None
    try:
        value = _encode(_stored_json(result.to_dict()))
    except (TypeError, ValueError, RecursionError):
        return None
    if len(value) > MAX_STORED_BYTES:
        return None
    stamp = _NO_EXPIRY if expires is None else repr(float(expires))
    return tag_of(key, value, expires, secrets) + stamp.encode("ascii") + b"\n" + value


def unseal(key: str, sealed: bytes, now: float, secrets: tuple[bytes, ...] = ()) -> ToolResult | None:
    """The live result sealed under *key* (with one of *secrets*, if any); ``None``: damaged, moved, expired, forged."""
    stamp, newline, value = sealed[_HEADER:].partition(b"\n")
    if not newline:
        return None
    try:
        expires = None if stamp == _NO_EXPIRY.encode() else float(stamp.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if expires is not None and not math.isfinite(expires):
        return None
    if not tagged(sealed[:_HEADER], key, value, expires, secrets):
        return None
    if expires is not None and now >= expires:
        return None
    return _result_from_json(value)


def tagged(tag: bytes, key: str, value: bytes, expires: float | None, secrets: tuple[bytes, ...] = ()) -> bool:
    """Whether *tag* is the seal of *key*, *value* and *expires* under one of *secrets* (none: unkeyed)."""
    raw = _encode(key)
    return any(hmac.compare_digest(tag, _checksum(raw, value, expires, secret)) for secret in secrets or (b"",))


def tag_of(key: str, value: bytes, expires: float | None, secrets: tuple[bytes, ...] = ()) -> bytes:
    """The seal of *key*, *value* and *expires* that :func:`tagged` verifies (keyed with ``secrets[0]``, if any)."""
    return _checksum(_encode(key), value, expires, secrets[0] if secrets else b"")


# --------------------------------------------------------------------------- the interface


@attrs.frozen
class Conversation:
    """A conversation's state as a backend stored it: *data* (a JSON object) at *version*.

    Version 0 with empty data is a conversation that nothing has been stored for (or that expired).
    """

    version: int
    data: Mapping[str, Any]


@runtime_checkable
class Limits(Protocol):
    """Fleet-wide limits: ``concurrency`` leases and ``rate_limit`` counters (:class:`StateBackend`'s half of them).

    A store that is unavailable raises the built-in :class:`ConnectionError` (a client library's
    own errors are translated), so that the caller applies the spec's choice: fail closed or open.
    """

    def acquire(self, name: str, limit: int, holder: str, ttl: float) -> bool:
        """Take one of *limit* leases of *name* for *holder* for *ttl* seconds; ``False`` if all are held.

        A holder that already holds one renews it (its expiry moves on) and keeps it.
        """
        ...

    def release(self, name: str, holder: str) -> None:
        """Give back *holder*'s lease of *name* (nothing if it holds none, or it expired)."""
        ...

    def admit_rate(self, name: str, limit: int, period: float) -> bool:
        """Count a call of *name* if fewer than *limit* were counted in the last *period* seconds."""
        ...

    def rate_wait(self, name: str, limit: int, period: float) -> float:
        """Seconds until :meth:`admit_rate` would count a call of *name* (0: now); counts nothing."""
        ...

    def close(self) -> None:
        """Release the store's connections; the object is not used afterwards."""
        ...


@runtime_checkable
class StateBackend(Limits, Protocol):
    """The shared state of the engines of one process or a fleet (see the module's docstring).

    A store that is unavailable never fails a cache operation: it is a miss or a no-op. The
    others raise the built-in :class:`ConnectionError` (a client library's own errors are
    translated), so that the caller applies the spec's choice: a limit fails closed or open.
    """

    shared: bool
    """Whether other processes share it (Redis): the engine then keeps its persistent cache there
    rather than in the SQLite file, and takes a lease for each call of a tool with a ``concurrency``."""

    def cache_get(self, namespace: str, key: str) -> ToolResult | None:
        """The live, verified result under *key* in *namespace*, or ``None``."""
        ...

    def cache_set(self, namespace: str, key: str, result: ToolResult, ttl: float | None) -> None:
        """Keep the successful *result* under *key* for *ttl* seconds (``None``: no expiry; <= 0: not at all)."""
        ...

    def load(self, conversation: str) -> Conversation:
        """The state of *conversation* (version 0 and no data if there is none)."""
        ...

    def store(self, conversation: str, data: Mapping[str, Any], version: int, ttl: float) -> bool:
        """Replace *conversation*'s data if its version is still *version*; it then expires *ttl* seconds on.

        Returns whether it was stored (``False``: someone stored since; load again).
        """
        ...

    def forget(self, conversation: str) -> None:
        """Drop *conversation*'s state and session cache (the session ended)."""
        ...

    def close(self) -> None:
        """Release the store's connections; the backend is not used afterwards."""
        ...


# --------------------------------------------------------------------------- memory


_FIRST_SWEEP = 1024


class MemoryState:
    """The state of one process, in its memory: what every engine has today, behind the interface.

    Thread-safe (the engine calls backends from worker threads).

    Args:
        clock: Returns the current time in seconds (``time.time``; tests pass a fake clock).
    """

    shared = False
    """Nothing outside the process sees it: the persistent cache stays in the SQLite file, and a
    tool's ``concurrency`` is each engine's own."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._caches: dict[str, dict[str, bytes]] = {}
        self._conversations: dict[str, tuple[float, Conversation]] = {}
        self._leases: dict[str, dict[str, float]] = {}
        self._calls: dict[str, deque[float]] = {}
        self._sweep_at = _FIRST_SWEEP

    def cache_get(self, namespace: str, key: str) -> ToolResult | None:
        with self._lock:
            entries = self._caches.get(namespace, {})
            sealed = entries.get(key)
            result = None if sealed is None else unseal(key, sealed, self._clock())
            if result is None and sealed is not None:
                del entries[key]  # expired (nothing else goes wrong in memory): Redis's expiry does the same
        return result

    def cache_set(self, namespace: str, key: str, result: ToolResult, ttl: float | None) -> None:
        if ttl is not None and ttl <= 0:
            return
        sealed = seal(key, result, None if ttl is None else self._clock() + ttl)
        if sealed is not None:
            with self._lock:
                self._caches.setdefault(namespace, {})[key] = sealed

    def load(self, conversation: str) -> Conversation:
        with self._lock:
            entry = self._conversations.get(conversation)
            if entry is None or self._clock() >= entry[0]:
                return Conversation(0, {})
            return entry[1]

    def store(self, conversation: str, data: Mapping[str, Any], version: int, ttl: float) -> bool:
        # Stored as JSON text and read back: the data a caller gets is the data Redis would give it.
        copied = json.loads(json.dumps(dict(data)))
        with self._lock:
            now = self._clock()
            entry = self._conversations.get(conversation)
            current = 0 if entry is None or now >= entry[0] else entry[1].version
            if current != version:
                return False
            self._conversations[conversation] = (now + ttl, Conversation(version + 1, copied))
            if len(self._conversations) >= self._sweep_at:
                self._sweep(now)
            return True

    def _sweep(self, now: float) -> None:
        """Drop the expired conversations and their session caches; the next sweep comes at twice the size.

        A serve that mints a conversation for every request without a handle must not grow without end.
        """
        for expired in [c for c, (expires, _) in self._conversations.items() if now >= expires]:
            del self._conversations[expired]
            self._caches.pop(expired, None)  # its entries expired with it: none outlives the conversation's ttl
        self._sweep_at = max(_FIRST_SWEEP, 2 * len(self._conversations))

    def forget(self, conversation: str) -> None:
        with self._lock:
            self._conversations.pop(conversation, None)
            self._caches.pop(conversation, None)

    def acquire(self, name: str, limit: int, holder: str, ttl: float) -> bool:
        with self._lock:
            now = self._clock()
            holders = self._leases.setdefault(name, {})
            for expired in [h for h, expires in holders.items() if expires <= now]:
                del holders[expired]
            if holder not in holders and len(holders) >= limit:
                return False
            holders[holder] = now + ttl
            return True

    def release(self, name: str, holder: str) -> None:
        with self._lock:
            self._leases.get(name, {}).pop(holder, None)

    def admit_rate(self, name: str, limit: int, period: float) -> bool:
        with self._lock:
            now = self._clock()
            calls = self._calls.setdefault(name, deque())
            while calls and calls[0] <= now - period:
                calls.popleft()
            if len(calls) >= limit:
                return False
            calls.append(now)
            return True

    def rate_wait(self, name: str, limit: int, period: float) -> float:
        with self._lock:
            now = self._clock()
            window = [t for t in self._calls.get(name, ()) if t > now - period]
        return 0.0 if len(window) < limit else window[len(window) - limit] + period - now

    def close(self) -> None:
        with self._lock:
            self._caches.clear()
            self._conversations.clear()
            self._leases.clear()
            self._calls.clear()


_WARNERS: weakref.WeakKeyDictionary[StateBackend, _Warner] = weakref.WeakKeyDictionary()
_WARNERS_LOCK = threading.Lock()


class StateCache:
    """A namespace of a state backend as an engine's store (``_cache.PersistentStore``).

    The :data:`PERSISTENT` namespace holds the persistent cache; a conversation's id, its
    session cache (``open_engine(conversation=...)``). The backend is its owner's (the command
    or application that opened it): closing the store leaves it open for the other engines. A
    backend never raises from a cache operation (an outage is a miss, with its own warning), so
    the store is never ``busy``.
    """

    busy = False

    def __init__(self, state: StateBackend, namespace: str = PERSISTENT) -> None:
        self._state = state
        self._namespace = namespace
        # One warner per backend: its problems are reported once, however many engines
        # (toolflow serve's sessions) use it.
        with _WARNERS_LOCK:
            self._warner = _WARNERS.setdefault(state, _Warner("of the state backend"))

    def get(self, key: str) -> ToolResult | None:
        return self._state.cache_get(self._namespace, key)

    def set(self, key: str, result: ToolResult, ttl: float | None) -> None:
        self._state.cache_set(self._namespace, key, result, ttl)

    def clear(self) -> None:
        """Nothing: a fleet's entries expire in the store (clearing it is the store's operator's business)."""

    def close(self) -> None:
        """Nothing: the backend stays open for its owner's other engines."""

    def report(self, kind: str, detail: str) -> None:
        self._warner.warn(kind, detail)


# --------------------------------------------------------------------------- handles


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@attrs.frozen
class HandleKeys:
    """The keys that sign conversation handles (MCP 2026-07-28: the state's key, echoed in ``_meta``).

    The handle a client echoes is attacker-controlled: it is an HMAC-SHA256-signed text naming
    the conversation, the principal it is bound to and its expiry. :meth:`sign` uses the first
    key; :meth:`verify` accepts any (rotation: the fleet accepts the new and the old secret while
    every replica moves to the new one).

    Args:
        keys: The current key, then the ones still accepted.
    """

    keys: tuple[bytes, ...] = attrs.field()

    @keys.validator
    def _check(self, _attribute: Any, value: tuple[bytes, ...]) -> None:
        if not value or any(type(key) is not bytes or len(key) < 32 for key in value):
            msg = "HandleKeys: keys must be at least one key of 32 bytes or more"
            raise ValueError(msg)

    @classmethod
    def from_secrets(cls, *shared: str) -> HandleKeys:
        """Keys derived from the fleet's shared secrets (the current one first), each of 16 characters or more."""
        if not shared or any(type(s) is not str or len(s) < 16 for s in shared):
            msg = "HandleKeys: a shared secret must be a text of 16 characters or more"
            raise ValueError(msg)
        return cls(tuple(hashlib.sha256(b"toolflow conversation handle\0" + s.encode()).digest() for s in shared))

    @classmethod
    def random(cls) -> HandleKeys:
        """A key of this process alone (one replica: its handles are good only where they were minted)."""
        return cls((secrets.token_bytes(32),))

    def derived(self, purpose: str) -> tuple[bytes, ...]:
        """Keys for another use of the same secrets (*purpose* names it), in the same order.

        One secret serves the handles, the seal of stored state and the ``requestState`` of
        ``input_required`` results; a key derived for one purpose is worthless for another.
        """
        label = b"toolflow " + purpose.encode() + b"\0"
        return tuple(hashlib.sha256(label + key).digest() for key in self.keys)

    def sign(self, conversation: str, principal: str | None, expires: float) -> str:
        """A handle for *conversation*, bound to *principal* (``None``: none authenticated), valid until *expires*."""
        payload = json.dumps([conversation, principal, float(expires)], separators=(",", ":")).encode()
        return _b64(payload) + "." + _b64(hmac.new(self.keys[0], payload, hashlib.sha256).digest())

    def verify(self, handle: object, principal: str | None, now: float) -> str | None:
        """The conversation of *handle* if a key signed it for *principal* and it has not expired, else ``None``."""
        if type(handle) is not str or len(handle) > 1024:
            return None
        encoded, dot, mac = handle.partition(".")
        try:
            payload, tag = _unb64(encoded), _unb64(mac)
        except ValueError:
            return None
        if not dot or not any(
            hmac.compare_digest(tag, hmac.new(key, payload, hashlib.sha256).digest()) for key in self.keys
        ):
            return None
        conversation, bound, expires = json.loads(payload)
        return conversation if bound == principal and now < expires else None


def new_conversation_id() -> str:
    """A fresh, unguessable conversation id."""
    return secrets.token_urlsafe(18)


def masked_url(url: str) -> str:
    """*url* as messages and logs show it: what comes before its last ``@`` and any ``password=`` value as ``***``.

    ``redis://:secret@host:6379/0`` is shown as ``redis://:***@host:6379/0``; a user name before a
    password stays, one alone (which may be a token) is masked too.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        scheme, rest = "", url
    userinfo, at, host = rest.rpartition("@")
    shown = f"{scheme}{separator}{userinfo.partition(':')[0] if ':' in userinfo else ''}:***@{host}" if at else url
    return re.sub(r"(?i)(password=)[^&#]*", r"\1***", shown)
