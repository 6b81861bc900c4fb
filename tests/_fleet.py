"""A fleet of real ``toolflow serve --transport http`` replicas on loopback, and a client that rotates across them.

Issue 19's tests with real parts (``tests/test_fleet_replicas.py``, ``test_serve_fleet_sessions.py``,
``test_serve_fleet_tasks.py``, the HTTP half of ``test_serve_conversation.py``) and its bench
(``tests/bench/bench_fleet.py``) use these:

- :class:`Fleet`: N ``toolflow serve --transport http --port 0 --state redis://...`` processes
  (:class:`_mcp_project.HTTPServer`, started at once), sharing one real ``redis-server``
  (``tests/_redis.py``) and one ``TOOLFLOW_STATE_SECRET`` (or none, to test a fleet without
  it); each one's URL read from its announcement. :meth:`Fleet.kill` ends one with SIGKILL;
  :meth:`Fleet.close` stops them all (SIGTERM, then SIGKILL after a bound). :func:`open_fleet`
  starts and stops one from a trio test without blocking its event loop.
- :class:`Rotating`: an ``httpx2`` transport (the HTTP client of the ``mcp`` SDK) that sends
  each request to the next live replica, rewriting the URL's port, over real sockets. It stands
  for a load balancer that spreads requests with no stickiness at all, the hardest case for a
  fleet. Each HTTP method takes its own turns, so which replica answers which POST does not
  depend on when the SDK's GET stream (re)tries. Like nginx's ``proxy_next_upstream error``, it
  passes a request on to the next replica only when the connection could not be made (nothing
  was sent); a request that reached a replica which then died fails, and is never sent twice.
  A transport over one port is pinned to that replica; a test may move it (:attr:`Rotating.ports`).
- :func:`fleet_client`: the ``mcp`` SDK's client in either protocol generation over a
  :class:`Rotating` transport, with a principal's bearer token if asked (:data:`TOKENS`,
  :func:`write_tokens`).
- :func:`write_fleet_project`: ``tests/_mcp_project.py``'s project (``ticket``, a session
  cache; ``login``/``whoami``, ``depends_on``) plus the fleet's tools, which append what they do
  to a journal file that every replica shares (:func:`journal`): ``hold`` (``concurrency: 2``),
  ``stamp`` (persistent cache, a fresh random stamp per run) and ``draw`` (session cache, a
  fresh random draw per run).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import attrs
import httpx2
import trio
from _mcp_project import HTTPServer, write_project
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

SECRET = "the fleet's shared secret, for the tests only"
"""``TOOLFLOW_STATE_SECRET`` of every replica: handles and sessions minted by one verify on the others."""

TOKENS = {"alice": "tf-alice-0123456789abcdef", "bob": "tf-bob-fedcba9876543210"}
"""Two principals' bearer tokens (:func:`write_tokens` writes them for ``--auth-tokens``)."""

JOURNAL = "FLEET_JOURNAL"
"""The environment variable naming the journal file the fleet's tools append to."""

PLUGIN = '''\
"""The fleet's tools: each appends a line per step to the journal file the replicas share."""

import os
import secrets

import trio

import toolflow


def _note(*words):
    # One write(2) on a file opened O_APPEND: lines of several processes never interleave.
    line = " ".join(str(word) for word in words) + "\\n"
    fd = os.open(os.environ["FLEET_JOURNAL"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def hold(n, seconds):
    _note("enter", n, os.getpid())
    await trio.sleep(seconds)
    _note("exit", n, os.getpid())
    return {"n": n, "pid": os.getpid()}


def stamp(n):
    _note("stamp", n, os.getpid())
    return {"n": n, "stamp": secrets.token_hex(8)}


def draw():
    _note("draw", 0, os.getpid())
    return {"drawn": secrets.token_hex(8)}


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("fleet.hold", hold)
    register("fleet.stamp", stamp)
    register("fleet.draw", draw)
'''

SPECS = """\
toolflow: 1
tools:
  hold:
    description: Enter, wait the seconds given, leave; at most two at once across the fleet.
    concurrency: 2
    timeout: 1000s
    retry: false
    parameters:
      type: object
      properties:
        n: {type: integer, description: The call's number.}
        seconds: {type: number, minimum: 0, description: How long to hold.}
      required: [n, seconds]
    implementation: fleet.hold
  stamp:
    description: A fresh random stamp for a number, kept in the fleet's persistent cache.
    cache: {scope: persistent, ttl: 1h}
    retry: false
    parameters:
      type: object
      properties:
        n: {type: integer, description: The number.}
      required: [n]
    implementation: fleet.stamp
  draw:
    description: A fresh random draw, the same for the rest of the conversation (its session cache).
    cache: {scope: session}
    retry: false
    implementation: fleet.draw
"""


