"""A real Anthropic Messages API server on 127.0.0.1 that serves scripted replies.

The machinery is :mod:`tests._openai_server`'s (a ``http.server`` in a thread; the same
:class:`Reply` kinds: JSON bodies, chunked event streams split where a test says, dropped
connections, stalls, keep-alives; callables that answer from the request); this module answers
``POST /v1/messages`` instead of ``.../chat/completions`` and builds the Messages API's bodies
and events. When the script runs out it answers 500 with an ``api_error``.

Typical use::

    with serve(
        Reply(json=message(text_block("Hi"), tool_use_block("toolu_1", "search", {"q": "x"}))),
        stream_message(text_block("Hello"), stop_reason="end_turn", json_piece=3),
        Reply(status=429, json=error_body("rate_limit_error", "slow down"), headers={"retry-after": "3"}),
    ) as server:
        provider = factory("test-model", base_url=server.base_url)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import _openai_server
from _openai_server import FakeOpenAI, RecordedRequest, Reply, Script, split_bytes

__all__ = [
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "error_body",
    "event",
    "message",
    "serve",
    "split_bytes",
    "stream_events",
    "stream_message",
    "text_block",
    "tool_use_block",
]


def text_block(text: str) -> dict[str, Any]:
    """``{"type": "text", "text": text}``."""
    return {"type": "text", "text": text}


def tool_use_block(block_id: str, name: str, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """``{"type": "tool_use", "id", "name", "input"}``."""
    return {"type": "tool_use", "id": block_id, "name": name, "input": dict(tool_input)}


def message(
    *blocks: Mapping[str, Any],
    stop_reason: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    model: str = "test-model",
) -> dict[str, Any]:
    """A non-streaming answer; *stop_reason* defaults to ``tool_use`` with a tool_use block, else ``end_turn``."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    body: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(b) for b in blocks],
        "stop_reason": stop_reason,
        "stop_sequence": None,
    }
    if usage is not None:
        body["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    return body


def error_body(kind: str, text: str) -> dict[str, Any]:
    """An error body ``{"type": "error", "error": {"type", "message"}}`` (``overloaded_error``, ...)."""
    return {"type": "error", "error": {"type": kind, "message": text}}


def event(data: Mapping[str, Any]) -> bytes:
    """One server-sent event, named by its data's ``type`` as the API names them."""
    return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def stream_events(
    *blocks: Mapping[str, Any],
    stop_reason: str | None = None,
    usage: tuple[int, int] = (10, 5),
    piece: int = 0,
) -> list[dict[str, Any]]:
    """The events of a streamed answer of *blocks*, as the API sends them.

    ``message_start`` (input tokens, one output token), a ``ping``, then per block its
    ``content_block_start`` (text empty, input ``{}``), its deltas and its ``content_block_stop``,
    then ``message_delta`` (the stop reason and the output tokens) and ``message_stop``. With
    *piece* > 0, a text or a tool_use input's JSON is sent in deltas of that many characters.
    """
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    start = message(usage=None, stop_reason=stop_reason)
    start.update(content=[], stop_reason=None, usage={"input_tokens": usage[0], "output_tokens": 1})
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            text, delta_type, field = json.dumps(block["input"], ensure_ascii=False), "input_json_delta", "partial_json"
        else:
            opening = {**block, "text": ""}
            text, delta_type, field = block["text"], "text_delta", "text"
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        size = piece or max(len(text), 1)
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": {"type": delta_type, field: text[at : at + size]}}
            for at in range(0, len(text), size)
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": usage[1]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def stream_message(*blocks: Mapping[str, Any], events: Sequence[Mapping[str, Any]] = (), **options: Any) -> Reply:
    """A streamed reply of *blocks* (:func:`stream_events`; its options: ``stop_reason``, ``usage``,
    ``piece``), one chunk per event, or of *events* when given; other options go to :class:`Reply`."""
    stream_options = {key: options.pop(key) for key in ("stop_reason", "usage", "piece") if key in options}
    chosen = events or stream_events(*blocks, **stream_options)
    return Reply(chunks=[event(item) for item in chosen], **options)


class _Handler(_openai_server._Handler):
    def _handle(self) -> None:
        request = self._record()
        if self.command != "POST" or self.path.split("?", 1)[0] != "/v1/messages":
            self._answer(Reply(status=404, json=error_body("not_found_error", f"no route {self.command} {self.path}")))
            return
        with self.server.lock:
            script = self.server.script.popleft() if self.server.script else None
        if script is None:
            reply = Reply(status=500, json=error_body("api_error", "the fake server has no scripted reply left"))
        else:
            reply = script if isinstance(script, Reply) else script(request)
        self._answer(reply)

    do_GET = do_POST = _handle  # noqa: N815 - http.server's naming


class FakeAnthropic(FakeOpenAI):
    """A running fake server: its base URL, the requests it received, and more replies to script."""

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.base_url = f"http://127.0.0.1:{server.server_address[1]}"
        """``http://127.0.0.1:PORT``: what to pass as ``base_url`` (the provider adds ``/v1/messages``)."""


@contextmanager
def serve(*replies: Script) -> Iterator[FakeAnthropic]:
    """Run a fake Messages API server on 127.0.0.1 (an ephemeral port) answering with *replies*, in order."""
    with _openai_server.serve(*replies) as fake:
        server = fake._server
        server.RequestHandlerClass = _Handler
        yield FakeAnthropic(server)
