"""Benchmark Redis clients under trio for the state backend (issue 19): which client library to use.

The contenders, against a real ``redis-server`` this script starts on 127.0.0.1 (no persistence):

- ``redis-py, threads``: redis-py's synchronous client (one ``ConnectionPool``) called through
  ``trio.to_thread.run_sync``, with a ``CapacityLimiter`` as large as the concurrency;
- ``coredis, native``: coredis's async client, built on anyio, which runs under trio itself.

(redis-py's asyncio client does not run under trio; through ``trio-asyncio`` it would, at the
cost of an asyncio loop inside trio's and a bridge on every call: not measured, see
docs/design.md "State backends".)

Each measures three operations: ``GET`` of a present key, ``SET`` with an expiry (``PX``), and
``EVAL`` of a lease script of the kind the ``concurrency`` leases need (count a sorted set's live
members, add one if there is room, return the count). Each runs one at a time (``--calls`` in a
row: the latency of one call) and 50 at once (50 tasks, ``--calls`` operations in all: the cost
per operation under load). The contenders run interleaved in ``--rounds`` rounds (the first one a
warm-up); the result is the median over rounds of the microseconds per operation. Run it from the
repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_redis.py
    .venv/bin/python tests/bench/bench_redis.py --rounds 15 --calls 1000
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import coredis
import redis
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _redis import RedisServer

CONCURRENCY = 50
LEASE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local held = redis.call('ZCARD', KEYS[1])
if held < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[1], 60000)
  return held + 1
end
return -held
"""
"""A lease's acquire: drop expired holders (score = expiry), add one if fewer than the limit hold it."""

Op = Callable[[int], Awaitable[Any]]


def redis_py_ops(client: redis.Redis, limiter: trio.CapacityLimiter) -> dict[str, Op]:
    def run(fn: Callable[[], Any]) -> Awaitable[Any]:
        return trio.to_thread.run_sync(fn, limiter=limiter)

    def lease(i: int) -> Any:
        now = int(time.time() * 1000)
        return client.eval(LEASE, 1, "bench:lease", now, now + 60000, 10**9, f"holder{i}")

    return {
        "GET": lambda i: run(lambda: client.get("bench:key")),
        "SET": lambda i: run(lambda: client.set(f"bench:set:{i % 100}", "value", px=60000)),
        "EVAL": lambda i: run(lambda: lease(i)),
    }


def coredis_ops(client: coredis.Redis[bytes]) -> dict[str, Op]:
    async def get(i: int) -> Any:
        return await client.get("bench:key")

    async def set_(i: int) -> Any:
        return await client.set(f"bench:set:{i % 100}", "value", px=60000)

    async def lease(i: int) -> Any:
        now = int(time.time() * 1000)
        return await client.eval(LEASE, ["bench:lease"], [now, now + 60000, 10**9, f"holder{i}"])

    return {"GET": get, "SET": set_, "EVAL": lease}


async def one_at_a_time(op: Op, calls: int) -> float:
    start = time.perf_counter()
    for i in range(calls):
        await op(i)
    return (time.perf_counter() - start) / calls * 1e6


async def concurrently(op: Op, calls: int) -> float:
    per_task = calls // CONCURRENCY

    async def worker(base: int) -> None:
        for i in range(per_task):
            await op(base + i)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for task in range(CONCURRENCY):
            nursery.start_soon(worker, task * per_task)
    return (time.perf_counter() - start) / (per_task * CONCURRENCY) * 1e6


async def bench(url: str, rounds: int, calls: int) -> dict[tuple[str, str, str], list[float]]:
    limiter = trio.CapacityLimiter(CONCURRENCY)
    sync = redis.Redis(connection_pool=redis.ConnectionPool.from_url(url, max_connections=CONCURRENCY))
    sync.set("bench:key", "x" * 200)
    results: dict[tuple[str, str, str], list[float]] = {}
    async with coredis.Redis.from_url(url) as native:
        contenders = {"redis-py, threads": redis_py_ops(sync, limiter), "coredis, native": coredis_ops(native)}
        for round_ in range(rounds):
            for mode, measure in (("one at a time", one_at_a_time), (f"{CONCURRENCY} at once", concurrently)):
                for name, ops in contenders.items():
                    for op_name, op in ops.items():
                        with trio.fail_after(600):
                            micros = await measure(op, calls)
                        if round_:  # the first round warms up pools, threads and the script cache
                            results.setdefault((mode, op_name, name), []).append(micros)
    sync.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    executable = shutil.which("redis-server")
    if executable is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    version = subprocess.run([executable, "--version"], capture_output=True, text=True, check=False).stdout.split()
    print(f"python {platform.python_version()}, trio {trio.__version__}, redis-py {redis.__version__},", end=" ")
    print(f"coredis {coredis.__version__}, {' '.join(version[:3])}, {os.cpu_count()} cores,", end=" ")
    print(f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as directory:
        server = RedisServer(executable, Path(directory))
        server.start()
        try:
            results = trio.run(bench, server.url, args.rounds, args.calls)
        finally:
            server.stop()
    print(f"median of {args.rounds - 1} rounds, microseconds per operation ({args.calls} operations a round)")
    for (mode, op_name, name), values in results.items():
        print(f"{mode:14} {op_name:5} {name:18} {statistics.median(values):9.1f}   best {min(values):9.1f}")
    for mode in ("one at a time", f"{CONCURRENCY} at once"):
        for op_name in ("GET", "SET", "EVAL"):
            ratios = [
                t / c
                for t, c in zip(
                    results[(mode, op_name, "redis-py, threads")],
                    results[(mode, op_name, "coredis, native")],
                    strict=True,
                )
            ]
            print(f"{mode:14} {op_name:5} redis-py/coredis  {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
