"""A conversation kept in a state backend: the merge of segments (``toolflow._conversation``) and engines that serve them.

The merge is pure, so hypothesis interleaves segments freely; the engines are real, over a
``MemoryState`` and over a real ``redis-server`` (``tests/_redis.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from _conversation_specs import conversation_spec
from _redis import RedisServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolflow
from toolflow._conversation import KEY, empty_part, merged, part_of
from toolflow._state import Conversation, MemoryState, StateBackend
from toolflow._state_redis import RedisState

SPEC = conversation_spec(stamp="implementation: convtest.stamp")


class Stamper:
    """The plugin of ``stamp``: a new stamp at each run, counted."""

    def __init__(self) -> None:
        self.runs = 0

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        """The implementation ``convtest.stamp``."""

        def stamp(topic: str) -> str:
            self.runs += 1
            return f"{topic}-{self.runs}"

        register("convtest.stamp", stamp)


@pytest.fixture
def tools(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Plugins, toolflow.Policy, Stamper]:
    """The registry, plugins and policy of SPEC, and the stamp's counter."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    stamper = Stamper()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(stamper, "convtest")
    specs = toolflow.load_specs([spec], **plugins.loader_options())
    return toolflow.Registry.build(specs, plugins), plugins, toolflow.Policy.from_specs(specs), stamper


Tools = tuple[toolflow.Registry, toolflow.Plugins, toolflow.Policy, Stamper]


@pytest.fixture(params=["memory", "redis"])
def state(request: pytest.FixtureRequest) -> Iterator[StateBackend]:
    """The state of the engines: in memory, or in a real Redis."""
    if request.param == "memory":
        backend: StateBackend = MemoryState()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        backend = RedisState(server.url, timeout=10)
    try:
        yield backend
    finally:
        backend.close()


@asynccontextmanager
async def segment(tools: Tools, state: StateBackend, conversation: str | None) -> AsyncIterator[toolflow.Engine]:
    """An engine serving one segment (a request) of *conversation*, as serve opens one: a turn of its own."""
    registry, plugins, policy, _ = tools
    async with toolflow.open_engine(
        registry, plugins=plugins, policy=policy, state=state, conversation=conversation, cache_timeout=10
    ) as engine:
        engine.tick()
        yield engine


async def calls(tools: Tools, state: StateBackend, conversation: str | None, *names: str) -> list[toolflow.ToolResult]:
    """Call each tool of *names* (``stamp`` with topic ``a``) in one segment of *conversation*."""
    async with segment(tools, state, conversation) as engine:
        return [await engine.call(name, {"topic": "a"} if name == "stamp" else {}) for name in names]


# --------------------------------------------------------------------------- the merge, pure

_TOOLS = st.sampled_from(["a", "b", "c", "d"])
_NAMES = st.frozensets(_TOOLS)
_COUNTS = st.dictionaries(_TOOLS, st.integers(0, 5))


def _part(turns: int, loop: frozenset[str], session: frozenset[str], runs: Mapping[str, int]) -> dict[str, Any]:
    rules = {"turn_calls": {}, "run_calls": dict(runs), "last": None, "called": bool(runs), "succeeded": sorted(loop)}
    gates = {"rules": rules, "succeeded_loop": sorted(loop), "succeeded_session": sorted(session)}
    return {"v": 1, "turns": turns, "gates": gates}


def _grow(part: Mapping[str, Any], loop: frozenset[str], runs: Mapping[str, int]) -> dict[str, Any]:
    """*part* after a segment that ran once more, succeeded with *loop* and called *runs* more times."""
    gates = part["gates"]
    counts = dict(gates["rules"]["run_calls"])
    for name, more in runs.items():
        counts[name] = counts.get(name, 0) + more
    return _part(
        part["turns"] + 1,
        frozenset(gates["succeeded_loop"]) | loop,
        frozenset(gates["succeeded_session"]) | loop,
        counts,
    )


def _sums_and_sets(data: Mapping[str, Any]) -> tuple[Any, ...]:
    part = part_of(data)
    gates = part["gates"]
    rules = gates["rules"]
    runs = {name: count for name, count in rules["run_calls"].items() if count}
    return part["turns"], runs, gates["succeeded_loop"], gates["succeeded_session"], rules["succeeded"], rules["called"]


