"""MCP tasks in ``toolflow serve``: a call of a background category answered at once with a task.

A category with ``background: true`` runs its calls in the background in the agent loop; over
MCP the same calls may run as *tasks*, for clients that ask:

- **2025-11-25** (tasks in the core protocol). The server declares the ``tasks`` capability
  (``list``, ``cancel``, ``requests.tools.call``) and lists each tool of a background category
  with ``execution.taskSupport: "optional"``. A ``tools/call`` with a ``task`` parameter is
  answered at once with a ``CreateTaskResult``; ``tasks/get``, ``tasks/result`` (waits for the
  ``CallToolResult``), ``tasks/list`` and ``tasks/cancel`` follow, and each change of status is
  sent as ``notifications/tasks/status`` on the session. A task asked of any other tool is
  ``-32601`` (the tool's ``taskSupport`` is ``forbidden``). The SDK (mcp 2.3) knows these
  messages as types only: the handlers are registered on its low-level server, and a task's
  ``tools/call`` is answered by a server middleware, since the SDK's serializer would refuse
  a ``CreateTaskResult`` as a ``tools/call`` result.
- **2026-07-28** (the Tasks extension, ``io.modelcontextprotocol/tasks``). The server
  advertises the extension (``server/discover``); a request whose client declares it, for a
  tool of a background category, is answered with a ``CreateTaskResult`` (``resultType:
  "task"``) through the SDK's :class:`~mcp.server.extension.Extension` interceptor; the client
  polls ``tasks/get`` (the ``CallToolResult`` inlined once ``completed``) and may send
  ``tasks/cancel`` and ``tasks/update``. There are no status notifications (they need a
  ``subscriptions/listen`` stream): the client polls.

Every task runs :meth:`toolflow._serve.ToolService.task_call`, the session's own call path
(gates, validation, caches, timeouts, retries, hooks, the principal's bound ``context:``
parameters), in a nursery that lives as long as the server, not the request: on the session's
engine under 2025-11-25, on an engine of its own under 2026-07-28 (no session). While a task
runs, nobody is there to answer an approval question, so the client is not asked: ``--approve``
and the plugins decide, and a call nobody approves is refused (its task completes with that
``isError`` result) — a client that wants to approve calls them without a task.

A task id is an explicit handle (:class:`toolflow._state.HandleKeys`, HMAC-SHA256 with a key
of this process, or the fleet's keys): it names the task, the principal that created it and,
under 2025-11-25, the protocol session (a fleet session's verified id, when the HTTP layer left
one in the request's scope), and it expires with the task (wall-clock time). Under 2026-07-28
a later request finds the task by its id alone, so an id that is forged, expired, or presented
by another principal (or session) is "not found", the same error for each. Limits (:class:`TaskLimits`): tasks running
and kept per owner, and the retention (``ttl``, capped); a task still running when its
retention ends is cancelled, and the tool's ``timeout`` bounds its run time before that.

**A fleet** (a shared state and the fleet's secret, :func:`fleet_records`): a task still runs
on the replica that created it, which keeps its record in the state
(:mod:`toolflow._task_records`), so that every replica answers ``tasks/get``, ``tasks/result``,
``tasks/list`` and ``tasks/cancel`` for it; a cancel request stored by another replica is acted
on here within a second. The limits stay each replica's own.

The server's stop and kill (:class:`toolflow._serve.Lifecycle`) apply: a stop refuses new
tasks and waits for the running ones (``policy.on_exit: wait``, until the grace period ends)
or cancels them (``cancel``); a kill cancels them. A cancelled task reports ``cancelled``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol, TypeAlias

import attrs
import outcome
import trio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.server.extension import Extension, MethodBinding, compose_tool_call_handler
from mcp.server.mcpserver import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolflow._serve_http import FLEET_SESSION, principal_of
from toolflow._shutdown import Interrupts
from toolflow._state import HandleKeys, StateBackend
from toolflow._task_records import (
    CHECK_INTERVAL,
    CLIENT_CANCELLED,
    HEARTBEAT,
    NOT_FOUND,
    POLL_INTERVAL_MS,
    CreateExtensionTask,
    ExtensionTask,
    ServedTask,
    TaskRecords,
    Unavailable,
    failure,
    now_text,
)

__all__ = [
    "DEFAULT_MAX_KEPT",
    "DEFAULT_MAX_RUNNING",
    "DEFAULT_MAX_TTL",
    "DEFAULT_TTL",
    "POLL_INTERVAL_MS",
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "CreateExtensionTask",
    "ExtensionTask",
    "TaskLimits",
    "Tasks",
    "connection_of",
    "fleet_records",
    "running",
    "session_of",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The Tasks extension of 2026-07-28."""

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key naming the task of a 2025-11-25 ``tasks/result`` answer."""

DEFAULT_MAX_RUNNING = 16
"""Tasks running at once per owner (a principal, and under 2025-11-25 its session)."""

DEFAULT_MAX_KEPT = 100
"""Tasks kept per owner, running or finished; past it, the owner's oldest finished task is dropped."""

