"""``toolflow serve``'s stdio transport: every request that arrives gets an answer.

The MCP SDK's ``stdio_server`` (mcp 2.3, ``mcp/server/stdio.py``, ``stdin_reader``) hands a line
it cannot parse to the server as an exception, and the dispatcher drops it
(``mcp/shared/jsonrpc_dispatcher.py``, ``JSONRPCDispatcher._dispatch``): a request whose
``params`` is not an object, or that holds a number of more than 4,300 digits, got no answer at
all, and its client waited for ever (upstream: modelcontextprotocol/python-sdk#2848). Until the
SDK answers such lines itself, toolflow reads standard input and the SDK writes standard output:

- each line is parsed once, with the SDK's own message adapter, and handed to the server;
- a line that does not parse is answered here, with the request's ``id`` when one can be read
  from it: ``-32700`` (not JSON, or a number too large), ``-32602`` (``params`` not an object),
  ``-32600`` (anything else wrong with the envelope, a batch, an ``id`` that is not a string or an
  integer, a line over :data:`MAX_LINE_BYTES`). A malformed notification or response has nobody
  to answer and is dropped, as JSON-RPC 2.0 requires;
- so is a request the SDK would mistake for a notification (an invalid ``id``) or a response (a
  ``method`` beside a ``result``), which it would drop unanswered.

While serving, file descriptor 0 points at the null device, as the SDK does for the streams it
reads, so a tool (or a program it starts) reads end-of-file, never a byte of the protocol.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Self

import anyio
import trio
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["MAX_LINE_BYTES", "answer_for", "misread_request", "parse_line", "serve_stdio"]

logger = logging.getLogger("toolflow.serve")

MAX_LINE_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
"""The longest message a line may carry (4 MiB, the SDK's limit for an HTTP request body)."""

_CHUNK = 65536
_KEPT_OF_LONG_LINE = 65536
"""Bytes kept of a line over the limit, to read its ``id`` from."""

_MESSAGE_CHARS = 300
"""Characters of a parse or validation error quoted in an answer."""

_SKIPPER = json.JSONDecoder(parse_int=len, parse_float=len, parse_constant=len)
"""Reads past a JSON value without converting its numbers (a 100,000-digit one included)."""


class _HugeNumber(str):
    """A number of more than 4,300 digits, as its text (it is no valid ``id`` either)."""

    __slots__ = ()


_LENIENT = json.JSONDecoder(parse_int=lambda text: int(text) if len(text) <= 4300 else _HugeNumber(text))
"""Parses a line the SDK refused, to see what it was; numbers too large to convert stay text."""

_NOT_JSON = object()


def parse_line(line: str) -> SessionMessage | list[JSONRPCError] | None:
    """The message a line carries, or the answers to send back instead, or None when it is dropped.

    The happy path is the SDK's own parse (``jsonrpc_message_adapter.validate_json``), once.
    """
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        return answer_for(line, exc)
    if (isinstance(message, JSONRPCNotification) and '"id"' in line) or (
        isinstance(message, JSONRPCResponse | JSONRPCError) and '"method"' in line
    ):
        refusal = misread_request(line)
        if refusal is not None:
            return [refusal]
    return SessionMessage(message)


def misread_request(text: str) -> JSONRPCError | None:
    """The answer to a request the SDK's adapter reads as a notification or a response, else None.

    An ``id`` MCP does not allow (a float, ``true``, ``null``, ...) makes the adapter read a
    request as a notification, and a ``result`` or ``error`` beside its ``method``, as a response:
    either way it would go unanswered.
    """
    raw = _loads(text)
    if not (isinstance(raw, dict) and "id" in raw and "method" in raw):
        return None
    if "result" in raw or "error" in raw:
        return _error(raw["id"], INVALID_REQUEST, "Invalid Request: a request carries no result or error")
    if _id_of(raw) is None:
        return _error(None, INVALID_REQUEST, f"Invalid Request: {_ID_PROBLEM}")
    return None


_ID_PROBLEM = "id must be a string or an integer"


def answer_for(line: str, error: ValidationError) -> list[JSONRPCError] | None:
    """The answers to a line the SDK's adapter refused with *error* (None: nothing to answer)."""
    first = error.errors(include_url=False, include_input=False)[0]
    summary = _summary(first)
    raw = _loads(line)
    if raw is _NOT_JSON:
        return [_error(_scan_id(line), PARSE_ERROR, f"Parse error: {summary}")]
    if isinstance(raw, list):
        ids = [item["id"] for item in raw if isinstance(item, dict) and "method" in item and "id" in item]
        text = "Invalid Request: batches are not supported; send one message per line"
        return [_error(ident, INVALID_REQUEST, text) for ident in ids] or [_error(None, INVALID_REQUEST, text)]
    if not isinstance(raw, dict):
        return [_error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")]
    return _answer_for_object(raw, first["type"] == "json_invalid", summary)


def _answer_for_object(raw: dict[str, Any], json_invalid: bool, summary: str) -> list[JSONRPCError] | None:
    """:func:`answer_for` of a JSON object the adapter refused (*json_invalid*: its strict parser did)."""
    if "method" not in raw:
        if "result" in raw or "error" in raw:
            return None  # a malformed response: never answered
        return [_error(_id_of(raw), INVALID_REQUEST, "Invalid Request: a request has a method")]
    if "id" not in raw:
        return None  # a malformed notification: never answered
    if json_invalid:  # valid JSON to a lenient parser: a number too large
        return [_error(raw["id"], PARSE_ERROR, f"Parse error: {summary}")]
    params = raw.get("params")
    if params is not None and not isinstance(params, dict):
        problem = f"params must be an object, got {type(params).__name__.replace('dict', 'object')}"
        return [_error(raw["id"], INVALID_PARAMS, f"Invalid params: {problem}")]
    if _id_of(raw) is None:
        return [_error(None, INVALID_REQUEST, f"Invalid Request: {_ID_PROBLEM}")]
    return [_error(raw["id"], INVALID_REQUEST, f"Invalid Request: {summary}")]


def _loads(line: str) -> Any:
    try:
        return _LENIENT.decode(line)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's parser goes
        return _NOT_JSON


def _summary(first: ErrorDetails) -> str:
    """A validation error's first problem in words, without the input it quotes (which may be huge)."""
    where = ".".join(str(part) for part in first["loc"][1:])  # loc[0] names the union member
    text = f"{where}: {first['msg']}" if where else first["msg"]
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


def _valid_id(ident: object) -> RequestId | None:
    """*ident* when it is an id MCP allows (a string or an integer), else None."""
    if (type(ident) is str) or (isinstance(ident, int) and not isinstance(ident, bool)):
        return ident
    return None


def _id_of(raw: dict[str, Any]) -> RequestId | None:
    return _valid_id(raw.get("id"))


def _error(ident: object, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=_valid_id(ident), error=ErrorData(code=code, message=message))


def _scan_id(text: str) -> RequestId | None:
    """The top-level ``id`` of the JSON object *text* begins, when it comes before whatever is wrong with it.

    For a line cut short or broken further on: clients write ``id`` early, so the request can
    still be answered.
    """
    end = len(text)
    position = _skip_space(text, 0)
    if not text.startswith("{", position):
        return None
    position += 1
    try:
        while True:
            position = _skip_space(text, position)
            if position >= end or text[position] != '"':
                return None
            key, position = _LENIENT.raw_decode(text, position)
            position = _skip_space(text, position)
            if not text.startswith(":", position):
                return None
            position = _skip_space(text, position + 1)
            if key == "id":
                value, _ = _LENIENT.raw_decode(text, position)
                return _valid_id(value)
            _, position = _SKIPPER.raw_decode(text, position)
            position = _skip_space(text, position)
            if not text.startswith(",", position):
                return None
            position += 1
    except (ValueError, RecursionError):
        return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n\ufeff":  # a byte-order mark, too
        position += 1
    return position


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[int | None]:
    """A private descriptor of the client's input, with fd 0 on the null device meanwhile (None: no input).

    What the SDK's ``stdio_server`` does for the standard streams it reads (``_claim_fd``). The
    private descriptor is never closed: a reader thread abandoned at shutdown may still be
    blocked on it.
    """
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # standard input is closed
        yield None
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield private
    finally:
        os.dup2(private, 0)


async def _lines(fd: int) -> AsyncIterator[tuple[bytes, bool]]:
    """The lines of *fd*, without their end of line, each with whether it is whole.

    A line over :data:`MAX_LINE_BYTES` is not whole: only its first bytes are kept (to read its
    ``id`` from), the rest is read and dropped. Reads happen in a worker thread, a chunk at a
    time, and are abandoned when the reader is cancelled.
    """
    pending = bytearray()
    whole = True
    while chunk := await trio.to_thread.run_sync(os.read, fd, _CHUNK, abandon_on_cancel=True):
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            if whole:
                pending += chunk[start:newline]
                whole = len(pending) <= MAX_LINE_BYTES
            yield bytes(pending[:_KEPT_OF_LONG_LINE] if not whole else pending), whole
            pending.clear()
            whole = True
            start = newline + 1
        if whole:
            pending += chunk[start:]
            if len(pending) > MAX_LINE_BYTES:
                del pending[_KEPT_OF_LONG_LINE:]
                whole = False
    if pending:
        yield bytes(pending), whole


class _Writes:
    """The server's write stream, telling *answered* each request id it sends an answer for."""

    def __init__(self, inner: Any, answered: Callable[[RequestId], None]) -> None:
        self._inner = inner
        self._answered = answered

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._answered(message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _no_input() -> AsyncIterator[str]:
    """The SDK's reader gets nothing: toolflow reads the input itself."""
    return
    yield  # pragma: no cover - makes this an async generator


async def serve_stdio(
    server: Server[Any],
    *,
    closing: Callable[[], Any],
    answered: Callable[[RequestId], None],
    announce: Callable[[], None],
) -> None:
    """Serve *server* over stdin and stdout until the client closes its input or *closing* returns.

    *answered* is told the id of every answer written, once it is on its way to the client.
    When *closing* returns the input is treated as closed, so the server finishes as when a
    client leaves: nothing is cut off mid-write.
    """
    receive_send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    reading = trio.CancelScope()
    with _claimed_stdin() as fd:
        async with stdio_server(stdin=_no_input()) as (_, write_stream):  # type: ignore[arg-type]
            writes = _Writes(write_stream, answered)

            async def read_input() -> None:
                with reading:
                    async with receive_send:  # closed at the end of input: the server then finishes
                        if fd is None:
                            return
                        async for raw, whole in _lines(fd):
                            outcome = _outcome(raw, whole=whole)
                            if isinstance(outcome, SessionMessage):
                                await receive_send.send(outcome)
                                continue
                            for answer in outcome or ():
                                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                                    await writes.send(SessionMessage(answer))

            async def end_input_when_closing() -> None:
                await closing()
                reading.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_input)
                nursery.start_soon(end_input_when_closing)
                announce()
                await server.run(receive, writes, server.create_initialization_options())
                nursery.cancel_scope.cancel()


def _outcome(raw: bytes, *, whole: bool) -> SessionMessage | list[JSONRPCError] | None:
    """What one line of input comes to: a message for the server, answers to send back, or nothing."""
    line = raw.decode("utf-8", "replace")
    if not whole:
        text = f"Invalid Request: a message is at most {MAX_LINE_BYTES:,} bytes"
        return [_error(_scan_id(line), INVALID_REQUEST, text)]
    if not line.strip():
        return None
    return parse_line(line)
