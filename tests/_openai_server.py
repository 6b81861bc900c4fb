"""A real OpenAI-compatible Chat Completions server on 127.0.0.1 that serves scripted replies.

It runs ``http.server`` in a thread, so it serves trio tests, synchronous tests (``run([...])``
of the CLI, which starts its own trio loop) and subprocesses alike. Each ``POST
.../chat/completions`` records the request and answers with the next scripted :class:`Reply`;
when the script runs out it answers 500 with ``{"error": {"message": "... no scripted reply
left"}}``, so a test that asks once too often fails with a clear message.

Typical use::

    with serve(
        Reply(json=completion(tool_calls=[tool_call("call_1", "search", {"q": "x"})])),
        stream_reply(chunk(content="Hel"), chunk(content="lo"), chunk(finish_reason="stop"), usage_chunk(5, 2)),
        Reply(status=429, json=error_body("slow down"), headers={"Retry-After": "3"}),
    ) as server:
        provider = factory("test-model", base_url=server.base_url)
        ...
        assert server.requests[0].json()["model"] == "test-model"

Replies:

- ``Reply(json=...)``: a JSON body (status 200 unless ``status=`` says otherwise);
  ``Reply(body=...)``: raw bytes or text (``content_type=`` sets the type);
- ``Reply(chunks=[...])``: a chunked ``text/event-stream`` body, each item (bytes, or text sent as
  UTF-8) written and flushed on its own, so a test controls exactly where the byte stream is
  split (inside a line, inside a multi-byte character). :func:`sse` encodes events and
  :func:`stream_reply` builds the usual reply (one chunk per event, then ``[DONE]``);
- ``drop_after=N``: close the connection abruptly after N chunks (for a JSON or raw body,
  ``drop_after=0`` sends the headers and closes before the body);
- ``disconnect=True``: close the connection without answering at all;
- ``stall=True``: never answer (until the server stops), or for a stream, send its chunks and
  then neither end it nor close it: for timeout tests under ``autojump_clock``;
- ``keepalive=SECONDS``: for a stream, send its chunks and then an SSE comment
  (``: keep-alive``) every SECONDS of real time, never ending it, until the server stops or
  the client leaves: a server that keeps a connection busy without ever answering;
- a callable ``(RecordedRequest) -> Reply``: a reply that depends on the request (ids, tools).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

__all__ = [
    "FakeOpenAI",
    "RecordedRequest",
    "Reply",
    "chunk",
    "completion",
    "error_body",
    "serve",
    "split_bytes",
    "sse",
    "stream_reply",
    "tool_call",
    "tool_call_delta",
    "usage_chunk",
]


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: ``POST``, ``GET``, ...
        path: The path with the query, as sent (``/v1/chat/completions``).
        headers: The headers, names in lower case.
        body: The raw body.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body, decoded as JSON."""
        return json.loads(self.body)


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted answer (see the module documentation for the kinds)."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    chunks: Sequence[bytes | str] | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    content_type: str | None = None
    drop_after: int | None = None
    disconnect: bool = False
    stall: bool = False
    keepalive: float | None = None


Script = Reply | Callable[[RecordedRequest], Reply]


# -- building replies ---------------------------------------------------------------------------


