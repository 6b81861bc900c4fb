"""Benchmark pipelines (issue 16, "Performance"): the cost of a step, and how much of the ideal concurrency they reach.

1. A step next to a call: a pipeline of 50 steps in a chain (each ``needs`` the one before) of
   a trivial async tool, per step, against ``await engine.call(...)`` of the same tool, 50
   times, in the same engine. Two pipelines: ``with:`` values without templates (no worker
   job), and values that read the step before (``"{{ steps.s3.n }}"``, one job per step), the
   latter against a call plus the same job run alone (``run_in_template_worker`` of the step's
   evaluation). They take turns in short rounds in one ``trio.run``; the table reports the
   median and the best round. Target: a step at most 2x a call plus its rendering.
2. Concurrency: a pipeline of three independent steps of a 100 ms tool, against the ideal
   100 ms; a ``for_each`` over 1,000 items of a 50 ms tool with ``concurrency: 100`` (engine
   ``max_concurrency`` 100), against the ideal 10 waves x 50 ms = 500 ms. Median of the runs.
   Targets: at most 1.1x and 1.3x the ideal.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_pipeline.py
    .venv/bin/python tests/bench/bench_pipeline.py --rounds 30 --repeats 7
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import toolflow
from toolflow._executor import Engine, open_engine
from toolflow._rendering import run_in_template_worker
from toolflow._template_values import compile_value, evaluate_step

CHAIN = 50


def _spec() -> str:
    plain_lines, templated_lines = [], []
    for i in range(CHAIN):
        needs = f", needs: [s{i - 1}]" if i else ""
        plain_lines.append(f"        s{i}: {{tool: add, with: {{a: {i}, b: 1}}{needs}}}")
        a = '"{{ steps.s%d }}"' % (i - 1) if i else "1"  # noqa: UP031 - braces of the template
        templated_lines.append(f"        s{i}: {{tool: add, with: {{a: {a}, b: 1}}}}")
    plain, templated = "\n".join(plain_lines), "\n".join(templated_lines)
    return f"""\
toolflow: 1
tools:
  add:
    description: Add two integers.
    parameters:
      type: object
      properties:
        a: {{type: integer, description: The first}}
        b: {{type: integer, description: The second}}
      required: [a, b]
    timeout: 5s
    implementation: bench.add
  nap:
    description: Sleep.
    parameters:
      type: object
      properties:
        seconds: {{type: number, description: How long}}
        item: {{type: integer, description: Which item}}
      required: [seconds]
    timeout: 5s
    implementation: bench.nap
  plain_chain:
    description: {CHAIN} steps in a chain, no templates.
    timeout: 60s
    pipeline:
      steps:
{plain}
  templated_chain:
    description: {CHAIN} steps in a chain, each reading the one before.
    timeout: 60s
    pipeline:
      steps:
{templated}
  three:
    description: Three independent 100 ms steps.
    pipeline:
      steps:
        a: {{tool: nap, with: {{seconds: 0.1}}}}
        b: {{tool: nap, with: {{seconds: 0.1}}}}
        c: {{tool: nap, with: {{seconds: 0.1}}}}
  thousand:
    description: 1,000 items of a 50 ms tool, 100 at a time.
    timeout: 60s
    parameters:
      type: object
      properties:
        items: {{type: array, description: The items}}
    pipeline:
      steps:
        each:
          for_each: "{{{{ items }}}}"
          concurrency: 100
          tool: nap
          with: {{seconds: 0.05, item: "{{{{ item }}}}"}}
