"""Three real replicas of ``toolflow serve --transport http`` on one real Redis (issue 19, "Tests with real parts").

Each test starts three processes on loopback (``tests/_fleet.py``) on a real ``redis-server``
(the ``redis_server`` fixture, skipped, saying how to install it, where there is none), and
drives them with the ``mcp`` SDK's own client whose requests rotate across the replicas, one
request to each in turn: no stickiness at all. What the tools did is read from the journal file
the replicas' tools append to, never from the clients' view alone. Nothing waits for time:
every wait is for a condition, under a generous guard (``trio.fail_after``), so a loaded machine
makes a test slower, not wrong.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from _fleet import Fleet, Rotating, fleet_client, journal, most_at_once, write_fleet_project
from _redis import RedisServer
from mcp import Client, types

from toolflow._cli import run
from toolflow._errors import UsageError
from toolflow._serve_conversation import CONVERSATION_META
from toolflow._state_config import lease_ttl_from_environ

# The SDK's HTTP client (httpx2) leaves its SSE streams' async generators to the garbage
# collector when a session ends under trio; trio's finalizer warns about each one.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

CALLS = 50
"""Concurrent calls of the fleet-wide ``concurrency: 2`` test."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_fleet_project(tmp_path / "fleet")


@pytest.fixture
def fleet(project: Path, redis_server: RedisServer) -> Iterator[Fleet]:
    """Three replicas on the test's Redis."""
    replicas = Fleet(project, "--state", redis_server.url)
    try:
        yield replicas
    finally:
        replicas.close()


async def until(condition: Callable[[], bool]) -> None:
    """Wait until *condition* holds, looking again every 20 ms (the caller's ``fail_after`` bounds the wait)."""
    while not condition():  # noqa: ASYNC110 - another process writes what it reads: no Event to wait on
        await trio.sleep(0.02)


def structured(result: types.CallToolResult) -> dict[str, object]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


class Conversation:
    """One conversation of an SDK client: under 2026-07-28 it echoes each answer's handle in its next request.

    Under 2025-11-25 the session is the conversation's key, and no handle is minted.
    """

    def __init__(self, client: Client, mode: str, rotating: Rotating) -> None:
        self._client = client
        self._modern = mode != "legacy"
        self._rotating = rotating
        self.handle: str | None = None
        self.answered_by: list[int] = []  # the replica that answered each call

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        meta: Any = {CONVERSATION_META: self.handle} if self.handle is not None else None
        before = len(self._rotating.sent)
        result = await self._client.call_tool(tool, arguments or {}, meta=meta)
        self.answered_by.append(self._rotating.sent[before])  # the call's own answer came first
        handle = (result.meta or {}).get(CONVERSATION_META)
        if self._modern:
            assert isinstance(handle, str), result
            self.handle = handle
        else:
            assert handle is None, result  # the session is the key
        return result


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# --------------------------------------------------------------------------- limits across the fleet


async def test_concurrency_holds_across_three_replicas_under_fifty_calls(fleet: Fleet) -> None:
    """50 calls at once, one to each replica in turn: never more than two inside the tool, fleet-wide."""
    answered: list[dict[str, object]] = []
    with trio.fail_after(300):
        async with fleet_client(fleet, "2026-07-28") as (client, rotating):

            async def one(n: int) -> None:
                answered.append(structured(await client.call_tool("hold", {"n": n, "seconds": 0.1})))

            async with trio.open_nursery() as nursery:
                for n in range(CALLS):
                    nursery.start_soon(one, n)
    entries = journal(fleet.journal)
    assert most_at_once(entries) == 2  # each replica alone would have let two of its own in: six
    assert sorted(int(str(answer["n"])) for answer in answered) == list(range(CALLS))
    assert Counter(n for what, n, _ in entries if what == "enter") == dict.fromkeys(range(CALLS), 1)
    assert {pid for _, _, pid in entries} == set(fleet.pids())  # every replica ran some
    assert set(rotating.sent) == set(fleet.ports)


LEASE_TTL = "6s"
"""The replicas' ``TOOLFLOW_LEASE_TTL`` in the SIGKILL test: a dead replica's leases free in seconds, not 30.

Not shorter: a lease is renewed every third of it, and a live replica whose renewal came later
than the TTL (a loaded machine) would lose its lease to another."""


