"""An MCP server over stdio with a bound on each message: the ``mcp`` SDK's stdio transport, its reader replaced.

The SDK's client reads a server's standard output as text and joins each chunk it reads to the
line read so far, so one line of 200 MB takes time that grows with the square of its length (the
connection reads nothing else meanwhile: every call waits) and memory for all of it. This
transport reads bytes and keeps at most :data:`MAX_MESSAGE_BYTES` of a line; the rest of a longer
one is skipped as it arrives, and the session gets an error in its place, as it does for a line
that is not JSON (``toolflow._mcp_sources`` fails the calls in flight at once).

The rest is what the SDK does: the SDK's default environment plus the entry's ``env``, a process
group of the server's own, and at the end standard input closed, 2 s to exit, then the group
terminated (SIGTERM, SIGKILL 2 s later). Windows keeps the SDK's transport (its process tree is a
Job Object there).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from anyio.abc import Process
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp import StdioServerParameters

__all__ = ["MAX_MESSAGE_BYTES", "Lines", "stdio_transport"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest message read from a server over stdio, in bytes (a longer one is skipped, and is an error)."""

_EXIT_GRACE = 2.0
"""Seconds a server has to exit after its standard input closes (the SDK's grace), and again after SIGTERM."""


class Lines:
    """Splits the bytes of a stream into lines of at most *limit* bytes; a longer line is one ``ValueError``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._line = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | ValueError]:
        """The lines that *chunk* completes, in order (without their newlines)."""
        out: list[bytes | ValueError] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if not self._skipping:
                self._line += chunk[start:] if end < 0 else chunk[start:end]
                if len(self._line) > self._limit:
                    out.append(ValueError(f"a message longer than {self._limit:,} bytes, skipped"))
                    self._line.clear()
                    self._skipping = True
            if end < 0:
                return out
            if not self._skipping:
                out.append(bytes(self._line))
            self._line.clear()
            self._skipping = False
            start = end + 1


def _message(line: bytes) -> Any:
    """The session's item for one line: a ``SessionMessage``, or the error that reading it raised."""
    import mcp_types  # noqa: PLC0415 - only specs with servers need the SDK
    from mcp.shared.message import SessionMessage  # noqa: PLC0415

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # pydantic's ValidationError is one
        return exc


@contextlib.asynccontextmanager
async def stdio_transport(parameters: StdioServerParameters, errlog: TextIO | int) -> AsyncIterator[Any]:
    """The server of *parameters* started, as the ``(read, write)`` streams of an ``mcp`` client.

    Raises:
        OSError: The server cannot be started.
    """
    import anyio  # noqa: PLC0415 - the SDK's streams; only specs with servers need them
    from mcp.client.stdio import get_default_environment, stdio_client  # noqa: PLC0415

    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Objects
        async with stdio_client(parameters, errlog=cast("TextIO", errlog)) as streams:
            yield streams
        return
    process = await anyio.open_process(
        [parameters.command, *parameters.args],
        env=get_default_environment() | (parameters.env or {}),
        cwd=parameters.cwd,
        stderr=errlog,
        start_new_session=True,
    )
    read_sender, read_receiver = anyio.create_memory_object_stream[Any](0)
    write_sender, write_receiver = anyio.create_memory_object_stream[Any](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read, process, read_sender)
        tasks.start_soon(_write, process, write_receiver, read_sender)
        try:
            yield read_receiver, write_sender
        finally:
            with anyio.CancelScope(shield=True):
                read_receiver.close()
                write_sender.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _read(process: Process, sender: MemoryObjectSendStream[Any]) -> None:
    """Send each line of the server's standard output to the session; then drain it, so the server can exit."""
    import anyio  # noqa: PLC0415

    assert process.stdout is not None
    lines = Lines(MAX_MESSAGE_BYTES)
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        async with sender:
            while True:
                for line in lines.feed(await process.stdout.receive()):
                    if isinstance(line, ValueError):
                        await sender.send(line)
                    elif line.strip():
                        await sender.send(_message(line))
    # The session is gone (or the server): drain, so that a server blocked on a full pipe can exit.
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        while True:
            await process.stdout.receive()


async def _write(
    process: Process, receiver: MemoryObjectReceiveStream[Any], reader: MemoryObjectSendStream[Any]
) -> None:
    """Write each message of the session to the server's standard input, one line each.

    When the server cannot be written to, *reader* (the sender of what the server says) is closed:
    the session sees the connection end, and no call waits for an answer that cannot come.
    """
    import anyio  # noqa: PLC0415

    assert process.stdin is not None  # opened with a pipe
    try:
        async with receiver:
            async for message in receiver:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        reader.close()


async def _stop(process: Process) -> None:
    """Close the server's standard input, give it time to exit, then terminate its process group."""
    import anyio  # noqa: PLC0415
    from mcp.os.posix.utilities import terminate_posix_process_tree  # noqa: PLC0415

    closed = (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError)
    if process.stdin is not None:
        with contextlib.suppress(*closed):
            await process.stdin.aclose()
    with anyio.move_on_after(_EXIT_GRACE):
        await process.wait()
    if process.returncode is None:
        await terminate_posix_process_tree(process, _EXIT_GRACE)
    if process.stdout is not None:
        with contextlib.suppress(*closed):
            await process.stdout.aclose()
