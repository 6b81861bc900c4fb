"""``toolflow serve``: the tools of a registry served over the Model Context Protocol (MCP).

The official ``mcp`` SDK (the optional extra ``toolflow-yaml[mcp]``) speaks the protocol; its
low-level :class:`mcp.server.Server` gets two handlers, and everything else is toolflow's:

- Exposure: the spec files' policy decides which tools a client sees and may call, exactly as
  in the agent loop (:meth:`toolflow.Registry.exposed`: the policy's ``toolset``, or the
  operator's ``--toolset``/``--tool``; then ``allow`` and ``deny``). The engine serves the whole
  registry with the exposed tools as its allowlist, so a call of any other tool is refused by
  the engine's gate (an ``isError`` result listing the exposed tools) and never runs.
- ``tools/list`` answers the exposed tools' MCP definitions from :func:`toolflow._export.mcp_tool`
  (name, title, description, ``inputSchema``, ``outputSchema`` when it describes an object,
  annotations from the category; a pipeline's from its steps' tools, served or not), rendered
  once at start-up.
- ``tools/call`` runs :meth:`toolflow.Engine.call`, so the gates, validation, caches, approval,
  timeouts and retries apply. Every outcome is a ``CallToolResult``: a failure of any kind (invalid
  arguments, an unknown tool, a timeout, a tool that fails or raises) has ``isError: true``
  and the model-readable message as its text; a success whose payload is an object also has
  it as ``structuredContent``, with the same JSON as text. Warnings follow in a second text
  block. The text is capped at the policy's ``max_result_chars``; the engine refuses arguments
  whose JSON is larger than its ``max_argument_bytes`` (an ``isError`` result; nothing runs).
- Sessions: one engine per client session (its ``session`` cache and ``depends_on`` state).
  Over stdio the process serves one client, so one engine serves the whole connection; over
  streamable HTTP each ``Mcp-Session-Id`` gets its own, closed with the session. A 2026-07-28
  request (a handle) or a fleet session's gets an engine for its conversation kept in the state
  (:mod:`toolflow._serve_conversation`); under ``--stateless``, an engine of its own.
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

- Shutdown (:class:`Lifecycle`): the first SIGTERM or Ctrl-C refuses new ``tools/call`` requests
  (a failure result saying the server is shutting down) and lets the calls in flight finish for
  up to the grace period; then, or at a second signal, they are cancelled and answered with a
  ``cancelled`` failure. Once every call is answered, the transport closes (stdio: as if the
  client had closed its input; HTTP: no new connections, open ones get a few seconds).

Everything runs on trio: stdio through :mod:`toolflow._serve_stdio` (the SDK's ``stdio_server``
writes; toolflow reads, so that every malformed request is answered), HTTP through
:mod:`toolflow._serve_http` (Hypercorn's trio worker; Host and Origin checks, bearer tokens,
session limits).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, TextIO, TypeAlias, cast

import attrs
import trio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp_types import RequestId

from toolflow import __version__
from toolflow._approval import ApprovalWarning, asking_approval
from toolflow._cache import DEFAULT_CACHE_TIMEOUT, CacheWarning, check_cache_backend
from toolflow._context import providing_context
from toolflow._conversation import DEFAULT_TTL
from toolflow._errors import UsageError
from toolflow._executor import Engine, open_engine
from toolflow._export import mcp_tool
from toolflow._invoke import CallHookWarning
from toolflow._mcp_sources import ToolSourceWarning
from toolflow._plugins import Plugins
from toolflow._policy import OnExit, Policy
from toolflow._registry import Registry
from toolflow._results import DEFAULT_MAX_RESULT_CHARS, ToolResult, json_text, truncate_text, valid_text
from toolflow._serve_approval import APPROVAL_INPUT, APPROVAL_STATE, ClientApproval, request_state_boundary
from toolflow._serve_conversation import Conversations, Keyed
from toolflow._serve_http import HTTPSettings, Listener, Principal, listen, principal_of, serve_http
from toolflow._serve_progress import call_with_progress
from toolflow._serve_stdio import serve_stdio
from toolflow._serve_tasks import TaskLimits, Tasks, connection_of, fleet_records, running, session_of
from toolflow._shutdown import DEFAULT_GRACE, Interrupts, open_signal_watch
from toolflow._state import StateBackend
from toolflow._state_config import FleetKeys
from toolflow._telemetry import remote_parent

__all__ = [
    "TRANSPORTS",
    "Lifecycle",
    "ToolService",
    "build_server",
    "call_result",
    "exposed_tools",
    "principal_of",
    "serve",
]

Transport: TypeAlias = Literal["stdio", "http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http")
"""The transports ``toolflow serve --transport`` accepts."""

_BOOKKEEPING = frozenset({"attempts", "cached"})
"""Keys the engine adds to a result's ``extra``; they are not part of the tool's output."""

_SESSION_KEY = "toolflow.engine"
"""Where a connection's :class:`_Session` lives in the SDK's per-connection ``state``."""

OpenEngine: TypeAlias = Callable[[], AbstractAsyncContextManager[Engine]]
CallTool: TypeAlias = Callable[[ServerRequestContext[Any, Any], types.CallToolRequestParams], Any]

_SHUTTING_DOWN = ToolResult.failure(
    "Error: the server is shutting down: the call was not run; call it again once the server is back",
    extra={"status": "shutting_down"},
)

_ANSWER_WAIT = 5.0
"""Seconds the transport waits, after a kill, for the answers of the cancelled calls to be written."""


def exposed_tools(
    registry: Registry, policy: Policy, *, toolsets: Iterable[str] = (), tools: Iterable[str] = ()
) -> Registry:
    """The tools ``toolflow serve`` offers: *policy*'s exposure, with *toolsets* and *tools* as the selection.

    See :meth:`toolflow.Registry.exposed`. A tool named in *tools* that the policy keeps out
    (``allow``, ``deny``) or that is hidden from models (``expose: false``) is an error, not a
    tool silently missing from the list.

    Raises:
        UsageError: The policy names unknown tools or toolsets, or a tool of *tools* is kept out.
        UnknownToolsetError: A toolset of *toolsets* is not declared.
        UnknownToolError: A tool of *tools* is not in *registry*.
    """
    tools = tuple(tools)
    exposed = registry.exposed(policy, toolsets=toolsets, tools=tools)
    missing = [name for name in dict.fromkeys(tools) if name in registry and name not in exposed]
    hidden = [name for name in missing if not registry.get(name).spec.expose]
    if hidden:
        listed = ", ".join(repr(name) for name in hidden)
        msg = (
            f"not served: {listed}: 'expose: false' in the spec hides it from models, as a pipeline step only"
            " (serve a pipeline that calls it)"
        )
        raise UsageError(msg)
    if missing:
        listed = ", ".join(repr(name) for name in missing)
        msg = f"the spec files' policy keeps {listed} from the model (policy 'allow'/'deny'), so it is not served"
        raise UsageError(msg)
    return exposed


def call_result(
    result: ToolResult, *, structured: bool = False, max_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> types.CallToolResult:
    """The MCP ``CallToolResult`` of one toolflow result, its text capped at *max_chars* characters.

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
        text = result.error or "Error: the tool failed"
    else:
        data = result.data
        if isinstance(data, Mapping):
            payload = data
        elif data is None and (extra := {k: v for k, v in result.extra.items() if k not in _BOOKKEEPING}):
            payload = extra
        elif data is None and structured:
            payload = {}
        if payload is not None:
            text = json_text(payload)
            # The JSON text is the JSON-safe copy of the payload: what is not JSON became a string.
            payload = _from_json(text)
        else:
            text = valid_text(data) if isinstance(data, str) else json_text(data)
    content.append(types.TextContent(type="text", text=truncate_text(text, max_chars)))
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
        engine_tools: Every tool the engines hold (default: *registry*), where the annotations
            of a pipeline look up its steps' tools, served or not.
        max_result_chars: The cap on a result's text (the policy's ``max_result_chars``).
        background: The served tools of background categories: they may run as MCP tasks.
        on_exit: The policy's ``on_exit``: whether a stop waits for running tasks or cancels them.
        task_limits: Tasks per client and their retention.
        state: The state the engines share; a shared one (Redis) keeps the tasks' records when
            *keys* come from the fleet's secret.
        keys: What signs task ids and conversation handles and, from the fleet's secret, seals an
            approval's ``requestState`` (default: this process's own random keys).
        tasks: The tasks of the server (None when no tool may run as one).
        conversations: How a request's conversation kept in the state is keyed (2026-07-28
            handles, fleet sessions; :mod:`toolflow._serve_conversation`); ``None``: none is.
        open_conversation: Opens the engine of one request of a conversation, by its id.
    """

    registry: Registry
    open_engine: OpenEngine
    shared: Engine | None = None
    engine_tools: Registry | None = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    background: frozenset[str] = frozenset()
    on_exit: OnExit = "wait"
    task_limits: TaskLimits = attrs.field(factory=TaskLimits)
    conversations: Conversations | None = None
    open_conversation: Callable[[str], AbstractAsyncContextManager[Engine]] | None = None
    state: StateBackend | None = None
    keys: FleetKeys = attrs.field(factory=FleetKeys)
    tasks: Tasks | None = attrs.field(init=False)
    _listing: types.ListToolsResult = attrs.field(init=False)
    _structured: frozenset[str] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        every = {tool.name: tool.spec for tool in self.engine_tools or self.registry}
        definitions = [mcp_tool(t.spec, every, task_support=t.name in self.background) for t in self.registry]
        self.tasks = None
        if self.background:  # in a fleet, every replica answers for a task (its record in the shared state)
            self.tasks = Tasks(
                background=self.background,
                run_call=self.task_call,
                on_exit=self.on_exit,
                limits=self.task_limits,
                keys=self.keys.keys,
                records=fleet_records(self.state, self.keys.secret_keys),
            )
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
        cache_timeout: float = DEFAULT_CACHE_TIMEOUT,
        state: StateBackend | None = None,
        keys: FleetKeys | None = None,
        conversation_ttl: float | None = None,
        task_limits: TaskLimits | None = None,
    ) -> ToolService:
        """The service of *registry*'s tools that *policy* exposes, each session on an engine that enforces it.

        *policy* (default: the defaults) decides which tools are exposed (with *toolsets* and
        *tools* as the operator's selection, see :func:`exposed_tools`), which categories
        need approval, and the caps on results and arguments; *approve* is the operator's fixed
        answer to every approval (``True``: ``--approve yes``), ``None`` leaving it to the plugins
        and the client. *keys* (default: this process's own) sign and seal what a client echoes
        (:class:`toolflow._state_config.FleetKeys`). With a *conversation_ttl*, each request's
        conversation is kept in *state* (2026-07-28 handles, fleet sessions; see
        :mod:`toolflow._serve_conversation`) and lives that many seconds after its last request;
        without one (stdio, ``--stateless``) a request without a protocol session stands alone.
        *task_limits* (default: :class:`TaskLimits`' defaults) limit each client's MCP tasks.

        Raises:
            UsageError: The policy or the selection name what does not exist, or the policy
                keeps out a tool of *tools*.
            ConfigError: No plugin provides *cache_backend* (checked here, not at a request).
        """
        check_cache_backend(cache_backend, plugins)
        policy = policy if policy is not None else Policy()
        exposed = exposed_tools(registry, policy, toolsets=toolsets, tools=tools)
        allowlist = exposed.names()
        fixed = None if approve is None else (lambda _call, _category: approve)
        keys = keys if keys is not None else FleetKeys()

        def open_session(conversation: str | None = None) -> AbstractAsyncContextManager[Engine]:
            return open_engine(
                registry,
                plugins=plugins,
                allowlist=allowlist,
                policy=policy,
                approve=fixed,
                cache_path=cache_path,
                cache_backend=cache_backend,
                cache_options=cache_options,
                cache_timeout=cache_timeout,
                state=state,  # every session's engine shares it (toolflow._state)
                conversation=conversation,
                conversation_ttl=DEFAULT_TTL if conversation_ttl is None else conversation_ttl,
            )

        conversations = None if conversation_ttl is None else Conversations(keys=keys.keys, lifetime=conversation_ttl)

        return cls(
            registry=exposed,
            open_engine=open_session,
            engine_tools=registry,
            max_result_chars=policy.max_result_chars,
            background=frozenset(t.name for t in exposed if policy.category(t.spec.category).background),
            on_exit=policy.on_exit,
            conversations=conversations,
            open_conversation=open_session,
            state=state,
            keys=keys,
            task_limits=task_limits if task_limits is not None else TaskLimits(),
        )

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
        if (keyed := self._keyed(ctx, params)) is not None:  # an engine for this request's segment
            async with self._conversation_engine(keyed) as segment:
                result = await self._call(segment, ctx, params)
            return keyed.stamped(result)  # after the commit: the next request may go to any replica
        engine = await self._session_engine(ctx)
        if engine is None:
            async with self.open_engine() as engine:
                return await self._call(engine, ctx, params)
        return await self._call(engine, ctx, params)

    async def task_call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Callable[[], Awaitable[types.CallToolResult | types.InputRequiredResult]]:
        """The call of *params* as an MCP task runs it later, on the same path as :meth:`call_tool`.

        The engine is the session's (2025-11-25, stdio), found now, or, without a session
        (2026-07-28 and stateless requests over HTTP), one of its own for the task's lifetime.
        Nobody is asked to approve. A request of a conversation kept in the state runs on an engine
        of its own that begins when the task starts and commits when it ends.
        """
        if (keyed := self._keyed(ctx, params)) is not None:

            async def in_conversation() -> types.CallToolResult | types.InputRequiredResult:
                async with self._conversation_engine(keyed) as engine:
                    result = await self._call(engine, ctx, params, task=True)
                return keyed.stamped(result)

            return in_conversation
        has_session = self.shared is not None or session_of(ctx) is not None
        engine = await self._session_engine(ctx) if has_session else None

        async def run() -> types.CallToolResult | types.InputRequiredResult:
            if engine is None:
                async with self.open_engine() as own:
                    return await self._call(own, ctx, params, task=True)
            return await self._call(engine, ctx, params, task=True)

        return run

    def _keyed(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Keyed | None:
        """The request's conversation in the state (None: stdio's one engine, a session's, or its own)."""
        return None if self.shared is not None or self.conversations is None else self.conversations.of(ctx, params)

    def _conversation_engine(self, keyed: Keyed) -> AbstractAsyncContextManager[Engine]:
        return cast("Callable[[str], AbstractAsyncContextManager[Engine]]", self.open_conversation)(keyed.conversation)

    async def _session_engine(self, ctx: ServerRequestContext[Any, Any]) -> Engine | None:
        """The engine of the request's session (opened on its first call); None: the request has none."""
        if self.shared is not None:
            return self.shared
        connection = connection_of(ctx)
        if connection is None:
            return None
        session = connection.state.get(_SESSION_KEY)
        if not isinstance(session, _Session):
            session = connection.state[_SESSION_KEY] = _Session()
        return await session.engine(self.open_engine, connection.exit_stack)

    async def _call(
        self,
        engine: Engine,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        *,
        task: bool = False,
    ) -> types.CallToolResult | types.InputRequiredResult:
        name = params.name
        arguments = params.arguments if params.arguments is not None else {}
        engine.tick()  # one request is one turn
        call_id = f"mcp_{ctx.request_id}"
        client = ClientApproval(ctx, params, task=task)
        with (
            asking_approval(client),
            providing_context(principal_context(principal_of(ctx))),
            remote_parent(_meta(ctx)),  # the client's span, if it sent one
        ):
            if task or _progress_token(ctx) is None:
                result = await engine.call(name, arguments, call_id=call_id)
            else:
                result = await call_with_progress(engine, ctx, name, arguments, call_id)
        if client.question is not None:  # 2026-07-28: the client answers by retrying the call
            return types.InputRequiredResult(
                input_requests={APPROVAL_INPUT: client.question}, request_state=APPROVAL_STATE
            )
        return call_result(result, structured=name in self._structured, max_chars=self.max_result_chars)


def principal_context(principal: Principal | None) -> dict[str, Any]:
    """The caller's context of a ``tools/call`` request: ``{"principal": {"id", "claims"}}``, or empty.

    Empty over stdio and over HTTP without tokens: a tool that requires a parameter bound to
    ``principal.id`` is then refused, never called with a value the client chose.
    """
    if principal is None:
        return {}
    return {"principal": {"id": principal.id, "claims": dict(principal.claims)}}


def _meta(ctx: ServerRequestContext[Any, Any]) -> object:
    return ctx.params.get("_meta") if ctx.params else None


def _progress_token(ctx: ServerRequestContext[Any, Any]) -> object:
    meta = _meta(ctx)
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


@attrs.define(kw_only=True)
class Lifecycle:
    """The server's stop and kill, and when its transport may close.

    :meth:`guard` wraps the ``tools/call`` handler: after :meth:`stop` a new call gets a failure
    result saying the server is shutting down (nothing runs); a call in flight runs on until it
    finishes or :meth:`kill` cancels it, and then it is answered with a ``cancelled`` failure.
    :meth:`closing` returns once the server stopped and every call has been answered.

    Attributes:
        interrupts: The signals' record, which words the ``cancelled`` result.
        answers_reported: The transport reports each answer written (:meth:`answered`); without
            it, a call counts as answered when its handler returns.
    """

    interrupts: Interrupts = attrs.field(factory=Interrupts)
    answers_reported: bool = False
    stopping: bool = attrs.field(default=False, init=False)
    _running: set[trio.CancelScope] = attrs.field(factory=set, init=False)
    _cancel_on_stop: set[trio.CancelScope] = attrs.field(factory=set, init=False)
    _unanswered: Counter[RequestId] = attrs.field(factory=Counter, init=False)
    _stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    _settled: trio.Event = attrs.field(factory=trio.Event, init=False)
    _answer_wait: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)

    def stop(self) -> None:
        """Refuse new calls from now on; the transport closes once the calls in flight are answered."""
        self.stopping = True
        for scope in tuple(self._cancel_on_stop):
            scope.cancel()
        self._stopped.set()
        self._check_settled()

    def kill(self) -> None:
        """Cancel every call in flight (each is answered ``cancelled``) and stop."""
        self._answer_wait.deadline = trio.current_time() + _ANSWER_WAIT
        for scope in tuple(self._running):
            scope.cancel()
        self.stop()

    async def closing(self) -> None:
        """Return when the transport may close: stopped, and every call answered (or, after a kill, 5 s)."""
        await self._stopped.wait()
        with self._answer_wait:
            await self._settled.wait()

    def track(self, scope: trio.CancelScope, *, cancel_on_stop: bool) -> None:
        """Count *scope* (an MCP task's) as work in flight until :meth:`release`: kill cancels it, stop too if asked."""
        self._running.add(scope)
        if cancel_on_stop:
            self._cancel_on_stop.add(scope)

    def release(self, scope: trio.CancelScope) -> None:
        """The work of *scope* is over."""
        self._running.discard(scope)
        self._cancel_on_stop.discard(scope)
        self._check_settled()

    def answered(self, request_id: RequestId) -> None:
        """The answer to request *request_id* was written (reported by the transport)."""
        if self._unanswered[request_id] > 0:
            self._unanswered[request_id] -= 1
            if not self._unanswered[request_id]:
                del self._unanswered[request_id]
            self._check_settled()

    def _check_settled(self) -> None:
        if self.stopping and not self._unanswered and not self._running:
            self._settled.set()

    def guard(self, call_tool: CallTool) -> CallTool:
        """*call_tool*, refusing calls after :meth:`stop` and answering those :meth:`kill` cancels."""

        @functools.wraps(call_tool)
        async def guarded(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
            if self.stopping:
                return call_result(_SHUTTING_DOWN)
            scope = trio.CancelScope()
            awaited = ctx.request_id if self.answers_reported else None  # the answer the transport will report
            self._running.add(scope)
            if awaited is not None:
                self._unanswered[awaited] += 1
            try:
                with scope:
                    result = await call_tool(ctx, params)
                if scope.cancelled_caught:
                    result = call_result(self.interrupts.cancelled())
            except BaseException:
                if awaited is not None:  # cancelled by the client or the transport: no answer comes
                    self.answered(awaited)
                raise
            finally:
                self._running.discard(scope)
                self._check_settled()
            return result

        return guarded


def build_server(service: ToolService, lifecycle: Lifecycle | None = None) -> Server[Any]:
    """An MCP server named ``toolflow`` whose tools are *service*'s, under *lifecycle*'s stop and kill.

    The SDK's :class:`~mcp.server.request_state.RequestStateBoundary` seals the ``requestState``
    of ``input_required`` results (under a key derived from the fleet's secret, *service*'s
    ``keys``, so that the retry may reach any replica; without one, a key of this process) and
    verifies the client's echo, so an approval answer counts only for the call it was asked about.
    """
    server: Server[Any] = Server(
        "toolflow", version=__version__, get_tool_input_schema=service.input_schema, on_list_tools=service.list_tools
    )
    server.middleware.append(request_state_boundary(service.keys.secret_keys))
    call_tool: CallTool = service.call_tool
    if service.tasks is not None:  # the tools of background categories may run as MCP tasks
        call_tool = service.tasks.install(server, call_tool, lifecycle)
    call_tool = call_tool if lifecycle is None else lifecycle.guard(call_tool)
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    return server


def serve(
    open_service: Callable[[], AbstractAsyncContextManager[ToolService]],
    *,
    transport: Transport = "stdio",
    http: HTTPSettings | None = None,
    grace: float = DEFAULT_GRACE,
    stderr: TextIO | None = None,
) -> int:
    """Serve the tools of *open_service*'s service over MCP until the client leaves (stdio) or a signal stops it.

    *open_service* opens the service when the server starts (the connections of the specs' MCP
    servers are opened with it, and closed when the server stops).

    Announces itself on *stderr* (default ``sys.stderr``) with one line, ``toolflow: serving N
    tools over stdio`` or ``toolflow: serving N tools at http://HOST:PORT/mcp``; with port 0 the
    line names the port the system chose. Warnings of call hooks, approvers and caches are
    printed there as ``toolflow: warning: ...``, and so is the shutdown (see :class:`Lifecycle`): SIGTERM,
    SIGINT or SIGHUP stop the server, the calls in flight have *grace* seconds to finish, a
    second signal cancels them at once.

    Returns:
        The exit code: 0 when the client left, 128 + N when signal N stopped the server.

    Raises:
        UsageError: *transport* is unknown, or the HTTP server cannot listen as *http* asks (see
            :func:`toolflow._serve_http.listen`).
    """
    out = sys.stderr if stderr is None else stderr
    if transport not in TRANSPORTS:
        msg = f"unknown transport {transport!r}: use one of {', '.join(TRANSPORTS)}"
        raise UsageError(msg)
    # Bound before the run starts, so that a port in use or a missing token is one clear error.
    listener = listen(http or HTTPSettings()) if transport == "http" else None
    interrupts = Interrupts(grace=grace)
    lifecycle = Lifecycle(interrupts=interrupts, answers_reported=transport == "stdio")

    def announce(service: ToolService, where: str) -> None:
        noun = "tool" if len(service.registry) == 1 else "tools"
        print(f"toolflow: serving {len(service.registry)} {noun} {where}", file=out, flush=True)
        if listener is not None and not listener.loopback and listener.settings.tokens is None:
            print(
                f"toolflow: warning: serving {listener.url} without authentication (--insecure-no-auth):"
                " anyone who can reach it can call the tools",
                file=out,
                flush=True,
            )

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"toolflow: warning: {message}", file=out, flush=True)

    stopping = (
        f"shutting down: new calls are refused, the calls in flight have {interrupts.grace_text()} to finish"
        " (a second signal cancels them)"
    )

    async def main() -> None:
        async with open_service() as service:
            server = build_server(service, lifecycle)
            async with open_signal_watch(
                interrupts, stop=lifecycle.stop, kill=lifecycle.kill, stderr=out, stopping=stopping
            ):
                if listener is None:
                    async with service.open_engine() as engine, running(service.tasks):
                        service.shared = engine
                        await serve_stdio(
                            server,
                            closing=lifecycle.closing,
                            answered=lifecycle.answered,
                            announce=lambda: announce(service, "over stdio"),
                        )
                else:
                    async with running(service.tasks):
                        await _serve_http(server, listener, lifecycle, functools.partial(announce, service))

    with warnings.catch_warnings():
        warnings.simplefilter("always", CallHookWarning)
        warnings.simplefilter("always", CacheWarning)
        warnings.simplefilter("always", ApprovalWarning)
        warnings.simplefilter("always", ToolSourceWarning)
        warnings.showwarning = show
        try:
            trio.run(main)
        finally:
            if listener is not None:
                listener.close()  # unless Hypercorn took it
    return interrupts.exit_code or 0


async def _serve_http(
    server: Server[Any], listener: Listener, lifecycle: Lifecycle, announce: Callable[[str], None]
) -> None:
    async with trio.open_nursery() as nursery:
        url = await nursery.start(functools.partial(serve_http, server, listener, closing=lifecycle.closing))
        announce(f"at {url}")
