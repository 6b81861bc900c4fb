"""The state backend's Redis side (issue 19): the test setup's real ``redis-server``, and the fleet-wide limits.

The server comes from the ``redis_server`` fixture (``tests/_redis.py``): a process of its own
per test on 127.0.0.1, skipped, saying how to install it, where ``redis-server`` is missing.
The limits' contract (the same tests as the in-memory backend's) is in ``tests/test_state.py``;
here is what only Redis has: replicas, expiring keys, restarts and outages.
"""

from __future__ import annotations

import pytest
import redis
import trio
from _redis import RedisServer

from toolflow._state_redis import RedisLimits


def test_the_fixture_serves_a_real_redis(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        assert client.ping() is True
        client.set("toolflow:probe", "value")
        assert client.get("toolflow:probe") == b"value"
    finally:
        client.close()


def test_a_restarted_server_is_empty_on_the_same_port(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        client.set("toolflow:probe", "value")
        redis_server.restart()
        # The pool's connection died with the server; redis-py reconnects once on a connection error.
        assert client.get("toolflow:probe") is None
    finally:
        client.close()


# --------------------------------------------------------------------------- fleet-wide limits


async def test_two_replicas_share_the_limit_under_fifty_concurrent_calls(redis_server: RedisServer) -> None:
    replicas = [RedisLimits(redis_server.url, timeout=10) for _ in range(2)]
    taken: list[bool] = []

    async def one(index: int) -> None:
        replica = replicas[index % 2]
        taken.append(await trio.to_thread.run_sync(replica.acquire, "slow", 2, f"call-{index}", 60.0))

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for index in range(50):
                    nursery.start_soon(one, index)
    finally:
        for replica in replicas:
            replica.close()
    assert sorted(taken) == [False] * 48 + [True] * 2


def test_the_keys_expire_in_redis_too(redis_server: RedisServer) -> None:
    limits = RedisLimits(redis_server.url, prefix="fleet-a:", timeout=10)
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        assert limits.acquire("tool", 1, "a", ttl=30)
        assert limits.admit_rate("tool", 5, 60)
        assert 0 < client.pttl("fleet-a:lease:tool") <= 30_001
        assert 0 < client.pttl("fleet-a:rate:tool") <= 60_001
        # A longer lease keeps the key alive for itself; a shorter one does not cut it short.
        assert limits.acquire("tool", 2, "b", ttl=300)
        assert limits.acquire("tool", 3, "c", ttl=1)
        assert client.pttl("fleet-a:lease:tool") > 30_001
        # Another prefix is another fleet.
        other = RedisLimits(redis_server.url, prefix="fleet-b:", timeout=10)
        assert other.acquire("tool", 1, "z", ttl=30)
        other.close()
    finally:
        limits.close()
        client.close()


def test_a_redis_restart_forgets_the_limits_and_they_work_again(redis_server: RedisServer) -> None:
    limits = RedisLimits(redis_server.url, timeout=10)
    try:
        assert limits.acquire("tool", 1, "a", ttl=60)
        assert not limits.acquire("tool", 1, "b", ttl=60)
        assert limits.admit_rate("tool", 1, 60)
        assert not limits.admit_rate("tool", 1, 60)
        redis_server.restart()
        # The pool's connection died and the scripts were forgotten: redis-py reconnects and
        # loads them again. Without persistence the leases and counts went with the server.
        assert limits.acquire("tool", 1, "b", ttl=60)
        assert not limits.acquire("tool", 1, "a", ttl=60)
        assert limits.admit_rate("tool", 1, 60)
        assert not limits.admit_rate("tool", 1, 60)
    finally:
        limits.close()


def test_an_unavailable_redis_raises_connection_error_and_recovers(redis_server: RedisServer) -> None:
    limits = RedisLimits(redis_server.url, timeout=10)
    try:
        assert limits.acquire("tool", 1, "a", ttl=60)
        redis_server.kill()
        with pytest.raises(ConnectionError, match="Redis is unavailable"):
            limits.acquire("tool", 1, "b", ttl=60)
        with pytest.raises(ConnectionError, match="Redis is unavailable"):
            limits.release("tool", "a")
        with pytest.raises(ConnectionError, match="Redis is unavailable"):
            limits.admit_rate("tool", 1, 60)
        redis_server.start()
        assert limits.acquire("tool", 1, "b", ttl=60)
    finally:
        limits.close()
