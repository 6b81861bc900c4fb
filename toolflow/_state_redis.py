"""The Redis state backend (issue 19): what a fleet of ``toolflow serve`` replicas shares.

:class:`RedisState` implements :class:`toolflow._state.StateBackend` (docs/design.md "State
backends") with redis-py's synchronous client, called from worker threads. Its keys, all under
one prefix (``toolflow:`` by default; one fleet's keys apart from another's):

- ``<prefix>cache:<namespace>:<key>``: a sealed cached result (:func:`toolflow._state.seal`;
  with the fleet's secret, *keys*, the seal is a MAC),
  expiring in Redis with its TTL; the persistent cache's keys are ``cache_key``'s, which hold the
  tool's spec digest, so editing a spec leaves its old entries to expire unread. A value that
  does not verify (damaged, written under another key, another program's) is a miss;
- ``<prefix>conversation:<id>``: a conversation's state, ``<version>:<expiry>:<tag><json>``,
  replaced only by a store naming the version it read (one Lua script: compare and set);
- the leases and rate counters of :class:`RedisLimits`, each operation one Lua script, atomic on
  the server:

- a tool's leases are a sorted set ``<prefix>lease:<tool>`` of holders scored by their expiry;
  acquiring drops the expired ones, then adds or renews the holder if it holds one already or
  fewer than the limit do;
- a tool's rate counter is a sorted set ``<prefix>rate:<tool>`` of calls scored by their time;
  admitting drops those older than the period, then adds the call if fewer than the limit remain.

Both scripts are idempotent (a holder, a call's id): when redis-py resends one after a lost
connection, nothing is counted twice. Times are the caller's clock (``time.time``): the
replicas' clocks must agree to well within a lease's TTL, as NTP keeps them. The keys also
expire in Redis (after the longest lease, after the period), so a tool that is no longer
called leaves nothing behind.

Redis unavailable: a cache operation is a miss or does nothing, with one
:class:`~toolflow.CacheWarning` per outage (the first failure after a success); every other
operation raises the built-in :class:`ConnectionError`, and the caller applies the spec's choice
(fail closed or open). Redis restarted without persistence: the cache, the conversations, the
leases and counts are gone, so for up to a lease's TTL the fleet may run more calls than the limit.
A URL's password is never shown: :func:`masked_url` is how every message names the server.
"""

from __future__ import annotations

import json
import math
import secrets
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import redis

from toolflow._cache import CacheWarning
from toolflow._errors import UsageError
from toolflow._results import ToolResult
from toolflow._state import (
    LEASE_TTL,
    MIN_LEASE_TTL,
    Conversation,
    HandleKeys,
    masked_url,
    seal,
    tag_of,
    tagged,
    unseal,
)

__all__ = ["RedisLimits", "RedisState"]

_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[4]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
  end
  return 1
end
return 0
"""
"""KEYS: the lease set. ARGV: now, the new expiry, the limit, the holder, the key's lifetime (ms)."""

_ADMIT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return 1
end
return 0
"""
"""KEYS: the call set. ARGV: now, the window's start, the limit, the call's id, the key's lifetime (ms)."""

_STORE = """
local now = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
local version = 0
if current then
  local found, expires = string.match(current, '^(%d+):([^:]+):')
  if found and (expires == '-' or tonumber(expires) > now) then
    version = tonumber(found)
  end
end
if version ~= tonumber(ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
return 1
"""
"""KEYS: the conversation. ARGV: now, the version read, the new value, its lifetime (ms)."""

_LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

_TAG_DIGITS = 32  # a conversation's seal, BLAKE2b-128 in hex


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000) + 1)


