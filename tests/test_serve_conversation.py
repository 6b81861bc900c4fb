"""``toolflow serve`` keeps a conversation in the state: 2026-07-28 handles across replicas (issue 19).

Real ``toolflow serve --transport http`` processes on loopback (``tests/_fleet.py``), sharing a
real ``redis-server`` (``tests/_redis.py``) and the fleet's secret, and the ``mcp`` SDK's client
speaking 2026-07-28, which echoes the handle of each answer in its next request. In process: the
same service over the SDK's in-memory transport, for what needs no second process.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import redis
import trio
from _conversation_specs import conversation_spec
from _fleet import SECRET, Fleet, authorization, fleet_client, open_fleet, write_tokens
from _redis import RedisServer
from mcp import Client, types
from mcp.client.context import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_serve_tasks import TasksClient  # the client's half of the Tasks extension

import toolflow
from toolflow._serve import ToolService, build_server
from toolflow._serve_conversation import CONVERSATION_META
from toolflow._state import HandleKeys, MemoryState
from toolflow._state_config import FleetKeys

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

SPEC = conversation_spec(
    stamp="command: " + json.dumps([sys.executable, "-c", "import secrets; print(secrets.token_hex(8))"]),
    more_tools="""\
  login_later:
    description: Logs in, as an MCP task.
    category: async_required
    template: "logged in later"
  report:
    description: Reports what only a caller logged in by a task may.
    depends_on: [login_later]
    template: "reported"
  wipe:
    description: Wipes what the caller fetched; asks first.
    approval: true
    depends_on: [login]
    template: "wiped"
""",
    policy="  categories:\n    async_required: {background: true}\n",
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with SPEC, a cache timeout that a loaded machine meets, and two principals' tokens."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "conversations"\n[tool.toolflow]\nspecs = ["specs"]\n'
        '[tool.toolflow.cache]\ntimeout = "30s"\n',
        encoding="utf-8",
    )
    write_tokens(tmp_path)
    return tmp_path


def servers(root: Path, count: int, *args: str, secret: str | None = SECRET) -> AbstractAsyncContextManager[Fleet]:
    """*count* replicas of ``toolflow serve --transport http --auth-tokens tokens.toml`` with *args*."""
    return open_fleet(root, "--auth-tokens", "tokens.toml", *args, count=count, secret=secret)


class Chain:
    """A 2026-07-28 client of one principal that echoes the last handle it got, whichever replica it asks."""

    def __init__(self, name: str, handle: str | None = None) -> None:
        self.name = name
        self.handle = handle

    async def call(self, url: str, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """Call *tool* at *url* with the handle (if any); keep the answer's handle."""
        async with httpx2.AsyncClient(headers=authorization(self.name)) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="2026-07-28") as client:
                meta: Any = None if self.handle is None else {CONVERSATION_META: self.handle}
                result = await client.call_tool(tool, arguments or {}, meta=meta)
        handle = (result.meta or {}).get(CONVERSATION_META)
        assert isinstance(handle, str), result
        self.handle = handle
        return result


