"""The Chat Completions client behind the ``openai`` provider (see :mod:`toolflow.default_plugins.openai`).

Kept apart from the plugin module so that registering the provider (which ``toolflow lint``
does) imports neither httpx nor anything else this needs.
"""

from __future__ import annotations

import codecs
import functools
import json
import math
import re
import secrets
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx
import trio

from toolflow import __version__
from toolflow._providers import ModelRequest, ModelResponse, ProviderError, Usage
from toolflow._retrying import retry_after_seconds

__all__ = ["OpenAIProvider"]

NAME = "openai"

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_DETAIL_CHARS = 500
_DRAIN_SECONDS = 2.0
"""How long to wait for a stream's end after ``[DONE]`` or an error event before closing it."""
_NEWLINE = re.compile(r"\r\n|\r|\n")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_SURROGATE = re.compile("[\ud800-\udfff]")


class OpenAIProvider:
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
        self.model = model
        self.base_url = base_url
        self.stream = stream
        self.response_timeout = response_timeout
        self._api_key = api_key
        self._timeout = timeout
        self._options = dict(options)
        self._url = f"{base_url}/chat/completions"
        self._shown_url = _without_credentials(self._url)
        # Made on first use, inside the trio run that uses it: connections belong to one event loop.
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        base_url = _without_credentials(self.base_url)
        return f"<OpenAIProvider model={self.model!r} base_url={base_url!r} stream={self.stream!r}>"

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
        for key, value in self._options.items():
            if value is None:
                body.pop(key, None)
            else:
                body[key] = value
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the server for the next assistant message.

        Raises:
            ProviderError: The request's format is ``anthropic`` or unknown, the request cannot
                be encoded as JSON, the server answered with an error status, an HTML page or
                something else that is not a Chat Completions answer, the connection failed,
                timed out or broke off, or the whole answer took longer than
                :attr:`response_timeout`. ``retryable``, ``status`` and ``retry_after`` say what
                the loop may do. Messages name the URL without its user name, password and query.
        """
        if request.format not in self.formats:
            msg = (
                f"the Chat Completions API cannot take the {request.format!r} history format;"
                f" use one of {', '.join(self.formats)}"
            )
            raise ProviderError(msg, provider=NAME)
        try:
            content = json.dumps(
                self.request_body(request), ensure_ascii=False, allow_nan=False, default=_jsonable
            ).encode()
        except (TypeError, ValueError) as exc:
            msg = f"the request cannot be encoded as JSON: {exc}"
            raise ProviderError(msg, provider=NAME) from exc
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream else "application/json",
        }
        # httpx's timeout bounds each wait (to connect, for the next bytes); this bounds the whole
        # answer, which a server sending keep-alive comments forever would otherwise never end.
        try:
            with trio.fail_after(self.response_timeout):
                return await self._exchange(content, headers)
        except trio.TooSlowError:
            msg = f"{self._shown_url} did not finish its answer within {self.response_timeout:g}s (response_timeout)"
            raise ProviderError(msg, provider=NAME, retryable=True) from None

    async def _exchange(self, content: bytes, headers: Mapping[str, str]) -> ModelResponse:
        """Send the request and read the answer; every httpx failure becomes a ProviderError."""
        url = self._shown_url
        try:
            async with self._get_client().stream("POST", self._url, content=content, headers=headers) as response:
                if not response.is_success:
                    await response.aread()
                    raise _status_error(response, url)
                if _media_type(response) in _HTML_TYPES:
                    raise _html_error(response, url)
                if self.stream and _media_type(response) != "application/json":
                    return await _read_stream(response.aiter_bytes())
                # Also the answer of a server that ignores ``stream: true`` and sends JSON.
                return _parse_completion(_json_body(await response.aread()))
        except httpx.TimeoutException as exc:
            msg = f"no answer from {url} within {self._timeout:g}s ({type(exc).__name__})"
            raise ProviderError(msg, provider=NAME, retryable=True) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
            msg = f"the connection to {url} failed: {_describe(exc)}"
            raise ProviderError(msg, provider=NAME, retryable=True) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            msg = f"cannot ask {url}: {_describe(exc)}"
            raise ProviderError(msg, provider=NAME) from exc

    async def aclose(self) -> None:
        """Close the HTTP client and its connections; the next request opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"user-agent": f"toolflow/{__version__} python-httpx/{httpx.__version__}"}
            if self._api_key:
                headers["authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self._timeout), verify=_ssl_context()
            )
        return self._client


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The default verifying context of httpx, made once: loading the CA bundle costs tens of milliseconds."""
    return httpx.create_ssl_context()


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


def _json_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        snippet = raw[:200].decode("utf-8", "replace")
        msg = f"the answer is not JSON: {snippet!r}"
        raise ProviderError(msg, provider=NAME) from None


def _jsonable(value: object) -> Any:
    """``json.dumps`` fallback: read-only mappings and other iterables of the history."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def _fix_surrogates(text: str) -> str:
    # A character outside the BMP may arrive as two JSON escapes (\ud83d, \ude00) in two deltas.
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


