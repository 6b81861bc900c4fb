"""``toolflow serve``: the tools of a registry served over the Model Context Protocol (MCP).

The official ``mcp`` SDK (the optional extra ``toolflow[mcp]``) speaks the protocol; its
low-level :class:`mcp.server.Server` gets two handlers, and everything else is toolflow's:

- Exposure: the spec files' policy decides which tools a client sees and may call, exactly as
  in the agent loop (:meth:`toolflow.Registry.exposed`: the policy's ``toolset``, or the
  operator's ``--toolset``/``--tool``; then ``allow`` and ``deny``). The engine serves the whole
  registry with the exposed tools as its allowlist, so a call of any other tool is refused by
  the engine's gate (an ``isError`` result listing the exposed tools) and never runs.
- ``tools/list`` answers the exposed tools' MCP definitions from :func:`toolflow._export.mcp_tool`
  (name, title, description, ``inputSchema``, ``outputSchema`` when it describes an object,
  annotations from the category), rendered once at start-up.
- ``tools/call`` runs :meth:`toolflow.Engine.call`, so the gates, validation, caches, approval,
  timeouts and retries apply. Every outcome is a ``CallToolResult``: a failure of any kind (invalid
  arguments, an unknown tool, a timeout, a tool that fails or raises) has ``isError: true``
  and the model-readable message as its text; a success whose payload is an object also has
  it as ``structuredContent``, with the same JSON as text. Warnings follow in a second text
  block. The text is capped at :data:`~toolflow._results.DEFAULT_MAX_RESULT_CHARS`.
- Sessions: one engine per client session (its ``session`` cache and ``depends_on`` state).
  Over stdio the process serves one client, so one engine serves the whole connection; over
  streamable HTTP each ``Mcp-Session-Id`` gets its own, closed with the session. A request
  without a session (a stateless 2026-07-28 request over HTTP) gets an engine of its own.
  ``engine.tick()`` runs before every ``tools/call``: MCP has no batches of calls, so each
  request is a turn.
- Approval: a call of a category with ``approval: true`` is approved by the first of: the
  operator's ``--approve yes|no``; the plugins' ``toolflow_approve_call``; the client, asked
  with an elicitation when the request's client declared the ``elicitation`` capability (a
  2025-11-25 session: an ``elicitation/create`` request on the session; a 2026-07-28 request: an
  ``input_required`` result carrying the question, which the client answers by retrying the
  call, the SDK's :class:`~mcp.server.request_state.RequestStateBoundary` sealing the state
  that binds the answer to that call). Nobody: an ``isError`` result saying that approval is
  required. The engine asks only after the gates (``depends_on`` included), the validator and
  the cache let the call through. A request is one turn: a category's ``per_turn`` limit
  (at least 1) counts the one call of the request.
- Cancellation: the SDK cancels a request's cancel scope when the client sends
  ``notifications/cancelled``; the engine lets ``trio.Cancelled`` through (a ``command``
  tool's process group is killed), and the request is never answered, as MCP requires.
- Progress: when a ``tools/call`` carries a ``progressToken``, the call runs under
  :func:`toolflow._context.reporting_progress`, and each
  :meth:`toolflow.CallContext.report_progress` becomes a ``notifications/progress``, in order,
  before the result; reports that do not increase are dropped.

Everything runs on trio: stdio through the SDK's ``stdio_server``, HTTP through Hypercorn's
trio worker.
"""

from __future__ import annotations

import contextlib
import math
import socket
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, TextIO, TypeAlias

import attrs
import trio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolflow import __version__
from toolflow._approval import ApprovalWarning, asking_approval
from toolflow._cache import CacheWarning
from toolflow._calls import ToolCall
from toolflow._context import reporting_progress
from toolflow._errors import UsageError
from toolflow._executor import Engine, open_engine
from toolflow._export import mcp_tool
from toolflow._invoke import CallHookWarning
from toolflow._plugins import Plugins
from toolflow._policy import Policy
from toolflow._registry import Registry
from toolflow._results import DEFAULT_MAX_RESULT_CHARS, ToolResult, _to_json, truncate_text

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MCP_PATH",
    "TRANSPORTS",
    "ToolService",
    "build_server",
    "call_result",
    "exposed_tools",
    "serve",
]

