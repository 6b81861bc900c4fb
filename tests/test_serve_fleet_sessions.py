"""2025-11-25 sessions that any replica of a fleet serves (issue 19, toolflow/_serve_fleet.py).

Three real ``toolflow serve --transport http --state redis://...`` processes on loopback share
one real ``redis-server``; clients send each request of one session to another replica: the
SDK's own client (through ``tests/_fleet.py``'s transport that sends each request to the next
replica's port, over real sockets) and plain HTTP requests where a test needs to choose the
replica. The replicas have no ``TOOLFLOW_STATE_SECRET``: a fleet session needs none
(``test_serve_conversation.py`` runs one with it).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import httpx2
import pytest
import trio
from _fleet import TOKENS, Fleet, authorization, fleet_client, write_tokens
from _mcp_project import HTTPServer, write_project
from _mcp_wire import GREET_SPECS, HTTP_HEADERS, INITIALIZE, PROTOCOL, answers, call
from _redis import RedisServer
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from toolflow import load_registry
from toolflow._serve import Lifecycle, ToolService, build_server
from toolflow._serve_http import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    FLEET_SESSION,
    BearerTokens,
    HTTPSettings,
    Principal,
    listen,
    serve_http,
)
from toolflow._state_redis import RedisState

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

REPLICAS = 3


def bearer(name: str) -> dict[str, str]:
    return {**HTTP_HEADERS, **authorization(name)}


@pytest.fixture
def fleet(tmp_path: Path, redis_server: RedisServer) -> Iterator[Fleet]:
    """Three replicas of one project, with bearer tokens, sharing *redis_server* (and no secret)."""
    root = write_project(tmp_path / "served")
    write_tokens(root)
    replicas = Fleet(root, "--auth-tokens", "tokens.toml", "--state", redis_server.url, count=REPLICAS, secret=None)
    try:
        yield replicas
    finally:
        replicas.close()


@pytest.fixture
async def post() -> AsyncIterator[Any]:
    """``post(server, body, name, session=None)``: one plain POST to the replica of the test's choice."""
    async with httpx.AsyncClient(timeout=30) as client:

        async def one(
            server: HTTPServer, body: dict[str, Any], name: str = "alice", session: str | None = None
        ) -> httpx.Response:
            headers = bearer(name) | (
                {} if session is None else {"Mcp-Session-Id": session, "MCP-Protocol-Version": PROTOCOL}
            )
            return await client.post(server.url, json=body, headers=headers)

        yield one


async def open_session(post: Any, server: HTTPServer, name: str = "alice") -> str:
    response = await post(server, INITIALIZE, name)
    assert response.status_code == 200, response.text
    assert answers(response)[0]["result"]["protocolVersion"] == PROTOCOL
    return str(response.headers["mcp-session-id"])


async def test_the_sdk_client_is_served_by_every_replica_within_one_session(fleet: Fleet) -> None:
    """One 2025-11-25 session of the SDK's client, each request on the next replica: all answered."""
    with trio.fail_after(90):
        async with fleet_client(fleet, "legacy", headers=authorization("alice")) as (client, rotating):
            listed = await client.session.list_tools()
            first = await client.session.call_tool("add", {"a": 2, "b": 3})
            second = await client.session.call_tool("greet", {"name": "Ada"})
    assert "add" in {tool.name for tool in listed.tools}
    assert first.structured_content == {"sum": 5}
    assert not second.is_error
    posts = [(sent.method, fleet.ports.index(sent.port), sent.status) for sent in rotating.log if sent.verb == "POST"]
    assert [(method, replica) for method, replica, _ in posts] == [
        ("initialize", 0),  # the session is minted on the first replica,
        ("notifications/initialized", 1),
        ("tools/list", 2),  # and used on the others
        ("tools/call", 0),
        ("tools/call", 1),
    ]
    assert all(200 <= status < 300 for _, _, status in posts), posts
    deletes = [sent.status for sent in rotating.log if sent.verb == "DELETE"]
    assert deletes == [200]  # the client ended its session on leaving
    gets = {sent.status for sent in rotating.log if sent.verb == "GET"}
    assert gets <= {405}  # no standalone stream in a fleet