async def test_a_replica_killed_holding_leases_frees_them_and_no_call_is_answered_twice(
    project: Path, redis_server: RedisServer
) -> None:
    """SIGKILL a replica while its calls hold both leases: they expire, the others' calls run, each call ran once."""
    fleet = Fleet(project, "--state", redis_server.url, env={"TOOLFLOW_LEASE_TTL": LEASE_TTL})
    victim, survivors = fleet.ports[0], fleet.ports[1:]
    lost: list[object] = []
    answered: list[dict[str, object]] = []

    async def held() -> None:
        """Two calls on the victim alone, which hold both leases until it dies; what its client makes of that."""
        try:
            async with (
                fleet_client(fleet, "2026-07-28", Rotating([victim])) as (pinned, _),
                trio.open_nursery() as calls,
            ):

                async def one(n: int) -> None:
                    lost.append(await pinned.call_tool("hold", {"n": n, "seconds": 1000}))

                for n in (0, 1):
                    calls.start_soon(one, n)
        except* httpx2.TransportError as group:  # the SDK's HTTP task fails: the server disconnected
            lost.extend(group.exceptions)

    try:
        with trio.fail_after(300):
            async with (
                fleet_client(fleet, "2026-07-28", Rotating(survivors)) as (waiting, waiting_transport),
                fleet_client(fleet, "2026-07-28") as (rotating, transport),
                trio.open_nursery() as nursery,
            ):

                async def quick(client: Client, n: int) -> None:
                    answered.append(structured(await client.call_tool("hold", {"n": n, "seconds": 0.1})))

                nursery.start_soon(held)
                await until(lambda: len(journal(fleet.journal)) == 2)  # both leases, in the victim
                async with trio.open_nursery() as calls:
                    for n in range(2, 6):
                        calls.start_soon(quick, waiting, n)  # they wait for a lease
                    await until(lambda: waiting_transport.started == 4)  # sent to the other two replicas
                    before = journal(fleet.journal)
                    fleet.kill(0)
                    for n in range(6, 10):
                        calls.start_soon(quick, rotating, n)  # the balancer finds the dead one
    finally:
        fleet.close()
    entries = journal(fleet.journal)
    victim_pid = fleet.pids()[0]
    assert sorted(before) == [("enter", 0, victim_pid), ("enter", 1, victim_pid)]  # nobody else ran meanwhile
    assert Counter(n for what, n, _ in entries if what == "enter") == dict.fromkeys(range(10), 1)
    assert sorted(int(str(answer["n"])) for answer in answered) == list(range(2, 10))  # each answered once
    assert victim_pid not in {answer["pid"] for answer in answered}
    assert lost
    assert not any(isinstance(outcome, types.CallToolResult) for outcome in lost)  # lost, not answered
    assert most_at_once([entry for entry in entries if entry[2] != victim_pid]) <= 2
    assert victim not in transport.sent


# --------------------------------------------------------------------------- one session, three replicas


