"""The state backend's contract (issue 19): every backend passes the same tests.

``BACKENDS`` maps a name to a factory taking the test's fake clock and the URL of the test's
Redis server (``None`` for the backends that need none): the in-memory backend and
:class:`toolflow._state_redis.RedisState` against a real ``redis-server`` (the ``redis_server``
fixture, skipped, saying how to install it, where there is none). ``LIMITS`` does the same for
the fleet-wide limits alone (with :class:`toolflow._state_redis.RedisLimits`, their first part).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

import pytest
from _redis import RedisServer

from toolflow._cache import MAX_STORED_BYTES
from toolflow._results import ToolResult
from toolflow._state import (
    PERSISTENT,
    HandleKeys,
    Limits,
    MemoryState,
    StateBackend,
    new_conversation_id,
    seal,
    unseal,
)
from toolflow._state_redis import RedisLimits, RedisState


class Clock:
    """A clock the test moves by hand: no test waits for real time."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


BACKENDS: dict[str, Callable[[Clock, str | None], StateBackend]] = {
    "memory": lambda clock, url: MemoryState(clock=clock),
    "redis": lambda clock, url: RedisState(str(url), clock=clock, timeout=10),
}
LIMITS: dict[str, Callable[[Clock, str | None], Limits]] = {
    **BACKENDS,
    "redis-limits": lambda clock, url: RedisLimits(str(url), clock=clock, timeout=10),
}
NEEDS_REDIS = {"redis", "redis-limits"}
L = TypeVar("L", bound=Limits)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _url(request: pytest.FixtureRequest) -> str | None:
    """The URL of the test's own Redis server, for the backends that need one (started only for them)."""
    if request.param not in NEEDS_REDIS:
        return None
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def _opened(request: pytest.FixtureRequest, clock: Clock, factories: Mapping[str, Callable[..., L]]) -> Iterator[L]:
    state = factories[request.param](clock, _url(request))
    try:
        yield state
    finally:
        state.close()


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, clock: Clock) -> Iterator[StateBackend]:
    for state in _opened(request, clock, BACKENDS):
        assert isinstance(state, StateBackend)
        yield state


@pytest.fixture(params=sorted(LIMITS))
def limits(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Limits]:
    for state in _opened(request, clock, LIMITS):
        assert isinstance(state, Limits)
        yield state


RESULT = ToolResult(success=True, data={"items": ["kettle", "knife"], "text": "caf\u00e9 \ud800"})


# --------------------------------------------------------------------------- caches


def test_a_cached_result_reads_back_until_it_expires(backend: StateBackend, clock: Clock) -> None:
    backend.cache_set(PERSISTENT, "look:abc:{}", RESULT, 10)
    assert backend.cache_get(PERSISTENT, "look:abc:{}") == RESULT
    clock.now += 9.9
    assert backend.cache_get(PERSISTENT, "look:abc:{}") == RESULT
    clock.now += 0.1
    assert backend.cache_get(PERSISTENT, "look:abc:{}") is None


def test_what_is_not_cached(backend: StateBackend) -> None:
    backend.cache_set(PERSISTENT, "failure", ToolResult.failure("Error: no"), None)
    backend.cache_set(PERSISTENT, "no time", RESULT, 0)
    backend.cache_set(PERSISTENT, "not json", ToolResult(success=True, data={1j}), None)
    backend.cache_set(PERSISTENT, "too big", ToolResult(success=True, data="x" * MAX_STORED_BYTES), None)
    for key in ("failure", "no time", "not json", "too big", "never set"):
        assert backend.cache_get(PERSISTENT, key) is None, key


def test_namespaces_are_apart_and_a_forgotten_conversation_loses_its_session_cache(backend: StateBackend) -> None:
    one, two = new_conversation_id(), new_conversation_id()
    assert one != two
    backend.cache_set(one, "k", RESULT, None)
    assert backend.cache_get(one, "k") == RESULT
    assert backend.cache_get(two, "k") is None
    assert backend.cache_get(PERSISTENT, "k") is None
    backend.forget(one)
    assert backend.cache_get(one, "k") is None


def test_a_sealed_value_verifies_only_as_it_was_sealed() -> None:
    sealed = seal("k", RESULT, 2000.0)
    assert sealed is not None
    assert unseal("k", sealed, 1999.0) == RESULT
    assert unseal("k", sealed, 2000.0) is None  # expired
    assert unseal("other key", sealed, 0) is None
    # Any byte changed, the expiry moved, or the value cut short: a miss, never another result.
    for index in range(len(sealed)):
        damaged = bytearray(sealed)
        damaged[index] ^= 0x01
        assert unseal("k", bytes(damaged), 0) is None, index
    moved = sealed.replace(b"2000.0\n", b"9000.0\n")
    assert unseal("k", moved, 5000.0) is None
    assert unseal("k", sealed[:-1], 0) is None
    assert unseal("k", b"", 0) is None
    forever = seal("k", RESULT, None)
    assert forever is not None
    assert unseal("k", forever, 1e300) == RESULT


# --------------------------------------------------------------------------- conversations


def test_conversation_state_is_compare_and_set(backend: StateBackend, clock: Clock) -> None:
    conversation = new_conversation_id()
    first = backend.load(conversation)
    assert (first.version, dict(first.data)) == (0, {})
    state = {"tick": 1, "succeeded": ["login"], "counts": {"turn": {"search": 1}}}
    assert backend.store(conversation, state, first.version, ttl=60)
    # Another replica that read version 0 too cannot overwrite what was stored since.
    assert not backend.store(conversation, {"tick": 9}, first.version, ttl=60)
    second = backend.load(conversation)
    assert (second.version, dict(second.data)) == (1, state)
    assert backend.store(conversation, {**state, "tick": 2}, second.version, ttl=60)
    assert backend.load(conversation).data["tick"] == 2
    clock.now += 60
    assert backend.load(conversation).version == 0  # expired


