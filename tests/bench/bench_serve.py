"""Benchmark ``toolflow serve`` (issue 6): the round trip of ``tools/call`` over stdio.

One trio run of the ``mcp`` SDK's own client (``stdio_client`` + ``ClientSession``) talks to
three server processes at once, each serving one trivial tool, ``add(a, b)`` returning the sum
as text:

- ``toolflow``: ``toolflow serve`` on trio; the tool is an async implementation bound by a
  project plugin, so every call goes through the engine (tick, look-up, gates, validation,
  the attempt under its timeout, normalisation, the MCP result);
- ``sdk-asyncio``: the SDK's high-level ``MCPServer`` with the same function as a tool, run as
  its ``run()`` does (anyio on asyncio): what a team would otherwise write;
- ``sdk-trio``: the same ``MCPServer`` on anyio's trio backend, the event loop toolflow uses.

After a warm-up, the servers are called in interleaved rounds (each round calls every server
``--calls`` times, in a rotating order), so that they share the machine's noise. Each call is
timed on its own; the table gives the median and the 99th percentile per server, and
toolflow's median against each SDK server. Target: toolflow adds at most 15 % to the round trip.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_serve.py
    .venv/bin/python tests/bench/bench_serve.py --rounds 40 --calls 50
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters, stdio_client

SPEC = """\
toolflow: 1
tools:
  add:
    description: Add two integers.
    parameters:
      type: object
      properties:
        a: {type: integer, description: The first.}
        b: {type: integer, description: The second.}
      required: [a, b]
    timeout: 5s
    implementation: bench.add
"""

PLUGIN = """\
import toolflow


async def add(a, b):
    return str(a + b)


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("bench.add", add)
"""

SDK_SERVER = """\
import sys

import anyio
from mcp.server import MCPServer

server = MCPServer("baseline")


@server.tool()
async def add(a: int, b: int) -> str:
    \"\"\"Add two integers.\"\"\"
    return str(a + b)


anyio.run(server.run_stdio_async, backend=sys.argv[1])
"""


def write_project(root: Path) -> None:
    """The served project: a spec, the plugin binding it, pyproject.toml, and the SDK's server script."""
    (root / "specs").mkdir()
    (root / "specs" / "add.yaml").write_text(SPEC, encoding="utf-8")
    (root / "bench_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "bench"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["bench_plugin"]\n',
        encoding="utf-8",
    )
    (root / "sdk_server.py").write_text(SDK_SERVER, encoding="utf-8")


def servers(root: Path) -> dict[str, StdioServerParameters]:
    """How to start each server."""
    env = {"TOOLFLOW_DISABLE_PLUGINS": "assistant,http"}
    python = sys.executable
    return {
        "toolflow": StdioServerParameters(command=python, args=["-m", "toolflow", "serve"], cwd=root, env=env),
        "sdk-asyncio": StdioServerParameters(command=python, args=["sdk_server.py", "asyncio"], cwd=root),
        "sdk-trio": StdioServerParameters(command=python, args=["sdk_server.py", "trio"], cwd=root),
    }


@contextlib.asynccontextmanager
async def session(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    """An initialised client session with the server *params* starts, its tools listed once."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        await client.list_tools()
        yield client


async def timed_calls(client: ClientSession, count: int) -> list[float]:
    """Call ``add`` *count* times; return each round trip in seconds."""
    times = []
    for n in range(count):
        started = time.perf_counter()
        result = await client.call_tool("add", {"a": n, "b": 1})
        times.append(time.perf_counter() - started)
        if result.is_error:
            msg = f"add failed: {result.content}"
            raise RuntimeError(msg)
    return times


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def bench(root: Path, rounds: int, calls: int, warmup: int) -> dict[str, list[float]]:
    """Interleaved rounds against every server; each server's round trips."""
    results: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(session(params)) for name, params in servers(root).items()}
        for client in clients.values():
            await timed_calls(client, warmup)
        names = list(clients)
        for index in range(rounds):
            for name in names[index % len(names) :] + names[: index % len(names)]:
                results.setdefault(name, []).extend(await timed_calls(clients[name], calls))
    return results


def main() -> None:
    """Run the benchmark and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    parser.add_argument("--calls", type=int, default=50, help="calls per server per round (default 50)")
    parser.add_argument("--warmup", type=int, default=100, help="calls per server before timing (default 100)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        write_project(root)
        results = trio.run(bench, root, args.rounds, args.calls, args.warmup)
    medians = {name: statistics.median(times) for name, times in results.items()}
    print(
        f"{platform.python_implementation()} {platform.python_version()}, trio {trio.__version__}, "
        f"mcp {importlib.metadata.version('mcp')}; {args.rounds} rounds x {args.calls} calls per server\n"
    )
    print("| server | calls | median | p99 | toolflow's median against it |")
    print("|---|---:|---:|---:|---:|")
    for name, times in results.items():
        against = "" if name == "toolflow" else f"{(medians['toolflow'] / medians[name] - 1) * 100:+.1f} %"
        median_us, p99_us = medians[name] * 1e6, percentile(times, 0.99) * 1e6
        print(f"| {name} | {len(times)} | {median_us:,.0f} us | {p99_us:,.0f} us | {against} |")


if __name__ == "__main__":
    main()