"""


class Bench:
    """The implementations."""

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def add(a: int, b: int) -> int:
            return a + b

        async def nap(seconds: float, item: int = 0) -> int:
            await trio.sleep(seconds)
            return item

        register("bench.add", add)
        register("bench.nap", nap)


def _registry(directory: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    path = directory / "tools.yaml"
    path.write_text(_spec(), encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Bench(), "bench")
    return toolflow.load_registry([path], plugins=plugins), plugins


async def _per_step(engine: Engine, rounds: int) -> dict[str, list[float]]:
    """Microseconds per step (or call) of each contender, one entry per round."""
    step = compile_value({"a": "{{ steps.s0 }}", "b": 1})
    assert not isinstance(step, tuple)

    async def calls() -> None:
        for i in range(CHAIN):
            await engine.call("add", {"a": i, "b": 1})

    async def plain() -> None:
        result = await engine.call("plain_chain", {})
        assert result.success, result.error

    async def templated() -> None:
        result = await engine.call("templated_chain", {})
        assert result.success, result.error

    async def calls_and_jobs() -> None:
        for i in range(CHAIN):
            await run_in_template_worker(evaluate_step, None, None, step, "item", {"steps": {"s0": i}})
            await engine.call("add", {"a": i, "b": 1})

    contenders: dict[str, Callable[[], Awaitable[None]]] = {
        "engine.call x50": calls,
        "pipeline, plain": plain,
        "job + call x50": calls_and_jobs,
        "pipeline, templated": templated,
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():  # warm up: workers started, plans made
        await run()
    for _ in range(rounds):
        for name, run in contenders.items():
            started = time.perf_counter()
            await run()
            times[name].append((time.perf_counter() - started) / CHAIN * 1e6)
    return times


async def _concurrency(engine: Engine, repeats: int) -> dict[str, list[float]]:
    """Wall milliseconds of the two concurrency pipelines, one entry per run."""
    out: dict[str, list[float]] = {
        "three 100 ms steps": [],
        "1,000 x 50 ms, 100 at a time": [],
        "  bare nursery, the same sleeps": [],
    }
    items = list(range(1000))
    await engine.call("thousand", {"items": items[:10]})  # warm up the template workers
    for _ in range(repeats):
        started = time.perf_counter()
        await _bare_sleeps(1000, 100, 0.05)
        out["  bare nursery, the same sleeps"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        result = await engine.call("three", {})
        out["three 100 ms steps"].append((time.perf_counter() - started) * 1000)
        assert result.success, result.error
        started = time.perf_counter()
        result = await engine.call("thousand", {"items": items})
        out["1,000 x 50 ms, 100 at a time"].append((time.perf_counter() - started) * 1000)
        assert result.success, result.error
        assert result.data == {"each": items}
    return out


async def _bare_sleeps(count: int, concurrency: int, seconds: float) -> None:
    """The floor of the for_each: *count* sleeps, *concurrency* at a time, in a bare nursery."""
    limit = trio.CapacityLimiter(concurrency)

    async def one() -> None:
        async with limit:
            await trio.sleep(seconds)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=20, help="rounds of the per-step comparison")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each concurrency pipeline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        registry, plugins = _registry(Path(directory))

        async def run() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
            async with open_engine(registry, plugins=plugins, max_concurrency=100) as engine:
                return await _per_step(engine, args.rounds), await _concurrency(engine, args.repeats)

        per_step, concurrency = trio.run(run)
    print(f"python {platform.python_version()}, trio {trio.__version__}, {args.rounds} rounds, {args.repeats} runs")
    print(f"{'per step (us)':<32}{'median':>10}{'best':>10}")
    for name, values in per_step.items():
        print(f"{name:<32}{statistics.median(values):>10.1f}{min(values):>10.1f}")
    plain = statistics.median(per_step["pipeline, plain"]) / statistics.median(per_step["engine.call x50"])
    templated = statistics.median(per_step["pipeline, templated"]) / statistics.median(per_step["job + call x50"])
    print(f"step / call (no templates): {plain:.2f}x  (target at most 2x)")
    print(f"step / (call + its job): {templated:.2f}x  (target at most 2x)")
    print(f"{'concurrency (ms)':<32}{'median':>10}{'best':>10}{'ideal':>10}{'ratio':>10}")
    for (name, values), ideal in zip(concurrency.items(), (100.0, 500.0, 500.0), strict=True):
        median = statistics.median(values)
        print(f"{name:<32}{median:>10.1f}{min(values):>10.1f}{ideal:>10.0f}{median / ideal:>9.2f}x")
    print("targets: three steps at most 1.1x, the for_each at most 1.3x")


if __name__ == "__main__":
    main()