async def test_a_session_goes_on_on_the_others_after_its_replica_is_killed(fleet: Fleet) -> None:
    """2025-11-25: one SDK session, its requests on each replica in turn; SIGKILL the replica that minted it."""
    with trio.fail_after(300):
        async with fleet_client(fleet, "legacy") as (client, rotating):
            before = [structured(await client.session.call_tool("add", {"a": n, "b": 1})) for n in range(3)]
            minted, killed_at = rotating.sent[0], len(rotating.sent)  # initialize went to the first replica
            fleet.kill(fleet.ports.index(minted))
            after = [structured(await client.session.call_tool("add", {"a": n, "b": 2})) for n in range(6)]
            listed = await client.session.list_tools()
    assert before == [{"sum": n + 1} for n in range(3)]
    assert after == [{"sum": n + 2} for n in range(6)]  # each answered once, by a replica still alive
    assert "hold" in {tool.name for tool in listed.tools}
    assert set(rotating.sent[:killed_at]) == set(fleet.ports)  # the session did rotate before
    assert minted not in rotating.sent[killed_at:]
    assert len(set(rotating.sent[killed_at:])) == 2


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_conversation_holds_on_three_replicas_and_outlives_the_one_that_wrote_it(
    fleet: Fleet, mode: str
) -> None:
    """Each call on the next replica: depends_on and the session cache hold; then SIGKILL the replica of the login.

    What the killed replica did (the login, the ticket it drew) is the conversation's, in Redis:
    the others go on with it.
    """
    with trio.fail_after(300):
        async with fleet_client(fleet, mode) as (client, rotating):
            chat = Conversation(client, mode, rotating)
            early = await chat.call("whoami")  # refused: no login yet
            login = await chat.call("login", {"user": "ada"})
            whoami = await chat.call("whoami")
            draws = [structured(await chat.call("draw"))["drawn"] for _ in range(3)]
            fleet.kill(fleet.ports.index(chat.answered_by[1]))  # the replica that ran the login
            later = [await chat.call("whoami") for _ in range(2)]
            draws += [structured(await chat.call("draw"))["drawn"] for _ in range(2)]
            stranger = Conversation(client, mode, rotating) if mode != "legacy" else None
            alone = await stranger.call("whoami") if stranger is not None else None
            other = structured(await stranger.call("draw"))["drawn"] if stranger is not None else None
    assert early.is_error
    assert "run 'login' successfully first" in text(early)
    assert (login.is_error, whoami.is_error) == (False, False)
    assert len(set(chat.answered_by[:6])) == 3  # the calls went to all three replicas
    assert [r.is_error for r in later] == [False, False]  # depends_on held after the kill
    assert len(set(draws)) == 1  # one run of the session-cached tool, whatever replica answered
    runs = [pid for what, _, pid in journal(fleet.journal) if what == "draw"]
    assert chat.answered_by[1] not in chat.answered_by[6:]
    if alone is not None:  # 2026-07-28: a request without the handle is a conversation of its own
        assert alone.is_error
        assert "run 'login' successfully first" in text(alone)
        assert other != draws[0]  # and a session cache of its own
    assert len(runs) == (1 if alone is None else 2)


# --------------------------------------------------------------------------- the lease TTL setting


def test_the_lease_ttl_comes_from_the_environment() -> None:
    """``TOOLFLOW_LEASE_TTL``: a duration or a number of seconds, at least one second; 30 s without it."""
    assert lease_ttl_from_environ({}) == 30.0
    assert lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": ""}) == 30.0
    assert lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": "6s"}) == 6.0
    assert lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": "2m"}) == 120.0
    assert lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": " 10 "}) == 10.0
    assert lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": "1.5"}) == 1.5
    with pytest.raises(UsageError, match=r"TOOLFLOW_LEASE_TTL: a lease must live 1s or more, got '500ms'"):
        lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": "500ms"})
    for bad in ("soon", "inf", "-5", "1e3", "0"):
        with pytest.raises(UsageError, match="TOOLFLOW_LEASE_TTL: "):
            lease_ttl_from_environ({"TOOLFLOW_LEASE_TTL": bad})


