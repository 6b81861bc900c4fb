"""Benchmark a fleet of ``toolflow serve`` replicas (issue 19): Redis-backed state, and throughput.

Two parts, each against real ``toolflow serve --transport http`` processes on 127.0.0.1 and a
real ``redis-server`` this script starts (no persistence), called with httpx over MCP 2025-11-25
(one session per client, its JSON-RPC requests posted as an MCP client posts them):

- **latency** (the issue's target: a ``tools/call`` with Redis-backed conversation state at most
  1.5x the same call with in-memory state, one replica, HTTP on loopback, interleaved rounds in
  one run). Two servers, ``--state memory`` and ``--state redis://...`` (both with the fleet's
  secret), each serving four tools. A 2025-11-25 session is the SDK's, in the server's memory,
  with ``--state memory``, and a fleet session with Redis: each request's session is checked in
  Redis, and each call loads its conversation's document from Redis and stores it back with a
  compare-and-set (2026-07-28 handles: ``tests/bench/bench_conversation.py``):

  - ``plain``: no cache, no limit: the conversation state alone;
  - ``cached``: ``cache: {scope: persistent}``, called with the same arguments: a hit. With
    memory state the persistent store is the project's SQLite file; with Redis, one ``GET``;
  - ``limited``: ``concurrency: 4`` and ``rate_limit`` (never reached): with memory state, the
    engine's own slot and an in-process counter; with Redis, a lease taken and given back (two
    Lua scripts) and the rate counter's script, three round trips to Redis per call;
  - ``session``: ``cache: {scope: session}``, the same arguments: a hit in the conversation's
    session cache, the server's memory or Redis.

  ``--rounds`` rounds, each calling every (server, tool) ``--calls`` times one after the other,
  in a rotating order; each call timed on its own; the median per (server, tool) and the ratio
  of the medians, Redis to memory.
- **throughput**: 1, 2 and 3 replicas sharing the Redis, under the same closed-loop load:
  ``--clients`` clients, each with a session on replica ``i % replicas`` (a balancer that keeps a
  client on one replica), calling ``--tool`` (``plain`` by default) in a loop for ``--seconds``;
  calls per second over all clients. (``limited`` measures its fleet-wide ``concurrency: 4``
  instead: the replicas share 4 leases.) The client runs in this process, on the same machine: on 2 cores, the replicas,
  Redis and the client share them (see docs/performance.md).

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_fleet.py
    .venv/bin/python tests/bench/bench_fleet.py --rounds 20 --calls 50 --clients 12 --seconds 10
    .venv/bin/python tests/bench/bench_fleet.py --skip-latency --state memory  # the throughput without Redis
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import trio
from _bench_state import interleaved, redis_executable, start_redis, versions, write_project

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _mcp_project import HTTPServer
from _mcp_wire import HTTP_HEADERS, INITIALIZE, INITIALIZED, PROTOCOL, answers

TOOLS = ("plain", "cached", "limited", "session")
CACHED = ("cached", "session")  # called with the same arguments every time: a hit

SECRET = "the bench fleet's shared secret"
"""``TOOLFLOW_STATE_SECRET`` of every server: what a fleet sets (without one, serve warns at start)."""


class Session:
    """One MCP 2025-11-25 session on one server, over one HTTP connection."""

    def __init__(self, client: httpx.AsyncClient, url: str) -> None:
        self._client = client
        self._url = url
        self._headers: dict[str, str] = {}
        self._next_id = 1

    async def open(self) -> Session:
        response = await self._client.post(self._url, json=INITIALIZE, headers=HTTP_HEADERS)
        response.raise_for_status()
        self._headers = {
            **HTTP_HEADERS,
            "Mcp-Session-Id": response.headers["mcp-session-id"],
            "MCP-Protocol-Version": PROTOCOL,
        }
        (await self._client.post(self._url, json=INITIALIZED, headers=self._headers)).raise_for_status()
        return self

    async def call(self, tool: str, arguments: dict[str, Any]) -> None:
        self._next_id += 1
        request = {
            "jsonrpc": "2.0",
            "id": self._next_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = await self._client.post(self._url, json=request, headers=self._headers)
        (answer,) = answers(response)
        if "error" in answer or answer["result"].get("isError"):
            msg = f"{tool} failed: {answer}"
            raise RuntimeError(msg)


async def latency(urls: dict[str, str], rounds: int, calls: int, warmup: int) -> dict[tuple[str, str], list[float]]:
    """Interleaved rounds of every (state, tool); each call's round trip in seconds."""
    async with httpx.AsyncClient(timeout=30) as client:
        sessions = {state: await Session(client, url).open() for state, url in urls.items()}
        return await interleaved(sessions, TOOLS, rounds=rounds, calls=calls, warmup=warmup, same=CACHED)


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time the processes *pids* have used so far (Linux's /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / os.sysconf("SC_CLK_TCK")


def p90(values: list[float]) -> float:
    """The 90th percentile of *values* (seconds), in microseconds."""
    return statistics.quantiles(values, n=10)[-1] * 1e6


async def throughput(urls: list[str], tool: str, clients: int, seconds: float) -> tuple[float, float]:
    """Calls per second of *clients* closed-loop clients, client *i* on ``urls[i % len(urls)]``.

    And the share of one core the clients (this process) used meanwhile.
    """
    done = 0

    async def client_loop(url: str, deadline: float) -> None:
        nonlocal done
        async with httpx.AsyncClient(timeout=30) as client:
            session = await Session(client, url).open()
            n = 0
            while trio.current_time() < deadline:
                await session.call(tool, {"a": n, "b": 1})
                n += 1
            done += n

    started, cpu = time.perf_counter(), time.process_time()
    deadline = trio.current_time() + seconds
    with trio.fail_after(seconds + 120):
        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(client_loop, urls[index % len(urls)], deadline)
    elapsed = time.perf_counter() - started
    return done / elapsed, (time.process_time() - cpu) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="interleaved latency rounds (default 20)")
    parser.add_argument("--calls", type=int, default=50, help="calls per (state, tool) per round (default 50)")
    parser.add_argument("--warmup", type=int, default=50, help="calls per (state, tool) before timing (default 50)")
    parser.add_argument("--clients", type=int, default=12, help="closed-loop clients (default 12)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per replica count (default 10)")
    parser.add_argument(
        "--tool", choices=TOOLS, default="plain", help="the tool of the throughput part (default plain)"
    )
    parser.add_argument(
        "--state",
        choices=("redis", "memory"),
        default="redis",
        help="the replicas' state in the throughput part (default redis; memory: each replica its own)",
    )
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    executable = redis_executable()
    print(versions(executable))
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stack:
        root = write_project(Path(directory) / "project", "bench_fleet_plugin", *TOOLS[1:])
        redis_server = start_redis(executable, Path(directory) / "redis", stack)
        if not args.skip_latency:
            servers = {
                state: HTTPServer(root, "--state", url, env={"TOOLFLOW_STATE_SECRET": SECRET})
                for state, url in (("memory", "memory"), ("redis", redis_server.url))
            }
            for server in servers.values():
                stack.callback(server.close)
            results = trio.run(
                latency, {s: server.url for s, server in servers.items()}, args.rounds, args.calls, args.warmup
            )
            print(
                f"\nlatency: {args.rounds} rounds x {args.calls} calls per (state, tool), one replica, HTTP on loopback\n"
            )
            print("| tool | memory, median | redis, median | redis / memory | memory p90 | redis p90 |")
            print("|---|---:|---:|---:|---:|---:|")
            for tool in TOOLS:
                memory, redis = results[("memory", tool)], results[("redis", tool)]
                m, r = statistics.median(memory) * 1e6, statistics.median(redis) * 1e6
                print(
                    f"| `{tool}` | {m:,.0f} us | {r:,.0f} us | {r / m:.2f}x | {p90(memory):,.0f} us | {p90(redis):,.0f} us |"
                )
            for server in servers.values():
                server.close()
        if not args.skip_throughput:
            print(
                f"\nthroughput: {args.clients} closed-loop clients calling `{args.tool}` for {args.seconds:g} s,"
                f" --state {args.state}\n"
            )
            print(
                "| replicas | calls/s | the replicas' CPU (cores) | the client's CPU (cores) | replicas' CPU per call |"
            )
            print("|---:|---:|---:|---:|---:|")
            for count in (1, 2, 3):
                state = redis_server.url if args.state == "redis" else "memory"
                replicas = [
                    HTTPServer(root, "--state", state, env={"TOOLFLOW_STATE_SECRET": SECRET}) for _ in range(count)
                ]
                pids = [server.process.pid for server in replicas]
                try:
                    before, started = cpu_seconds(pids), time.perf_counter()
                    rate, cpu = trio.run(throughput, [s.url for s in replicas], args.tool, args.clients, args.seconds)
                    used, elapsed = cpu_seconds(pids) - before, time.perf_counter() - started
                finally:
                    for server in replicas:
                        server.close()
                per_call = used / (rate * elapsed) * 1e3
                print(f"| {count} | {rate:,.0f} | {used / elapsed:.2f} | {cpu:.2f} | {per_call:.1f} ms |", flush=True)


if __name__ == "__main__":
    main()
