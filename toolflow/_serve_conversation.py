"""Which conversation a served request belongs to, and the handle that chains a 2026-07-28 client's requests (issue 19).

``toolflow serve`` keeps a conversation's state (its ``session`` cache, the ``depends_on``
successes, the rules' counts) in the state backend, so that any replica of a fleet sharing it
serves any request of the conversation; each such request opens an engine for one segment of
it (``open_engine(conversation=...)``). The key of the conversation:

- **2026-07-28** (no protocol sessions): a handle. Every answer to a ``tools/call`` carries one in
  its ``_meta`` under :data:`CONVERSATION_META`; a client that echoes it in its next request's
  ``params._meta`` continues the conversation. The handle is attacker-controlled text, so it is
  an HMAC-signed ``[conversation, principal, expiry]`` (:class:`toolflow._state.HandleKeys`):
  bound to the principal whose token authenticated the request (none without authentication),
  good for the conversation's idle lifetime and renewed by every answer. A request without a
  handle, or with one that does not verify (forged, damaged, expired, minted for another
  principal or under another fleet's secret), starts a new conversation: nothing of another
  one is reachable through it, and the answer's handle names the new one.
- **2025-11-25** over a fleet: the session id that the fleet's HTTP session check verified and
  left in the request's ASGI scope (:data:`toolflow._serve_http.FLEET_SESSION`).

Anything else has no conversation here: a 2025-11-25 session of one replica keeps its engine in
the SDK's session (as before), stdio serves one client with one engine, and ``--stateless``
mints no handles (every request stands alone).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
from mcp import types
from mcp.server import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolflow._conversation import DEFAULT_TTL
from toolflow._serve_http import FLEET_SESSION, principal_of
from toolflow._state import HandleKeys, new_conversation_id

__all__ = ["CONVERSATION_META", "Conversations", "Keyed"]

_Result = TypeVar("_Result", bound=types.Result)

CONVERSATION_META = "io.toolflow/conversation"
"""The ``_meta`` key of a conversation's handle: in every ``tools/call`` answer, echoed in the next request."""


@attrs.frozen(kw_only=True)
class Keyed:
    """A request's conversation: its id, and the handle its answer carries (``None``: a fleet session's, no handle)."""

    conversation: str
    handle: str | None = None

    def stamped(self, result: _Result) -> _Result:
        """*result* with the conversation's handle in its ``_meta`` (nothing to add for a fleet session)."""
        if self.handle is None:
            return result
        return result.model_copy(update={"meta": {**(result.meta or {}), CONVERSATION_META: self.handle}})


@attrs.frozen(kw_only=True)
class Conversations:
    """How ``toolflow serve`` keys a request's conversation (see the module's docstring).

    Attributes:
        keys: The keys of handles: from the fleet's shared secret, or this process's own.
        lifetime: Seconds a conversation lives after its last request (the HTTP transport's
            ``session_idle_timeout``): a handle's validity and the stored state's expiry.
        clock: The current time in seconds.
    """

    keys: HandleKeys
    lifetime: float = DEFAULT_TTL
    clock: Callable[[], float] = time.time

    def of(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Keyed | None:
        """The conversation of a ``tools/call`` request, or ``None`` when it has none of the state's."""
        principal = principal_of(ctx)
        owner = None if principal is None else principal.id
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            echoed = (params.meta or {}).get(CONVERSATION_META)
            now = self.clock()
            conversation = None if echoed is None else self.keys.verify(echoed, owner, now)
            if conversation is None:
                conversation = new_conversation_id()
            return Keyed(conversation=conversation, handle=self.keys.sign(conversation, owner, now + self.lifetime))
        session = fleet_session(ctx)
        return None if session is None else Keyed(conversation=session)


def fleet_session(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The fleet session id the HTTP session check verified for the request, if any."""
    scope = getattr(ctx.request, "scope", None)
    session = scope.get(FLEET_SESSION) if isinstance(scope, Mapping) else None
    return session if isinstance(session, str) and session else None
