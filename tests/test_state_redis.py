"""The state backend's Redis side (issue 19): the test setup's real ``redis-server``, and the fleet-wide limits.

The server comes from the ``redis_server`` fixture (``tests/_redis.py``): a process of its own
per test on 127.0.0.1, skipped, saying how to install it, where ``redis-server`` is missing.
The limits' contract (the same tests as the in-memory backend's) is in ``tests/test_state.py``;
here is what only Redis has: replicas, expiring keys, restarts and outages.
"""

from __future__ import annotations

import re
import warnings

import pytest
import redis
import trio
from _redis import RedisServer

from toolflow._cache import CacheWarning
from toolflow._results import ToolResult
from toolflow._state import PERSISTENT, HandleKeys, masked_url
from toolflow._state_redis import RedisLimits, RedisState


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
        with pytest.raises(ConnectionError, match="is unavailable"):
            limits.acquire("tool", 1, "b", ttl=60)
        with pytest.raises(ConnectionError, match="is unavailable"):
            limits.release("tool", "a")
        with pytest.raises(ConnectionError, match="is unavailable"):
            limits.admit_rate("tool", 1, 60)
        redis_server.start()
        assert limits.acquire("tool", 1, "b", ttl=60)
    finally:
        limits.close()


# --------------------------------------------------------------------------- the whole backend


RESULT = ToolResult(success=True, data={"answer": 42})


def test_two_replicas_share_the_caches_and_conversations(redis_server: RedisServer) -> None:
    one, two = (RedisState(redis_server.url, timeout=10) for _ in range(2))
    try:
        one.cache_set(PERSISTENT, "look:abc:{}", RESULT, 60)
        assert two.cache_get(PERSISTENT, "look:abc:{}") == RESULT
        read = two.load("conv-1")
        assert one.store("conv-1", {"tick": 1}, read.version, ttl=60)
        assert not two.store("conv-1", {"tick": 9}, read.version, ttl=60)  # one stored since: read again
        again = two.load("conv-1")
        assert (again.version, dict(again.data)) == (1, {"tick": 1})
        assert two.store("conv-1", {"tick": 2}, again.version, ttl=60)
        assert one.load("conv-1").data == {"tick": 2}
    finally:
        one.close()
        two.close()


def test_entries_expire_in_redis_with_their_ttl(redis_server: RedisServer) -> None:
    state = RedisState(redis_server.url, prefix="fleet-a:", timeout=10)
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        state.cache_set(PERSISTENT, "k", RESULT, 30)
        state.cache_set(PERSISTENT, "forever", RESULT, None)
        assert state.store("conv", {"tick": 1}, 0, ttl=120)
        assert 0 < client.pttl("fleet-a:cache:persistent:k") <= 30_001
        assert client.pttl("fleet-a:cache:persistent:forever") == -1
        assert 0 < client.pttl("fleet-a:conversation:conv") <= 120_001
    finally:
        state.close()
        client.close()


def test_a_damaged_or_foreign_value_is_a_miss_never_another_result(redis_server: RedisServer) -> None:
    state = RedisState(redis_server.url, timeout=10)
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        state.cache_set(PERSISTENT, "a", RESULT, None)
        state.cache_set(PERSISTENT, "b", ToolResult(success=True, data="b's"), None)
        sealed = client.get("toolflow:cache:persistent:a")
        assert isinstance(sealed, bytes)
        client.set("toolflow:cache:persistent:b", sealed)  # a's value moved under b's key
        assert state.cache_get(PERSISTENT, "b") is None
        client.set("toolflow:cache:persistent:a", sealed[:-2] + b"3}")  # damaged
        assert state.cache_get(PERSISTENT, "a") is None
        client.set("toolflow:cache:persistent:c", b'{"success": true, "data": "forged"}')  # another program's
        assert state.cache_get(PERSISTENT, "c") is None
        client.set("toolflow:conversation:conv", b"not a conversation")
        assert state.load("conv").version == 0
        assert state.store("conv", {"tick": 1}, 0, ttl=60)
    finally:
        state.close()
        client.close()


FLEET = HandleKeys.from_secrets("the fleet's shared secret")
ROTATED = HandleKeys.from_secrets("the fleet's next secret!!", "the fleet's shared secret")