def write_tokens(root: Path, tokens: Mapping[str, str] = TOKENS) -> Path:
    """``root / "tokens.toml"`` for ``--auth-tokens tokens.toml``: a principal per name of *tokens*, owner-only."""
    path = root / "tokens.toml"
    path.write_text(
        "".join(f'[principals.{name}]\ntoken = "{token}"\n\n' for name, token in tokens.items()), encoding="utf-8"
    )
    path.chmod(0o600)  # else serve warns at start that others can read the tokens
    return path


def authorization(name: str, tokens: Mapping[str, str] = TOKENS) -> dict[str, str]:
    """The ``Authorization`` header of principal *name*."""
    return {"Authorization": f"Bearer {tokens[name]}"}


def write_fleet_project(root: Path) -> Path:
    """``_mcp_project``'s project in *root*, plus the fleet's spec file and plugin; *root*.

    The replicas wait for the persistent store up to 30 s (a loaded machine must not turn hits
    into misses); a Redis that is down refuses at once, so that costs no waiting.
    """
    write_project(root)
    (root / "specs" / "fleet.yaml").write_text(SPECS, encoding="utf-8")
    (root / "fleet_tools.py").write_text(PLUGIN, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "fleet-demo"\n\n[tool.toolflow]\nspecs = ["specs"]\n'
        'plugins = ["serve_tools", "fleet_tools"]\n'
        # A generous wait for the store: on a loaded machine a late answer would be a miss.
        '\n[tool.toolflow.cache]\ntimeout = "30s"\n',
        encoding="utf-8",
    )
    return root


