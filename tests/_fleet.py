"""A fleet of real ``toolflow serve --transport http`` replicas on loopback, and a client that rotates across them.

Issue 19's tests with real parts (``tests/test_fleet_replicas.py``) and its bench
(``tests/bench/bench_fleet.py``) use these:

- :class:`Fleet`: N ``toolflow serve --transport http --port 0 --state redis://...`` processes
  (:class:`_mcp_project.HTTPServer`, started at once), sharing one real ``redis-server``
  (``tests/_redis.py``) and one ``TOOLFLOW_STATE_SECRET``; each one's URL read from its
  announcement. :meth:`Fleet.kill` ends one with SIGKILL; :meth:`Fleet.close` stops them all
  (SIGTERM, then SIGKILL after a bound).
- :class:`Rotating`: an ``httpx2`` transport (the HTTP client of the ``mcp`` SDK) that sends
  each request to the next live replica, rewriting the URL's port, over real sockets. It stands
  for a load balancer that spreads requests with no stickiness at all, the hardest case for a
  fleet. Like nginx's ``proxy_next_upstream error``, it passes a request on to the next replica
  only when the connection could not be made (nothing was sent); a request that reached a
  replica which then died fails, and is never sent twice.
- :func:`write_fleet_project`: ``tests/_mcp_project.py``'s project (``ticket``, a session
  cache; ``login``/``whoami``, ``depends_on``) plus the fleet's tools, which append what they do
  to a journal file that every replica shares (:func:`journal`): ``hold`` (``concurrency: 2``),
  ``stamp`` (persistent cache, a fresh random stamp per run) and ``draw`` (session cache, a
  fresh random draw per run).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
from _mcp_project import HTTPServer, write_project
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

SECRET = "the fleet's shared secret, for the tests only"
"""``TOOLFLOW_STATE_SECRET`` of every replica: handles and sessions minted by one verify on the others."""

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
        root: The project (:func:`write_fleet_project`).
        args: The ``toolflow serve`` arguments of every replica: ``--state`` with a real Redis's
            URL, and any others.
        count: How many replicas.
        env: More environment variables, the same for every replica (``TOOLFLOW_STATE_SECRET``
            is :data:`SECRET` unless given; the journal is ``root / "journal"``).
    """

    def __init__(self, root: Path, *args: str, count: int = 3, env: dict[str, str] | None = None) -> None:
        self.journal = root / "journal"
        environment = {"TOOLFLOW_STATE_SECRET": SECRET, JOURNAL: str(self.journal), **(env or {})}
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
        self.ports = [int(replica.url.rsplit(":", 1)[1].split("/")[0]) for replica in self.replicas]

    @property
    def url(self) -> str:
        """The first replica's URL; :class:`Rotating` sends each request to the next replica anyway."""
        return self.replicas[0].url

    def pids(self) -> list[int]:
        return [replica.process.pid for replica in self.replicas]

    def kill(self, index: int) -> None:
        """SIGKILL replica *index* (its leases and its calls in flight stay as they were)."""
        self.replicas[index].kill()

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


class Rotating(httpx2.AsyncBaseTransport):
    """Each request to the next replica of *ports* on 127.0.0.1 (see the module's docstring).

    Attributes:
        sent: The port of each replica that answered, in the order the answers began (a test
            checks that the requests rotated).
        started: How many requests were handed to a replica so far, answered or not (a test
            waits until its requests reached the replicas).
    """

    def __init__(self, ports: Sequence[int]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._ports = list(ports)
        self._turn = itertools.count()
        self._down: set[int] = set()
        self.sent: list[int] = []
        self.started = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        for _ in self._ports:
            port = self._ports[next(self._turn) % len(self._ports)]
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
            self.sent.append(port)
            return response
        msg = f"no replica of {self._ports} accepts connections"
        raise httpx2.ConnectError(msg, request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def fleet_client(
    fleet: Fleet, mode: str, transport: Rotating | None = None
) -> AsyncIterator[tuple[Client, Rotating]]:
    """The ``mcp`` SDK's client speaking *mode* (``legacy``: 2025-11-25; ``2026-07-28``), each request to the next replica."""
    rotating = transport if transport is not None else Rotating(fleet.ports)
    async with (
        httpx2.AsyncClient(transport=rotating, timeout=httpx2.Timeout(120)) as http,
        Client(streamable_http_client(fleet.url, http_client=http), mode=mode) as client,
    ):
        yield client, rotating