async def test_a_session_is_one_principal_s_on_any_replica_until_deleted(fleet: Fleet, post: Any) -> None:
    """Minted on A; used on B and C; another principal's token or a forged id get 404; DELETE on C ends it on A."""
    one, two, three = fleet.replicas
    with trio.fail_after(90):
        session = await open_session(post, one)
        listed = await post(two, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, session=session)
        assert listed.status_code == 200, listed.text
        called = await post(three, call(2, "add", {"a": 1, "b": 1}), session=session)
        assert answers(called)[0]["result"]["structuredContent"] == {"sum": 2}
        tickets = []
        for request_id, server in enumerate(fleet.replicas, start=20):  # a session-cached tool, on each replica in turn
            ticket = await post(server, call(request_id, "ticket"), session=session)
            tickets.append(answers(ticket)[0]["result"]["structuredContent"]["ticket"])
        assert len(set(tickets)) == 1  # the session's cache is in Redis: the tool ran once

        stolen = await post(two, call(3, "add", {"a": 1, "b": 1}), "bob", session=session)
        assert stolen.status_code == 404
        assert stolen.json()["error"]["message"] == "Session not found"
        for forged in ("A" * 24, "no such session", "x" * 500, session[:-1]):
            refused = await post(one, call(4, "add", {"a": 1, "b": 1}), session=forged)
            assert refused.status_code == 404, forged
        without = await post(two, call(5, "add", {"a": 1, "b": 1}))
        assert without.status_code == 400  # a request without a session, other than initialize
        assert "Missing session ID" in without.text

        async with httpx.AsyncClient(timeout=30) as client:
            headers = bearer("alice") | {"Mcp-Session-Id": session}
            # The SDK's own checks come first, and answer as they would without a fleet.
            unknown = await client.post(two.url, json=call(7, "add"), headers=headers | {"Authorization": "Bearer x"})
            assert unknown.status_code == 401
            foreign = await client.post(two.url, json=call(7, "add"), headers=headers | {"Host": "evil.example"})
            assert foreign.status_code == 421
            stream = await client.get(one.url, headers=headers | {"Accept": "text/event-stream"})
            assert stream.status_code == 405
            assert stream.headers["allow"] == "POST, DELETE"
            ended = await client.delete(three.url, headers=headers)
            assert ended.status_code == 200
        after = await post(one, {"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, session=session)
        assert after.status_code == 404
        assert after.json()["error"]["message"] == "Session not found"
        assert await open_session(post, one) != session  # the client initializes again


async def test_a_redis_outage_is_503_and_a_restart_without_persistence_forgets_the_session(
    fleet: Fleet, post: Any, redis_server: RedisServer
) -> None:
    """Redis down: a session cannot be checked, nor a new one registered (503, Retry-After, one warning).

    The test's Redis keeps nothing on disk, so once it is back the session is gone (404) and the
    client initializes again; a Redis that persists (RDB/AOF) would serve it again.
    """
    one, two, _ = fleet.replicas
    with trio.fail_after(90):
        session = await open_session(post, one)
        redis_server.kill()
        for attempt in range(2):
            down = await post(two, call(attempt, "add", {"a": 1, "b": 1}), session=session)
            assert down.status_code == 503
            assert down.headers["retry-after"] == "5"
        opening = await post(two, INITIALIZE)
        assert opening.status_code == 503
        assert opening.headers.get_list("retry-after") == ["5"]
        await trio.to_thread.run_sync(redis_server.start)
        lost = await post(two, call(9, "add", {"a": 1, "b": 1}), session=session)
        assert lost.status_code == 404
        fresh = await open_session(post, two)
        again = await post(one, call(10, "add", {"a": 2, "b": 2}), session=fresh)
        assert answers(again)[0]["result"]["structuredContent"] == {"sum": 4}
    warned = [line for line in two.output if "the shared state is unavailable (sessions)" in line]
    assert len(warned) == 1, two.output  # one warning for the outage, however many requests it refused


async def test_a_modern_request_passes_untouched(fleet: Fleet) -> None:
    """2026-07-28 has no sessions: the fleet's session check lets its requests through to the SDK."""
    with trio.fail_after(90):
        async with fleet_client(fleet, "2026-07-28", headers=authorization("bob")) as (client, rotating):
            listed = await client.session.list_tools()
            results = [await client.session.call_tool("add", {"a": 20, "b": n}) for n in (22, 23)]
    assert "add" in {tool.name for tool in listed.tools}
    assert [result.structured_content for result in results] == [{"sum": 42}, {"sum": 43}]
    assert set(rotating.sent) == set(fleet.ports)
    assert all(200 <= sent.status < 300 for sent in rotating.log), rotating.log


async def refreshing(client: httpx.AsyncClient, url: str, state: RedisState, session: str) -> bool:
    """A session last refreshed an idle timeout ago is stored again by its next request, keeping other parts."""
    before = state.load(session)
    old = {**before.data["session"], "refreshed": before.data["session"]["refreshed"] - DEFAULT_SESSION_IDLE_TIMEOUT}
    assert state.store(session, {**before.data, "session": old, "conversation": {"tick": 7}}, before.version, 60)
    listed = await client.post(
        url,
        json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        headers=bearer("alice") | {"Mcp-Session-Id": session},
    )
    after = state.load(session)
    return (
        listed.status_code == 200
        and after.version == before.version + 2
        and after.data["session"]["refreshed"] > old["refreshed"]
        and after.data["conversation"] == {"tick": 7}
    )


@attrs.define(kw_only=True)
class _SeesTheSession(ToolService):
    """Records, for every call, the fleet session in the request's ASGI scope and the protocol version header."""

    seen: list[tuple[object, object]] = attrs.field(factory=list)

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        self.seen.append(
            (ctx.request.scope.get(FLEET_SESSION, "none"), ctx.request.headers.get("mcp-protocol-version"))
        )
        return await ToolService.call_tool(self, ctx, params)


async def test_a_handler_finds_the_verified_session_in_the_scope(tmp_path: Path, redis_server: RedisServer) -> None:
    """The contract with the tool service: FLEET_SESSION holds the checked id, and nothing for a modern request."""
    spec = tmp_path / "greet.yaml"
    spec.write_text(GREET_SPECS, encoding="utf-8")
    service = _SeesTheSession.under_policy(load_registry([spec]))
    assert isinstance(service, _SeesTheSession)
    state = RedisState(redis_server.url, timeout=10)
    tokens = BearerTokens([(TOKENS["alice"], Principal(id="alice"))])
    settings = HTTPSettings(port=0, tokens=tokens, state=state)
    assert settings.fleet
    assert not attrs.evolve(settings, stateless=True).fleet
    lifecycle = Lifecycle()
    greet = call(1, "greet", {"name": "Ada"})
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery, httpx.AsyncClient(timeout=30) as client:
                url = await nursery.start(
                    functools.partial(
                        serve_http, build_server(service, lifecycle), listen(settings), closing=lifecycle.closing
                    )
                )
                bad = {**INITIALIZE, "params": {"protocolVersion": 2025}}
                refused = await client.post(url, json=bad, headers=bearer("alice"))
                opened = await client.post(url, json=INITIALIZE, headers=bearer("alice"))
                session = opened.headers["mcp-session-id"]
                # No MCP-Protocol-Version header: the session's own version is assumed.
                answered = await client.post(url, json=greet, headers=bearer("alice") | {"Mcp-Session-Id": session})
                stored = state.load(session)
                refreshed = await refreshing(client, url, state, session)
                auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
                async with (
                    httpx2.AsyncClient(headers=auth) as http,
                    Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as modern,
                ):
                    result = await modern.session.call_tool("greet", {"name": "Bo"})
                lifecycle.stop()
    finally:
        state.close()
    assert "error" in answers(refused)[0]
    assert "mcp-session-id" not in refused.headers  # an initialize that failed opens no session
    assert answers(answered)[0]["result"]["content"][0]["text"] == "Hello, Ada!"
    assert stored.version == 1  # registered once; a request right after it did not store it again
    assert stored.data["session"]["principal"] == {"client_id": "alice", "issuer": None, "subject": "alice"}
    assert stored.data["session"]["protocol"] == PROTOCOL
    assert refreshed
    assert not result.is_error
    assert service.seen[0] == (session, PROTOCOL)  # the version the session negotiated, not the SDK's default
    assert service.seen[1:] == [("none", "2026-07-28")]  # 2026-07-28 has no sessions
