"""A real HTTP server on 127.0.0.1 for the tests, and helpers to call ``http`` tools through a registry.

The server (``http.server.ThreadingHTTPServer`` on port 0, in a thread) answers:

- ``/echo...`` (any method): JSON with the method, raw path, parsed query, headers and body it got;
- ``/status/CODE``: that status with a JSON error body; ``?retry_after=VALUE`` adds ``Retry-After``;
- ``/text``: ``text/plain``; ``/bad-json``: ``application/json`` that is not JSON;
- ``/bytes/N``: N bytes of ``x``; ``/chunked/N``: the same, chunked (no Content-Length);
- ``/redirect``: 302 to ``/echo/redirected``;
- ``/goto/CODE?to=URL``: a redirect with status CODE to URL (absolute, so to another server too);
- ``/loop``: 302 to itself;
- ``/hang``: never answers (until the server stops).

The ``hostile`` server is a bare socket server instead: each test gives it the function that
writes the raw bytes of its answers (compression bombs, bodies that never end, headers that
trickle), which ``http.server`` would not send.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import toolflow_http.plugin

from toolflow import Registry, ToolResult, invoke
from toolflow.testing import IsolatedPlugins, ToolflowProject

pytest_plugins = ["toolflow.testing"]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Keep test output quiet."""

    def _send(self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] = {}) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _chunked(self, size: int) -> None:
        """*size* bytes of ``x`` in 100-byte chunks, with no Content-Length."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, size, 100):
            chunk = b"x" * min(100, size - start)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def _json(self, status: int, value: Any, headers: Mapping[str, str] = {}) -> None:
        self._send(status, json.dumps(value).encode(), "application/json", headers)

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.requests.append((self.command, self.path, dict(self.headers.items()), raw))
        if url.path.startswith("/echo"):
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            self._json(
                200,
                {
                    "method": self.command,
                    "path": url.path,
                    "raw_path": self.path,
                    "query": query,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                },
                {"ETag": '"v1"', "X-RateLimit-Remaining": "41", "X-Internal": "hidden"},
            )
        elif url.path.startswith("/status/"):
            status = int(url.path.rsplit("/", 1)[1])
            headers = {"Retry-After": query["retry_after"][0]} if "retry_after" in query else {}
            self._json(status, {"error": f"status {status} as asked"}, headers)
        elif url.path == "/text":
            self._send(200, "hello, wörld".encode(), "text/plain; charset=utf-8")
        elif url.path == "/bad-json":
            self._send(200, b"{not json", "application/json")
        elif url.path.startswith("/bytes/"):
            self._send(200, b"x" * int(url.path.rsplit("/", 1)[1]), "application/octet-stream")
        elif url.path.startswith("/chunked/"):
            self._chunked(int(url.path.rsplit("/", 1)[1]))
        elif url.path == "/redirect":
            self._send(302, b"", "text/plain", {"Location": "/echo/redirected"})
        elif url.path == "/loop":
            self._send(302, b"", "text/plain", {"Location": "/loop"})
        elif url.path.startswith("/goto/"):
            self._send(int(url.path.rsplit("/", 1)[1]), b"", "text/plain", {"Location": query["to"][0]})
        elif url.path == "/hang":
            self.server.release.wait(30)
        else:
            self._json(404, {"error": "no such page"})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle  # noqa: N815


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.release = threading.Event()


class Server:
    """The running test server: its base URL and the requests it received."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self.base = f"http://127.0.0.1:{server.server_address[1]}"

    @property
    def requests(self) -> list[tuple[str, str, dict[str, str], bytes]]:
        """``(method, raw path, headers, body)`` of every request, in order."""
        return self._server.requests


@pytest.fixture
def server() -> Iterator[Server]:
    """A real HTTP server on 127.0.0.1 (port 0), serving from a thread for the test's duration."""
    yield from _serve()


@pytest.fixture
def other_server() -> Iterator[Server]:
    """A second server like ``server``, on another port: another origin."""
    yield from _serve()


def _serve() -> Iterator[Server]:
    httpd = _Server()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield Server(httpd)
    finally:
        httpd.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class Hostile:
    """The ``hostile`` fixture: a TCP server on 127.0.0.1 that answers each request with ``answer(socket, path)``."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # accept() does not wake when another thread closes the socket
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.answer: Callable[[socket.socket, str], None] = lambda conn, path: None
        self.stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    def serve(self) -> None:
        """Accept connections until :meth:`close`, each answered in a thread of its own."""
        while not self.stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            thread = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            with contextlib.suppress(OSError):  # the client gave up, as it should
                self.answer(conn, head.split(b" ", 2)[1].decode("ascii"))

    def close(self) -> None:
        """Stop accepting, and let answers that never end see a closed socket."""
        self.stopped.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(10)


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    """A bare TCP server on 127.0.0.1 whose answers the test writes byte by byte (set ``hostile.answer``)."""
    server = Hostile()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.close()
        thread.join(5)


@pytest.fixture
def refused_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/nothing"


@pytest.fixture
def http_plugins(toolflow_plugins: IsolatedPlugins) -> IsolatedPlugins:
    """The isolated plugin manager with this plugin registered."""
    toolflow_plugins.register(toolflow_http.plugin, "http")
    return toolflow_plugins


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests to the local server must not go through a proxy from the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_registry(toolflow_project: ToolflowProject, http_plugins: IsolatedPlugins) -> Callable[..., Registry]:
    """``make_registry(spec)``: write *spec* (YAML text or a mapping) into the project, build its registry."""

    def make(spec: Mapping[str, Any] | str) -> Registry:
        toolflow_project.write_spec("http.yaml", spec)
        return toolflow_project.registry(http_plugins)

    return make


async def _call(registry: Registry, name: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
    tool = registry.get(name)
    assert tool.is_async
    return await invoke(tool, dict(arguments or {}))


@pytest.fixture
def call() -> Callable[..., Awaitable[ToolResult]]:
    """``await call(registry, name, arguments)``: validate, run and normalise one call, as the engine does."""
    return _call
