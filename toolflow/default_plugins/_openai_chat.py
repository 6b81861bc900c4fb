"""The Chat Completions client behind the ``openai`` provider (see :mod:`toolflow.default_plugins.openai`).

Kept apart from the plugin module so that registering the provider (which ``toolflow lint``
does) imports neither httpx nor anything else this needs. The connection, the deadline and the
errors of HTTP are :class:`~toolflow.default_plugins._http_provider.HttpProvider`'s.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Mapping
from typing import Any

from toolflow._providers import ModelRequest, ModelResponse, ProviderError, Usage
from toolflow.default_plugins._http_provider import (
    HttpProvider,
    fix_surrogates,
    read_events,
    shorten,
)

__all__ = ["OpenAIProvider"]

NAME = "openai"


class OpenAIProvider(HttpProvider):
    """A Chat Completions client for the agent loop; made by :func:`toolflow.default_plugins.openai.create_provider`.

    Attributes:
        name: ``openai``.
        formats: ``openai``, ``fallback`` and ``text``.
        model: The model name sent when the request names none.
        base_url: The API root the requests go to.
        stream: Whether answers are streamed.
        response_timeout: Seconds allowed for a whole answer, from sending the request to its
            last byte; what the server sends meanwhile (keep-alive comments) does not extend it.
    """

    name = NAME
    formats: tuple[str, ...] = ("openai", "fallback", "text")
    api = "Chat Completions API"
    answer = "Chat Completions answer"

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        stream: bool,
        timeout: float,
        response_timeout: float,
        options: Mapping[str, Any],
    ) -> None:
        super().__init__(
            model=model,
            base_url=base_url,
            url=f"{base_url}/chat/completions",
            headers={"authorization": f"Bearer {api_key}"} if api_key else {},
            stream=stream,
            timeout=timeout,
            response_timeout=response_timeout,
            options=options,
        )

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for *request* (without checking its format).

        The system prompt, when there is one, is the first message; ``tools`` is sent only when
        there are tools; ``stream_options.include_usage`` only when streaming; the options
        (``max_tokens``, ``temperature``, ``extra_body``) come last.
        """
        messages: list[Any] = [{"role": "system", "content": request.system}] if request.system else []
        messages.extend(request.messages)
        body: dict[str, Any] = {"model": request.model or self.model, "messages": messages, "stream": self.stream}
        if request.tools:
            body["tools"] = list(request.tools)
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        return self._add_options(body)

    async def _read_stream(self, chunks: AsyncIterator[bytes]) -> ModelResponse:
        return await _read_stream(chunks)

    def _parse(self, data: Any) -> ModelResponse:
        return _parse_completion(data)

    def _server_detail(self, body: bytes) -> str:
        return _server_message(body)


# -- answers ------------------------------------------------------------------------------------


def _parse_completion(data: Any) -> ModelResponse:
    """A non-streaming answer ``{"choices": [{"message", "finish_reason"}], "usage"}`` to a response."""
    if not isinstance(data, Mapping):
        msg = f"expected a Chat Completions object, got {type(data).__name__}"
        raise ProviderError(msg, provider=NAME)
    problem = _error_in(data)
    if problem is not None:
        raise ProviderError(f"the server answered with an error: {problem}", provider=NAME, retryable=True)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        msg = "the answer has no choices"
        raise ProviderError(msg, provider=NAME)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        msg = "the answer's first choice has no message"
        raise ProviderError(msg, provider=NAME)
    raw_calls = message.get("tool_calls") or []
    calls = [_tool_call(c, i) for i, c in enumerate(raw_calls) if isinstance(c, Mapping)]
    return ModelResponse(
        message=_assistant(_text(message.get("content")), calls),
        usage=_usage(data.get("usage")),
        finish_reason=_finish_reason(choice.get("finish_reason")),
    )


def _assistant(content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message: ``content`` is ``None`` only beside tool calls, ``tool_calls`` only when some."""
    if calls:
        return {"role": "assistant", "content": content or None, "tool_calls": calls}
    return {"role": "assistant", "content": content or ""}


def _tool_call(raw: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A tool call in the one shape the history keeps, whatever the server sent."""
    function = raw.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments = function.get("arguments")
    if isinstance(arguments, Mapping | list):  # some servers send decoded arguments
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": _string(raw.get("id")) or _new_id(index),
        "type": "function",
        "function": {"name": _string(function.get("name")), "arguments": _string(arguments)},
    }


def _new_id(index: int) -> str:
    # Some local servers send no ids; the history needs one to pair each result with its call.
    return f"call_{secrets.token_hex(8)}_{index}"


def _text(content: object) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return str(content)


