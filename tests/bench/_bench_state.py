"""What the benches of serve's shared state have in common (``bench_conversation.py``, ``bench_fleet.py``).

- :func:`spec` and :func:`write_project`: a project whose tools all add two integers
  (``bench_serve``'s plugin, ``bench.add``) and differ only in what serve keeps for them;
- :func:`start_redis`: a real ``redis-server`` in a temporary folder (no persistence), and
  :func:`versions`, the line that says what was measured on what;
- :func:`interleaved`: the latency rounds: every (server, tool) called in a rotating order, each
  call timed on its own.

Not a bench itself: each bench imports it from beside it, as ``bench_instructions`` imports
``bench_loop``.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Collection, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _redis import RedisServer
from bench_serve import PLUGIN  # bench.add

_NUMBERS = """\
    parameters: &numbers
      type: object
      properties:
        a: {type: integer, description: The first.}
        b: {type: integer, description: The second.}
      required: [a, b]
"""

TOOLS = {
    "plain": "  plain:\n    description: Add two integers.\n" + _NUMBERS + "    implementation: bench.add\n",
    "cached": """\
  cached:
    description: Add two integers, cached across the fleet.
    parameters: *numbers
    cache: {scope: persistent, ttl: 1h}
    implementation: bench.add
""",
    "limited": """\
  limited:
    description: Add two integers, limited across the fleet.
    parameters: *numbers
    concurrency: 4
    rate_limit: {calls: 1000000, per: 1s}
    implementation: bench.add
""",
    "session": """\
  session:
    description: Add two integers, kept in the conversation's session cache.
    parameters: *numbers
    cache: {scope: session}
    implementation: bench.add
""",
}
"""Each tool's spec text, by name: ``plain`` (no cache, no limit) defines the parameters the others refer to."""


def spec(*tools: str) -> str:
    """A spec file of ``plain`` and *tools* (names of :data:`TOOLS`)."""
    return "toolflow: 1\ntools:\n" + "".join(TOOLS[name] for name in ("plain", *tools))


def write_project(root: Path, plugin: str, *tools: str, cache_timeout: str | None = None) -> Path:
    """A project in *root* with :func:`spec` of *tools* and ``bench.add`` in module *plugin*; *root*.

    *cache_timeout*: the ``[tool.toolflow.cache]`` timeout, or the default without it.
    """
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "bench.yaml").write_text(spec(*tools), encoding="utf-8")
    (root / f"{plugin}.py").write_text(PLUGIN, encoding="utf-8")
    cache = "" if cache_timeout is None else f'[tool.toolflow.cache]\ntimeout = "{cache_timeout}"\n'
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "bench"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["{plugin}"]\n{cache}',
        encoding="utf-8",
    )
    return root


def redis_executable() -> str:
    """The ``redis-server`` on PATH; without one the bench stops, saying how to install it."""
    executable = shutil.which("redis-server")
    if executable is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    return executable


def versions(redis_executable: str) -> str:
    """Python's, trio's, the SDK's, redis-py's and redis-server's versions, the cores and the load."""
    version = subprocess.run([redis_executable, "--version"], capture_output=True, text=True, check=False)
    return (
        f"python {platform.python_version()}, trio {trio.__version__}, mcp {importlib.metadata.version('mcp')},"
        f" redis-py {importlib.metadata.version('redis')}, {' '.join(version.stdout.split()[:3])},"
        f" {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )


def start_redis(redis_executable: str, folder: Path, stack: ExitStack) -> RedisServer:
    """A ``redis-server`` with its files in *folder* (made here), stopped when *stack* closes."""
    folder.mkdir()
    server = RedisServer(redis_executable, folder)
    server.start()
    stack.callback(server.stop)
    return server


class Caller(Protocol):
    """A client of one server that calls a tool and raises if the call failed."""

    async def call(self, tool: str, arguments: dict[str, Any]) -> None: ...


async def interleaved(
    callers: Mapping[str, Caller],
    tools: Collection[str],
    *,
    rounds: int,
    calls: int,
    warmup: int,
    same: Collection[str],
) -> dict[tuple[str, str], list[float]]:
    """Every (server, tool) of *callers* and *tools*, *warmup* calls each, then *rounds* rounds of *calls*.

    Each round takes the pairs in another rotation, so a slow moment of the machine falls on every
    pair alike. The tools of *same* get the same arguments every time (a cache hit after the
    first), the others new ones. Returns each call's round trip in seconds, by (server, tool).
    """
    pairs = [(server, tool) for server in callers for tool in tools]

    def arguments(tool: str, n: int) -> dict[str, Any]:
        return {"a": 1 if tool in same else n, "b": 1}

    for server, tool in pairs:
        for n in range(warmup):
            await callers[server].call(tool, arguments(tool, n))
    results: dict[tuple[str, str], list[float]] = {}
    for index in range(rounds):
        shift = index % len(pairs)
        for server, tool in pairs[shift:] + pairs[:shift]:
            times = results.setdefault((server, tool), [])
            for n in range(calls):
                started = time.perf_counter()
                await callers[server].call(tool, arguments(tool, n))
                times.append(time.perf_counter() - started)
    return results