def text(result: types.CallToolResult) -> str:
    """The first text block of *result*."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def conversation_of(handle: str | None) -> str:
    """The conversation a handle names (its payload is readable; its signature is what makes it count)."""
    assert handle is not None
    payload = handle.partition(".")[0]
    return str(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))[0])


async def test_a_handle_carries_the_conversation_across_two_replicas(project: Path, redis_server: RedisServer) -> None:
    """Calls alternate between two replicas: depends_on holds, the session cache hits, the rules count once."""
    with trio.fail_after(120):
        async with servers(project, 2, "--state", redis_server.url) as fleet:
            one, two = fleet.replicas
            alice = Chain("alice")
            assert text(await alice.call(one.url, "login")) == "logged in"
            first_handle = alice.handle
            assert text(await alice.call(two.url, "fetch")) == "fetched"
            stamp = text(await alice.call(one.url, "stamp", {"topic": "a"}))
            again = await alice.call(two.url, "stamp", {"topic": "a"})
            assert [text(await alice.call(url, "limited")) for url in (two.url, one.url)] == ["done", "done"]
            third = await alice.call(two.url, "limited")
            stranger = await Chain("alice").call(two.url, "fetch")  # no handle: a conversation of its own
    assert text(again) == stamp
    assert third.is_error
    assert "limited" in text(third)
    assert conversation_of(alice.handle) == conversation_of(first_handle)  # one conversation all along
    assert alice.handle != first_handle  # renewed by every answer
    assert stranger.is_error
    assert "run 'login' successfully first" in text(stranger)


async def test_a_forged_expired_or_foreign_handle_starts_afresh(project: Path, redis_server: RedisServer) -> None:
    """A handle that does not verify for this principal now is no key to the conversation: depends_on refuses."""
    keys = HandleKeys.from_secrets(SECRET)
    with trio.fail_after(120):
        async with servers(project, 1, "--state", redis_server.url) as fleet:
            (server,) = fleet.replicas
            alice = Chain("alice")
            await alice.call(server.url, "login")
            good = alice.handle
            conversation = conversation_of(good)
            payload, _, mac = str(good).partition(".")
            forged = payload + "." + ("A" if mac[0] != "A" else "B") + mac[1:]
            expired = keys.sign(conversation, "alice", time.time() - 1)
            other_fleet = HandleKeys.from_secrets("another-fleet-secret-0123").sign(
                conversation, "alice", time.time() + 60
            )
            answers = {}
            for name, who, handle in (
                ("forged", "alice", forged),
                ("expired", "alice", expired),
                ("other fleet", "alice", other_fleet),
                ("another principal", "bob", good),
            ):
                chain = Chain(who, handle)
                answers[name] = (await chain.call(server.url, "fetch"), chain.handle)
            still = await Chain("alice", good).call(server.url, "fetch")  # the real one still works
    for name, (result, handle) in answers.items():
        assert result.is_error, name
        assert "run 'login' successfully first" in text(result), name
        assert conversation_of(handle) != conversation, name  # a new conversation, with its own handle
    assert text(still) == "fetched"


async def test_redis_stopped_midway_costs_the_conversation_and_one_warning(
    project: Path, redis_server: RedisServer
) -> None:
    """Redis down: every call is answered, depends_on fails closed, the server warns once; back: a fresh start."""
    with trio.fail_after(120):
        async with servers(project, 1, "--state", redis_server.url) as fleet:
            (server,) = fleet.replicas
            alice = Chain("alice")
            await alice.call(server.url, "login")
            redis_server.kill()
            down = [await alice.call(server.url, name) for name in ("fetch", "login", "fetch")]
            down.append(await alice.call(server.url, "stamp", {"topic": "c"}))
            redis_server.start()
            back = [await alice.call(server.url, name) for name in ("fetch", "login", "fetch")]
            output = "".join(server.output)
    assert [r.is_error for r in down] == [True, False, True, False], [
        text(r) for r in down
    ]  # nothing of the conversation is reachable
    assert output.count("the conversation state is unavailable") == 1, output
    assert "Traceback" not in output
    assert [r.is_error for r in back] == [True, False, False]  # the new Redis is empty: login again, then it holds


async def test_one_replica_with_memory_state_chains_handles_too(project: Path) -> None:
    """Without --state and without a secret: the handle chain gives a 2026-07-28 client depends_on and the cache."""
    with trio.fail_after(120):
        async with servers(project, 1, secret=None) as fleet:
            (server,) = fleet.replicas
            alice = Chain("alice")
            await alice.call(server.url, "login")
            fetched = await alice.call(server.url, "fetch")
            stamps = [text(await alice.call(server.url, "stamp", {"topic": "b"})) for _ in range(2)]
            output = "".join(server.output)
    assert text(fetched) == "fetched"
    assert stamps[0] == stamps[1]
    assert "TOOLFLOW_STATE_SECRET is not set" not in output  # one replica: nothing to share


async def test_a_shared_state_without_a_secret_warns_at_start(project: Path, redis_server: RedisServer) -> None:
    """With Redis but no secret, each replica's handles hold only on itself: one start-up warning says so."""
    with trio.fail_after(120):
        async with servers(project, 2, "--state", redis_server.url, secret=None) as fleet:
            one, two = fleet.replicas
            alice = Chain("alice")
            await alice.call(one.url, "login")
            elsewhere = await alice.call(two.url, "fetch")
            output = "".join(one.output)
    assert output.count("TOOLFLOW_STATE_SECRET is not set") == 1, output  # one warning: handles and task ids
    assert "the conversation handles and task ids this replica mints are good on this replica only" in output
    assert elsewhere.is_error  # the other replica's keys do not verify the handle


