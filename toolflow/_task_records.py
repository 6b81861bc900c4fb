"""MCP tasks as ``toolflow serve`` keeps them, and their records in a fleet's shared state (issue 19).

:class:`ServedTask` is one task of :mod:`toolflow._serve_tasks` (its status, result, cancel scope),
with the two forms a client sees (2025-11-25's ``Task``, the Tasks extension's
:class:`ExtensionTask`) and the form a fleet stores, its *record*.

A task runs on the replica that created it: its cancel scope, its engine and its result live
there. With a shared state (Redis), that replica also keeps the
task's *record* in the state, through :class:`toolflow._state.StateBackend`'s conversation
documents (``load``/``store``: compare-and-set JSON objects that expire), so that every other
replica can answer ``tasks/get``, ``tasks/result``, ``tasks/list`` and ``tasks/cancel``:

- ``task:<local id>`` (:data:`RECORD`): the task's record: its signed id and owner, the status,
  message, times, retention (wall-clock ``until``), the ``CallToolResult`` as JSON once finished,
  the error, a cancel request, and the heartbeat of the replica running it (``beat``). It expires
  with the task's retention.
- ``tasks-of:<digest of the owner>`` (:data:`OWNER_INDEX`): the local ids of an owner's tasks,
  for ``tasks/list``.

The running replica writes the record when the task is created (before the client has its id)
and at every change of status, and refreshes it every :data:`HEARTBEAT` seconds while it runs. A
cancel request from another replica is stored in the record (compare-and-set): the record says
``cancelled`` from then on, and the running replica, which reads its running tasks' records every
:data:`CHECK_INTERVAL` seconds (and on each ``tasks/get`` it answers), cancels the task's scope.
A record never overwrites a stored cancel request. A ``working`` record whose heartbeat is older
than :data:`STALE_AFTER` seconds belongs to a replica that stopped without ending it (SIGKILL):
other replicas report it ``failed`` (:func:`view`).

Each backend operation runs in a worker thread (the Redis client is synchronous) through
:func:`toolflow._limits.off_loop`, bounded by :data:`OPERATION_TIMEOUT`. The state unavailable:
the running replica goes on from memory (its own requests are answered as before), the others
cannot know the task (:data:`Unavailable`); one warning on ``toolflow.state`` per outage.

Times in a record are wall-clock (``time.time``), read by other replicas: the replicas' clocks
must agree to well within :data:`STALE_AFTER` seconds, as NTP keeps them.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, TypeVar

import attrs
import trio
from mcp import types
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from toolflow._limits import off_loop
from toolflow._state import StateBackend

__all__ = [
    "CHECK_INTERVAL",
    "CLIENT_CANCELLED",
    "HEARTBEAT",
    "NOT_FOUND",
    "OPERATION_TIMEOUT",
    "OWNER_INDEX",
    "POLL_INTERVAL_MS",
    "RECORD",
    "RESULT_POLL",
    "STALE_AFTER",
    "STOPPED_REPLICA",
    "UNAVAILABLE",
    "CreateExtensionTask",
    "ExtensionTask",
    "ServedTask",
    "TaskRecords",
    "TaskStatus",
    "Unavailable",
    "failure",
    "now_text",
    "view",
]

POLL_INTERVAL_MS = 1000
"""The polling interval suggested to clients."""

NOT_FOUND = "Failed to retrieve task: no task of yours has this id (it may have expired)"
UNAVAILABLE = (
    "Failed to retrieve task: it runs on another replica, and the shared state that would tell of it is"
    " unavailable now; try again"
)
CLIENT_CANCELLED = "Error: cancelled - the client cancelled the task (tasks/cancel) before it finished"

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]


class ExtensionTask(types.Result):
    """A task as the Tasks extension (2026-07-28) sends it: the result of ``tasks/get``."""

    result_type: str = "complete"
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    """The ``CallToolResult``, once ``completed``."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error, once ``failed``."""


class CreateExtensionTask(ExtensionTask):
    """The answer to a ``tools/call`` that became a task (2026-07-28): ``resultType: "task"``."""

    result_type: Literal["task"] = "task"  # the extension's discriminator


