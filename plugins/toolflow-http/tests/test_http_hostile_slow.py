"""Answers that are slow, endless or huge before the body: the tool's timeout ends each, and memory stays bounded.

These held before the body's reading was rewritten (the timeout is a trio cancel scope around
the whole call); they stay here so that they keep holding. The servers trickle in real time,
but nothing asserts on time: each call has a one-second timeout and a generous guard.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import pytest
import trio

from toolflow import Registry, ToolResult


class Hostile(Protocol):
    """The ``hostile`` fixture (see conftest.py)."""

    base: str
    answer: Callable[[socket.socket, str], None]


Call = Callable[..., Awaitable[ToolResult]]
MakeRegistry = Callable[..., Registry]


def _trickle(conn: socket.socket, data: bytes) -> None:
    for byte in data:
        conn.sendall(bytes([byte]))
        time.sleep(0.3)


def trickled_headers(conn: socket.socket, path: str) -> None:
    """The status line and headers, a byte every 0.3 s: each read gets a byte, the whole never arrives in time."""
    _trickle(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")


def trickled_body(conn: socket.socket, path: str) -> None:
    """A body of 100 bytes, a byte every 0.3 s."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n")
    _trickle(conn, b"x" * 100)


def short_body(conn: socket.socket, path: str) -> None:
    """Content-Length 1000, three bytes, then the connection held open until the client leaves."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nabc")
    conn.recv(1)


def stalled_chunks(conn: socket.socket, path: str) -> None:
    """A chunked body with one chunk, then nothing, the connection held open."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    conn.recv(1)


def endless_informational(conn: socket.socket, path: str) -> None:
    """102 Processing, again and again, never the final answer."""
    while True:
        conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n" * 100)


def huge_headers(conn: socket.socket, path: str) -> None:
    """1 MB of header lines."""
    lines = b"".join(b"X-Filler-%d: %s\r\n" % (n, b"a" * 40) for n in range(20_000))
    conn.sendall(b"HTTP/1.1 200 OK\r\n" + lines + b"Content-Length: 0\r\n\r\n")


async def fetch(make_registry: MakeRegistry, call: Call, hostile: Hostile) -> ToolResult:
    spec = {
        "tools": {
            "fetch": {
                "description": "Fetch something.",
                "timeout": "1s",
                "parameters": {"type": "object", "properties": {}},
                "http": {"url": f"{hostile.base}/slow"},
            }
        }
    }
    with trio.fail_after(30):
        return await call(make_registry(spec), "fetch", {})


@pytest.mark.parametrize(
    "answer",
    [trickled_headers, trickled_body, short_body, stalled_chunks, endless_informational],
    ids=["trickled-headers", "trickled-body", "short-body", "stalled-chunks", "endless-1xx"],
)
async def test_the_timeout_ends_an_answer_that_never_completes(
    answer: Callable[[socket.socket, str], None], hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """Trickling, stalled or endlessly informational answers end as a timeout failure, never a hang."""
    hostile.answer = answer
    result = await fetch(make_registry, call, hostile)
    assert not result.success
    # Whichever fires first: the engine's timeout, the kind's cancel scope, or httpx's read timeout.
    assert re.search(r"timed out|Timeout", result.error or ""), result.error


async def test_huge_headers_are_a_protocol_error(hostile: Hostile, make_registry: MakeRegistry, call: Call) -> None:
    """1 MB of header lines stops at h11's 16 KiB limit: a RemoteProtocolError failure, not memory without bound."""
    hostile.answer = huge_headers
    result = await fetch(make_registry, call, hostile)
    assert (result.error or "").startswith("Error: RemoteProtocolError: ")
