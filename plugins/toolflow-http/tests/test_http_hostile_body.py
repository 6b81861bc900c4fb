"""Bodies from a hostile service: compression bombs, encodings the tool does not read, bodies that never end.

Each answer is written byte by byte by the ``hostile`` server (see conftest.py); the limit is
``max_bytes``, which must hold *after* ``Content-Encoding`` is undone and stop the reading there.
"""

from __future__ import annotations

import functools
import gzip
import socket
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import pytest
import trio
from toolflow_http._body import MAX_ENCODINGS

from toolflow import Registry, ToolResult

MiB = 1024 * 1024


class Hostile(Protocol):
    """The ``hostile`` fixture (see conftest.py)."""

    base: str
    answer: Callable[[socket.socket, str], None]


class Server(Protocol):
    """The ``server`` fixture (see conftest.py)."""

    base: str


Call = Callable[..., Awaitable[ToolResult]]
MakeRegistry = Callable[..., Registry]


def tool(http: Any) -> dict[str, Any]:
    """A spec file with one ``http`` tool called ``fetch`` and no parameters (a generous timeout)."""
    body = {"description": "Fetch something.", "parameters": {"type": "object", "properties": {}}, "http": http}
    return {"tools": {"fetch": {**body, "timeout": "60s"}}}


async def fetch(make_registry: MakeRegistry, call: Call, http: Any) -> ToolResult:
    with trio.fail_after(120):
        return await call(make_registry(tool(http)), "fetch", {})


def head(status: str = "200 OK", headers: Mapping[str, str] = {}) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


