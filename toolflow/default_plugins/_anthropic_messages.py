"""The Messages API client behind the ``anthropic`` provider (see :mod:`toolflow.default_plugins.anthropic`).

Kept apart from the plugin module so that registering the provider (which ``toolflow lint``
does) imports neither httpx nor anything else this needs. It speaks HTTP with httpx, as the
``openai`` provider does, on the same :class:`~toolflow.default_plugins._http_provider.HttpProvider`
(the connection, the deadline, the errors of HTTP, the event stream reader); why not Anthropic's
SDK: docs/design.md, the agent loop's record.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolflow._providers import ModelRequest, ModelResponse, ProviderError, Usage
from toolflow.default_plugins._http_provider import (
    HttpProvider,
    fix_surrogates,
    read_events,
    shorten,
)

__all__ = ["AnthropicProvider"]

NAME = "anthropic"

_FATAL_ERROR_TYPES = frozenset(
    {"invalid_request_error", "authentication_error", "permission_error", "not_found_error", "request_too_large"}
)
"""Error types (in a body or a stream's ``error`` event) that asking again cannot mend."""


class AnthropicProvider(HttpProvider):
    """A Messages API client for the agent loop; made by :func:`toolflow.default_plugins.anthropic.create_provider`.

    Attributes:
        name: ``anthropic``.
        formats: ``anthropic``, ``fallback`` and ``text``.
        model: The model name sent when the request names none.
        base_url: The API root the requests go to (without ``/v1``).
        version: The ``anthropic-version`` header.
        stream: Whether answers are streamed.
        response_timeout: Seconds allowed for a whole answer, from sending the request to its
            last byte; what the server sends meanwhile (``ping`` events) does not extend it.
    """

    name = NAME
    formats: tuple[str, ...] = ("anthropic", "fallback", "text")
    api = "Messages API"
    answer = "Messages API answer"

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        version: str,
        stream: bool,
        timeout: float,
        response_timeout: float,
        options: Mapping[str, Any],
    ) -> None:
        headers = {"anthropic-version": version}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(
            model=model,
            base_url=base_url,
            url=f"{base_url}/v1/messages",
            headers=headers,
            stream=stream,
            timeout=timeout,
            response_timeout=response_timeout,
            options=options,
        )
        self.version = version

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for *request* (without checking its format).

        ``system`` and ``tools`` are sent only when there are some; the options (``max_tokens``,
        ``temperature``, ``extra_body``) come last.
        """
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": list(request.messages),
            "stream": self.stream,
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = list(request.tools)
        return self._add_options(body)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the server for the next assistant message (see :meth:`HttpProvider.complete` for the errors).

        For the ``anthropic`` format the message is ``{"role": "assistant", "content": [blocks]}``
        (``text``, ``tool_use`` with its ``input`` decoded, ``thinking``, ...); for ``fallback``
        and ``text`` it is ``{"role": "assistant", "content": "the text"}``.
        """
        response = await super().complete(request)
        if request.format == "anthropic":
            return response
        # fallback and text keep plain string messages: the text blocks, joined.
        blocks = response.message["content"]
        text = "".join(block["text"] for block in blocks if block.get("type") == "text")
        return ModelResponse(
            message={"role": "assistant", "content": text}, usage=response.usage, finish_reason=response.finish_reason
        )

    async def _read_stream(self, chunks: AsyncIterator[bytes]) -> ModelResponse:
        assembler = _Assembler()
        incomplete = ProviderError(
            "the stream ended before message_stop: the answer is incomplete", provider=NAME, retryable=True
        )
        return await read_events(chunks, lambda events: _fold(assembler, events), incomplete=incomplete)

    def _parse(self, data: Any) -> ModelResponse:
        return _parse_message(data)

    def _server_detail(self, body: bytes) -> str:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
            data = None
        if isinstance(data, Mapping):
            kind, message = _error_parts(data)
            return shorten(f"{kind}: {message}" if kind else message)
        return shorten(body.decode("utf-8", "replace"))


# -- answers ------------------------------------------------------------------------------------


def _parse_message(data: Any) -> ModelResponse:
    """A non-streaming answer ``{"type": "message", "content": [...], "stop_reason", "usage"}``."""
    if not isinstance(data, Mapping):
        msg = f"expected a Messages API message, got {type(data).__name__}"
        raise ProviderError(msg, provider=NAME)
    if data.get("type") == "error":
        raise _error_event(data)
    content = data.get("content")
    if not isinstance(content, list):
        msg = "the answer has no content list: it is not a Messages API message"
        raise ProviderError(msg, provider=NAME)
    blocks = [_block(block) for block in content if isinstance(block, Mapping)]
    return ModelResponse(
        message={"role": "assistant", "content": [block for block in blocks if _kept(block)]},
        usage=_usage(data.get("usage")),
        finish_reason=_stop_reason(data.get("stop_reason")),
    )