# -- errors -------------------------------------------------------------------------------------


def _status_error(response: httpx.Response, url: str) -> ProviderError:
    status = response.status_code
    detail = _server_message(response.content) or response.reason_phrase or "no message"
    return ProviderError(
        f"POST {url} answered HTTP {status}: {detail}",
        provider=NAME,
        retryable=status in _RETRYABLE_STATUS or status >= 500,
        retry_after=_retry_after(response.headers),
        status=status,
    )


def _server_message(body: bytes) -> str:
    """The server's own words: ``error.message`` and its kin, else the start of the body."""
    try:
        data = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
    else:
        if isinstance(data, Mapping):
            found = _error_in(data) or data.get("detail") or data.get("message")
            text = found if isinstance(found, str) else json.dumps(data, default=str)
        else:
            text = json.dumps(data, default=str)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL_CHARS else text[: _MAX_DETAIL_CHARS - 3] + "..."


def _retry_after(headers: httpx.Headers) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    return retry_after_seconds(headers.get("retry-after"))


def _describe(exc: Exception) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _media_type(response: httpx.Response) -> str:
    """The response's media type, lower-cased, without parameters (``text/event-stream``)."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def _html_error(response: httpx.Response, url: str) -> ProviderError:
    """A 200 answer that is a web page: a wrong base URL, a proxy's login page, a captive portal."""
    msg = (
        f"POST {url} answered HTTP {response.status_code} with an HTML page ({_media_type(response)}),"
        " not a Chat Completions answer: check the base URL; a proxy or a network's login page"
        " (captive portal) may be answering instead of the API"
    )
    return ProviderError(msg, provider=NAME, status=response.status_code)


def _without_credentials(url: str) -> str:
    """*url* without its user name, password, query and fragment, which may carry secrets, for messages."""
    return _USERINFO.sub(r"\1", url).split("#", 1)[0].split("?", 1)[0]


# -- streaming ----------------------------------------------------------------------------------


class _EventDecoder:
    """Server-sent events from a byte stream split anywhere.

    Decodes UTF-8 incrementally (a character may be split between two reads) and ends lines only
    at CR, LF or CRLF, as the SSE specification says (``str.splitlines``, which httpx's
    ``aiter_lines`` uses, also splits at U+2028 and U+0085, which JSON may carry raw).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        self._data: list[str] = []
        self._event = ""

    def feed(self, raw: bytes) -> list[tuple[str, str]]:
        """The ``(event name, data)`` of each event that *raw* completes."""
        text = self._pending + self._decoder.decode(raw)
        # A CR at the very end may be the first half of a CRLF: keep it for the next read.
        held = text.endswith("\r")
        lines = _NEWLINE.split(text[:-1] if held else text)
        self._pending = lines.pop() + ("\r" if held else "")
        return self._lines(lines)

    def close(self) -> list[tuple[str, str]]:
        """The events left when the stream ends (a last one without its blank line included)."""
        text = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        lines = _NEWLINE.split(text) if text else []
        return self._lines([*lines, ""])

    def _lines(self, lines: list[str]) -> list[tuple[str, str]]:
        events = []
        for line in lines:
            if not line:
                if self._data:
                    events.append((self._event, "\n".join(self._data)))
                self._data, self._event = [], ""
            elif line.startswith(":"):  # a comment (keep-alive)
                continue
            else:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "data":
                    self._data.append(value)
                elif field == "event":
                    self._event = value
        return events


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
                    "function": {"name": call.name, "arguments": _fix_surrogates("".join(call.arguments))},
                },
                position,
            )
            # By index, as the API numbers them; calls sharing an index keep the order they came in.
            for position, call in enumerate(sorted(self._calls, key=lambda item: item.index))
        ]
        content = _fix_surrogates("".join(self._content)) if self._content else None
        return ModelResponse(message=_assistant(content, calls), usage=self._usage, finish_reason=self._finish_reason)


async def _read_stream(chunks: AsyncIterator[bytes]) -> ModelResponse:
    """Read server-sent events up to ``[DONE]`` and assemble the answer.

    The stream is read to its end even after ``[DONE]`` or an error event: leaving httpx's
    nested byte generators half-way leaves them to the garbage collector (a ResourceWarning
    under trio). A server that keeps the stream open after that gets :data:`_DRAIN_SECONDS`.
    """
    decoder = _EventDecoder()
    assembler = _Assembler()
    outcome: ModelResponse | ProviderError | None = None
    with trio.move_on_after(math.inf) as drain:
        async for raw in chunks:
            if outcome is None:
                outcome = _fold(assembler, decoder.feed(raw))
                if outcome is not None:
                    drain.deadline = trio.current_time() + _DRAIN_SECONDS
    if outcome is None:
        outcome = _fold(assembler, decoder.close())
    if outcome is None:
        msg = "the stream ended before [DONE]: the answer is incomplete"
        outcome = ProviderError(msg, provider=NAME, retryable=True)
    if isinstance(outcome, ProviderError):
        raise outcome
    return outcome


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
    except ValueError:
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