def tool_call(call_id: str, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """A complete Chat Completions tool call; *arguments* given as a mapping are JSON-encoded."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def completion(
    content: str | None = None,
    *,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    model: str = "test-model",
) -> dict[str, Any]:
    """A non-streaming Chat Completions body with one choice.

    *finish_reason* defaults to ``tool_calls`` when there are tool calls, else ``stop``; *usage*
    is ``(prompt_tokens, completion_tokens)``, or ``None`` to leave it out.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [dict(c) for c in tool_calls]
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return body


def tool_call_delta(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str | None = None
) -> dict[str, Any]:
    """One streamed tool-call delta: the first of a call carries *call_id* and *name*, later ones pieces of *arguments*."""
    delta: dict[str, Any] = {"index": index}
    if call_id is not None:
        delta["id"] = call_id
        delta["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        delta["function"] = function
    return delta


def chunk(
    *,
    content: str | None = None,
    tool_calls: Sequence[Mapping[str, Any]] | None = None,
    finish_reason: str | None = None,
    role: str | None = None,
    model: str = "test-model",
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a delta for choice 0."""
    delta: dict[str, Any] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = [dict(d) for d in tool_calls]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def usage_chunk(prompt_tokens: int, completion_tokens: int, *, model: str = "test-model") -> dict[str, Any]:
    """The final chunk of a stream asked with ``include_usage``: empty ``choices`` and the usage."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message: str, *, type_: str = "server_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI error body ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def sse(*events: Mapping[str, Any] | str) -> bytes:
    """Server-sent events as bytes: a mapping becomes ``data: {json}`` (UTF-8, not ASCII-escaped), text ``data: text``."""
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
        out.append(f"data: {data}\n\n")
    return "".join(out).encode()


def split_bytes(data: bytes, offsets: Iterable[int]) -> list[bytes]:
    """*data* cut at each of *offsets* (sorted, duplicates ignored): the chunks of a stream split exactly there."""
    cuts = sorted({o for o in offsets if 0 < o < len(data)})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def stream_reply(*events: Mapping[str, Any] | str, done: bool = True, **options: Any) -> Reply:
    """A streamed reply: one chunk per event, then ``data: [DONE]`` unless *done* is false; *options* go to :class:`Reply`."""
    chunks = [sse(event) for event in events]
    if done:
        chunks.append(sse("[DONE]"))
    return Reply(chunks=chunks, **options)


# -- the server ---------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each chunk leaves at once, so the client sees the splits

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Keep test output quiet."""

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        with self.server.lock:
            self.server.requests.append(request)
        return request

    def _handle(self) -> None:
        request = self._record()
        if self.command != "POST" or not self.path.split("?", 1)[0].endswith("/chat/completions"):
            self._answer(Reply(status=404, json=error_body(f"no route {self.command} {self.path}", type_="not_found")))
            return
        with self.server.lock:
            script = self.server.script.popleft() if self.server.script else None
        if script is None:
            reply = Reply(status=500, json=error_body("the fake server has no scripted reply left"))
        else:
            reply = script if isinstance(script, Reply) else script(request)
        self._answer(reply)

    do_GET = do_POST = _handle  # noqa: N815 - http.server's naming

    def _stall(self) -> None:
        self.server.release.wait(60)
        self._drop()

    def _keep_alive(self, interval: float) -> None:
        comment = b": keep-alive\n\n"
        while not self.server.release.wait(interval):
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(comment), comment))
            except OSError:  # the client gave up
                return
        self._drop()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):  # the client may have left first
            self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, reply: Reply) -> None:
        if reply.stall and reply.chunks is None:
            self._stall()
            return
        if reply.disconnect:
            self._drop()
            return
        self.send_response(reply.status)
        if reply.chunks is not None:
            self._stream(reply)
            return
        if reply.body is not None:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            content_type = reply.content_type or "text/plain; charset=utf-8"
        else:
            body = b"" if reply.json is None else json.dumps(reply.json, ensure_ascii=False).encode()
            content_type = reply.content_type or "application/json"
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if reply.drop_after is not None:
            self._drop()
            return
        self.wfile.write(body)

    def _stream(self, reply: Reply) -> None:
        assert reply.chunks is not None
        self.send_header("Content-Type", reply.content_type or "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for sent, item in enumerate(reply.chunks):
            if reply.drop_after is not None and sent >= reply.drop_after:
                break
            data = item.encode() if isinstance(item, str) else item
            if data:  # an empty chunk would end the chunked body
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        if reply.keepalive is not None:
            self._keep_alive(reply.keepalive)
        elif reply.stall:
            self._stall()
        elif reply.drop_after is not None:
            self._drop()
        else:
            self.wfile.write(b"0\r\n\r\n")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Iterable[Script]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.script: deque[Script] = deque(script)
        self.requests: list[RecordedRequest] = []
        self.release = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up mid-answer (the tests make them); report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAI:
    """A running fake server: its base URL, the requests it received, and more replies to script."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        """``http://127.0.0.1:PORT/v1``: what to pass as ``base_url``."""

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (a copy)."""
        with self._server.lock:
            return list(self._server.requests)

    @property
    def pending(self) -> int:
        """How many scripted replies are left."""
        with self._server.lock:
            return len(self._server.script)

    def add(self, *replies: Script) -> None:
        """Append *replies* to the script."""
        with self._server.lock:
            self._server.script.extend(replies)


@contextmanager
def serve(*replies: Script) -> Iterator[FakeOpenAI]:
    """Run a fake Chat Completions server on 127.0.0.1 (an ephemeral port) answering with *replies*, in order."""
    httpd = _Server(replies)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield FakeOpenAI(httpd)
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