async def test_stateless_serve_mints_no_handles(project: Path) -> None:
    """``--stateless``: every request stands alone, and no answer carries a handle."""
    with trio.fail_after(120):
        async with (
            servers(project, 1, "--stateless") as fleet,
            fleet_client(fleet, "2026-07-28", headers=authorization("alice")) as (client, _),
        ):
            await client.call_tool("login", {})
            fetched = await client.call_tool("fetch", {})
    assert fetched.is_error
    assert CONVERSATION_META not in (fetched.meta or {})


# --------------------------------------------------------------------------- in process


LIFETIME = 1800.0
"""How long the in-process services' conversations live (serve: the HTTP sessions' idle timeout)."""


def _service(root: Path, **options: Any) -> ToolService:
    specs = toolflow.load_specs([root / "specs"])
    registry = toolflow.load_registry([root / "specs"], plugins=toolflow.load_plugins(entry_points=False))
    return ToolService.under_policy(registry, policy=toolflow.Policy.from_specs(specs), cache_timeout=30, **options)


async def test_in_process_the_handle_rides_in_meta_and_a_legacy_session_keeps_its_engine(project: Path) -> None:
    """2026-07-28 requests chain by the handle; a 2025-11-25 session is one engine, as before, with no handle."""
    service = _service(project, conversation_ttl=LIFETIME, state=MemoryState())
    with trio.fail_after(30):
        async with Client(build_server(service), mode="2026-07-28") as client:
            login = await client.call_tool("login", {})
            handle = (login.meta or {})[CONVERSATION_META]
            echoed: Any = {CONVERSATION_META: handle}
            chained = await client.call_tool("fetch", {}, meta=echoed)
            alone = await client.call_tool("fetch", {})
        async with Client(build_server(service), mode="legacy") as legacy:
            await legacy.call_tool("login", {})
            session = await legacy.call_tool("fetch", {})
    assert text(chained) == "fetched"
    assert alone.is_error
    assert text(session) == "fetched"
    assert CONVERSATION_META not in (session.meta or {})


async def test_without_keys_a_modern_request_stands_alone_as_before(project: Path) -> None:
    """A service built without a conversation lifetime (the Python API's default) mints nothing and keys nothing."""
    service = _service(project)
    with trio.fail_after(30):
        async with Client(build_server(service), mode="2026-07-28") as client:
            login = await client.call_tool("login", {})
            fetched = await client.call_tool("fetch", {})
    assert CONVERSATION_META not in (login.meta or {})
    assert fetched.is_error


