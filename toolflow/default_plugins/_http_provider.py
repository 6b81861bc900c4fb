"""What the HTTP model providers (``openai``, ``anthropic``) share.

:class:`HttpProvider` holds the connection (one httpx client per provider, made on first use
inside the trio run that uses it), sends a request under the deadline of a whole answer, and
turns httpx's failures, error statuses and HTML pages into :class:`~toolflow.ProviderError`; a
subclass writes the request body and reads a successful answer. :func:`read_events` reads a
server-sent event stream to its end and folds its events in. Imported only when a provider is
created, like the subclasses' modules.
"""

from __future__ import annotations

import abc
import codecs
import functools
import json
import math
import re
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import httpx
import trio

from toolflow import __version__
from toolflow._providers import ModelRequest, ModelResponse, ProviderError
from toolflow._results import valid_text
from toolflow._retrying import retry_after_seconds

__all__ = ["MAX_ANSWER_BYTES", "HttpProvider", "answer_too_large", "read_events"]

MAX_ANSWER_BYTES = 64 << 20
"""The most bytes of one answer read from a model server (64 MiB): a longer one is a ProviderError.

A model's whole answer, tool calls included, is far smaller (a million tokens is a few MiB); a
server that sends more is broken or hostile, and reading it all could exhaust the memory.
"""

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_MAX_DETAIL_CHARS = 500
_DRAIN_SECONDS = 2.0
"""How long to wait for a stream's end after its last event or an error before closing it."""
_NEWLINE = re.compile(r"\r\n|\r|\n")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_SURROGATE = re.compile("[\ud800-\udfff]")
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class HttpProvider(abc.ABC):
    """A model provider that POSTs JSON to one URL; subclasses say what is sent and how the answer is read.

    Attributes:
        name: The provider's registered name (a class attribute of the subclass).
        formats: The history formats it speaks (likewise).
        api: The API's name in messages (``Chat Completions API``, ``Messages API``).
        answer: What its answer is called in messages (``Chat Completions answer``).
        model: The model name sent when the request names none.
        base_url: The API root the requests go to.
        stream: Whether answers are streamed.
        response_timeout: Seconds allowed for a whole answer, from sending the request to its
            last byte; what the server sends meanwhile (keep-alive comments, pings) does not
            extend it.
    """

    # Set by each subclass on the class, as ModelProvider's protocol reads them.
    name: str
    formats: tuple[str, ...]
    api: str
    answer: str

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        url: str,
        headers: Mapping[str, str],
        stream: bool,
        timeout: float,
        response_timeout: float,
        options: Mapping[str, Any],
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.stream = stream
        self.response_timeout = response_timeout
        self._headers = dict(headers)  # credentials among them: never shown
        self._timeout = timeout
        self._options = dict(options)
        self._url = url
        self._shown_url = without_credentials(url)
        # Made on first use, inside the trio run that uses it: connections belong to one event loop.
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        base_url = without_credentials(self.base_url)
        return f"<{type(self).__name__} model={self.model!r} base_url={base_url!r} stream={self.stream!r}>"

    @abc.abstractmethod
    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for *request*."""

    def _add_options(self, body: dict[str, Any]) -> dict[str, Any]:
        """*body* with the options merged in last; an option that is ``None`` removes its field."""
        for key, value in self._options.items():
            if value is None:
                body.pop(key, None)
            else:
                body[key] = value
        return body

    async def _read(self, response: httpx.Response) -> ModelResponse:
        """The answer of a successful *response*: an event stream, or a JSON body."""
        if self.stream and media_type(response) != "application/json":
            return await self._read_stream(response.aiter_bytes())
        # Also the answer of a server that ignores ``stream: true`` and sends JSON.
        raw = await read_body(response.aiter_bytes())
        if raw is None:
            raise answer_too_large(self.name)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion
            snippet = raw[:200].decode("utf-8", "replace")
            msg = f"the answer is not JSON: {snippet!r}"
            raise ProviderError(msg, provider=self.name) from None
        return self._parse(data)

    @abc.abstractmethod
    async def _read_stream(self, chunks: AsyncIterator[bytes]) -> ModelResponse:
        """The answer of a streamed response (:func:`read_events`)."""

    @abc.abstractmethod
    def _parse(self, data: Any) -> ModelResponse:
        """The answer of a JSON body."""

    @abc.abstractmethod
    def _server_detail(self, body: bytes) -> str:
        """The server's own words in an error status's *body*, on one line."""

    def _status_error(self, response: httpx.Response, body: bytes) -> ProviderError:
        """The error of an error status with its *body* (empty past the limit): retryable for 408, 409, 429 and 5xx."""
        status = response.status_code
        detail = self._server_detail(body) or response.reason_phrase or "no message"
        return ProviderError(
            f"POST {self._shown_url} answered HTTP {status}: {detail}",
            provider=self.name,
            retryable=status in _RETRYABLE_STATUS or status >= 500,
            retry_after=retry_after(response.headers),
            status=status,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask the server for the next assistant message.

        Raises:
            ProviderError: The request's format is not one of :attr:`formats`, the request
                cannot be encoded as JSON, the server answered with an error status, an HTML
                page or something else that is not an answer of the API, the connection failed,
                timed out or broke off, or the whole answer took longer than
                :attr:`response_timeout`. ``retryable``, ``status`` and ``retry_after`` say what
                the loop may do. Messages name the URL without its user name, password and query.
        """
        if request.format not in self.formats:
            msg = (
                f"the {self.api} cannot take the {request.format!r} history format;"
                f" use one of {', '.join(self.formats)}"
            )
            raise ProviderError(msg, provider=self.name)
        try:
            # A lone surrogate (a JSON escape in the model's own answer, a file name that is not
            # UTF-8) cannot be sent as UTF-8: it goes as U+FFFD.
            content = valid_text(
                json.dumps(self.request_body(request), ensure_ascii=False, allow_nan=False, default=jsonable)
            ).encode()
        except (TypeError, ValueError) as exc:
            msg = f"the request cannot be encoded as JSON: {exc}"
            raise ProviderError(msg, provider=self.name) from exc
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
            raise ProviderError(msg, provider=self.name, retryable=True) from None

    async def _exchange(self, content: bytes, headers: Mapping[str, str]) -> ModelResponse:
        """Send the request and read the answer; every httpx failure becomes a ProviderError."""
        url = self._shown_url
        try:
            async with self._get_client().stream("POST", self._url, content=content, headers=headers) as response:
                if not response.is_success:
                    raise self._status_error(response, await read_body(response.aiter_bytes()) or b"")
                if media_type(response) in _HTML_TYPES:
                    msg = (
                        f"POST {url} answered HTTP {response.status_code} with an HTML page ({media_type(response)}),"
                        f" not a {self.answer}: check the base URL; a proxy or a network's login page"
                        " (captive portal) may be answering instead of the API"
                    )
                    raise ProviderError(msg, provider=self.name, status=response.status_code)
                return await self._read(response)
        except httpx.TimeoutException as exc:
            msg = f"no answer from {url} within {self._timeout:g}s ({type(exc).__name__})"
            raise ProviderError(msg, provider=self.name, retryable=True) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
            msg = f"the connection to {url} failed: {describe(exc)}"
            raise ProviderError(msg, provider=self.name, retryable=True) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            msg = f"cannot ask {url}: {describe(exc)}"
            raise ProviderError(msg, provider=self.name) from exc

    async def aclose(self) -> None:
        """Close the HTTP client and its connections; the next request opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"user-agent": f"toolflow/{__version__} python-httpx/{httpx.__version__}", **self._headers}
            self._client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self._timeout), verify=_ssl_context()
            )
        return self._client


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The default verifying context of httpx, made once: loading the CA bundle costs tens of milliseconds."""
    return httpx.create_ssl_context()


