"""Fleet sessions: 2025-11-25 sessions kept in the shared state, so that any replica serves any request (issue 19).

The MCP SDK's stateful transport keeps its sessions in a table of its own process: a request
whose ``Mcp-Session-Id`` another replica minted gets 404. With a shared state (Redis) and not
``--stateless``, ``toolflow serve --transport http`` therefore runs the SDK's *stateless*
transport and keeps the sessions itself with :class:`FleetSessions`, an ASGI middleware between
the SDK's bearer authentication and its transport:

- **Opening.** A POST without ``Mcp-Session-Id`` whose body is an ``initialize`` request is
  served; when its answer is a success, a fresh unguessable id is registered in the state
  (document key :data:`SESSION_DOCUMENT`: the owner, the negotiated protocol version, when it was
  last refreshed) and sent as the answer's ``Mcp-Session-Id``. Any other JSON-RPC message
  without a session id gets the SDK's stateful answer, 400 "Missing session ID"; a body the SDK
  cannot parse is passed on for the SDK to answer.
- **Using.** A request with ``Mcp-Session-Id`` is served only if the state holds a session of
  that id owned by the request's principal (compared as the SDK compares a session's owner:
  client id, issuer and subject of the bearer token). Anything else (unknown, expired, another
  principal's, an id toolflow could never have minted) gets the SDK's own 404 "Session not
  found", after which a client opens a new session. A served request carries the verified id in
  its ASGI scope under :data:`FLEET_SESSION`, for the tool service to key the conversation by.
- **Ending.** DELETE forgets the session (and its conversation state); GET, the standalone SSE
  stream, is 405 with ``Allow: POST, DELETE``: a fleet sends nothing outside a request's answer.
- **Idle expiry.** The document expires ``session_idle_timeout`` after its last store; a request
  stores it again (a compare-and-set with the version read; losing it means another request just
  did) when a tenth of that time has passed since the last refresh.
- **Outage.** A session that cannot be checked is never served: 503 with ``Retry-After``, and one
  warning on the ``toolflow.state`` logger per outage. An ``initialize`` whose session cannot be
  registered is 503 too (its answer is dropped; the client retries).

Requests of the 2026-07-28 era (an ``MCP-Protocol-Version`` the 2025 handshake does not know)
have no sessions: they pass untouched, as do requests the SDK refuses anyway (a Host or Origin
it does not allow, a missing or unknown bearer token), so that the SDK's answers to those stay
its own. The state is called from worker threads: the Redis client is synchronous.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pydantic_core
import trio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, SESSION_ID_PATTERN
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ErrorData, JSONRPCError, JSONRPCRequest, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolflow._state import StateBackend, new_conversation_id

__all__ = ["FLEET_SESSION", "RETRY_AFTER", "SESSION_DOCUMENT", "FleetSessions"]

FLEET_SESSION = "toolflow.session"
"""The ASGI scope key of a request's verified 2025-11-25 session id when a fleet keeps its sessions in the state.

Only the fleet's session check (:class:`FleetSessions`) writes it, after it found the request's
``Mcp-Session-Id`` in the shared state and owned by the request's principal; the tool service
keys the conversation by it (issue 19). A request without it has no fleet session.
"""

SESSION_DOCUMENT = "session"
"""The key of a session's part of its conversation document in the state; other parts keep it as they find it."""

RETRY_AFTER = 5
"""Seconds a client is asked to wait (``Retry-After``) when the state cannot check or register a session."""

MAX_SESSION_ID = 128
"""The longest ``Mcp-Session-Id`` looked up; toolflow mints 24 characters, so a longer one is no session of ours."""

REFRESHES_PER_TIMEOUT = 10
"""A session's expiry is moved on at most this many times per idle timeout (each is one more store)."""

logger = logging.getLogger("toolflow.state")

_PROTOCOL_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("latin-1")
_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("latin-1")
_T = TypeVar("_T")


class _Down(enum.Enum):
    """What :meth:`FleetSessions._call` gives when the state could not be reached (the request is answered 503)."""

    DOWN = "down"


DOWN = _Down.DOWN


