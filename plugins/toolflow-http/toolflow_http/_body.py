"""Read a response's body within ``max_bytes``, whatever the server sends.

The limit caps the body as the tool reads it, *after* its ``Content-Encoding`` is undone, and
reading stops as soon as it is passed: a few kilobytes of gzip that inflate to gigabytes (a
"compression bomb", also stacked as ``gzip, gzip``) cost at most ``max_bytes`` of output, and a
body that never ends is a failure at the limit rather than at the timeout.

httpx's own decoders are not used: each inflates a whole network chunk at once, and a stacked
encoding inflates the inner layer from the outer one's whole output, so one 64 KiB read can
become gigabytes in memory before a byte reaches a limit. Here every layer inflates at most
:data:`PIECE` bytes per step, pulled by the layer after it, so memory stays within a few pieces
per layer.

Then the bytes become text or JSON (:func:`body_text`, :func:`body_json`): JSON that a parser
would have to guess at (``NaN``, a key twice, a number Python will not read, nesting past the
recursion limit, bytes invalid in the charset) is refused with a reason, and a charset that is
not a text encoding is UTF-8 with a warning, so nothing a server sends is read as something else
without saying so.
"""

from __future__ import annotations

import contextlib
import json
import sys
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_ENCODINGS",
    "PIECE",
    "BodyError",
    "BodyTooLargeError",
    "NotJSONError",
    "body_json",
    "body_text",
    "read_body",
]

PIECE = 64 * 1024
"""The most one layer inflates in one step."""

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

ACCEPT_ENCODING = "gzip, deflate"
"""The request's ``Accept-Encoding``: the encodings :func:`read_body` undoes."""

MAX_ENCODINGS = 5
"""The most ``Content-Encoding`` layers a body may have, as urllib3, curl and undici allow.

Real answers have one, rarely two. Each layer costs a decoder and a generator frame, and a 16 KiB
header can name thousands: past the limit the body is refused, not decoded.
"""


class BodyError(Exception):
    """The body cannot be read as the response describes it (an encoding that is unknown or broken)."""


class BodyTooLargeError(BodyError):
    """The body is larger than the limit (after its encoding is undone)."""