def test_a_bad_lease_ttl_is_a_usage_error_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command with a shared state refuses a bad ``TOOLFLOW_LEASE_TTL`` before it connects or calls anything."""
    # A project without plugins: this test runs in the test process, which must not import any.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "ttl"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "stamp.yaml").write_text(
        "toolflow: 1\ntools:\n  stamp:\n    description: Stamps.\n    parameters:\n      type: object\n"
        "      properties:\n        n: {type: integer, description: The number.}\n"
        '    template: "stamped {{ n }}"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    monkeypatch.setenv("TOOLFLOW_STATE", "redis://127.0.0.1:1/0")  # nothing listens there: nothing connects
    monkeypatch.setenv("TOOLFLOW_LEASE_TTL", "a while")
    out, err = io.StringIO(), io.StringIO()
    code = run(["call", "stamp", '{"n": 1}'], stdout=out, stderr=err)
    assert code == 2, err.getvalue()
    assert "TOOLFLOW_LEASE_TTL: expected a duration like '500ms', '30s', '5m' or a number of seconds" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert out.getvalue() == ""  # nothing ran
    monkeypatch.setenv("TOOLFLOW_LEASE_TTL", "10s")
    monkeypatch.setenv("TOOLFLOW_STATE", "memory")
    assert run(["call", "stamp", '{"n": 1}'], stdout=out, stderr=err) == 0, err.getvalue()
    assert "stamped 1" in out.getvalue()


# --------------------------------------------------------------------------- Redis restarted


DOCUMENTED_WARNINGS = (
    re.compile(r"toolflow: warning: cache Redis at redis://127\.0\.0\.1:\d+/0 is unavailable \(.*\);"
               r" calls run without it until it is back"),
    re.compile(r"the shared state is unavailable \((lease|rate|sessions)\): .*"),
    re.compile(r"toolflow: warning: the conversation state is unavailable \(.*\); requests run on an empty"
               r" conversation until it is back: a depends_on dependency must run again, and the session cache"
               r" is not used"),
)  # fmt: skip
"""What a replica may say while Redis restarts (docs/deploying.md, "Redis unavailable or restarted")."""


def documented(line: str) -> bool:
    return any(warning.search(line) for warning in DOCUMENTED_WARNINGS)


async def test_redis_restarted_mid_run_costs_documented_warnings_only(fleet: Fleet, redis_server: RedisServer) -> None:
    """Calls rotating across three replicas while Redis restarts empty: all answer, never another argument's result."""
    outcomes: list[tuple[int, dict[str, object]]] = []
    restarted = trio.Event()
    with trio.fail_after(300):
        async with fleet_client(fleet, "2026-07-28") as (client, _):

            async def caller(first: int) -> None:
                """Calls ``stamp`` for 0..5 in turn until well after the restart."""
                n, after = first, 0
                while after < 12:
                    result = await client.call_tool("stamp", {"n": n % 6})
                    outcomes.append((n % 6, structured(result)))
                    after += restarted.is_set()
                    n += 1

            async with trio.open_nursery() as nursery:
                for first in range(4):
                    nursery.start_soon(caller, first)
                await until(lambda: len(outcomes) >= 24)  # a warm cache across the fleet
                await trio.to_thread.run_sync(redis_server.restart)
                restarted.set()
            # Back and empty: a miss stores again, and the other replicas' look-ups hit it.
            again = [structured(await client.call_tool("stamp", {"n": 100})) for _ in range(3)]
    assert all(n == data["n"] for n, data in outcomes)  # never another argument's result
    stamps: dict[int, set[object]] = {}
    for n, data in outcomes:
        stamps.setdefault(n, set()).add(data["stamp"])
    runs = Counter(n for what, n, _ in journal(fleet.journal) if what == "stamp")
    assert all(len(stamps[n]) <= runs[n] for n in stamps)  # every stamp served was one a run made
    assert len({data["stamp"] for data in again}) == 1
    assert runs[100] == 1
    said = [line.strip() for line in fleet.output().splitlines() if line.strip()]
    assert [line for line in said if not line.startswith("toolflow: serving ") and not documented(line)] == []


async def test_redis_restarted_mid_conversation_never_loosens_depends_on(
    fleet: Fleet, redis_server: RedisServer
) -> None:
    """2026-07-28: Redis restarts empty mid-conversation: the handle still verifies, but the login is gone.

    The conversation goes on from nothing: ``whoami`` is refused until ``login`` runs again, and
    the session cache draws afresh; never the old conversation's state half-kept, nor a refusal
    turned into a pass.
    """
    with trio.fail_after(300):
        async with fleet_client(fleet, "2026-07-28") as (client, rotating):
            chat = Conversation(client, "2026-07-28", rotating)
            await chat.call("login", {"user": "ada"})
            before = [await chat.call("whoami"), await chat.call("draw")]
            await trio.to_thread.run_sync(redis_server.restart)
            after = [await chat.call("whoami") for _ in range(3)]  # on each replica: all refused
            drawn = [structured(await chat.call("draw"))["drawn"] for _ in range(3)]
            await chat.call("login", {"user": "ada"})
            again = [await chat.call("whoami") for _ in range(3)]
    assert [r.is_error for r in before] == [False, False]
    assert [r.is_error for r in after] == [True, True, True]
    assert all("run 'login' successfully first" in text(r) for r in after)
    assert len(set(drawn)) == 1
    assert drawn[0] != structured(before[1])["drawn"]
    assert [r.is_error for r in again] == [False, False, False]
    said = [line.strip() for line in fleet.output().splitlines() if line.strip()]
    assert [line for line in said if not line.startswith("toolflow: serving ") and not documented(line)] == []