def test_with_the_fleets_secret_only_a_replica_can_write_what_verifies(redis_server: RedisServer) -> None:
    """Whoever can write to Redis but lacks the secret cannot plant a cached result or a conversation."""
    replica = RedisState(redis_server.url, timeout=10, keys=FLEET)
    outsider = RedisState(redis_server.url, timeout=10)  # same Redis, no secret: computes the unkeyed seal
    client = redis.Redis.from_url(redis_server.url, socket_timeout=10)
    try:
        outsider.cache_set(PERSISTENT, "planted", ToolResult(success=True, data="forged"), None)
        assert outsider.cache_get(PERSISTENT, "planted") is not None  # without a secret it verifies ...
        assert replica.cache_get(PERSISTENT, "planted") is None  # ... but not for the fleet
        replica.cache_set(PERSISTENT, "real", RESULT, None)
        assert replica.cache_get(PERSISTENT, "real") == RESULT
        assert outsider.cache_get(PERSISTENT, "real") is None
        assert outsider.store("conv", {"gates": "forged"}, 0, ttl=60)
        assert replica.load("conv").version == 0
        assert replica.store("mine", {"tick": 1}, 0, ttl=60)
        assert replica.load("mine").data == {"tick": 1}
        stored = client.get("toolflow:conversation:mine")
        assert isinstance(stored, bytes)
        client.set("toolflow:conversation:other", stored)  # moved to another conversation's id
        assert replica.load("other").version == 0
        client.set("toolflow:conversation:mine", stored.replace(b'"tick":1', b'"tick":7'))  # edited
        assert replica.load("mine").version == 0
    finally:
        for state in (replica, outsider):
            state.close()
        client.close()


def test_a_rotated_secret_still_reads_what_the_old_one_sealed(redis_server: RedisServer) -> None:
    """During a rotation the new secret seals and both verify; once the old one is dropped, its entries are misses."""
    old = RedisState(redis_server.url, timeout=10, keys=FLEET)
    rotating = RedisState(redis_server.url, timeout=10, keys=ROTATED)
    new = RedisState(redis_server.url, timeout=10, keys=HandleKeys((ROTATED.keys[0],)))
    try:
        old.cache_set(PERSISTENT, "k", RESULT, None)
        assert old.store("conv", {"tick": 1}, 0, ttl=60)
        assert rotating.cache_get(PERSISTENT, "k") == RESULT
        assert rotating.load("conv").version == 1
        assert new.cache_get(PERSISTENT, "k") is None
        assert new.load("conv").version == 0
        rotating.cache_set(PERSISTENT, "k2", RESULT, None)
        assert new.cache_get(PERSISTENT, "k2") == RESULT
    finally:
        for state in (old, rotating, new):
            state.close()


def test_forgetting_a_conversation_drops_its_session_cache_only(redis_server: RedisServer) -> None:
    state = RedisState(redis_server.url, timeout=10)
    try:
        for conversation in ("c*", "c[1]", "c?"):
            state.cache_set(conversation, "k", RESULT, None)
            assert state.store(conversation, {"tick": 1}, 0, ttl=60)
        state.cache_set(PERSISTENT, "k", RESULT, None)
        state.forget("c*")  # glob characters match themselves only
        assert state.cache_get("c*", "k") is None
        assert state.load("c*").version == 0
        assert state.cache_get("c[1]", "k") == RESULT
        assert state.cache_get("c?", "k") == RESULT
        assert state.load("c?").version == 1
        assert state.cache_get(PERSISTENT, "k") == RESULT
    finally:
        state.close()


def test_an_outage_is_one_cache_warning_and_misses_and_the_rest_raises(redis_server: RedisServer) -> None:
    state = RedisState(redis_server.url, timeout=10)
    try:
        state.cache_set(PERSISTENT, "k", RESULT, None)
        redis_server.kill()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert state.cache_get(PERSISTENT, "k") is None
            state.cache_set(PERSISTENT, "k", RESULT, None)
            assert state.cache_get(PERSISTENT, "k") is None
        assert [type(w.message) for w in caught] == [CacheWarning]  # one per outage
        assert re.search(r"Redis at redis://127\.0\.0\.1:\d+/0 is unavailable", str(caught[0].message))
        for operation in (lambda: state.load("c"), lambda: state.store("c", {}, 0, 60), lambda: state.forget("c")):
            with pytest.raises(ConnectionError, match="is unavailable"):
                operation()
        redis_server.start()  # empty: a restart without persistence
        assert state.cache_get(PERSISTENT, "k") is None
        state.cache_set(PERSISTENT, "k", RESULT, None)
        assert state.cache_get(PERSISTENT, "k") == RESULT
        redis_server.kill()
        with pytest.warns(CacheWarning):  # the next outage warns again
            assert state.cache_get(PERSISTENT, "k") is None
    finally:
        state.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@cache.internal:6379/0", "redis://:***@cache.internal:6379/0"),
        ("rediss://fleet:s3cret@cache.internal/1", "rediss://fleet:***@cache.internal/1"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://token@cache.internal", "redis://:***@cache.internal"),
        ("redis://cache.internal/0?password=s3cret&db=1", "redis://cache.internal/0?password=***&db=1"),
    ],
)
def test_a_password_is_never_shown(url: str, shown: str) -> None:
    assert masked_url(url) == shown
    state = RedisState(url, timeout=10)
    assert state.url == shown
    state.close()