class _Inflater:
    """One ``gzip`` or ``deflate`` layer, inflating at most :data:`PIECE` bytes per step."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._zlib = zlib.decompressobj(_WBITS[name])
        self._fed = False
        self._raw_tried = name != "deflate"

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """The output for *data*, one piece at a time, as the caller asks for it.

        Raises:
            BodyError: The data is not valid for this encoding.
        """
        self._fed = self._fed or bool(data)
        while True:
            try:
                out = self._zlib.decompress(data, PIECE)
            except zlib.error as exc:
                if not self._raw_tried:  # 'deflate' without zlib's header, as some servers send it
                    self._raw_tried = True
                    self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                msg = f"the {self.name} body is corrupt ({exc})"
                raise BodyError(msg) from None
            self._raw_tried = True
            data = self._zlib.unconsumed_tail
            if self._zlib.eof and self._zlib.unused_data:
                data = self._next_member()
            if out:
                yield out
            # A full piece may leave output inside zlib with no input left: ask again.
            if not data and len(out) < PIECE:
                return

    def _next_member(self) -> bytes:
        """What follows the end of the stream: another gzip member (RFC 1952), or an error."""
        rest = self._zlib.unused_data
        if self.name == "deflate":
            msg = f"the deflate body has {len(rest)} bytes after its end"
            raise BodyError(msg)
        self._zlib = zlib.decompressobj(_WBITS[self.name])
        return rest

    def finish(self) -> None:
        """Check that the stream ended (a truncated one would read as a shorter body).

        Raises:
            BodyError: The stream stopped before its end.
        """
        if self._fed and not self._zlib.eof:
            msg = f"the {self.name} body ends before its compressed stream does"
            raise BodyError(msg)


def _layers(headers: httpx.Headers) -> list[_Inflater]:
    """The decoders for the response's ``Content-Encoding``, in the order they undo it (the last applied first).

    Raises:
        BodyError: An encoding this tool does not read, or more than :data:`MAX_ENCODINGS` of them.
    """
    names = [name.strip().lower() for name in headers.get_list("content-encoding", split_commas=True)]
    names = [name for name in names if name not in {"", "identity"}]
    if len(names) > MAX_ENCODINGS:
        msg = f"the response has {len(names)} Content-Encodings, more than the {MAX_ENCODINGS} this tool undoes"
        raise BodyError(msg)
    layers: list[_Inflater] = []
    for name in reversed(names):
        if name not in _WBITS:
            msg = f"the response's Content-Encoding {name!r} is not one this tool reads ({ACCEPT_ENCODING})"
            raise BodyError(msg)
        layers.append(_Inflater(name))
    return layers


def _decoded(layers: Sequence[_Inflater], data: bytes) -> Iterator[bytes]:
    """*data* through every layer, each pulling pieces from the one before it."""
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].pieces(data):
        yield from _decoded(layers[1:], piece)


def _has_body(response: httpx.Response) -> bool:
    """False for the answers whose Content-Length gives the size of a body not sent (RFC 9110, 8.6)."""
    return response.request.method != "HEAD" and response.status_code not in {204, 304}


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The body of *response* (a stream not yet read), its ``Content-Encoding`` undone, up to *limit* bytes.

    A declared ``Content-Length`` over the limit stops before reading (what arrives is at least
    as large once inflated), unless the answer has no body (to a HEAD, a 204 or a 304, the header
    gives the size of a body not sent). Reading stops at the first byte past the limit.

    Raises:
        BodyTooLargeError: The body is larger than *limit*.
        BodyError: An encoding that is not gzip, deflate or identity, or a corrupt or truncated one.
        httpx.HTTPError: From the transport, as it reads.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit and _has_body(response):
        raise BodyTooLargeError
    layers = _layers(response.headers)
    chunks: list[bytes] = []
    size = 0
    raw = response.aiter_raw()
    try:
        async for data in raw:
            for piece in _decoded(layers, data):
                size += len(piece)
                if size > limit:
                    raise BodyTooLargeError
                chunks.append(piece)
    except BodyError:
        await _abandon(response, raw)
        raise
    for layer in layers:
        layer.finish()
    return b"".join(chunks)


async def _abandon(response: httpx.Response, raw: AsyncIterator[bytes]) -> None:
    """Stop reading *response* half-way: close it, then let *raw* end on the closed connection.

    ``aiter_raw`` is the outermost of httpx's and httpcore's nested async generators; closing it
    alone leaves the inner ones to the garbage collector, which trio reports as a
    ResourceWarning. Once the connection is closed, the next read fails inside the innermost
    one, and the error ends each of them in turn (after what h11 already buffered, at most).
    """
    await response.aclose()
    with contextlib.suppress(httpx.HTTPError, httpx.StreamError):
        async for _ in raw:
            pass


# --- text and JSON -----------------------------------------------------------------------------


class NotJSONError(ValueError):
    """The body cannot be read as JSON; the message says why, without the body."""


def _encoding(charset: str | None, warnings: list[str]) -> str:
    """The text encoding the response names, or UTF-8 (with a warning when it names one that is not)."""
    if charset is None:
        return "utf-8"
    try:
        "".encode(charset)  # refuses an unknown name, and codecs that are not text encodings ('rot13', 'zlib')
    except LookupError:
        warnings.append(f"the response's charset {charset!r} is not a text encoding; read as UTF-8")
        return "utf-8"
    return charset


def body_text(body: bytes, charset: str | None, warnings: list[str]) -> str:
    """*body* as text in *charset*; bytes it cannot decode become U+FFFD, with a warning saying where."""
    encoding = _encoding(charset, warnings)
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as exc:
        warnings.append(
            f"the body is not valid {encoding} ({exc.reason} at byte {exc.start}); bytes that are not were replaced"
            " with U+FFFD"
        )
        return body.decode(encoding, errors="replace")


def _constant(name: str) -> Any:
    msg = f"{name} is not a JSON value"
    raise ValueError(msg)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            msg = f"the key {key[:100]!r} appears twice in one object"
            raise ValueError(msg)
        seen.add(key)
    return found  # not reached: a shorter dict means a key came twice


def body_json(body: bytes, charset: str | None, warnings: list[str]) -> Any:
    """*body* parsed as JSON (RFC 8259), refusing what a parser would have to guess at.

    Refused: bytes that are not valid in the charset (UTF-8 unless the response names
    another), ``NaN`` and ``Infinity``, a key twice in one object (parsers disagree on which
    one wins), a number with more digits than Python reads, nesting deeper than Python's
    recursion limit. A UTF-8 byte order mark is skipped (RFC 8259, section 8.1). A charset that
    is not a text encoding is a warning added to *warnings*, and UTF-8 is used.

    Raises:
        NotJSONError: The body is not JSON, or is JSON of one of the kinds above.
    """
    encoding = _encoding(charset, warnings)
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        msg = f"not valid {encoding}: {exc.reason} at byte {exc.start}"
        raise NotJSONError(msg) from None
    try:
        return json.loads(text.removeprefix("\ufeff"), parse_constant=_constant, object_pairs_hook=_object)
    except RecursionError:
        msg = "nested too deeply to read"
    except ValueError as exc:
        msg = str(exc)
        if "integer string conversion" in msg:  # the limit's own message suggests a Python setting
            msg = f"a number with more than {sys.get_int_max_str_digits()} digits"
    raise NotJSONError(msg)
