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
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence

import httpx

__all__ = ["ACCEPT_ENCODING", "PIECE", "BodyError", "BodyTooLargeError", "read_body"]

PIECE = 64 * 1024
"""The most one layer inflates in one step."""

_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}

ACCEPT_ENCODING = "gzip, deflate"
"""The request's ``Accept-Encoding``: the encodings :func:`read_body` undoes."""


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
        BodyError: An encoding this tool does not read.
    """
    names = [name.strip().lower() for name in headers.get_list("content-encoding", split_commas=True)]
    layers: list[_Inflater] = []
    for name in reversed(names):
        if name in {"", "identity"}:
            continue
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


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The body of *response* (a stream not yet read), its ``Content-Encoding`` undone, up to *limit* bytes.

    A declared ``Content-Length`` over the limit stops before reading (what arrives is at least
    as large once inflated). Reading stops at the first byte past the limit.

    Raises:
        BodyTooLargeError: The body is larger than *limit*.
        BodyError: An encoding that is not gzip, deflate or identity, or a corrupt or truncated one.
        httpx.HTTPError: From the transport, as it reads.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
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