def now_text() -> str:
    """Now, as a task's times are sent (ISO 8601, UTC, milliseconds)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def failure(text: str) -> types.CallToolResult:
    """A tool result that is an error saying *text*."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@attrs.define(kw_only=True, eq=False)
class ServedTask:
    """One task: its handle, owner, status and, once finished, its result.

    ``expires`` is the end of its retention on this process's trio clock (its scope's deadline),
    ``until`` the same on the wall clock (its id's expiry and its record's, which other replicas read).
    """

    id: str
    local: str
    owner: str
    modern: bool
    created: str
    updated: str
    expires: float
    until: float
    ttl_ms: int
    status: TaskStatus = "working"
    message: str | None = None
    result: types.CallToolResult | None = None
    error: dict[str, Any] | None = None
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    notify: Connection | None = None
    remote: bool = False
    """A view of another replica's task, read from its record (no scope or event of its own to use)."""

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    def record(self) -> dict[str, Any]:
        """The task's record in a fleet's shared state (``until``: its retention's end, wall-clock)."""
        result = None if self.result is None else self.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        fields = ("id", "local", "owner", "modern", "status", "message", "created", "updated", "ttl_ms", "until")
        return {**{name: getattr(self, name) for name in fields}, "result": result, "error": self.error}

    @classmethod
    def of_record(cls, record: Mapping[str, Any]) -> ServedTask | None:
        """The task another replica runs, as its record says (``None``: not a record toolflow wrote)."""
        try:
            result = record.get("result")
            return cls(
                **{name: record[name] for name in ("id", "local", "owner", "modern", "status", "created", "updated")},
                message=record.get("message"),
                expires=math.inf,
                until=float(record["until"]),
                ttl_ms=int(record["ttl_ms"]),
                result=None if result is None else types.CallToolResult.model_validate(result),
                error=record.get("error"),
                remote=True,
            )
        except (KeyError, TypeError, ValueError):  # pydantic's ValidationError is a ValueError
            return None

    def legacy(self) -> dict[str, Any]:
        """The 2025-11-25 ``Task`` fields."""
        return {
            "task_id": self.id,
            "status": self.status,
            "status_message": self.message,
            "created_at": self.created,
            "last_updated_at": self.updated,
            "ttl": self.ttl_ms,
            "poll_interval": POLL_INTERVAL_MS,
        }

    def extension(self, model: type[ExtensionTask] = ExtensionTask) -> ExtensionTask:
        """The 2026-07-28 task, its result or error inlined when it has one."""
        result = None
        if self.status == "completed" and self.result is not None:
            result = self.result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return model(
            task_id=self.id,
            status=self.status,
            status_message=self.message,
            created_at=self.created,
            last_updated_at=self.updated,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=POLL_INTERVAL_MS,
            result=result,
            error=self.error if self.status == "failed" else None,
        )

    def finish(self, status: TaskStatus, result: types.CallToolResult | None, message: str | None) -> bool:
        """Move to terminal *status*, unless already terminal (a cancelled task stays cancelled)."""
        if self.terminal:
            return False
        self.status, self.result, self.message, self.updated = status, result, message, now_text()
        self.done.set()
        return True


RECORD = "task:"
"""The prefix of a task's record (its document id in the state: ``task:<local id>``)."""

OWNER_INDEX = "tasks-of:"
"""The prefix of an owner's index (``tasks-of:<digest>``): the local ids of its tasks."""

CHECK_INTERVAL = 1.0
"""Seconds between the running replica's reads of a running task's record (a cancel request stops it within this)."""

HEARTBEAT = 10.0
"""Seconds between the running replica's refreshes of a running task's record."""

STALE_AFTER = 3 * HEARTBEAT
"""A ``working`` record not refreshed for this many seconds: its replica stopped; others report it ``failed``."""

RESULT_POLL = 0.25
"""Seconds between the reads of a record by a ``tasks/result`` waiting on another replica."""

OPERATION_TIMEOUT = 5.0
"""Seconds one operation of the state may take before it counts as unavailable."""

STOPPED_REPLICA = "Error: failed - the replica running the task stopped before it finished"