async def approve(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The client's answer to every approval question: yes."""
    return types.ElicitResult(action="accept", content={"approve": True})


async def test_an_approval_question_carries_the_handle_and_the_retry_stays_in_the_conversation(project: Path) -> None:
    """2026-07-28 ``input_required``: its ``_meta`` has the conversation's handle; the answered retry runs in it."""

    service = _service(project, conversation_ttl=LIFETIME, state=MemoryState())
    with trio.fail_after(30):
        async with Client(build_server(service), mode="2026-07-28", elicitation_callback=approve) as client:
            login = await client.call_tool("login", {})
            echoed: Any = {CONVERSATION_META: (login.meta or {})[CONVERSATION_META]}
            question = await client.session.call_tool("wipe", {}, meta=echoed, allow_input_required=True)
            wiped = await client.call_tool("wipe", {}, meta=echoed)
    assert isinstance(question, types.InputRequiredResult)
    assert conversation_of((question.meta or {})[CONVERSATION_META]) == conversation_of(echoed[CONVERSATION_META])
    assert text(wiped) == "wiped"  # depends_on met: the retry ran in the conversation of the login
    assert conversation_of((wiped.meta or {})[CONVERSATION_META]) == conversation_of(echoed[CONVERSATION_META])


async def test_an_approval_asked_by_one_replica_is_answered_on_another_with_the_fleets_keys(project: Path) -> None:
    """The ``requestState`` of ``input_required`` is sealed with the fleet's key: the retry may reach any replica."""

    state, fleet = MemoryState(), HandleKeys.from_secrets("the fleet's shared secret")
    one, two = (
        _service(project, keys=FleetKeys.of_secret(fleet), conversation_ttl=LIFETIME, state=state) for _ in "12"
    )
    stranger = _service(project, conversation_ttl=LIFETIME, state=state)  # without the fleet's secret: its own keys
    answer: Any = {"toolflow.approval": types.ElicitResult(action="accept", content={"approve": True})}
    with trio.fail_after(30):
        async with (
            Client(build_server(one), mode="2026-07-28", elicitation_callback=approve) as first,
            Client(build_server(two), mode="2026-07-28", elicitation_callback=approve) as second,
            Client(build_server(stranger), mode="2026-07-28", elicitation_callback=approve) as third,
        ):
            login = await first.call_tool("login", {})
            echoed: Any = {CONVERSATION_META: (login.meta or {})[CONVERSATION_META]}
            question = await first.session.call_tool("wipe", {}, meta=echoed, allow_input_required=True)
            assert isinstance(question, types.InputRequiredResult)
            sealed = question.request_state
            wiped = await second.session.call_tool(
                "wipe", {}, meta=echoed, input_responses=answer, request_state=sealed
            )
            with pytest.raises(MCPError):  # another key: the boundary refuses the state it did not seal
                await third.session.call_tool("wipe", {}, meta=echoed, input_responses=answer, request_state=sealed)
    assert text(wiped) == "wiped"


# --------------------------------------------------------------------------- 2025-11-25 fleet sessions


async def test_a_fleet_session_keeps_its_conversation_on_every_replica(
    project: Path, redis_server: RedisServer
) -> None:
    """2025-11-25 over a fleet: the session's calls alternate replicas; depends_on, the cache and the rules hold."""
    with trio.fail_after(120):
        async with (
            servers(project, 2, "--state", redis_server.url) as fleet,
            fleet_client(fleet, "legacy", headers=authorization("alice")) as (client, transport),
        ):
            results = [await client.session.call_tool(name, {}) for name in ("login", "fetch")]
            stamps = [text(await client.session.call_tool("stamp", {"topic": "s"})) for _ in range(2)]
            limited = [await client.session.call_tool("limited", {}) for _ in range(3)]
            # Read raw, before the client leaves (its DELETE ends the session and the document):
            # whether the document is sealed or not, both parts' keys are in it.
            raw = redis.Redis.from_url(redis_server.url)
            try:
                stored = raw.get(f"toolflow:conversation:{transport.session}")
            finally:
                raw.close()
    assert [text(r) for r in results] == ["logged in", "fetched"]
    assert stamps[0] == stamps[1]
    assert [r.is_error for r in limited] == [False, False, True]
    assert CONVERSATION_META not in (results[1].meta or {})  # the session is the key: no handle
    assert isinstance(stored, bytes)
    assert b'"session":' in stored  # the sessions' part and this one, side by side
    assert b'"conversation":' in stored
    assert set(transport.sent) == set(fleet.ports)  # the session's requests did reach both replicas


async def test_a_task_commits_its_conversation_when_it_ends(project: Path) -> None:
    """A 2026-07-28 task of a conversation: its result carries the handle, and its success counts in the conversation."""
    service = _service(project, conversation_ttl=LIFETIME, state=MemoryState())
    assert service.tasks is not None
    with trio.fail_after(30):
        async with (
            service.tasks.running(),
            Client(build_server(service), mode="2026-07-28", extensions=[TasksClient()]) as client,
        ):
            done = await client.call_tool("login_later", {})
            echoed: Any = {CONVERSATION_META: (done.meta or {})[CONVERSATION_META]}
            reported = await client.call_tool("report", {}, meta=echoed)
            alone = await client.call_tool("report", {})
    assert text(done) == "logged in later"
    assert text(reported) == "reported"
    assert alone.is_error