DEFAULT_TTL = 15 * 60.0
"""Seconds a task is kept from its creation when the client asks for no ``ttl``."""

DEFAULT_MAX_TTL = 60 * 60.0
"""The longest retention a client may ask for, in seconds."""

logger = logging.getLogger("toolflow.state")

_SESSION_KEY = "toolflow.tasks.session"
"""Where a connection's random session id lives in the SDK's per-connection ``state``."""

_CLOSING_KEY = "toolflow.tasks.closing"
"""Set on a connection once its exit stack ends its tasks."""

_LEGACY_CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
).model_dump(by_alias=True, mode="json", exclude_none=True)

_EXPIRED = "Error: cancelled - the task's retention (ttl) ended before it finished"

RunCall: TypeAlias = Callable[
    [ServerRequestContext[Any, Any], types.CallToolRequestParams],
    Awaitable[Callable[[], Awaitable[types.CallToolResult | types.InputRequiredResult]]],
]
"""Prepares a call to run as a task (during the request) and returns what runs it (later)."""


class UpdateTaskParams(types.RequestParams):
    """``tasks/update`` (2026-07-28): answers to a task's ``inputRequests``."""

    task_id: str
    input_responses: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class TaskLimits:
    """How many tasks an owner may have, and for how long they are kept.

    ``toolflow serve`` takes them from ``--task-max-running``, ``--task-max-kept``, ``--task-ttl``
    and ``--task-max-ttl`` (:func:`toolflow._cli._task_limits`); in a fleet, each replica its own.

    Attributes:
        running: Tasks running at once per owner; one more is refused (``-32600``).
        kept: Tasks kept per owner, running or finished; past it the oldest finished one is dropped.
        ttl: Seconds a task is kept from its creation when the client asks for no ``ttl``.
        max_ttl: The longest retention a client may ask for, in seconds (a longer ``ttl`` is cut).
    """

    running: int = DEFAULT_MAX_RUNNING
    kept: int = DEFAULT_MAX_KEPT
    ttl: float = DEFAULT_TTL
    max_ttl: float = DEFAULT_MAX_TTL

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.running <= self.kept:
            msg = f"TaskLimits: running must be at least 1 and at most kept ({self.kept}), got {self.running!r}"
            raise ValueError(msg)
        if not 0 < self.ttl <= self.max_ttl:
            msg = f"TaskLimits: ttl must be more than 0 and at most max_ttl ({self.max_ttl}), got {self.ttl!r}"
            raise ValueError(msg)


class Lifetime(Protocol):
    """What tasks need of the server's :class:`toolflow._serve.Lifecycle`."""

    stopping: bool
    interrupts: Interrupts

    def track(self, scope: trio.CancelScope, *, cancel_on_stop: bool) -> None:
        """Hold the server's closing until *scope* is released; a kill (and a stop, if asked) cancels it."""

    def release(self, scope: trio.CancelScope) -> None:
        """*scope* has finished."""


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The SDK's per-connection state of the request, if the SDK lets us reach it.

    mcp 2.3 hands low-level handlers a ``ServerRequestContext`` without the ``connection`` its
    planned ``Context`` has; the ``ServerSession`` keeps it. Without it, every request is a
    session of its own.
    """
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def session_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The protocol session of a request: its connection under 2025-11-25, when the connection is one.

    None under 2026-07-28 (no sessions) and for a request without a back channel (stateless
    HTTP, where every request has a connection of its own that ends with it).
    """
    connection = connection_of(ctx)
    if _modern(ctx) or connection is None or not connection.has_standalone_channel:
        return None
    return connection


