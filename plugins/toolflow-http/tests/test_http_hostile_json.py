"""JSON and text from a hostile service: what a parser would have to guess at is refused, never read as something else.

A body that says JSON but cannot be read as JSON is kept as text with a warning saying why
(``response: auto``), or is a failure saying why (``response: json``); never a traceback, and
never data that differs from what the server wrote.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import pytest
import trio

from toolflow import Registry, ToolResult


class Hostile(Protocol):
    """The ``hostile`` fixture (see conftest.py)."""

    base: str
    answer: Callable[[socket.socket, str], None]


Call = Callable[..., Awaitable[ToolResult]]
MakeRegistry = Callable[..., Registry]


def serve(hostile: Hostile, body: bytes, content_type: str) -> None:
    """Make *hostile* answer every request with *body* as *content_type*."""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    hostile.answer = lambda conn, path: conn.sendall(head.encode("latin-1") + body)


async def fetch(make_registry: MakeRegistry, call: Call, hostile: Hostile, **http: Any) -> ToolResult:
    spec = {
        "tools": {
            "fetch": {
                "description": "Fetch something.",
                "parameters": {"type": "object", "properties": {}},
                "http": {"url": f"{hostile.base}/data", **http},
            }
        }
    }
    with trio.fail_after(30):
        return await call(make_registry(spec), "fetch", {})


REFUSED = [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to read"),
    (b'{"n": ' + b"7" * 100_000 + b"}", "a number with more than 4300 digits"),
    (b'{"x": NaN}', "NaN is not a JSON value"),
    (b"[1, -Infinity]", "-Infinity is not a JSON value"),
    (b'{"admin": false, "admin": true}', "the key 'admin' appears twice in one object"),
    (b'{"a": {"b": 1, "b": 2}}', "the key 'b' appears twice in one object"),
    (b'{"name": "\xff\xfe"}', "not valid utf-8: invalid start byte at byte 10"),
]
IDS = ["deep", "digits", "nan", "infinity", "duplicate-key", "nested-duplicate", "invalid-utf-8"]


@pytest.mark.parametrize(("body", "why"), REFUSED, ids=IDS)
async def test_json_a_parser_would_guess_at_is_a_failure_in_json_mode(
    body: bytes, why: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """``response: json``: each of these bodies is the failure 'not JSON', saying why."""
    serve(hostile, body, "application/json")
    result = await fetch(make_registry, call, hostile, response="json")
    assert result.error == f"Error: the response is not JSON: {why}"
    assert result.data is None


@pytest.mark.parametrize(("body", "why"), REFUSED, ids=IDS)
async def test_json_a_parser_would_guess_at_is_text_with_a_warning_in_auto_mode(
    body: bytes, why: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """``response: auto``: each of these bodies is kept as text, with a warning saying why it is not data."""
    serve(hostile, body, "application/json")
    result = await fetch(make_registry, call, hostile)
    assert result.success, result.error
    assert isinstance(result.data, str)
    assert result.warnings[0] == f"the response says 'application/json' but is not valid JSON ({why}); kept as text"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'\xef\xbb\xbf{"x": "caf\xc3\xa9"}', "application/json"),  # a UTF-8 byte order mark (RFC 8259 8.1)
        ('{"x": "café"}'.encode("utf-16"), "application/json; charset=utf-16"),
        ('{"x": "café"}'.encode("latin-1"), "application/json; charset=ISO-8859-1"),
    ],
    ids=["bom", "utf-16", "latin-1"],
)
async def test_json_in_the_charset_it_names_is_data(
    body: bytes, content_type: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """A byte order mark is skipped, and a charset the response names is the one it is read in."""
    serve(hostile, body, content_type)
    result = await fetch(make_registry, call, hostile)
    assert result.success, result.error
    assert result.data == {"x": "café"}
    assert not result.warnings


@pytest.mark.parametrize("charset", ["rot13", "zlib", "base64", "no-such-charset"])
async def test_a_charset_that_is_not_a_text_encoding_is_read_as_utf_8_with_a_warning(
    charset: str, hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """A charset Python knows only as a bytes or text transform, or not at all, is UTF-8 and a warning, not a crash."""
    serve(hostile, '{"x": "café"}'.encode(), f"application/json; charset={charset}")
    result = await fetch(make_registry, call, hostile)
    assert result.success, result.error
    assert result.data == {"x": "café"}
    assert result.warnings == (f"the response's charset {charset!r} is not a text encoding; read as UTF-8",)
    serve(hostile, "café".encode(), f"text/plain; charset={charset}")
    text = await fetch(make_registry, call, hostile)
    assert text.data == "café"
    assert text.warnings == (f"the response's charset {charset!r} is not a text encoding; read as UTF-8",)


async def test_text_that_is_not_valid_in_its_charset_says_so(
    hostile: Hostile, make_registry: MakeRegistry, call: Call
) -> None:
    """Bytes invalid in the charset become U+FFFD with a warning naming where, never silently."""
    serve(hostile, b"ok \xff\xfe end", "text/plain; charset=utf-8")
    result = await fetch(make_registry, call, hostile)
    assert result.success, result.error
    assert result.data == "ok \ufffd\ufffd end"
    assert result.warnings == (
        "the body is not valid utf-8 (invalid start byte at byte 3); bytes that are not were replaced with U+FFFD",
    )