@functools.cache
def zeros_gzipped_twice(size: int) -> bytes:
    """*size* zero bytes, gzipped, then gzipped again: a few hundred bytes on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MiB)
    once = b"".join(packer.compress(block) for _ in range(size // MiB)) + packer.flush()
    return gzipped(once)


def endless_gzip(conn: socket.socket, path: str) -> None:
    """A chunked gzip body of zeros that never ends: a few KiB on the wire per GiB inflated."""
    headers = {"Content-Type": "text/plain", "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"}
    conn.sendall(head(headers=headers))
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MiB)
    while True:
        conn.sendall(chunk(packer.compress(block) + packer.flush(zlib.Z_SYNC_FLUSH)))


def endless_plain(conn: socket.socket, path: str) -> None:
    """A chunked body that never ends."""
    conn.sendall(head(headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"}))
    while True:
        conn.sendall(chunk(b"x" * 65536))


def fixed(body: bytes, **headers: str) -> Callable[[socket.socket, str], None]:
    """An answer with *body* and *headers* (``Content_Type`` for ``Content-Type``), and its Content-Length."""
    named = {name.replace("_", "-"): value for name, value in headers.items()}

    def answer(conn: socket.socket, path: str) -> None:
        conn.sendall(head(headers={**named, "Content-Length": str(len(body))}) + body)

    return answer


@pytest.mark.parametrize("answer", [endless_gzip, endless_plain], ids=["gzip", "plain"])
async def test_a_body_that_never_ends_stops_at_max_bytes(
    answer: Callable[[socket.socket, str], None], hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """An endless body, inflated or not, fails as 'larger than max_bytes' once past them, not at the timeout."""
    hostile.answer = answer
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/endless", "max_bytes": MiB})
    assert result.error == f"Error: the response of GET {hostile.base}/endless is larger than {MiB} bytes"
    assert result.extra["status"] == 200


async def test_a_stacked_gzip_bomb_is_inflated_no_further_than_max_bytes(
    hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """``Content-Encoding: gzip, gzip`` of 256 MiB of zeros (under 1 KiB sent) never holds much more than max_bytes."""
    body = zeros_gzipped_twice(256 * MiB)
    assert len(body) < 1024
    hostile.answer = fixed(body, Content_Type="text/plain", Content_Encoding="gzip, gzip")
    registry = make_registry(tool({"url": f"{hostile.base}/bomb", "max_bytes": MiB}))
    tracemalloc.start()
    try:
        with trio.fail_after(120):
            result = await call(registry, "fetch", {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.error == f"Error: the response of GET {hostile.base}/bomb is larger than {MiB} bytes"
    assert peak < 16 * MiB  # max_bytes, a piece per layer, and the call itself; httpx alone held all 256 MiB


DATA = b'{"name": "caf\xc3\xa9", "items": [1, 2, 3]}'


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzipped(DATA)),
        ("x-gzip", gzipped(DATA)),
        ("deflate", zlib.compress(DATA)),
        ("deflate", _raw_deflate(DATA)),
        ("gzip, gzip", gzipped(gzipped(DATA))),
        ("deflate, gzip", gzipped(zlib.compress(DATA))),  # deflate applied first, so undone last
        ("identity, gzip", gzipped(DATA)),
        ("gzip", gzipped(DATA[:10]) + gzipped(DATA[10:])),  # two gzip members (RFC 1952)
        ("GZip ", gzipped(DATA)),
    ],
    ids=["gzip", "x-gzip", "zlib-deflate", "raw-deflate", "gzip-gzip", "deflate-gzip", "identity", "members", "case"],
)
async def test_encodings_are_undone_in_order(
    encoding: str, body: bytes, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """gzip and deflate, stacked or not, are undone last-applied first, and the JSON inside is the data."""
    hostile.answer = fixed(body, Content_Type="application/json", Content_Encoding=encoding)
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/data"})
    assert result.success, result.error
    assert result.data == {"name": "café", "items": [1, 2, 3]}


@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "gzip, br", "br, gzip"])
async def test_an_encoding_the_tool_does_not_read_is_a_failure(
    encoding: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """A Content-Encoding other than gzip, deflate or identity fails, naming it, not read as the bytes sent."""
    name = "br" if "br" in encoding else encoding
    body = gzipped(b'{"a": 1}') if "gzip" in encoding else b'{"a": 1}'
    hostile.answer = fixed(body, Content_Type="application/json", Content_Encoding=encoding)
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/data"})
    assert result.error == (
        f"Error: the response's Content-Encoding {name!r} is not one this tool reads (gzip, deflate)"
        f" (GET {hostile.base}/data)"
    )


async def test_more_encodings_than_the_limit_are_a_failure(
    hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """Six gzip layers (a header can name thousands) fail before any is undone; five are read."""
    body = DATA
    for _ in range(MAX_ENCODINGS):
        body = gzipped(body)
    hostile.answer = fixed(body, Content_Type="application/json", Content_Encoding=", ".join(["gzip"] * MAX_ENCODINGS))
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/data"})
    assert result.data == {"name": "café", "items": [1, 2, 3]}, result.error
    hostile.answer = fixed(gzipped(body), Content_Type="application/json", Content_Encoding=", ".join(["gzip"] * 3000))
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/data"})
    assert result.error == (
        f"Error: the response has 3000 Content-Encodings, more than the {MAX_ENCODINGS} this tool undoes"
        f" (GET {hostile.base}/data)"
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (gzipped(DATA)[:-12], "the gzip body ends before its compressed stream does"),
        (b"\x1f\x8b\x08\x00garbage-garbage", "the gzip body is corrupt (Error -3 while decompressing data: "),
        (gzipped(DATA) + b"trailing", "the gzip body is corrupt (Error -3 while decompressing data: "),
    ],
    ids=["truncated", "corrupt", "trailing-bytes"],
)
async def test_a_broken_gzip_body_is_a_failure(
    body: bytes, error: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """A gzip body cut short or corrupt is a failure saying so, never the part that inflated."""
    hostile.answer = fixed(body, Content_Type="text/plain", Content_Encoding="gzip")
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/data"})
    assert not result.success
    assert (result.error or "").startswith(f"Error: {error}")


async def test_an_empty_gzip_body_is_empty(hostile: Hostile, make_registry: MakeRegistry, call: Call) -> None:
    """A response with no body but a Content-Encoding (a HEAD, a 204) is an empty body, not a truncated stream."""
    hostile.answer = fixed(b"", Content_Type="text/plain", Content_Encoding="gzip")
    result = await fetch(make_registry, call, {"url": f"{hostile.base}/empty"})
    assert result.success, result.error
    assert result.data is None


@pytest.mark.parametrize(("method", "status"), [("HEAD", "200 OK"), ("GET", "304 Not Modified")])
async def test_the_content_length_of_a_body_not_sent_is_not_its_size(
    method: str, status: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """A HEAD's or a 304's Content-Length over max_bytes is the size of a body not sent: no failure."""

    def answer(conn: socket.socket, path: str) -> None:
        conn.sendall(head(status, {"Content-Type": "text/plain", "Content-Length": str(10 * MiB)}))

    hostile.answer = answer
    http = {"url": f"{hostile.base}/big", "method": method, "max_bytes": MiB, "ok_status": [200, 304]}
    result = await fetch(make_registry, call, http)
    assert result.success, result.error
    assert result.data is None


async def test_the_request_accepts_only_the_encodings_the_tool_reads(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """Accept-Encoding names gzip and deflate, whatever decoders httpx has installed (brotli, zstandard)."""
    result = await fetch(make_registry, call, {"url": f"{server.base}/echo"})
    assert result.data["headers"]["accept-encoding"] == "gzip, deflate"