# -- helpers ------------------------------------------------------------------------------------


def jsonable(value: object) -> Any:
    """``json.dumps`` fallback: read-only mappings and other iterables of the history."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        return list(value)
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def fix_surrogates(text: str) -> str:
    """*text* with pairs of surrogates joined (a character outside the BMP sent as two JSON escapes in two pieces)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def shorten(text: str) -> str:
    """*text* on one line, at most :data:`_MAX_DETAIL_CHARS` long."""
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL_CHARS else text[: _MAX_DETAIL_CHARS - 3] + "..."


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    return retry_after_seconds(headers.get("retry-after"))


def describe(exc: Exception) -> str:
    """``Type: message``, or the type alone."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def media_type(response: httpx.Response) -> str:
    """The response's media type, lower-cased, without parameters (``text/event-stream``)."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";", 1)[0].strip().lower()


def without_credentials(url: str) -> str:
    """*url* without its user name, password, query and fragment, which may carry secrets, for messages."""
    return _USERINFO.sub(r"\1", url).split("#", 1)[0].split("?", 1)[0]


# -- streaming ----------------------------------------------------------------------------------


class EventDecoder:
    """Server-sent events from a byte stream split anywhere.

    Decodes UTF-8 incrementally (a character may be split between two reads) and ends lines only
    at CR, LF or CRLF, as the SSE specification says (``str.splitlines``, which httpx's
    ``aiter_lines`` uses, also splits at U+2028 and U+0085, which JSON may carry raw).
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending: list[str] = []
        """The text of the unfinished line, in pieces: joined once, when the line ends."""
        self._held = False
        self._data: list[str] = []
        self._event = ""

    def feed(self, raw: bytes) -> list[tuple[str, str]]:
        """The ``(event name, data)`` of each event that *raw* completes."""
        text = self._decoder.decode(raw)
        if not self._held and "\n" not in text and "\r" not in text:
            self._pending.append(text)  # a long line in many reads is read in linear time
            return []
        text = "".join(self._pending) + text
        # A CR at the very end may be the first half of a CRLF: keep it for the next read.
        self._held = text.endswith("\r")
        lines = _NEWLINE.split(text[:-1] if self._held else text)
        self._pending = [lines.pop() + ("\r" if self._held else "")]
        return self._lines(lines)

    def close(self) -> list[tuple[str, str]]:
        """The events left when the stream ends (a last one without its blank line included)."""
        text = "".join(self._pending) + self._decoder.decode(b"", final=True)
        self._pending, self._held = [], False
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


Fold = Callable[[list[tuple[str, str]]], "ModelResponse | ProviderError | None"]
"""Folds ``(event name, data)`` pairs in: the answer at the stream's last event, an error, or ``None`` for more."""