class FleetSessions:
    """The ASGI middleware that keeps 2025-11-25 sessions in a shared state (see the module's docstring).

    Args:
        app: The SDK's app, running its stateless transport.
        state: The fleet's shared state.
        path: The MCP endpoint's path; other paths pass untouched.
        idle_timeout: Seconds a session lives after its last refresh.
        security: The SDK's Host and Origin checks: a request they refuse is passed on, for the SDK to refuse.
        max_body: The most bytes of a body read to tell an ``initialize`` (the SDK's limit; a longer body passes on).
        clock: The wall clock (the refresh stamp is compared across replicas).
    """

    def __init__(
        self,
        app: ASGIApp,
        state: StateBackend,
        *,
        path: str,
        idle_timeout: float,
        security: TransportSecuritySettings | None = None,
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self._state = state
        self._path = path
        self._ttl = idle_timeout
        self._security = TransportSecurityMiddleware(security)
        self._max_body = max_body
        self._clock = clock
        self._down = False  # in an outage, which one warning has reported

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self._concerns(scope):
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        owner = dict(authorization_context(user)) if isinstance(user, AuthenticatedUser) else None
        session_id = _header(scope, _SESSION_HEADER)
        if scope["method"] == "GET":
            await _refuse(send, 405, "Method Not Allowed: a fleet has no standalone stream", allow=True)
        elif session_id is not None:
            await self._in_session(session_id, owner, scope, receive, send)
        elif scope["method"] == "POST":
            await self._opening(owner, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _concerns(self, scope: Scope) -> bool:
        """Whether *scope* is a 2025-era request to the endpoint that the SDK would not refuse before its session."""
        if scope["type"] != "http" or scope["path"] != self._path:
            return False
        version = _header(scope, _PROTOCOL_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False  # the modern era (or a value the SDK's classifier refuses): no sessions
        if "user" in scope and not isinstance(scope["user"], AuthenticatedUser):
            return False  # tokens are required and this one is missing or unknown: the SDK answers 401
        refusal = await self._security.validate_request(Request(scope), is_post=scope["method"] == "POST")
        return refusal is None

    # ----------------------------------------------------------------------- a session's requests

    async def _in_session(
        self, session_id: str, owner: dict[str, Any] | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        stored = await self._session(session_id, owner)
        if stored is DOWN:
            await _unavailable(send)
            return
        if stored is None:
            await _refuse(send, 404, "Session not found")  # the SDK's words for an unknown session
            return
        version, data = stored
        if scope["method"] == "DELETE":
            if await self._call(lambda: self._state.forget(session_id)) is DOWN:
                await _unavailable(send)
                return
            start = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            await send(start)
            await send({"type": "http.response.body", "body": b""})
            return
        if not await self._refresh(session_id, version, data):
            await _unavailable(send)
            return
        headers = list(scope["headers"])
        protocol = data[SESSION_DOCUMENT].get("protocol")
        if _header(scope, _PROTOCOL_HEADER) is None and protocol in HANDSHAKE_PROTOCOL_VERSIONS:
            # The stateless transport takes a request without the header for 2025-03-26; the session
            # negotiated its own version, which the SDK's stateful transport would have kept.
            headers.append((_PROTOCOL_HEADER, protocol.encode("latin-1")))
        await self.app({**scope, "headers": headers, FLEET_SESSION: session_id}, receive, send)

    async def _session(
        self, session_id: str, owner: dict[str, Any] | None
    ) -> tuple[int, Mapping[str, Any]] | _Down | None:
        """The version and document of *owner*'s session *session_id*; None: there is no such session."""
        if len(session_id) > MAX_SESSION_ID or not SESSION_ID_PATTERN.fullmatch(session_id):
            return None  # not an id toolflow mints: no need to ask the state
        conversation = await self._call(lambda: self._state.load(session_id))
        if conversation is DOWN:
            return DOWN
        session = conversation.data.get(SESSION_DOCUMENT)
        if not isinstance(session, dict) or session.get("principal") != owner:
            if isinstance(session, dict):
                logger.warning("refused a request for session %s: another principal opened it", session_id[:8])
            return None
        return conversation.version, conversation.data

    async def _refresh(self, session_id: str, version: int, data: Mapping[str, Any]) -> bool:
        """Store the session again (its expiry moves on) if a tenth of the idle timeout passed since the last time.

        Returns whether the state could be reached.
        """
        session = data[SESSION_DOCUMENT]
        now = self._clock()
        stamp = session.get("refreshed")
        if isinstance(stamp, int | float) and math.isfinite(stamp) and now - stamp < self._ttl / REFRESHES_PER_TIMEOUT:
            return True
        document = {**data, SESSION_DOCUMENT: {**session, "refreshed": now}}
        # A lost compare-and-set means another request stored it since: the expiry moved on anyway.
        return await self._call(lambda: self._state.store(session_id, document, version, self._ttl)) is not DOWN

    # ----------------------------------------------------------------------- opening a session

    async def _opening(self, owner: dict[str, Any] | None, scope: Scope, receive: Receive, send: Send) -> None:
        body, complete = await _peek(receive, self._max_body)
        replay = _replaying(body, complete, receive)
        kind = _kind(body) if complete else None
        if kind == "other":
            await _refuse(send, 400, "Bad Request: Missing session ID")  # the SDK's stateful answer
            return
        if kind != "initialize":
            await self.app(scope, replay, send)  # too long or malformed: the SDK answers it
            return
        answer = _Buffered(send)
        await self.app(scope, replay, answer.send)
        result = answer.result()
        if answer.status is None or not 200 <= answer.status < 300 or result is None:
            await answer.flush()  # refused (an error, in HTTP or JSON-RPC): nothing was opened
            return
        session_id = new_conversation_id()
        protocol = result.get("protocolVersion")
        document = {
            SESSION_DOCUMENT: {
                "principal": owner,
                "protocol": protocol if isinstance(protocol, str) else None,
                "refreshed": self._clock(),
            }
        }
        # Not stored: the state is down, or the id is taken (144 random bits: never seen). The client retries.
        if await self._call(lambda: self._state.store(session_id, document, 0, self._ttl)) is not True:
            await _unavailable(send)
            return
        await answer.flush((_SESSION_HEADER, session_id.encode("ascii")))

    # ----------------------------------------------------------------------- the state

    async def _call(self, operation: Callable[[], _T]) -> _T | _Down:
        """*operation* on the state in a worker thread; :data:`DOWN` (one warning per outage) if it is unavailable."""
        try:
            value = await trio.to_thread.run_sync(operation, abandon_on_cancel=True)
        except ConnectionError as exc:
            if not self._down:
                self._down = True
                logger.warning(
                    "the shared state is unavailable (sessions): requests of sessions are answered 503 until it"
                    " is back: %s",
                    exc,
                )
            return DOWN
        self._down = False
        return value


class _Buffered:
    """An ``initialize`` answer held back until its session is registered (it is small and ends at once)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._messages: list[Message] = []
        self.status: int | None = None

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        self._messages.append(message)

    def result(self) -> dict[str, Any] | None:
        """The answer's JSON-RPC result (from a JSON body or server-sent events); None for an error or no answer."""
        body = b"".join(m.get("body", b"") for m in self._messages if m["type"] == "http.response.body")
        lines = [line.removeprefix(b"data:").strip() for line in body.splitlines() if line.startswith(b"data:")]
        for text in lines or [body]:
            try:
                message = json.loads(text)
            except ValueError:
                continue
            result = message.get("result") if isinstance(message, dict) else None
            if isinstance(result, dict):
                return result
        return None

    async def flush(self, header: tuple[bytes, bytes] | None = None) -> None:
        """Send the answer, with *header* added."""
        for message in self._messages:
            if header is not None and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}  # noqa: PLW2901
            await self._send(message)


async def _peek(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The body's first messages, up to just over *limit* bytes, and whether that is the whole body."""
    body = bytearray()
    while len(body) <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body), False  # the client left: the app will see it
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            return bytes(body), True
    return bytes(body), False


def _replaying(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that gives *body* first (as one message), then what *receive* gives."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": not complete}

    return replay


def _kind(body: bytes) -> str | None:
    """``"initialize"``, ``"other"`` (a valid JSON-RPC message of another kind), or None (the SDK refuses it)."""
    try:  # as the SDK's transport reads a body
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except (ValidationError, ValueError):
        return None
    return "initialize" if isinstance(message, JSONRPCRequest) and message.method == "initialize" else "other"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


async def _unavailable(send: Send) -> None:
    await _refuse(send, 503, "Session store unavailable", code=INTERNAL_ERROR)


async def _refuse(send: Send, status: int, text: str, *, code: int = INVALID_REQUEST, allow: bool = False) -> None:
    """A JSON-RPC error without a request id, as the SDK answers a request it refuses before reading it."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=text))
    payload = body.model_dump_json(by_alias=True, exclude_unset=True).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if allow:
        headers.append((b"allow", b"POST, DELETE"))
    if status == 503:
        headers.append((b"retry-after", str(RETRY_AFTER).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
