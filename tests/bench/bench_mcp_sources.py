"""Benchmark a call of a remote MCP tool through toolflow against the same call with the `mcp` client directly.

Issue 18, "Performance": a call through toolflow to a remote MCP tool at most 1.25x the same
call with the `mcp` client directly on the same trio loop. One server process (the test server
``tests/_mcp_remote_server.py``, over stdio), one connection: toolflow's ``engine.call("echo", ...)``
(validation, gates, timeout scope, hooks, result normalisation, then ``Client.call_tool``) and
``Client.call_tool("echo", ...)`` on the very client toolflow's connection holds take turns in
short rounds in one ``trio.run``; the table reports the median and the best round of each, and
their ratio. The server's own work and the pipe dominate both sides, as they would in production.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_mcp_sources.py
    .venv/bin/python tests/bench/bench_mcp_sources.py --rounds 30 --calls 50
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import toolflow
from toolflow import LoadResult, McpServer, SpecFile
from toolflow._mcp_sources import _RemoteCall

SERVER = Path(__file__).resolve().parent.parent / "_mcp_remote_server.py"


async def _round(calls: int, call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls


async def main(rounds: int, calls: int) -> None:
    server = McpServer(name="remote", command=(sys.executable, str(SERVER), "stdio"), tools=("echo",))
    specs = LoadResult(files=(SpecFile(path="bench.yaml", mcp_servers=(server,)),))
    async with toolflow.open_registry(specs) as registry, toolflow.open_engine(registry) as engine:
        remote = registry.get("echo").resolve()
        assert isinstance(remote, _RemoteCall)
        client = remote.connection._client  # the very connection toolflow uses
        assert client is not None

        async def through_toolflow() -> None:
            result = await engine.call("echo", {"text": "hi"})
            assert result.success, result

        async def direct() -> None:
            result = await client.call_tool("echo", {"text": "hi"})
            assert not result.is_error

        for warm in (through_toolflow, direct):
            await _round(calls, warm)
        toolflow_times, direct_times = [], []
        for _ in range(rounds):
            toolflow_times.append(await _round(calls, through_toolflow))
            direct_times.append(await _round(calls, direct))
    med_t, med_d = statistics.median(toolflow_times), statistics.median(direct_times)
    print(f"python {platform.python_version()}, {platform.machine()}; {rounds} rounds x {calls} calls")
    print(f"{'':28} {'median':>10} {'best':>10}")
    print(f"{'through toolflow':28} {med_t * 1e6:>8.0f}us {min(toolflow_times) * 1e6:>8.0f}us")
    print(f"{'mcp Client.call_tool':28} {med_d * 1e6:>8.0f}us {min(direct_times) * 1e6:>8.0f}us")
    print(f"ratio (medians): {med_t / med_d:.2f}x   (target: at most 1.25x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    options = parser.parse_args()
    trio.run(main, options.rounds, options.calls)