def _string(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    return Usage(prompt_tokens=_count(raw.get("prompt_tokens")), completion_tokens=_count(raw.get("completion_tokens")))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _finish_reason(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _error_in(data: Mapping[str, Any]) -> str | None:
    """The message of an error object in a body or an event, or ``None`` when it is not one."""
    error = data.get("error")
    if error:
        if isinstance(error, Mapping):
            return _string(error.get("message")) or json.dumps(error, default=str)
        return _string(error)
    if data.get("object") == "error":  # vLLM's older error shape
        return _string(data.get("message")) or "unknown error"
    return None


# -- errors -------------------------------------------------------------------------------------


def _server_message(body: bytes) -> str:
    """The server's own words: ``error.message`` and its kin, else the start of the body."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
        text = body.decode("utf-8", "replace").strip()
    else:
        if isinstance(data, Mapping):
            found = _error_in(data) or data.get("detail") or data.get("message")
            text = found if isinstance(found, str) else json.dumps(data, default=str)
        else:
            text = json.dumps(data, default=str)
    return shorten(text)


# -- streaming ----------------------------------------------------------------------------------


class _Call:
    __slots__ = ("arguments", "id", "index", "name")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _Assembler:
    """Chat Completions chunks to the message a non-streaming answer would have given."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._calls: list[_Call] = []  # in the order their first deltas came
        self._at: dict[int, _Call] = {}  # the call a delta at each index continues: the latest started there
        self._finish_reason: str | None = None
        self._usage: Usage | None = None

    def add(self, data: Mapping[str, Any]) -> None:
        """Fold one chunk in."""
        usage = _usage(data.get("usage"))
        if usage is not None:  # the final chunk's, or the running total some servers send
            self._usage = usage
        choices = data.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                text = delta.get("content")
                if isinstance(text, str):
                    self._content.append(text)
                calls = delta.get("tool_calls")
                for part in calls if isinstance(calls, list) else ():
                    if isinstance(part, Mapping):
                        self._add_call(part)
            self._finish_reason = _finish_reason(choice.get("finish_reason")) or self._finish_reason

    def _call_for(self, part: Mapping[str, Any]) -> _Call:
        """The call *part* continues, or a new one it starts.

        A delta carrying an ``id`` belongs to the call with that id. A new id starts a new call
        even at an index already taken by a call with another id: Ollama and LiteLLM send
        parallel calls all at ``index: 0``, each whole in one delta. A delta without an id
        continues the call at its index, or, without an index (some servers), the last call.
        """
        call_id = _string(part.get("id"))
        index = part.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = None
        if call_id:
            for known in self._calls:
                if known.id == call_id:
                    return known
        current = self._at.get(index) if index is not None else (self._calls[-1] if self._calls else None)
        # A call whose first delta had no id (a server that sends none) takes the id that comes later.
        if current is not None and not (call_id and current.id):
            return current
        call = _Call(len(self._calls) if index is None else index)
        self._calls.append(call)
        if index is not None:
            self._at[index] = call
        return call

    def _add_call(self, part: Mapping[str, Any]) -> None:
        call = self._call_for(part)
        call.id = call.id or _string(part.get("id"))
        function = part.get("function")
        if isinstance(function, Mapping):
            call.name = call.name or _string(function.get("name"))
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call.arguments.append(arguments)
            elif isinstance(arguments, Mapping | list):
                call.arguments.append(json.dumps(arguments, ensure_ascii=False))

    def response(self) -> ModelResponse:
        """The assembled response."""
        calls = [
            _tool_call(
                {
                    "id": call.id,
                    "function": {"name": call.name, "arguments": fix_surrogates("".join(call.arguments))},
                },
                position,
            )
            # By index, as the API numbers them; calls sharing an index keep the order they came in.
            for position, call in enumerate(sorted(self._calls, key=lambda item: item.index))
        ]
        content = fix_surrogates("".join(self._content)) if self._content else None
        return ModelResponse(message=_assistant(content, calls), usage=self._usage, finish_reason=self._finish_reason)


async def _read_stream(chunks: AsyncIterator[bytes]) -> ModelResponse:
    """Read server-sent events up to ``[DONE]`` and assemble the answer."""
    assembler = _Assembler()
    incomplete = ProviderError(
        "the stream ended before [DONE]: the answer is incomplete", provider=NAME, retryable=True
    )
    return await read_events(chunks, lambda events: _fold(assembler, events), incomplete=incomplete)


def _fold(assembler: _Assembler, events: list[tuple[str, str]]) -> ModelResponse | ProviderError | None:
    """Fold *events* in: the answer at ``[DONE]``, the error of an error event, else ``None``."""
    try:
        for event, data in events:
            if _handle_event(assembler, event, data):
                return assembler.response()
    except ProviderError as exc:
        return exc
    return None


def _handle_event(assembler: _Assembler, event: str, data: str) -> bool:
    """Fold one event in; true at ``[DONE]``."""
    if data.strip() == "[DONE]":
        return True
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
        if event == "error":
            raise ProviderError(f"the stream sent an error: {data}", provider=NAME, retryable=True) from None
        snippet = data[:200]
        msg = f"the stream sent an event that is not JSON: {snippet!r}"
        raise ProviderError(msg, provider=NAME) from None
    if not isinstance(value, Mapping):
        msg = f"the stream sent {type(value).__name__} where a chunk object belongs"
        raise ProviderError(msg, provider=NAME)
    problem = _error_in(value)
    if problem is not None or event == "error":
        message = problem or json.dumps(value, default=str)
        raise ProviderError(f"the stream sent an error: {message}", provider=NAME, retryable=True)
    assembler.add(value)
    return False