# No deadline, no speed check: a loaded machine (the suite runs beside others) is not a failure.
_UNTIMED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_UNTIMED
@given(
    turns=st.integers(0, 10),
    loop=_NAMES,
    runs=_COUNTS,
    grow_a=st.tuples(_NAMES, _COUNTS),
    grow_b=st.tuples(_NAMES, _COUNTS),
)
def test_two_interleaved_segments_merge_to_the_same_state_in_either_order(
    turns: int,
    loop: frozenset[str],
    runs: dict[str, int],
    grow_a: tuple[frozenset[str], dict[str, int]],
    grow_b: tuple[frozenset[str], dict[str, int]],
) -> None:
    """Two segments that began from one state commit the same sets and sums whichever stores first."""
    start = _part(turns, loop, loop, runs)
    stored = {KEY: start, "session": {"principal": "alice"}}
    after_a, after_b = _grow(start, *grow_a), _grow(start, *grow_b)
    a_then_b = merged(merged(stored, start, after_a), start, after_b)
    b_then_a = merged(merged(stored, start, after_b), start, after_a)
    assert _sums_and_sets(a_then_b) == _sums_and_sets(b_then_a)
    # Nothing is thrown away: both segments' increases count, and both successes are kept.
    total, counts, kept_loop, *_ = _sums_and_sets(a_then_b)
    assert total == turns + 2
    for name in {*runs, *grow_a[1], *grow_b[1]}:
        assert counts.get(name, 0) == runs.get(name, 0) + grow_a[1].get(name, 0) + grow_b[1].get(name, 0)
    assert set(kept_loop) == loop | grow_a[0] | grow_b[0]
    assert a_then_b["session"] == {"principal": "alice"}  # another part's key, untouched


@_UNTIMED
@given(turns=st.integers(0, 10), runs=_COUNTS, grow=st.tuples(_NAMES, _COUNTS))
def test_a_segment_that_outlived_the_stored_state_brings_its_whole_count_back(
    turns: int, runs: dict[str, int], grow: tuple[frozenset[str], dict[str, int]]
) -> None:
    """The document expired while the segment ran: the merge keeps what the segment began from, not its increase alone."""
    start = _part(turns, frozenset(), frozenset(), runs)
    after = _grow(start, *grow)
    assert _sums_and_sets(merged({}, start, after)) == _sums_and_sets({KEY: after})


def test_a_damaged_or_foreign_part_is_read_as_nothing_stored() -> None:
    """A part of another version or shape starts the conversation afresh (fail closed); the merge replaces it."""
    for damaged in (
        {KEY: "x"},
        {KEY: {"v": 2, "turns": 1, "gates": None}},
        {KEY: {"v": 1, "turns": -1, "gates": None}},
        {KEY: {"v": 1, "turns": 1, "gates": {"rules": None, "succeeded_loop": [1], "succeeded_session": []}}},
        {
            KEY: {
                "v": 1,
                "turns": 1,
                "gates": {"rules": {"run_calls": {}}, "succeeded_loop": [], "succeeded_session": []},
            }
        },
    ):
        assert part_of(damaged) == empty_part()
    after = _part(1, frozenset({"a"}), frozenset({"a"}), {"a": 1})
    assert part_of(merged({KEY: "x", "other": [1]}, empty_part(), after))["gates"] == after["gates"]


# --------------------------------------------------------------------------- engines


async def test_a_later_segment_sees_the_session_cache_and_the_successes(tools: Tools, state: StateBackend) -> None:
    """The second request of a conversation finds the first's login (depends_on) and its cached stamp."""
    with trio.fail_after(30):
        first = await calls(tools, state, "c1", "login", "stamp")
        later = await calls(tools, state, "c1", "fetch", "stamp")
        alone = await calls(tools, state, "c2", "fetch", "stamp")  # another conversation
    assert [r.success for r in first] == [True, True]
    assert later[0].data == "fetched"
    assert later[1].data == first[1].data == "a-1"
    assert later[1].extra.get("cached") is True
    assert alone[0].extra["status"] == "dependency"
    assert alone[1].data == "a-2"
    assert part_of(state.load("c1").data)["turns"] == 2


async def test_without_a_conversation_an_engine_keeps_its_state_to_itself(tools: Tools, state: StateBackend) -> None:
    """``conversation=None``: today's behaviour, nothing is stored, a later engine starts afresh."""
    with trio.fail_after(30):
        await calls(tools, state, None, "login")
        later = await calls(tools, state, None, "fetch")
    assert later[0].extra["status"] == "dependency"


async def test_segments_that_run_at_once_keep_each_others_counts(tools: Tools, state: StateBackend) -> None:
    """Two requests of one conversation run at the same time: both counts and both successes are kept."""
    with trio.fail_after(30):
        async with segment(tools, state, "c1") as one, segment(tools, state, "c1") as two:
            assert (await one.call("limited", {})).success
            assert (await two.call("limited", {})).success
            assert (await one.call("login", {})).success
        # Each was admitted against the state when it began; stored, the conversation has used both calls.
        third = await calls(tools, state, "c1", "limited", "fetch")
    assert third[0].extra["status"] == "blocked"
    assert "limited" in (third[0].error or "")
    assert third[1].data == "fetched"
    stored = part_of(state.load("c1").data)
    assert stored["turns"] == 3
    assert stored["gates"]["rules"]["run_calls"] == {"fetch": 1, "limited": 2, "login": 1}


