"""Fleet-wide limits in Redis: ``concurrency`` leases and ``rate_limit`` counters (issue 19; not wired in).

The first part of the Redis state backend (docs/design.md "State backends"): the
:class:`toolflow._state.Limits` half of :class:`toolflow._state.StateBackend`, with redis-py's
synchronous client, called (once wired in) from worker threads. Each operation is one Lua script,
atomic on the server:

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

Redis unavailable: every operation raises the built-in :class:`ConnectionError`, and the caller
applies the spec's choice (fail closed or open). Redis restarted without persistence: the leases
and counts are gone, so for up to a lease's TTL the fleet may run more calls than the limit.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any

import redis

__all__ = ["RedisLimits"]

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

_LOST = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000) + 1)


class RedisLimits:
    """Leases and rate counters shared by every replica that uses the same Redis and *prefix*.

    Args:
        url: The server, as ``redis://host:port/db`` (``rediss://`` for TLS).
        prefix: The start of every key (one fleet's keys apart from another's).
        clock: Returns the current time in seconds (``time.time``; tests pass a fake clock).
        timeout: Seconds a connection or a reply may take before the operation gives up.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "toolflow:",
        clock: Callable[[], float] = time.time,
        timeout: float = 1.0,
    ) -> None:
        self._client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._prefix = prefix
        self._clock = clock
        self._acquire = self._client.register_script(_ACQUIRE)
        self._admit = self._client.register_script(_ADMIT)

    def _run(self, operation: Callable[[], Any]) -> Any:
        try:
            return operation()
        except _LOST as exc:
            msg = f"Redis is unavailable: {exc}"
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

    def close(self) -> None:
        self._client.close()
