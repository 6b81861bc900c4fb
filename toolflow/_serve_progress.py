"""``toolflow serve``'s progress: a tool's ``ctx.report_progress`` becomes the request's ``notifications/progress``.

Moved out of :mod:`toolflow._serve` (which was at its 750-line cap) unchanged.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import trio
from mcp.server import ServerRequestContext

from toolflow._context import reporting_progress
from toolflow._executor import Engine
from toolflow._results import ToolResult

__all__ = ["call_with_progress"]

_PROGRESS_BUFFER = 64
"""Progress reports waiting to be sent; when the client reads slower than the tool reports, newer ones are dropped."""


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


async def call_with_progress(
    engine: Engine, ctx: ServerRequestContext[Any, Any], name: str, arguments: object, call_id: str
) -> ToolResult:
    """*engine*'s call, each progress report of the tool sent to the client, in order, before the result."""
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