def journal(path: Path) -> list[tuple[str, int, int]]:
    """The journal's lines as ``(what, n, pid)``, in the order they were written."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(what, int(n), int(pid)) for what, n, pid in (line.split() for line in lines)]


def most_at_once(entries: Sequence[tuple[str, int, int]]) -> int:
    """The most ``hold`` calls inside the tool at once, by the journal's order.

    A call writes ``enter`` after it took its lease and ``exit`` before it gives it back, so each
    call's span in the journal lies within the span it held a lease: this count is never above
    the number of leases held at once.
    """
    inside = most = 0
    for what, _, _ in entries:
        inside += {"enter": 1, "exit": -1}.get(what, 0)
        most = max(most, inside)
    return most


class Fleet:
    """*count* replicas of ``toolflow serve --transport http --port 0 *args*`` for *root*.

    Args:
        root: The project (:func:`write_fleet_project`, or any project of serve's).
        args: The ``toolflow serve`` arguments of every replica: ``--state`` with a real Redis's
            URL, and any others.
        count: How many replicas.
        secret: Every replica's ``TOOLFLOW_STATE_SECRET``; ``None``: the variable is not set
            (a fleet without the secret).
        env: More environment variables, the same for every replica (the journal is
            ``root / "journal"``).
    """

    def __init__(
        self,
        root: Path,
        *args: str,
        count: int = 3,
        secret: str | None = SECRET,
        env: dict[str, str] | None = None,
    ) -> None:
        self.journal = root / "journal"
        environment = {JOURNAL: str(self.journal), **(env or {})}
        if secret is not None:
            environment["TOOLFLOW_STATE_SECRET"] = secret
        with ThreadPoolExecutor(count) as pool:  # at once: each takes seconds to import and start
            started = [pool.submit(HTTPServer, root, *args, env=environment) for _ in range(count)]
        self.replicas: list[HTTPServer] = []
        failures = []
        for future in started:
            try:
                self.replicas.append(future.result())
            except RuntimeError as exc:
                failures.append(exc)
        if failures:
            self.close()
            raise failures[0]
        self.ports = [_port(replica.url) for replica in self.replicas]

    @property
    def url(self) -> str:
        """The first replica's URL; :class:`Rotating` sends each request to the next replica anyway."""
        return self.replicas[0].url

    @property
    def urls(self) -> list[str]:
        """Each replica's URL, in :attr:`replicas`' order."""
        return [replica.url for replica in self.replicas]

    def pids(self) -> list[int]:
        return [replica.process.pid for replica in self.replicas]

    def kill(self, index: int) -> None:
        """SIGKILL replica *index* (its leases and its calls in flight stay as they were)."""
        self.replicas[index].kill()

    def lines(self) -> list[str]:
        """The journal's lines as the replicas' tools wrote them (:func:`journal` parses the fleet tools')."""
        return self.journal.read_text(encoding="utf-8").splitlines() if self.journal.exists() else []

    def output(self) -> str:
        """What the replicas wrote to stderr so far."""
        return "".join(line for replica in self.replicas for line in replica.output)

    def close(self) -> None:
        """Stop every replica: SIGTERM, then SIGKILL those still running after a bound."""
        for replica in self.replicas:
            if replica.process.poll() is None:
                replica.process.terminate()
        for replica in self.replicas:
            replica.close(timeout=30)


@contextlib.asynccontextmanager
async def open_fleet(
    root: Path, *args: str, count: int = 3, secret: str | None = SECRET, env: dict[str, str] | None = None
) -> AsyncIterator[Fleet]:
    """A :class:`Fleet` started and stopped in a worker thread, so that a trio test's clock and guard go on."""
    fleet = await trio.to_thread.run_sync(functools.partial(Fleet, root, *args, count=count, secret=secret, env=env))
    try:
        yield fleet
    finally:
        await trio.to_thread.run_sync(fleet.close)


def _port(url: str) -> int:
    port = httpx2.URL(url).port
    assert port is not None, url
    return port


@attrs.frozen
class Exchange:
    """A request that :class:`Rotating` handed to a replica, once its answer began."""

    verb: str
    """The HTTP method."""
    method: str
    """The JSON-RPC method of a POST's message; ``""`` for anything else."""
    port: int
    """The replica's port."""
    status: int
    """The answer's HTTP status."""


def _rpc_method(request: httpx2.Request) -> str:
    if request.method != "POST":
        return ""
    message = json.loads(request.content)
    return str(message.get("method", "")) if isinstance(message, dict) else ""


class Rotating(httpx2.AsyncBaseTransport):
    """Each request to the next replica of *ports* on 127.0.0.1 (see the module's docstring).

    Attributes:
        ports: The replicas' ports, in turn; a test may set another list (a transport over one
            port is pinned to that replica, and moved by setting it).
        log: Each request a replica answered, in the order the answers began (a test checks that
            the requests rotated, and which replica answered what).
        started: How many requests were handed to a replica so far, answered or not (a test
            waits until its requests reached the replicas).
        session: The last ``Mcp-Session-Id`` an answer carried (a fleet session's key in Redis).
    """

    def __init__(self, ports: Sequence[int]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.ports = list(ports)
        self._turns: dict[str, itertools.count[int]] = {}
        self._down: set[int] = set()
        self.log: list[Exchange] = []
        self.started = 0
        self.session: str | None = None

    @property
    def sent(self) -> list[int]:
        """The port of each replica that answered, in the order the answers began."""
        return [exchange.port for exchange in self.log]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # Each HTTP method in its own turns: the POSTs rotate whatever the GET stream does meanwhile.
        turns = self._turns.setdefault(request.method, itertools.count())
        for _ in range(len(self.ports)):
            port = self.ports[next(turns) % len(self.ports)]
            if port in self._down:
                continue
            # The Host header stays what the client wrote, as behind a load balancer.
            request.url = request.url.copy_with(port=port)
            self.started += 1
            try:
                response = await self._inner.handle_async_request(request)
            except httpx2.ConnectError:
                self.started -= 1
                self._down.add(port)  # nothing was sent: the next replica may take it
                continue
            self.log.append(Exchange(request.method, _rpc_method(request), port, response.status_code))
            self.session = response.headers.get("mcp-session-id", self.session)
            return response
        msg = f"no replica of {self.ports} accepts connections"
        raise httpx2.ConnectError(msg, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def fleet_client(
    fleet: Fleet, mode: str, transport: Rotating | None = None, *, headers: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[Client, Rotating]]:
    """The ``mcp`` SDK's client speaking *mode* (``legacy``: 2025-11-25; ``2026-07-28``), each request to the next replica.

    *transport* is :class:`Rotating` over every replica unless given; *headers* go with every
    request (:func:`authorization`).
    """
    rotating = transport if transport is not None else Rotating(fleet.ports)
    async with (
        httpx2.AsyncClient(transport=rotating, headers=headers, timeout=httpx2.Timeout(120)) as http,
        Client(streamable_http_client(fleet.url, http_client=http), mode=mode) as client,
    ):
        yield client, rotating