async def test_a_commit_keeps_the_keys_of_the_document_it_does_not_own(tools: Tools, state: StateBackend) -> None:
    """The sessions part's key in the same document survives a commit as it was."""
    assert state.store("c1", {"session": {"principal": "alice", "protocol": "2025-11-25"}}, 0, 60)
    with trio.fail_after(30):
        await calls(tools, state, "c1", "login")
    data = state.load("c1").data
    assert data["session"] == {"principal": "alice", "protocol": "2025-11-25"}
    assert part_of(data)["gates"]["succeeded_session"] == ["login"]


async def test_the_state_lives_for_the_conversation_ttl_from_the_last_commit(tools: Tools) -> None:
    """The document expires ``conversation_ttl`` seconds after the last request; then the conversation starts afresh."""
    now = [1000.0]
    state = MemoryState(clock=lambda: now[0])
    registry, plugins, policy, _ = tools

    async def call(name: str) -> toolflow.ToolResult:
        async with toolflow.open_engine(
            registry, plugins=plugins, policy=policy, state=state, conversation="c1", conversation_ttl=60
        ) as engine:
            return await engine.call(name, {})

    with trio.fail_after(30):
        await call("login")
        now[0] += 50
        assert (await call("fetch")).success  # refreshed: 60 s from here
        now[0] += 50
        assert (await call("fetch")).success
        now[0] += 61
        assert (await call("fetch")).extra["status"] == "dependency"


class _Racing:
    """A state whose every compare-and-set loses, as if other replicas always stored first."""

    shared = False

    def __init__(self) -> None:
        self.inner = MemoryState()
        self.stores = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def load(self, conversation: str) -> Conversation:
        return self.inner.load(conversation)

    def store(self, conversation: str, data: Mapping[str, Any], version: int, ttl: float) -> bool:
        self.stores += 1
        return False


async def test_a_commit_that_keeps_losing_the_race_gives_up_with_one_warning(tools: Tools) -> None:
    """A bounded number of attempts, then a warning; the call's own result is not touched."""
    racing = _Racing()
    with warnings.catch_warnings(record=True) as caught, trio.fail_after(30):
        warnings.simplefilter("always")
        results = await calls(tools, racing, "c1", "login")
    assert results[0].success
    assert racing.stores == 5
    assert [str(w.message) for w in caught if "lost the race" in str(w.message)] != []
    assert len(caught) == 1


async def test_an_outage_runs_calls_on_an_empty_conversation_with_one_warning(
    tools: Tools, redis_server: RedisServer
) -> None:
    """Redis down: calls answer, depends_on refuses until its dependency runs again, one warning; then back."""
    state = RedisState(redis_server.url, timeout=1)
    try:
        with trio.fail_after(60):
            await calls(tools, state, "c1", "login", "stamp")
            redis_server.kill()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                down = await calls(tools, state, "c1", "fetch", "stamp")
                again = await calls(tools, state, "c1", "login", "fetch")
            redis_server.start()  # back, empty
            with warnings.catch_warnings(record=True) as after:
                warnings.simplefilter("always")
                back = await calls(tools, state, "c1", "fetch", "login")
                later = await calls(tools, state, "c1", "fetch")
    finally:
        state.close()
    assert down[0].extra["status"] == "dependency"  # fail closed: the stored login is out of reach
    assert down[1].success
    assert not down[1].extra.get("cached")
    assert [r.success for r in again] == [True, True]  # within the request, as always
    assert [str(w.message) for w in caught] == [
        f"the conversation state is unavailable (Redis at {state.url} is unavailable: "
        + str(caught[0].message).split(" is unavailable: ", 1)[1]
    ]
    assert "requests run on an empty conversation until it is back" in str(caught[0].message)
    assert [str(w.message) for w in after] == []
    assert back[0].extra["status"] == "dependency"
    assert back[1].success
    assert later[0].data == "fetched"


def test_a_memory_state_drops_expired_conversations_as_it_grows() -> None:
    """A serve that mints a conversation per handle-less request: expired ones and their caches are swept."""
    now = [0.0]
    state = MemoryState(clock=lambda: now[0])
    stamp = toolflow.ToolResult(success=True, data="x")
    for n in range(2000):
        assert state.store(f"c{n}", {"n": n}, 0, 10)
        state.cache_set(f"c{n}", "k", stamp, 10)
    now[0] = 100.0  # all of them expired
    for n in range(2000, 6000):
        assert state.store(f"c{n}", {"n": n}, 0, 10)
    kept = state._conversations
    assert len(kept) == 4000  # the 4000 live ones; the 2000 expired ones are gone
    assert "c0" not in kept
    assert state.cache_get("c0", "k") is None
    assert state.load("c5999").data == {"n": 5999}
