"""Approval by the client of a ``toolflow serve`` request, and the seal that binds its answer to the call.

The engine asks approvers in order (``--approve``, the plugins, then the client). The client
is asked with an elicitation (:class:`ClientApproval`): an ``elicitation/create`` request on a
2025-11-25 session, an ``input_required`` result under 2026-07-28, whose answer comes back in the
client's retry of the call. The SDK's :class:`~mcp.server.request_state.RequestStateBoundary`
seals the ``requestState`` of that result and verifies the client's echo
(:func:`request_state_boundary`), so an answer counts only for the call it was asked about. The
seal's key is the fleet's (derived from ``TOOLFLOW_STATE_SECRET``) when there is one, so a retry
that reaches another replica is verified there too; otherwise a key of this process.
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolflow._approval import ApprovalReason
from toolflow._calls import ToolCall
from toolflow._results import json_text, truncate_text
from toolflow._state import HandleKeys

__all__ = ["APPROVAL_INPUT", "APPROVAL_SCHEMA", "APPROVAL_STATE", "ClientApproval", "request_state_boundary"]

APPROVAL_INPUT = "toolflow.approval"
"""The key of the approval question in a 2026-07-28 ``input_required`` result, and of its answer."""

APPROVAL_STATE = "toolflow.approval/v1"
"""The ``requestState`` of an approval question: the SDK's boundary seals it, bound to the call."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call",
            "description": "Yes runs the call once, as shown; no refuses it.",
            "default": False,
        }
    },
    "required": ["approve"],
}


class ClientApproval:
    """Asks the client that made one ``tools/call`` request to approve a call, when it can.

    The engine asks it last (after ``--approve`` and the plugins). A client that did not declare
    form elicitation cannot be asked: no answer (the call is refused as needing approval).
    Over a 2025-11-25 session the question is an ``elicitation/create`` request related to the
    call's request. A 2026-07-28 request cannot be sent requests: the first round records the
    question (:attr:`question`, which the handler returns as ``input_required``) and answers
    nothing, so nothing runs; the client's retry carries the answer, which counts only with the
    ``requestState`` this server sealed for exactly that call (tool and arguments).
    """

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, *, task: bool = False
    ) -> None:
        self._ctx = ctx
        self._params = params
        self._task = task  # a task's client is not there to answer
        self.question: types.ElicitRequest | None = None

    async def __call__(self, call: ToolCall, category: str) -> bool | None:
        capabilities = self._ctx.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        # An empty `elicitation: {}` is form mode (the 2025-06-18 shape); `url` alone is not.
        if self._task or elicitation is None or (elicitation.form is None and elicitation.url is not None):
            return None
        message = _approval_message(call, category)
        if self._ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            session = self._ctx.session
            return _approved(
                await session.elicit_form(message, APPROVAL_SCHEMA, related_request_id=self._ctx.request_id)
            )
        response = (self._params.input_responses or {}).get(APPROVAL_INPUT)
        if self._params.request_state == APPROVAL_STATE and isinstance(response, types.ElicitResult):
            return _approved(response)
        self.question = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA)
        )
        return None


def _approval_message(call: ToolCall, category: str) -> str:
    arguments = json_text(dict(call.arguments))
    steps = (
        f" Your answer covers its steps {truncate_text(', '.join(call.approves), 2000)} too." if call.approves else ""
    )
    reason = f" ({category.text})" if isinstance(category, ApprovalReason) and category.by_tool else ""
    return (
        f"Approve the {category} call {call.name}({truncate_text(arguments, 2000)})?{reason}{steps}"
        " It runs only if you say yes."
    )


def _approved(answer: types.ElicitResult) -> bool:
    """Yes only for an accepted form whose ``approve`` is true; a decline or a cancel is no."""
    content = answer.content or {}
    return answer.action == "accept" and content.get("approve") is True


def request_state_boundary(keys: HandleKeys | None) -> RequestStateBoundary:
    """The SDK's seal of ``input_required`` state: under a key derived from the fleet's *keys*, else this process's."""
    if keys is None:
        security = RequestStateSecurity.ephemeral()
    else:
        security = RequestStateSecurity(keys=list(keys.derived("request state")))
    return RequestStateBoundary(security, default_audience="toolflow")