def _fleet_session(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """A fleet's verified 2025-11-25 session id (:data:`toolflow._serve_http.FLEET_SESSION`); None without one."""
    scope = getattr(ctx.request, "scope", None) if not _modern(ctx) else None
    session = scope.get(FLEET_SESSION) if isinstance(scope, Mapping) else None
    return session if isinstance(session, str) else None


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the request's client declared the Tasks extension (2026-07-28: in this request's capabilities)."""
    capabilities = ctx.session.client_capabilities
    declared = capabilities.extensions if capabilities is not None else None
    return bool(declared) and TASKS_EXTENSION in (declared or {})


@attrs.define(kw_only=True)
class Tasks:
    """The tasks of one server: created by ``tools/call``, run in a nursery of the server's lifetime.

    Attributes:
        background: The served tools that may run as tasks (those of background categories).
        run_call: Prepares a call to run as a task (:meth:`toolflow._serve.ToolService.task_call`).
        on_exit: ``policy.on_exit``: a stop waits for running tasks (``wait``) or cancels them.
        limits: Tasks per owner and their retention.
        keys: The keys that sign task ids (default: a random key of this process; a fleet's
            replicas share the fleet's keys, so that each verifies the ids the others sign).
        records: A fleet's task records in its shared state (None: one replica, tasks in memory only).
        lifetime: The server's stop and kill, set by :meth:`install`.
    """

    background: frozenset[str]
    run_call: RunCall
    on_exit: Literal["wait", "cancel"] = "wait"
    limits: TaskLimits = attrs.field(factory=TaskLimits)
    keys: HandleKeys = attrs.field(factory=HandleKeys.random)
    records: TaskRecords | None = None
    lifetime: Lifetime | None = None
    _tasks: dict[str, ServedTask] = attrs.field(factory=dict, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)

    # --- wiring ------------------------------------------------------------------------------

    def install(self, server: Server[Any], call_tool: Any, lifetime: Lifetime | None) -> Any:
        """Serve tasks on *server*: the methods, the capability, the 2025-11-25 middleware.

        Returns *call_tool* wrapped by the extension's interceptor (2026-07-28 task creation),
        to be registered as the ``tools/call`` handler inside the lifecycle's guard.
        """
        self.lifetime = lifetime
        extension = _TasksExtension(self)
        for binding in extension.methods():
            server.add_request_handler(binding.method, binding.params_type, binding.handler)
        server.extensions[extension.identifier] = extension.settings()
        server.middleware.append(self._legacy_middleware)
        return compose_tool_call_handler([extension], call_tool)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The nursery tasks run in; on the way out, the tasks still running are cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                for task in self._tasks.values():
                    task.scope.cancel()

    # --- creation ----------------------------------------------------------------------------

    def _owner(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """Whose a task is: the principal, and under 2025-11-25 the protocol session (a fleet's: its verified id)."""
        principal = principal_of(ctx)
        session = _fleet_session(ctx)
        connection = session_of(ctx)
        if session is None and connection is not None:
            session = connection.state.setdefault(_SESSION_KEY, secrets.token_urlsafe(12))
        return json.dumps([principal.id if principal is not None else None, session])

    def _purge(self) -> None:
        now = trio.current_time()
        for local, task in tuple(self._tasks.items()):
            if task.terminal and task.expires <= now:
                del self._tasks[local]

    def _make_room(self, owner: str) -> None:
        """Refuse a task over the running limit; drop the owner's oldest finished task over the kept limit."""
        self._purge()
        mine = [task for task in self._tasks.values() if task.owner == owner]
        if sum(not task.terminal for task in mine) >= self.limits.running:
            msg = (
                f"too many tasks running: at most {self.limits.running} per client;"
                " wait for one to finish or cancel one (tasks/cancel)"
            )
            raise MCPError(code=INVALID_REQUEST, message=msg)
        finished = [task for task in mine if task.terminal]
        while finished and len(mine) >= self.limits.kept:
            oldest = finished.pop(0)
            mine.remove(oldest)
            del self._tasks[oldest.local]

    async def create(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, ttl_ms: int | None
    ) -> ServedTask:
        """A new task running *params*' call; it exists (``tasks/get`` finds it) before this returns.

        Raises:
            MCPError: The owner has too many tasks running, or the server cannot run tasks now.
        """
        run = await self.run_call(ctx, params)  # the only wait: from here on, the checks and the record are atomic
        if self._nursery is None or (self.lifetime is not None and self.lifetime.stopping):
            raise MCPError(code=INVALID_REQUEST, message="the server is shutting down: no new tasks are started")
        owner = self._owner(ctx)
        self._make_room(owner)
        seconds = self.limits.ttl if ttl_ms is None else min(max(ttl_ms, 1) / 1000, self.limits.max_ttl)
        until = time.time() + seconds  # wall-clock: a fleet's other replicas verify the id
        local = secrets.token_urlsafe(12)
        created = now_text()
        task = ServedTask(
            id=self.keys.sign(local, owner, until),
            local=local,
            owner=owner,
            modern=_modern(ctx),
            created=created,
            updated=created,
            expires=trio.current_time() + seconds,
            until=until,
            ttl_ms=round(seconds * 1000),
            notify=session_of(ctx),
        )
        if task.notify is not None and _CLOSING_KEY not in task.notify.state:
            # The session's engine closes with the connection: its tasks end first (LIFO).
            task.notify.state[_CLOSING_KEY] = True
            task.notify.exit_stack.push_async_callback(self._end_session, owner)
        self._tasks[local] = task
        if self.lifetime is not None:  # now, so that a stop or kill right after this answer finds it
            self.lifetime.track(task.scope, cancel_on_stop=self.on_exit == "cancel")
        if self.records is None:
            self._nursery.start_soon(self._run, task, run)
        else:  # the record is stored before the client has the id, and before any later change of it
            await self._nursery.start(self._run, task, run)
        return task

    async def _run(
        self,
        task: ServedTask,
        run: Callable[[], Awaitable[types.CallToolResult | types.InputRequiredResult]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        lifetime = self.lifetime
        changed = False
        if self.records is not None:
            with contextlib.suppress(Unavailable):  # the task runs all the same; this replica answers for it
                await self.records.created(task)
        task_status.started()
        try:
            with task.scope:
                task.scope.deadline = task.expires  # a task nobody may fetch any more stops
                try:
                    result = await self._watched(task, run)
                except Exception as exc:  # noqa: BLE001 - a bug must fail the task, not the server's nursery
                    task.error = {"code": -32603, "message": f"Internal error: {type(exc).__name__}"}
                    changed = task.finish("failed", None, f"the call failed: {type(exc).__name__}")
                else:
                    changed = self._complete(task, result)
        finally:
            if not task.terminal:  # cancelled: by the ttl, a stop, a kill or the server's end
                text = _EXPIRED if trio.current_time() >= task.expires else self._stopped()
                changed = task.finish("cancelled", failure(text), text)
            if lifetime is not None:
                lifetime.release(task.scope)
        if changed:  # a task the client cancelled was reported by tasks/cancel
            await self._changed(task)

    async def _watched(
        self, task: ServedTask, run: Callable[[], Awaitable[types.CallToolResult | types.InputRequiredResult]]
    ) -> types.CallToolResult | types.InputRequiredResult:
        """*run*'s result; in a fleet, while it runs, the record is refreshed and read for a cancel request."""
        if self.records is None:
            return await run()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch, task, self.records)
            captured = await outcome.acapture(run)  # raised outside the nursery, as it was raised
            nursery.cancel_scope.cancel()
        return captured.unwrap()

    async def _watch(self, task: ServedTask, records: TaskRecords) -> None:
        """Read the running *task*'s record every CHECK_INTERVAL seconds, refresh it every HEARTBEAT.

        A refresh that fails is tried again at the next check, so that once the state is back the
        record is fresh within a second rather than read as its replica's death by the others.
        """
        beat = trio.current_time()
        while True:
            await trio.sleep(CHECK_INTERVAL)
            if trio.current_time() - beat < HEARTBEAT:
                cancelled = await records.cancel_requested(task.local)
            else:
                try:
                    cancelled = await records.save(task)
                except Unavailable:
                    cancelled = False
                else:
                    beat = trio.current_time()
            if cancelled:
                self._cancelled_elsewhere(task)

    def _cancelled_elsewhere(self, task: ServedTask) -> None:
        """Another replica stored a cancel request in *task*'s record: cancel it here (the record says so already)."""
        task.finish("cancelled", failure(CLIENT_CANCELLED), CLIENT_CANCELLED)
        task.scope.cancel()

    async def _changed(self, task: ServedTask) -> None:
        """*task*'s status changed: its record (in a fleet) and its session's notification."""
        if self.records is not None:
            try:
                cancelled = await self.records.save(task)
            except Unavailable:
                cancelled = False
            if cancelled and task.status != "cancelled":  # another replica's cancel was stored first: it stands
                task.status, task.result, task.message = "cancelled", failure(CLIENT_CANCELLED), CLIENT_CANCELLED
        await self._notify(task)

    def _complete(self, task: ServedTask, result: types.CallToolResult | types.InputRequiredResult) -> bool:
        if not isinstance(result, types.CallToolResult):  # never for a task: nobody is asked a question
            result = failure("Error: the call needed the client's input, which a task cannot ask for")
        message = None
        if result.is_error and result.content and isinstance(result.content[0], types.TextContent):
            message = result.content[0].text[:500]
        # 2025-11-25 fails a task whose tool result is an error; the extension completes it with the error inside.
        return task.finish("failed" if result.is_error and not task.modern else "completed", result, message)

    def _stopped(self) -> str:
        if self.lifetime is not None and self.lifetime.interrupts.signal is not None:
            return self.lifetime.interrupts.cancelled().error or "Error: cancelled"
        return "Error: cancelled - the server stopped before the task finished"

    async def _notify(self, task: ServedTask) -> None:
        """``notifications/tasks/status`` on the task's session (2025-11-25); best effort, as the spec allows."""
        connection = task.notify
        if connection is None:
            return
        params = types.TaskStatusNotificationParams(**task.legacy())
        with trio.move_on_after(5), contextlib.suppress(Exception):
            await connection.notify(
                "notifications/tasks/status", params.model_dump(by_alias=True, mode="json", exclude_none=True)
            )

    async def _end_session(self, owner: str) -> None:
        """The session closes: its tasks (nobody else may fetch them) are cancelled and forgotten."""
        ending = [task for task in self._tasks.values() if task.owner == owner]
        for task in ending:
            task.scope.cancel()
        for task in ending:
            await task.done.wait()
            self._tasks.pop(task.local, None)

    # --- requests ----------------------------------------------------------------------------

    async def find(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> ServedTask:
        """The caller's task *task_id*: this replica's, or in a fleet another's (read from its record).

        Raises:
            MCPError: ``-32602``: no task of the caller's has this id (forged, expired, another's),
                or it is another replica's and the shared state is unavailable.
        """
        owner = self._owner(ctx)
        local = self.keys.verify(task_id, owner, time.time())
        self._purge()
        task = self._tasks.get(local) if local is not None else None
        if task is None and local is not None and self.records is not None:
            task = await self.records.find(local, task_id, owner)
        elif (
            task is not None
            and not task.terminal
            and self.records is not None
            and await self.records.cancel_requested(task.local)  # stored by another replica a moment ago
        ):
            self._cancelled_elsewhere(task)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message=NOT_FOUND)
        return task

    async def cancel(self, task: ServedTask) -> ServedTask:
        """Cancel *task* (it reports ``cancelled`` at once, in a fleet on every replica); the task after it.

        Raises:
            MCPError: ``-32602``: the task has finished already (2025-11-25; the extension acknowledges).
        """
        if task.remote and self.records is not None:
            task, cancelled = await self.records.cancel(task)
        elif cancelled := not task.terminal:
            task.finish("cancelled", failure(CLIENT_CANCELLED), CLIENT_CANCELLED)
            task.scope.cancel()
            await self._changed(task)
        if not cancelled and not task.modern:
            msg = f"Cannot cancel task: already in terminal status {task.status!r}"
            raise MCPError(code=INVALID_PARAMS, message=msg)
        return task

    async def finished(self, task: ServedTask) -> ServedTask:
        """*task* once terminal: this replica's awaited, another's polled from its record.

        Raises:
            MCPError: ``-32602``: another replica's task whose record is gone (its retention ended).
        """
        if task.remote and self.records is not None:
            return await self.records.finished(task)
        await task.done.wait()
        return task

    async def of_owner(self, ctx: ServerRequestContext[Any, Any]) -> list[ServedTask]:
        """The caller's tasks, oldest first; in a fleet, those of every replica."""
        self._purge()
        owner = self._owner(ctx)
        mine = [task for task in self._tasks.values() if task.owner == owner]
        if self.records is None:
            return mine
        others = [task for task in await self.records.of_owner(owner) if task.local not in self._tasks]
        return sorted([*mine, *others], key=lambda task: task.created) if others else mine

    async def _legacy_middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """2025-11-25: the ``tasks`` capability in ``initialize``, and ``tools/call`` with a ``task``."""
        raw = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method == "initialize":
            result = await call_next(ctx)
            if raw.get("protocolVersion") == "2025-11-25" and isinstance(result, dict):
                capabilities = result.get("capabilities")
                if isinstance(capabilities, dict):
                    capabilities["tasks"] = _LEGACY_CAPABILITY
            return result
        if ctx.method != "tools/call" or _modern(ctx) or raw.get("task") is None:
            return await call_next(ctx)
        params = types.CallToolRequestParams.model_validate(raw, by_name=False)
        if params.name not in self.background:
            msg = f"tool {params.name!r} cannot run as a task (its execution.taskSupport is 'forbidden')"
            raise MCPError(code=METHOD_NOT_FOUND, message=msg)
        task = await self.create(ctx, params, params.task.ttl if params.task is not None else None)
        return types.CreateTaskResult(task=types.Task(**task.legacy())).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )


class _TasksExtension(Extension):
    """The Tasks extension's methods and ``tools/call`` interceptor, with the 2025-11-25 methods beside them."""

    identifier = TASKS_EXTENSION

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", types.GetTaskRequestParams, self.get_task),
            MethodBinding("tasks/cancel", types.CancelTaskRequestParams, self.cancel_task),
            MethodBinding("tasks/result", types.GetTaskPayloadRequestParams, self.task_result),
            MethodBinding("tasks/list", types.PaginatedRequestParams, self.list_tasks),
            MethodBinding("tasks/update", UpdateTaskParams, self.update_task),
        ]

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """2026-07-28: a call of a background tool, from a client that declared the extension, becomes a task."""
        if not _modern(ctx) or params.name not in self.tasks.background or not _declares_tasks(ctx):
            return await call_next(ctx)
        task = await self.tasks.create(ctx, params, None)
        return task.extension(CreateExtensionTask)

    async def _task(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> ServedTask:
        if _modern(ctx):
            require_client_extension(ctx, TASKS_EXTENSION)
        return await self.tasks.find(ctx, task_id)

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams) -> HandlerResult:
        task = await self._task(ctx, params.task_id)
        return task.extension() if _modern(ctx) else types.GetTaskResult(**task.legacy())

    async def cancel_task(
        self, ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams
    ) -> HandlerResult:
        task = await self.tasks.cancel(await self._task(ctx, params.task_id))
        return types.EmptyResult() if _modern(ctx) else types.CancelTaskResult(**task.legacy())

    async def task_result(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskPayloadRequestParams
    ) -> HandlerResult:
        """2025-11-25: wait for the task to end; its ``CallToolResult``, naming the task in ``_meta``."""
        _legacy_only(ctx, "tasks/result")
        task = await self.tasks.finished(await self._task(ctx, params.task_id))
        result = task.result or failure(task.message or "Error: the task failed")
        return result.model_copy(update={"meta": {**(result.meta or {}), RELATED_TASK: {"taskId": task.id}}})

    async def list_tasks(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> HandlerResult:
        """2025-11-25: the caller's tasks, on one page (at most ``kept`` of them)."""
        _legacy_only(ctx, "tasks/list")
        if params.cursor is not None:
            raise MCPError(code=INVALID_PARAMS, message="Invalid cursor: tasks/list has one page")
        return types.ListTasksResult(tasks=[types.Task(**task.legacy()) for task in await self.tasks.of_owner(ctx)])

    async def update_task(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> HandlerResult:
        """2026-07-28: acknowledged; toolflow's tasks never ask for input, so every response is ignored."""
        if not _modern(ctx):
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tasks/update")
        await self._task(ctx, params.task_id)
        return types.EmptyResult()


def _legacy_only(ctx: ServerRequestContext[Any, Any], method: str) -> None:
    """The Tasks extension dropped ``tasks/result`` and ``tasks/list``: not found under 2026-07-28."""
    if _modern(ctx):
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data=method)


def fleet_records(state: StateBackend | None, keys: HandleKeys | None) -> TaskRecords | None:
    """A fleet's task records: with a shared state and the fleet's *keys*; else None (tasks in memory only).

    Without the keys, the replicas cannot verify each other's task ids: each answers for its own
    tasks only (``toolflow serve`` warns of it once, at the start, with the handles').
    """
    if state is None or not state.shared or keys is None:
        return None
    return TaskRecords(state)


@contextlib.asynccontextmanager
async def running(tasks: Tasks | None) -> AsyncIterator[None]:
    """:meth:`Tasks.running`, or nothing when the server has no tasks."""
    if tasks is None:
        yield
        return
    async with tasks.running():
        yield