def _block(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A content block as the history keeps it: a plain dict, a ``tool_use`` block's input an object."""
    block = dict(raw)
    if block.get("type") == "tool_use" and isinstance(block.get("input"), str):  # JSON text from some proxies
        block["input"] = _decode_input(block["input"], block)
    return block


def _kept(block: Mapping[str, Any]) -> bool:
    # The API refuses empty text blocks when the message is sent back on the next turn.
    return block.get("type") != "text" or bool(str(block.get("text") or "").strip())


def _decode_input(text: str, block: Mapping[str, Any]) -> Any:
    """A ``tool_use`` block's JSON input, ``{}`` when empty."""
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
        snippet = text[:200]
        msg = (
            f"the input of tool_use {block.get('name')!r} is not complete JSON: {snippet!r}"
            " (an answer cut at max_tokens? raise max_tokens)"
        )
        raise ProviderError(msg, provider=NAME) from None


def _usage(raw: object) -> Usage | None:
    """``input_tokens`` plus the cached input (written or read) as the prompt; ``output_tokens``."""
    if not isinstance(raw, Mapping):
        return None
    prompt = sum(
        _count(raw.get(key)) for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(prompt_tokens=prompt, completion_tokens=_count(raw.get("output_tokens")))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _stop_reason(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# -- errors -------------------------------------------------------------------------------------


def _error_parts(data: Mapping[str, Any]) -> tuple[str, str]:
    """The ``(type, message)`` of an ``{"type": "error", "error": {"type", "message"}}`` object."""
    error = data.get("error")
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        return (kind if isinstance(kind, str) else "", message if isinstance(message, str) else json.dumps(error))
    return "", json.dumps(data, default=str) if error is None else str(error)


def _error_event(data: Mapping[str, Any]) -> ProviderError:
    """An error in a stream or a 200 body: retryable unless its type says the request is wrong."""
    kind, message = _error_parts(data)
    detail = f"{kind}: {message}" if kind else message
    return ProviderError(
        f"the server answered with an error: {detail}", provider=NAME, retryable=kind not in _FATAL_ERROR_TYPES
    )


# -- streaming ----------------------------------------------------------------------------------


class _Assembler:
    """Messages API stream events to the message a non-streaming answer would have given."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._parts: dict[int, list[str]] = {}  # the pieces of each block's text, thinking or JSON input
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None

    def add(self, data: Mapping[str, Any]) -> bool:
        """Fold one event in; true at ``message_stop``."""
        kind = data.get("type")
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
                self._usage.update(message["usage"])
        elif kind == "content_block_start":
            block = data.get("content_block")
            if isinstance(block, Mapping):
                index = _index(data)
                self._blocks[index] = dict(block)
                self._parts[index] = []
        elif kind == "content_block_delta":
            self._add_delta(_index(data), data.get("delta"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping):
                self._stop_reason = _stop_reason(delta.get("stop_reason")) or self._stop_reason
            if isinstance(data.get("usage"), Mapping):  # cumulative counts: the latest wins
                self._usage.update(data["usage"])
        elif kind == "error":
            raise _error_event(data)
        return kind == "message_stop"

    def _add_delta(self, index: int, delta: object) -> None:
        if not isinstance(delta, Mapping) or index not in self._blocks:
            return
        kind = delta.get("type")
        piece = {
            "text_delta": "text",
            "input_json_delta": "partial_json",
            "thinking_delta": "thinking",
        }.get(kind if isinstance(kind, str) else "")
        if piece is not None and isinstance(delta.get(piece), str):
            self._parts[index].append(delta[piece])
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            self._blocks[index]["signature"] = delta["signature"]
        elif kind == "citations_delta" and isinstance(delta.get("citation"), Mapping):
            self._blocks[index].setdefault("citations", []).append(dict(delta["citation"]))

    def _finished(self, index: int) -> dict[str, Any]:
        block = self._blocks[index]
        text = fix_surrogates("".join(self._parts[index]))
        kind = block.get("type")
        if kind in {"text", "thinking"}:
            block[kind] = str(block.get(kind) or "") + text
        elif "input" in block or kind == "tool_use":  # tool_use, server_tool_use: the JSON came in pieces
            block["input"] = _decode_input(text, block) if text else _object(block.get("input"))
        return block

    def response(self) -> ModelResponse:
        """The assembled response."""
        blocks = [self._finished(index) for index in sorted(self._blocks)]
        return ModelResponse(
            message={"role": "assistant", "content": [block for block in blocks if _kept(block)]},
            usage=_usage(self._usage) if self._usage else None,
            finish_reason=self._stop_reason,
        )


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


def _object(value: object) -> Any:
    return value if isinstance(value, Mapping) else {}


def _fold(assembler: _Assembler, events: list[tuple[str, str]]) -> ModelResponse | ProviderError | None:
    """Fold *events* in: the answer at ``message_stop``, the error of an error event, else ``None``."""
    try:
        for event, data in events:
            try:
                value = json.loads(data)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
                if event == "error":
                    return ProviderError(f"the stream sent an error: {data}", provider=NAME, retryable=True)
                msg = f"the stream sent an event that is not JSON: {data[:200]!r}"
                return ProviderError(msg, provider=NAME)
            if not isinstance(value, Mapping):
                msg = f"the stream sent {type(value).__name__} where an event object belongs"
                return ProviderError(msg, provider=NAME)
            if event == "error" and value.get("type") != "error":
                return _error_event({"error": value})
            if assembler.add(value):
                return assembler.response()
    except ProviderError as exc:
        return exc
    return None