_ATTEMPTS = 8
"""Compare-and-set attempts of one write: more means a record fought over (or one that does not verify)."""

_T = TypeVar("_T")

TERMINAL = frozenset({"completed", "failed", "cancelled"})


Unavailable = ConnectionError
"""What an operation raises when the shared state did not answer (an outage, or no answer within
:data:`OPERATION_TIMEOUT`): the built-in error, as :class:`toolflow._state.StateBackend` raises it."""


def view(record: Mapping[str, Any], now: float) -> dict[str, Any]:
    """*record* as another replica reports it: a ``working`` one whose heartbeat is stale has ``failed``."""
    beat = record.get("beat")
    if record.get("status") != "working" or not isinstance(beat, int | float) or now - beat <= STALE_AFTER:
        return dict(record)
    result = {"content": [{"type": "text", "text": STOPPED_REPLICA}], "isError": True}
    error = {"code": -32603, "message": "Internal error: the replica running the task stopped"}
    return {**record, "status": "failed", "message": STOPPED_REPLICA, "result": result, "error": error}


def _index_of(owner: str) -> str:
    return OWNER_INDEX + hashlib.sha256(owner.encode()).hexdigest()[:32]


class TaskRecords:
    """The task records of a fleet in its shared *state* (see the module's docstring).

    Args:
        state: The shared state (its ``shared`` is true).
        clock: Wall-clock seconds (``time.time``): records are read by other replicas, whose
            clocks agree with this one's as NTP keeps them.
    """

    def __init__(self, state: StateBackend, *, clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock
        self._limiter = trio.CapacityLimiter(8)  # worker threads for the records, per server
        self._down: set[str] = set()

    async def _call(self, kind: str, operation: Callable[[], _T]) -> _T:
        """*operation* in a worker thread, bounded by :data:`OPERATION_TIMEOUT`.

        Raises:
            Unavailable: The state failed, or did not answer in time (logged once per outage of *kind*).
        """
        with trio.move_on_after(OPERATION_TIMEOUT):
            value = await off_loop(operation, self._limiter, self._down, kind)
            if value is None:
                raise Unavailable(kind)
            return value
        await off_loop(_timed_out, self._limiter, self._down, kind)  # reported as an outage, once
        raise Unavailable(kind)

    def _ttl(self, until: float) -> float:
        return max(until - self.clock(), 1.0)

    # --- the running replica ---------------------------------------------------------------------

    async def created(self, task: ServedTask) -> None:
        """Store a new *task*'s record and add it to its owner's index (before the client has its id).

        Raises:
            Unavailable: The state did not answer.
        """
        local, until, record = task.local, task.until, task.record()

        def create() -> bool:
            self._write(local, record, until)
            index = _index_of(task.owner)
            for _ in range(_ATTEMPTS):
                found = self.state.load(index)
                now = self.clock()
                kept = [entry for entry in found.data.get("tasks", ()) if _live(entry, now)]
                kept.append([local, until])
                latest = max(float(entry[1]) for entry in kept)
                if self.state.store(index, {"tasks": kept}, found.version, self._ttl(latest)):
                    break
            return True

        await self._call("task records", create)

    async def save(self, task: ServedTask) -> bool:
        """Write the record of a *task* this replica runs; whether another replica asked to cancel it.

        A record that holds a cancel request is left as it is (it says ``cancelled``).

        Raises:
            Unavailable: The state did not answer.
        """
        local, until, record = task.local, task.until, task.record()
        return await self._call("task records", lambda: self._write(local, record, until))

    def _write(self, local: str, record: Mapping[str, Any], until: float) -> bool:
        for _ in range(_ATTEMPTS):
            found = self.state.load(RECORD + local)
            if found.data.get("cancel"):
                return True
            if self.state.store(RECORD + local, {**record, "beat": self.clock()}, found.version, self._ttl(until)):
                return False
        return False

    async def cancel_requested(self, local: str) -> bool:
        """Whether the record of *local* holds a cancel request (``False`` if the state cannot say)."""
        try:
            found = await self._call("task records", lambda: self.state.load(RECORD + local))
        except Unavailable:  # the task runs on; a cancel request is seen once the state is back
            return False
        return bool(found.data.get("cancel"))

    # --- any replica -----------------------------------------------------------------------------

    async def find(self, local: str, task_id: str, owner: str) -> ServedTask | None:
        """Another replica's task *local*, as its record says, if it is *owner*'s task *task_id*.

        Raises:
            MCPError: ``-32602``: the state is unavailable (the task cannot be known).
        """
        try:
            record = await self._call("task records", lambda: self.state.load(RECORD + local))
        except Unavailable:
            raise MCPError(code=INVALID_PARAMS, message=UNAVAILABLE) from None
        data = record.data
        if not record.version or data.get("id") != task_id or data.get("owner") != owner:
            return None
        return ServedTask.of_record(view(data, self.clock()))

    async def cancel(self, task: ServedTask) -> tuple[ServedTask, bool]:
        """Store a cancel request in the record of another replica's *task*; the task after it, and whether cancelled.

        ``False``: the task had ended, or was cancelled already, before this request.

        Raises:
            MCPError: ``-32602``: the record is gone, or the state is unavailable.
        """
        local = RECORD + task.local

        def request() -> tuple[Mapping[str, Any] | None, bool]:
            for _ in range(_ATTEMPTS):
                found = self.state.load(local)
                if not found.version:
                    return None, False
                current = view(found.data, self.clock())
                if current.get("status") in TERMINAL:
                    return current, False
                changed = {**found.data, **_cancelled(), "cancel": True}
                if self.state.store(local, changed, found.version, self._ttl(task.until)):
                    return changed, True
            raise ConnectionError("the task's record is being changed by others; try again")

        try:
            record, cancelled = await self._call("task records", request)
        except Unavailable:
            raise MCPError(code=INVALID_PARAMS, message=UNAVAILABLE) from None
        after = None if record is None else ServedTask.of_record(record)
        if after is None:
            raise MCPError(code=INVALID_PARAMS, message=NOT_FOUND)
        return after, cancelled

    async def finished(self, task: ServedTask) -> ServedTask:
        """Another replica's *task* once its record is terminal, read every :data:`RESULT_POLL` seconds.

        An outage waits on; the wait ends with the task's retention.

        Raises:
            MCPError: ``-32602``: the record is gone (its retention ended).
        """
        key = RECORD + task.local
        while not task.terminal:
            await trio.sleep(RESULT_POLL)
            with contextlib.suppress(Unavailable):
                record = await self._call("task records", lambda: self.state.load(key))
                polled = ServedTask.of_record(view(record.data, self.clock())) if record.version else None
                if polled is None:
                    raise MCPError(code=INVALID_PARAMS, message=NOT_FOUND)
                task = polled
            if self.clock() >= task.until:
                raise MCPError(code=INVALID_PARAMS, message=NOT_FOUND)
        return task

    async def of_owner(self, owner: str) -> list[ServedTask]:
        """The tasks of *owner* that the records hold, oldest first (none while the state is unavailable)."""

        def listing() -> list[dict[str, Any]]:
            index = self.state.load(_index_of(owner))
            now = self.clock()
            records = []
            for entry in index.data.get("tasks", ()):
                if _live(entry, now):
                    found = self.state.load(RECORD + str(entry[0]))
                    if found.version and found.data.get("owner") == owner:
                        records.append(view(found.data, now))
            return records

        try:
            records = await self._call("task records", listing)
        except Unavailable:
            return []
        tasks = (ServedTask.of_record(record) for record in records)
        return [task for task in tasks if task is not None]


def _cancelled() -> dict[str, Any]:
    """What a record says once a client cancelled its task."""
    result = failure(CLIENT_CANCELLED).model_dump(by_alias=True, mode="json", exclude_none=True)
    return {"status": "cancelled", "message": CLIENT_CANCELLED, "result": result, "updated": now_text()}


def _live(entry: object, now: float) -> bool:
    """Whether an owner index's *entry* (``[local id, until]``) names a task still kept."""
    return isinstance(entry, list) and len(entry) == len(("local", "until")) and _number(entry[1]) > now


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else -math.inf


def _timed_out() -> None:
    raise ConnectionError(f"no answer within {OPERATION_TIMEOUT:g} seconds")
