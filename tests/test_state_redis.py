"""The state backend's Redis side (issue 19): the test setup's real ``redis-server``.

The server comes from the ``redis_server`` fixture (``tests/_redis.py``): a process of its own
per test on 127.0.0.1, skipped, saying how to install it, where ``redis-server`` is missing.
"""

from __future__ import annotations

import redis
from _redis import RedisServer


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