def answer_too_large(provider: str) -> ProviderError:
    """The error of an answer longer than :data:`MAX_ANSWER_BYTES` (not retryable: the server would send it again)."""
    msg = f"the answer is longer than {MAX_ANSWER_BYTES >> 20} MiB, more than any model's: it was not read"
    return ProviderError(msg, provider=provider)


async def read_body(chunks: AsyncIterator[bytes]) -> bytes | None:
    """The bytes of *chunks*; ``None`` when they pass :data:`MAX_ANSWER_BYTES` (the rest is drained, as below)."""
    parts: list[bytes] = []
    size = 0
    with trio.move_on_after(math.inf) as drain:
        async for chunk in chunks:
            if size <= MAX_ANSWER_BYTES:
                size += len(chunk)
                parts.append(chunk)
                if size > MAX_ANSWER_BYTES:
                    parts.clear()
                    drain.deadline = trio.current_time() + _DRAIN_SECONDS
    return None if size > MAX_ANSWER_BYTES else b"".join(parts)


async def read_events(chunks: AsyncIterator[bytes], fold: Fold, *, incomplete: ProviderError) -> ModelResponse:
    """Read server-sent events until *fold* gives the answer or an error; *incomplete* if the stream ends first.

    The stream is read to its end even after that: leaving httpx's nested byte generators
    half-way leaves them to the garbage collector (a ResourceWarning under trio). A server that
    keeps the stream open after it gets :data:`_DRAIN_SECONDS`. A stream longer than
    :data:`MAX_ANSWER_BYTES` is :func:`answer_too_large` for *incomplete*'s provider.
    """
    decoder = EventDecoder()
    outcome: ModelResponse | ProviderError | None = None
    size = 0
    with trio.move_on_after(math.inf) as drain:
        async for raw in chunks:
            if outcome is None:
                size += len(raw)
                outcome = answer_too_large(incomplete.provider) if size > MAX_ANSWER_BYTES else fold(decoder.feed(raw))
                if outcome is not None:
                    drain.deadline = trio.current_time() + _DRAIN_SECONDS
    if outcome is None:
        outcome = fold(decoder.close())
    if outcome is None:
        outcome = incomplete
    if isinstance(outcome, ProviderError):
        raise outcome
    return outcome
