"""Benchmark serve's conversation state (issue 19): a 2026-07-28 ``tools/call`` that echoes its handle.

Real ``toolflow serve --transport http`` processes on 127.0.0.1 and a real ``redis-server`` this
script starts (no persistence), called by the ``mcp`` SDK's client speaking 2026-07-28 (every
request a POST of its own, no protocol session). Three servers:

- ``stateless``: ``--stateless``: an engine per request and no conversation, which is what a
  2026-07-28 request got before conversations were kept (the baseline of the engine per request);
- ``memory``: the default state in the server's memory; the client echoes the last handle, so
  each request opens an engine for its conversation's segment: a ``load`` and a compare-and-set
  ``store`` of the conversation's document, each in a worker thread;
- ``redis``: ``--state redis://...`` with the fleet's secret: the same, with the document (and
  the session cache) in Redis: two more round trips per call.

Two tools, both ``bench.add``: ``plain`` (no cache) and ``session`` (``cache: {scope: session}``,
called with the same arguments: a hit after the first, from the server's memory or from Redis).
``--rounds`` interleaved rounds, each calling every (server, tool) ``--calls`` times in a
rotating order; each call timed on its own; the medians and their ratios. The issue's target: a
call with Redis-backed conversation state at most 1.5x the same call with in-memory state.

Then, in this process, what serve does per request without the transport: open an engine, tick,
call ``plain``, close it; without a conversation, with one in a ``MemoryState``, with one in the
Redis (interleaved rounds, each timed on its own): the cost of the engine per request.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_conversation.py
    .venv/bin/python tests/bench/bench_conversation.py --rounds 20 --calls 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import httpx2
import trio
from _bench_state import interleaved, redis_executable, start_redis, versions, write_project
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _mcp_project import HTTPServer

import toolflow
from toolflow._serve_conversation import CONVERSATION_META
from toolflow._state import MemoryState, StateBackend
from toolflow._state_redis import RedisState

TOOLS = ("plain", "session")
SERVERS = ("stateless", "memory", "redis")
SECRET = "bench-secret-0123456789abcdef"
PLUGIN_MODULE = "bench_conversation_plugin"


class Chain:
    """A 2026-07-28 client of one server that echoes the last handle it got (``stateless`` gets none)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._meta: Any = None

    async def call(self, tool: str, arguments: dict[str, Any]) -> None:
        result = await self._client.call_tool(tool, arguments, meta=self._meta)
        if result.is_error:
            msg = f"{tool} failed: {result}"
            raise RuntimeError(msg)
        handle = (result.meta or {}).get(CONVERSATION_META)
        self._meta = None if handle is None else {CONVERSATION_META: handle}


async def latency(urls: dict[str, str], rounds: int, calls: int, warmup: int) -> dict[tuple[str, str], list[float]]:
    """Interleaved rounds of every (server, tool); each call's round trip in seconds."""
    async with AsyncExitStack() as stack:
        chains = {}
        for server, url in urls.items():
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
            client = await stack.enter_async_context(
                Client(streamable_http_client(url, http_client=http), mode="2026-07-28")
            )
            chains[server] = Chain(client)
        return await interleaved(chains, TOOLS, rounds=rounds, calls=calls, warmup=warmup, same=("session",))


async def engines(root: Path, redis_url: str, rounds: int, calls: int) -> dict[str, list[float]]:
    """Open an engine, tick, call ``plain`` and close it, per kind of conversation; each in seconds."""
    plugins = toolflow.load_plugins(entry_points=False)
    sys.path.insert(0, str(root))
    plugins.register(__import__(PLUGIN_MODULE), "bench")
    registry = toolflow.load_registry([root / "specs"], plugins=plugins)
    memory, redis = MemoryState(), RedisState(redis_url)
    kinds: dict[str, tuple[StateBackend, str | None]] = {
        "none": (memory, None),
        "memory": (memory, "c-memory"),
        "redis": (redis, "c-redis"),
    }
    results: dict[str, list[float]] = {kind: [] for kind in kinds}
    try:
        for index in range(rounds + 1):  # the first round warms up
            order = list(kinds)[index % 3 :] + list(kinds)[: index % 3]
            for kind in order:
                state, conversation = kinds[kind]
                for n in range(calls):
                    started = time.perf_counter()
                    async with toolflow.open_engine(
                        registry, plugins=plugins, state=state, conversation=conversation
                    ) as e:
                        e.tick()
                        await e.call("plain", {"a": n, "b": 1})
                    if index:
                        results[kind].append(time.perf_counter() - started)
    finally:
        redis.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    parser.add_argument("--calls", type=int, default=50, help="calls per (server, tool) per round (default 50)")
    parser.add_argument("--warmup", type=int, default=50, help="calls per (server, tool) before timing (default 50)")
    args = parser.parse_args()
    executable = redis_executable()
    print(versions(executable))
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        root = write_project(Path(directory) / "project", PLUGIN_MODULE, "session", cache_timeout="5s")
        redis_server = start_redis(executable, Path(directory) / "redis", stack)
        options = {"stateless": ("--stateless",), "memory": (), "redis": ("--state", redis_server.url)}
        servers = {name: HTTPServer(root, *options[name], env={"TOOLFLOW_STATE_SECRET": SECRET}) for name in SERVERS}
        for server in servers.values():
            stack.callback(server.close)
        results = trio.run(latency, {n: s.url for n, s in servers.items()}, args.rounds, args.calls, args.warmup)
        for server in servers.values():
            server.close()
        per_engine = trio.run(engines, root, redis_server.url, args.rounds, args.calls)
    print(f"\n{args.rounds} rounds x {args.calls} calls per (server, tool), 2026-07-28, one replica each, loopback\n")
    print("| tool | stateless | memory | redis | memory / stateless | redis / memory |")
    print("|---|---:|---:|---:|---:|---:|")
    for tool in TOOLS:
        s, m, r = (statistics.median(results[(name, tool)]) * 1e6 for name in SERVERS)
        print(f"| `{tool}` | {s:,.0f} us | {m:,.0f} us | {r:,.0f} us | {m / s:.2f}x | {r / m:.2f}x |")
    print(f"\nin process: open an engine, tick, call `plain`, close; {args.rounds} rounds x {args.calls}\n")
    print("| conversation | median | p90 | against none |")
    print("|---|---:|---:|---:|")
    base = statistics.median(per_engine["none"])
    for kind, times in per_engine.items():
        median, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
        print(f"| {kind} | {median * 1e6:,.0f} us | {p90 * 1e6:,.0f} us | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
