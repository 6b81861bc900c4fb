"""Benchmark OpenTelemetry's cost (issue 18, Performance): a traced call, and W1 without tracing.

1. ``traced``: ``await engine.call("add", {"a": 1, "b": 2})`` on an engine whose ``otel`` plugin
   writes spans to the SDK's in-memory exporter (``SimpleSpanProcessor``) and the duration
   histogram to an in-memory metric reader, against the same call on an engine without tracing
   plus one bare SDK span (``tracer.start_as_current_span``) into the same exporter. The three
   run interleaved in short rounds in one ``trio.run``; the ratio is taken per round. Target:
   traced <= 2x (untraced + bare span).
2. ``w1``: W1, ``Engine.call`` of the same tool (as in ``bench_executor.py``), in three trees and
   settings, each in its own process, taking turns: this tree with ``opentelemetry`` made
   unimportable (the extra not installed), this tree with OpenTelemetry installed but no tracer
   provider configured, and a base tree without any tracing code (``--base DIR``, main's HEAD
   unpacked there, run with ``PYTHONPATH=DIR``). Target: each at most 1.03x the base.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_otel.py traced
    git archive bf4750a | (mkdir -p /tmp/base-otel && tar -x -C /tmp/base-otel)
    .venv/bin/python tests/bench/bench_otel.py w1 --base /tmp/base-otel
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_executor

import toolflow


def _registry(folder: Path, *extra: tuple[object, str]) -> tuple[toolflow.Registry, toolflow.Plugins]:
    """``bench_executor``'s registry of the ``add`` tool, with the *extra* plugins registered."""
    registry, plugins = bench_executor._registry(folder)
    for plugin, name in extra:
        plugins.register(plugin, name)
    return registry, plugins


async def _calls(engine: toolflow.Engine, calls: int) -> float:
    arguments = {"a": 1, "b": 2}
    start = time.perf_counter()
    for _ in range(calls):
        await engine.call("add", arguments)
    return (time.perf_counter() - start) / calls


# --- 1. a traced call -------------------------------------------------------------------------


def traced(rounds: int, calls: int) -> None:
    """Print the per-call times and the ratio traced / (untraced + bare span)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolflow.default_plugins.otel import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracer = provider.get_tracer("bench")

    async def bare(calls: int) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            with tracer.start_as_current_span("execute_tool add"):
                pass
        return (time.perf_counter() - start) / calls

    async def main() -> dict[str, list[float]]:
        with tempfile.TemporaryDirectory() as tmp:
            registry, plugins = _registry(Path(tmp))
            traced_registry, traced_plugins = _registry(Path(tmp), (Telemetry(provider, meters), "otel-bench"))
            spans_registry, spans_plugins = _registry(Path(tmp), (Telemetry(provider), "otel-bench"))
        async with (
            toolflow.open_engine(registry, plugins=plugins) as plain,
            toolflow.open_engine(traced_registry, plugins=traced_plugins) as traced_engine,
            toolflow.open_engine(spans_registry, plugins=spans_plugins) as spans_engine,
        ):
            contenders: dict[str, Callable[[int], Awaitable[float]]] = {
                "untraced engine.call": lambda n: _calls(plain, n),
                "traced engine.call": lambda n: _calls(traced_engine, n),
                "traced, no meter provider": lambda n: _calls(spans_engine, n),
                "bare SDK span": bare,
            }
            for round_ in contenders.values():  # warm up
                await round_(calls)
            times: dict[str, list[float]] = {name: [] for name in contenders}
            for _ in range(rounds):
                for name, round_ in contenders.items():
                    exporter.clear()
                    gc.collect()
                    times[name].append(await round_(calls))
            assert len(exporter.get_finished_spans()) == calls
            return times

    times = trio.run(main)
    for name, values in times.items():
        print(f"{name:26} median {statistics.median(values) * 1e6:8.2f} us   best {min(values) * 1e6:8.2f} us")
    for name in ("traced engine.call", "traced, no meter provider"):
        ratios = [
            t / (u + b)
            for t, u, b in zip(times[name], times["untraced engine.call"], times["bare SDK span"], strict=True)
        ]
        spread = f"rounds {min(ratios):.2f}-{max(ratios):.2f}x"
        print(f"{name} / (untraced + bare span): median {statistics.median(ratios):.2f}x, {spread}")


# --- 2. W1 without tracing, three trees ---------------------------------------------------------


def w1_child(rounds: int, calls: int) -> None:
    """One process's W1 rounds (median per-call seconds, as JSON); run by :func:`w1`."""

    async def main() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            registry, plugins = _registry(Path(tmp))
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            await _calls(engine, calls)  # warm up
            times = []
            for _ in range(rounds):
                gc.collect()
                times.append(await _calls(engine, calls))
        return statistics.median(times)

    median = trio.run(main)
    loaded = sorted(m for m, module in sys.modules.items() if m.startswith("opentelemetry") and module is not None)
    print(json.dumps({"median": median, "toolflow": toolflow.__file__, "otel_loaded": bool(loaded)}))


def w1(base: str, repeats: int, rounds: int, calls: int) -> None:
    """Run the three settings in turn, *repeats* times; print each one's median and its ratio to the base."""
    here = str(Path(__file__).resolve())
    settings = {
        "base (no tracing code)": ({"PYTHONPATH": base}, []),
        "extra not installed": ({}, ["--block-otel"]),
        "installed, not configured": ({}, []),
    }
    results: dict[str, list[float]] = {name: [] for name in settings}
    for _ in range(repeats):
        for name, (env, flags) in settings.items():
            argv = [sys.executable, here, "w1-child", "--rounds", str(rounds), "--calls", str(calls), *flags]
            out = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, check=True)
            answer = json.loads(out.stdout)
            results[name].append(answer["median"])
            print(
                f"  {name:28} {answer['median'] * 1e6:7.2f} us  ({answer['toolflow']}, otel loaded: {answer['otel_loaded']})"
            )
    floor = statistics.median(results["base (no tracing code)"])
    for name, values in results.items():
        median = statistics.median(values)
        print(f"{name:28} median {median * 1e6:7.2f} us  {median / floor:.3f}x the base")


def main() -> None:
    """Parse the command line and run one part."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("part", choices=["traced", "w1", "w1-child"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", default="/tmp/base-otel")
    parser.add_argument("--block-otel", action="store_true", help="make opentelemetry unimportable first")
    args = parser.parse_args()
    if args.block_otel:
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]
    if args.part == "traced":
        traced(args.rounds, args.calls)
    elif args.part == "w1":
        w1(args.base, args.repeats, args.rounds, args.calls)
    else:
        w1_child(args.rounds, args.calls)


if __name__ == "__main__":
    main()