class RedisLimits:
    """Leases and rate counters shared by every replica that uses the same Redis and *prefix*.

    Args:
        url: The server, as ``redis://host:port/db`` (``rediss://`` for TLS).
        prefix: The start of every key (one fleet's keys apart from another's).
        clock: Returns the current time in seconds (``time.time``; tests pass a fake clock).
        timeout: Seconds a connection or a reply may take before the operation gives up.
        lease_ttl: Seconds the ``concurrency`` leases this process takes live unless renewed
            (the engine renews them every third of it; ``TOOLFLOW_LEASE_TTL`` for the commands).

    Raises:
        ValueError: *lease_ttl* is not a number of at least :data:`toolflow._state.MIN_LEASE_TTL`.
        UsageError: redis-py does not accept *url* (a bad port, database or query option).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolflow:",
        clock: Callable[[], float] = time.time,
        timeout: float = 1.0,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        if type(lease_ttl) not in (int, float) or not MIN_LEASE_TTL <= lease_ttl < math.inf:
            msg = f"lease_ttl must be a number of seconds of at least {MIN_LEASE_TTL:g}, got {lease_ttl!r}"
            raise ValueError(msg)
        self.lease_ttl = float(lease_ttl)
        """Seconds the leases this process takes live unless renewed (the engine's ``FleetLimits`` reads it)."""
        try:  # the URL's own socket_timeout and socket_connect_timeout, when it has them, win over *timeout*
            self._client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        except ValueError as exc:  # redis-py's reading of the URL: its port, database or a query option
            msg = f"state {masked_url(url)!r} is not a Redis URL redis-py accepts: {exc}"
            raise UsageError(msg) from None
        self.url = masked_url(url)
        """The server, as messages may show it (no password)."""
        self._prefix = prefix
        self._clock = clock
        self._acquire = self._client.register_script(_ACQUIRE)
        self._admit = self._client.register_script(_ADMIT)
        self._store = self._client.register_script(_STORE)  # RedisState's (one client set-up for both)
        self._down = False  # in an outage of the caches, which one warning has reported (RedisState)
        self._down_lock = threading.Lock()

    def _run(self, operation: Callable[[], Any]) -> Any:
        try:
            return operation()
        except _LOST as exc:
            msg = f"Redis at {self.url} is unavailable: {exc}"
            raise ConnectionError(msg) from exc

    def acquire(self, name: str, limit: int, holder: str, ttl: float) -> bool:
        now = float(self._clock())
        key = f"{self._prefix}lease:{name}"
        args: list[str | int] = [repr(now), repr(now + ttl), limit, holder, _ms(ttl)]
        return bool(self._run(lambda: self._acquire(keys=[key], args=args)))

    def release(self, name: str, holder: str) -> None:
        self._run(lambda: self._client.zrem(f"{self._prefix}lease:{name}", holder))

    def admit_rate(self, name: str, limit: int, period: float) -> bool:
        now = float(self._clock())
        key = f"{self._prefix}rate:{name}"
        call = f"{now!r}:{secrets.token_hex(8)}"
        args: list[str | int] = [repr(now), repr(now - period), limit, call, _ms(period)]
        return bool(self._run(lambda: self._admit(keys=[key], args=args)))

    def rate_wait(self, name: str, limit: int, period: float) -> float:
        now = float(self._clock())
        key = f"{self._prefix}rate:{name}"
        found = self._run(lambda: self._client.zrangebyscore(key, f"({now - period!r}", "+inf", withscores=True))
        times = sorted(float(score) for _, score in found)
        return 0.0 if len(times) < limit else times[len(times) - limit] + period - now

    def close(self) -> None:
        self._client.close()


class RedisState(RedisLimits):
    """The state backend of a fleet: every replica that uses the same Redis and *prefix* shares it.

    Thread-safe (redis-py's connection pool); the engine calls it from worker threads.

    Args:
        url: The server, as ``redis://[:password@]host:port/db`` (``rediss://`` for TLS).
        prefix: The start of every key (one fleet's keys apart from another's).
        clock: Returns the current time in seconds (``time.time``; tests pass a fake clock).
        timeout: Seconds a connection or a reply may take before the operation gives up.
        keys: The fleet's shared secret (``TOOLFLOW_STATE_SECRET``); with it, cached results and
            conversations are sealed with a MAC, and whatever verifies was written by a replica.
        lease_ttl: As :class:`RedisLimits`'s.
    """

    shared = True
    """Every replica on the same Redis shares it: the persistent cache, the leases, the counts."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolflow:",
        clock: Callable[[], float] = time.time,
        timeout: float = 1.0,
        keys: HandleKeys | None = None,
        lease_ttl: float = LEASE_TTL,
    ) -> None:
        super().__init__(url, prefix=prefix, clock=clock, timeout=timeout, lease_ttl=lease_ttl)
        # With the fleet's secret, what is stored is sealed with a MAC that only the replicas can
        # compute: whoever can write to Redis but lacks the secret cannot plant a result or a
        # conversation that verifies. Without one, the seal is a checksum against damage only.
        self._secrets = () if keys is None else keys.derived("state seal")

    def _cache_key(self, namespace: str, key: str) -> bytes:
        return f"{self._prefix}cache:{namespace}:".encode() + key.encode("utf-8", "surrogatepass")

    def _conversation_key(self, conversation: str) -> str:
        return f"{self._prefix}conversation:{conversation}"

    def _cached(self, operation: Callable[[], Any]) -> Any:
        """*operation*'s value, or ``None`` in an outage, whose first failure is one :class:`CacheWarning`."""
        try:
            value = operation()
        except _LOST as exc:
            with self._down_lock:
                first, self._down = not self._down, True
            if first:
                text = f"cache Redis at {self.url} is unavailable ({exc}); calls run without it until it is back"
                warnings.warn(CacheWarning(text), stacklevel=4)
            return None
        if self._down:
            with self._down_lock:
                self._down = False
        return value

    def cache_get(self, namespace: str, key: str) -> ToolResult | None:
        sealed = self._cached(lambda: self._client.get(self._cache_key(namespace, key)))
        if type(sealed) is not bytes:
            return None
        return unseal(key, sealed, float(self._clock()), self._secrets)

    def cache_set(self, namespace: str, key: str, result: ToolResult, ttl: float | None) -> None:
        if ttl is not None and ttl <= 0:
            return
        now = float(self._clock())
        sealed = seal(key, result, None if ttl is None else now + ttl, self._secrets)
        if sealed is None:
            return
        expiry = None if ttl is None else _ms(ttl)
        self._cached(lambda: self._client.set(self._cache_key(namespace, key), sealed, px=expiry))

    def load(self, conversation: str) -> Conversation:
        stored = self._run(lambda: self._client.get(self._conversation_key(conversation)))
        return _conversation(conversation, stored, float(self._clock()), self._secrets)

    def store(self, conversation: str, data: Mapping[str, Any], version: int, ttl: float) -> bool:
        now = float(self._clock())
        text = json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        tag = tag_of(f"{conversation}\0{version + 1}", text, now + ttl, self._secrets)
        value = f"{version + 1}:{now + ttl!r}:".encode() + tag.hex().encode() + text
        args: list[str | int | bytes] = [repr(now), version, value, _ms(ttl)]
        return bool(self._run(lambda: self._store(keys=[self._conversation_key(conversation)], args=args)))

    def forget(self, conversation: str) -> None:
        pattern = _glob_escaped(f"{self._prefix}cache:{conversation}:") + "*"

        def forget() -> None:
            keys = [self._conversation_key(conversation), *self._client.scan_iter(match=pattern, count=500)]
            self._client.delete(*keys)

        self._run(forget)


def _glob_escaped(text: str) -> str:
    """*text* as a Redis ``MATCH`` pattern that matches only itself."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)


def _conversation(conversation: str, stored: object, now: float, secrets: tuple[bytes, ...]) -> Conversation:
    """The conversation stored as *stored* (``<version>:<expiry>:<tag><json>``); version 0: none, expired, forged.

    The tag (32 hex digits) seals the conversation's id, the version, the expiry and the JSON
    (:func:`toolflow._state.tag_of`), so a document moved to another id or rolled back to an
    older version does not verify either.
    """
    if type(stored) is not bytes:
        return Conversation(0, {})
    version, _, rest = stored.partition(b":")
    expires, _, rest = rest.partition(b":")
    tag, text = rest[:_TAG_DIGITS], rest[_TAG_DIGITS:]
    try:
        number, deadline = int(version), float(expires)
        sealed = bytes.fromhex(tag.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return Conversation(0, {})
    if not math.isfinite(deadline) or now >= deadline or number < 1:
        return Conversation(0, {})
    if not tagged(sealed, f"{conversation}\0{number}", text, deadline, secrets):
        return Conversation(0, {})
    try:
        data = json.loads(text.decode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return Conversation(0, {})
    return Conversation(number, data) if type(data) is dict else Conversation(0, {})