def test_a_forgotten_conversation_starts_again(backend: StateBackend) -> None:
    conversation = new_conversation_id()
    assert backend.store(conversation, {"tick": 3}, 0, ttl=60)
    backend.forget(conversation)
    assert backend.load(conversation).version == 0
    assert backend.store(conversation, {"tick": 1}, 0, ttl=60)


# --------------------------------------------------------------------------- leases and rates


def test_leases_hold_the_limit_and_expire(limits: Limits, clock: Clock) -> None:
    assert limits.acquire("slow_tool", 2, "replica-a:1", ttl=30)
    assert limits.acquire("slow_tool", 2, "replica-b:1", ttl=30)
    assert not limits.acquire("slow_tool", 2, "replica-c:1", ttl=30)
    assert limits.acquire("other_tool", 2, "replica-c:1", ttl=30)  # another tool's leases are apart
    limits.release("slow_tool", "replica-a:1")
    assert limits.acquire("slow_tool", 2, "replica-c:1", ttl=30)
    assert not limits.acquire("slow_tool", 2, "replica-a:2", ttl=30)
    # replica-b died without releasing: its lease runs out; replica-c renewed its own meanwhile.
    clock.now += 20
    assert limits.acquire("slow_tool", 2, "replica-c:1", ttl=30)
    clock.now += 10
    assert limits.acquire("slow_tool", 2, "replica-a:2", ttl=30)
    assert not limits.acquire("slow_tool", 2, "replica-a:3", ttl=30)


def test_releasing_what_is_not_held_changes_nothing(limits: Limits) -> None:
    limits.release("tool", "nobody")
    assert limits.acquire("tool", 1, "a", ttl=30)
    limits.release("tool", "b")
    assert not limits.acquire("tool", 1, "b", ttl=30)


def test_the_rate_counter_is_a_sliding_window(limits: Limits, clock: Clock) -> None:
    assert limits.rate_wait("search", 3, 60) == 0
    assert [limits.admit_rate("search", 3, 60) for _ in range(4)] == [True, True, True, False]
    assert limits.rate_wait("search", 3, 60) == pytest.approx(60)
    assert limits.admit_rate("other", 1, 60)
    clock.now += 59.9
    assert limits.rate_wait("search", 3, 60) == pytest.approx(0.1)
    assert not limits.admit_rate("search", 3, 60)
    clock.now += 0.1  # the first three calls leave the window together
    assert limits.rate_wait("search", 3, 60) == 0
    assert [limits.admit_rate("search", 3, 60) for _ in range(4)] == [True, True, True, False]
    clock.now += 30
    assert limits.admit_rate("search", 4, 60)  # a higher limit: room for one more
    assert limits.rate_wait("search", 4, 60) == pytest.approx(30)  # when the oldest of the four leaves


# --------------------------------------------------------------------------- handles


def test_a_handle_verifies_for_its_principal_until_it_expires() -> None:
    keys = HandleKeys.from_secrets("the fleet's shared secret")
    handle = keys.sign("conv-1", "alice", expires=100.0)
    assert keys.verify(handle, "alice", now=99.0) == "conv-1"
    assert keys.verify(handle, "alice", now=100.0) is None
    assert keys.verify(handle, "mallory", now=0) is None
    assert keys.verify(handle, None, now=0) is None
    anonymous = keys.sign("conv-2", None, expires=100.0)
    assert keys.verify(anonymous, None, now=0) == "conv-2"
    assert keys.verify(anonymous, "alice", now=0) is None


def test_a_forged_or_damaged_handle_is_refused() -> None:
    keys = HandleKeys.from_secrets("the fleet's shared secret")
    other = HandleKeys.from_secrets("somebody else's secret!")
    handle = keys.sign("conv-1", "alice", expires=100.0)
    assert keys.verify(other.sign("conv-1", "alice", expires=100.0), "alice", now=0) is None
    payload, _, mac = handle.partition(".")
    forged = HandleKeys.from_secrets("x" * 16).sign("conv-9", "alice", expires=1e9).partition(".")[0]
    for bad in (forged + "." + mac, payload, payload + ".", "", "\u00e9.\u00e9", ".", "a" * 5000, None, 42):
        assert keys.verify(bad, "alice", now=0) is None, bad
    for index in range(len(handle)):
        damaged = handle[:index] + ("A" if handle[index] != "A" else "B") + handle[index + 1 :]
        assert keys.verify(damaged, "alice", now=0) in (None, "conv-1"), index  # base64's padding bits


def test_rotation_accepts_the_old_secret_and_signs_with_the_new() -> None:
    old = HandleKeys.from_secrets("the secret of last month")
    rotating = HandleKeys.from_secrets("the secret of this month", "the secret of last month")
    assert rotating.verify(old.sign("conv-1", None, expires=100.0), None, now=0) == "conv-1"
    assert old.verify(rotating.sign("conv-2", None, expires=100.0), None, now=0) is None
    assert HandleKeys.random().verify(rotating.sign("c", None, expires=100.0), None, now=0) is None


@pytest.mark.parametrize("secrets", [(), ("short",), ("long enough secret", "")])
def test_weak_secrets_are_refused(secrets: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="16 characters"):
        HandleKeys.from_secrets(*secrets)
    with pytest.raises(ValueError, match="32 bytes"):
        HandleKeys((b"short",))