Transport: TypeAlias = Literal["stdio", "http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http")
"""The transports ``toolflow serve --transport`` accepts."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MCP_PATH = "/mcp"
"""The path of the streamable HTTP endpoint."""

_BOOKKEEPING = frozenset({"attempts", "cached"})
"""Keys the engine adds to a result's ``extra``; they are not part of the tool's output."""

_PROGRESS_BUFFER = 64
"""Progress reports waiting to be sent; when the client reads slower than the tool reports, newer ones are dropped."""

_SESSION_KEY = "toolflow.engine"
"""Where a connection's :class:`_Session` lives in the SDK's per-connection ``state``."""

OpenEngine: TypeAlias = Callable[[], AbstractAsyncContextManager[Engine]]


APPROVAL_INPUT = "toolflow.approval"
"""The key of the approval question in a 2026-07-28 ``input_required`` result, and of its answer."""

_APPROVAL_STATE = "toolflow.approval/v1"
"""The ``requestState`` of an approval question: the SDK's boundary seals it, bound to the call."""

_APPROVAL_SCHEMA: dict[str, Any] = {
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


def exposed_tools(
    registry: Registry, policy: Policy, *, toolsets: Iterable[str] = (), tools: Iterable[str] = ()
) -> Registry:
    """The tools ``toolflow serve`` offers: *policy*'s exposure, with *toolsets* and *tools* as the selection.

    See :meth:`toolflow.Registry.exposed`. A tool named in *tools* that the policy keeps out
    (``allow``, ``deny``) is an error, not a tool silently missing from the list.

    Raises:
        UsageError: The policy names unknown tools or toolsets, or keeps out a tool of *tools*.
        UnknownToolsetError: A toolset of *toolsets* is not declared.
        UnknownToolError: A tool of *tools* is not in *registry*.
    """
    tools = tuple(tools)
    exposed = registry.exposed(policy, toolsets=toolsets, tools=tools)
    hidden = [name for name in dict.fromkeys(tools) if name in registry and name not in exposed]
    if hidden:
        listed = ", ".join(repr(name) for name in hidden)
        msg = f"the spec files' policy keeps {listed} from the model (policy 'allow'/'deny'), so it is not served"
        raise UsageError(msg)
    return exposed


def call_result(result: ToolResult, *, structured: bool = False) -> types.CallToolResult:
    """The MCP ``CallToolResult`` of one toolflow result.

    A failure is ``isError: true`` with its error as the text. A success whose data is a mapping
    (or, for a flat result dictionary, whose other keys are) has that mapping as
    ``structuredContent`` and its JSON as the text; any other data is the text itself (a string
    as it is, anything else as JSON). *structured* (the tool lists an ``outputSchema``) makes
    ``structuredContent`` present on every success, as MCP clients then require. Warnings follow
    as a second text block. Never raises for odd data: values JSON cannot express become text.
    """
    content: list[types.ContentBlock] = []
    payload: Any = None
    if not result.success:
        text = result.error or "the tool failed"
    else:
        data = result.data
        if isinstance(data, Mapping):
            payload = data
        elif data is None and (extra := {k: v for k, v in result.extra.items() if k not in _BOOKKEEPING}):
            payload = extra
        elif data is None and structured:
            payload = {}
        if payload is not None:
            text = _to_json(payload)
            # The JSON text is the JSON-safe copy of the payload: what is not JSON became a string.
            payload = _from_json(text)
        else:
            text = data if isinstance(data, str) else _to_json(data)
    content.append(types.TextContent(type="text", text=truncate_text(text, DEFAULT_MAX_RESULT_CHARS)))
    if result.warnings:
        notes = "\n".join(f"  - {warning}" for warning in result.warnings)
        content.append(types.TextContent(type="text", text=truncate_text(f"Warnings:\n{notes}", 4000)))
    return types.CallToolResult(content=content, structured_content=payload, is_error=not result.success)


def _from_json(text: str) -> Any:
    import json  # noqa: PLC0415 - only for structured results

    return json.loads(text)


@attrs.define(kw_only=True)
class _Session:
    """One client session's engine, opened on the session's first call and closed with it."""

    _lock: trio.Lock = attrs.field(factory=trio.Lock)
    _engine: Engine | None = None

    async def engine(self, open_engine: OpenEngine, stack: contextlib.AsyncExitStack) -> Engine:
        if self._engine is None:
            async with self._lock:
                if self._engine is None:
                    self._engine = await stack.enter_async_context(open_engine())
        return self._engine


@attrs.define(kw_only=True)
class ToolService:
    """The ``tools/list`` and ``tools/call`` handlers over one registry.

    Attributes:
        registry: The tools served (listed): the exposed tools. The engines that
            *open_engine* opens hold every tool, with these as their allowlist.
        open_engine: Opens the engine of a new client session.
        shared: The engine of every request, when the transport serves one client (stdio).
    """

    registry: Registry
    open_engine: OpenEngine
    shared: Engine | None = None
    _listing: types.ListToolsResult = attrs.field(init=False)
    _structured: frozenset[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        definitions = [mcp_tool(tool.spec) for tool in self.registry]
        self._listing = types.ListToolsResult(tools=[types.Tool.model_validate(d) for d in definitions])
        self._structured = frozenset(d["name"] for d in definitions if "outputSchema" in d)

    @classmethod
    def under_policy(
        cls,
        registry: Registry,
        *,
        policy: Policy | None = None,
        toolsets: Iterable[str] = (),
        tools: Iterable[str] = (),
        approve: bool | None = None,
        plugins: Plugins | None = None,
        cache_path: str | None = None,
        cache_backend: str | None = None,
        cache_options: Mapping[str, Any] | None = None,
    ) -> ToolService:
        """The service of *registry*'s tools that *policy* exposes, each session on an engine that enforces it.

        *policy* (default: the defaults) decides which tools are exposed (with *toolsets* and
        *tools* as the operator's selection, see :func:`exposed_tools`) and which categories
        need approval; *approve* is the operator's fixed answer to every approval (``True``:
        ``--approve yes``), ``None`` leaving it to the plugins and the client.

        Raises:
            UsageError: The policy or the selection name what does not exist, or the policy
                keeps out a tool of *tools*.
        """
        policy = policy if policy is not None else Policy()
        exposed = exposed_tools(registry, policy, toolsets=toolsets, tools=tools)
        allowlist = exposed.names()
        fixed = None if approve is None else (lambda _call, _category: approve)

        def open_session() -> AbstractAsyncContextManager[Engine]:
            return open_engine(
                registry,
                plugins=plugins,
                allowlist=allowlist,
                policy=policy,
                approve=fixed,
                cache_path=cache_path,
                cache_backend=cache_backend,
                cache_options=cache_options,
            )

        return cls(registry=exposed, open_engine=open_session)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The ``inputSchema`` of tool *name*, or None for an unknown tool."""
        return next((tool.input_schema for tool in self._listing.tools if tool.name == name), None)

    async def list_tools(
        self,
        ctx: ServerRequestContext[Any, Any],  # noqa: ARG002 - the SDK's handler signature
        params: types.PaginatedRequestParams | None,  # noqa: ARG002
    ) -> types.ListToolsResult:
        """Answer ``tools/list``: every tool served, in load order, on one page."""
        return self._listing

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Answer ``tools/call`` through the session's engine; only cancellation escapes."""
        if self.shared is not None:
            return await self._call(self.shared, ctx, params)
        connection = _connection(ctx)
        if connection is None:
            async with self.open_engine() as engine:
                return await self._call(engine, ctx, params)
        session = connection.state.get(_SESSION_KEY)
        if not isinstance(session, _Session):
            session = connection.state[_SESSION_KEY] = _Session()
        engine = await session.engine(self.open_engine, connection.exit_stack)
        return await self._call(engine, ctx, params)

    async def _call(
        self, engine: Engine, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        engine.tick()  # one request is one turn
        name = params.name
        arguments = params.arguments if params.arguments is not None else {}
        call_id = f"mcp_{ctx.request_id}"
        client = _ClientApproval(ctx, params)
        with asking_approval(client):
            if _progress_token(ctx) is None:
                result = await engine.call(name, arguments, call_id=call_id)
            else:
                result = await _call_with_progress(engine, ctx, name, arguments, call_id)
        if client.question is not None:  # 2026-07-28: the client answers by retrying the call
            return types.InputRequiredResult(
                input_requests={APPROVAL_INPUT: client.question}, request_state=_APPROVAL_STATE
            )
        return call_result(result, structured=name in self._structured)


class _ClientApproval:
    """Asks the client that made one ``tools/call`` request to approve a call, when it can.

    The engine asks it last (after ``--approve`` and the plugins). A client that did not declare
    form elicitation cannot be asked: no answer (the call is refused as needing approval).
    Over a 2025-11-25 session the question is an ``elicitation/create`` request related to the
    call's request. A 2026-07-28 request cannot be sent requests: the first round records the
    question (:attr:`question`, which the handler returns as ``input_required``) and answers
    nothing, so nothing runs; the client's retry carries the answer, which counts only with the
    ``requestState`` this server sealed for exactly that call (tool and arguments).
    """

    def __init__(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> None:
        self._ctx = ctx
        self._params = params
        self.question: types.ElicitRequest | None = None

    async def __call__(self, call: ToolCall, category: str) -> bool | None:
        capabilities = self._ctx.session.client_capabilities
        elicitation = capabilities.elicitation if capabilities is not None else None
        # An empty `elicitation: {}` is form mode (the 2025-06-18 shape); `url` alone is not.
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            return None
        message = _approval_message(call, category)
        if self._ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            session = self._ctx.session
            return _approved(
                await session.elicit_form(message, _APPROVAL_SCHEMA, related_request_id=self._ctx.request_id)
            )
        response = (self._params.input_responses or {}).get(APPROVAL_INPUT)
        if self._params.request_state == _APPROVAL_STATE and isinstance(response, types.ElicitResult):
            return _approved(response)
        self.question = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=_APPROVAL_SCHEMA)
        )
        return None


def _approval_message(call: ToolCall, category: str) -> str:
    arguments = _to_json(dict(call.arguments))
    return f"Approve the {category} call {call.name}({truncate_text(arguments, 2000)})? It runs only if you say yes."


def _approved(answer: types.ElicitResult) -> bool:
    """Yes only for an accepted form whose ``approve`` is true; a decline or a cancel is no."""
    content = answer.content or {}
    return answer.action == "accept" and content.get("approve") is True


def _connection(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The SDK's per-connection state of the request, if the SDK lets us reach it.

    mcp 2.3 hands low-level handlers a ``ServerRequestContext`` without the ``connection`` its
    planned ``Context`` has; the ``ServerSession`` keeps it. Without it, every request is a
    session of its own.
    """
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> object:
    meta = ctx.params.get("_meta") if ctx.params else None
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


class _ProgressSink:
    """Takes progress reports from any thread and queues them, in order, for the request's forwarder."""

    def __init__(self, send: trio.MemorySendChannel[tuple[float, float | None, str | None]]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._send = send
        self._last = -math.inf
        self._closed = False

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self._closed:
            return
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._put, (progress, total, message))

    def _put(self, report: tuple[float, float | None, str | None]) -> None:
        # Runs in the trio thread, one report after another, so the order and the check hold.
        if self._closed or report[0] <= self._last:
            return
        self._last = report[0]
        with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._send.send_nowait(report)

    def close(self) -> None:
        self._closed = True
        self._send.close()


async def _call_with_progress(
    engine: Engine, ctx: ServerRequestContext[Any, Any], name: str, arguments: object, call_id: str
) -> ToolResult:
    send, receive = trio.open_memory_channel[tuple[float, float | None, str | None]](_PROGRESS_BUFFER)
    sink = _ProgressSink(send)

    async def forward() -> None:
        async with receive:
            async for progress, total, message in receive:
                await ctx.session.report_progress(progress, total, message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forward)
        try:
            with reporting_progress(sink):
                result = await engine.call(name, arguments, call_id=call_id)
        finally:
            sink.close()  # the forwarder sends what is queued, then ends: progress arrives before the result
    return result


def build_server(service: ToolService) -> Server[Any]:
    """An MCP server named ``toolflow`` whose tools are *service*'s.

    The SDK's :class:`~mcp.server.request_state.RequestStateBoundary` seals the ``requestState``
    of ``input_required`` results (under a key held by this process only) and verifies the
    client's echo, so an approval answer counts only for the call it was asked about.
    """
    server: Server[Any] = Server(
        "toolflow",
        version=__version__,
        get_tool_input_schema=service.input_schema,
        on_list_tools=service.list_tools,
        on_call_tool=service.call_tool,
    )
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="toolflow"))
    return server


def serve(
    service: ToolService,
    *,
    transport: Transport = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    stderr: TextIO | None = None,
) -> None:
    """Serve *service*'s tools over MCP until the client disconnects (stdio) or the process is interrupted.

    Announces itself on *stderr* (default ``sys.stderr``) with one line, ``toolflow: serving N
    tools over stdio`` or ``toolflow: serving N tools at http://HOST:PORT/mcp``; with port 0 the
    line names the port the system chose. Warnings of call hooks, approvers and caches are
    printed there as ``toolflow: warning: ...``.

    Raises:
        UsageError: *transport* is unknown, or the HTTP server cannot listen on *host*:*port*.
    """
    out = sys.stderr if stderr is None else stderr
    if transport not in TRANSPORTS:
        msg = f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}"
        raise UsageError(msg)

    def announce(where: str) -> None:
        noun = "tool" if len(service.registry) == 1 else "tools"
        print(f"toolflow: serving {len(service.registry)} {noun} {where}", file=out, flush=True)

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"toolflow: warning: {message}", file=out, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", CallHookWarning)
        warnings.simplefilter("always", CacheWarning)
        warnings.simplefilter("always", ApprovalWarning)
        warnings.showwarning = show
        if transport == "stdio":
            trio.run(_serve_stdio, service, announce)
        else:
            trio.run(_serve_http, service, host, port, announce)


async def _serve_stdio(service: ToolService, announce: Callable[[str], None]) -> None:
    server = build_server(service)
    async with service.open_engine() as engine:
        service.shared = engine
        async with stdio_server() as (read_stream, write_stream):
            announce("over stdio")
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def _serve_http(service: ToolService, host: str, port: int, announce: Callable[[str], None]) -> None:
    from hypercorn.config import Config  # noqa: PLC0415 - only the HTTP transport needs it
    from hypercorn.trio import serve as hypercorn_serve  # noqa: PLC0415

    server = build_server(service)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    config = Config()
    # Bound here, so that a port in use is one clear error (Hypercorn would leak the socket).
    config.bind = [f"fd://{_listen(host, port)}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(hypercorn_serve, app, config)
        announce(" ".join(f"at {bind}{MCP_PATH}" for bind in binds))


def _listen(host: str, port: int) -> int:
    """Bind a TCP socket to *host*:*port* and hand over its file descriptor (Hypercorn listens on it).

    Raises:
        UsageError: The address cannot be bound (in use, not an address of this machine, ...).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        listener.bind((host, port))
    except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
        listener.close()
        msg = f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}"
        raise UsageError(msg) from None
    return listener.detach()
