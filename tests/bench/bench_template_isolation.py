"""Benchmark template isolation (issue 14, section 2): stalls, memory per payload, and the cost of a worker.

1. Stall: the latency of another caller's trivial calls while a hostile template renders, against
   the same calls while a plain CPU-bound Python thread runs in the process (what a rendering in
   a worker thread would cost at best) and on an idle process. Each condition runs ``--calls``
   sequential calls of two tools, ``hello`` (a plain-text template: the event loop alone) and
   ``echo`` (``{{ x }}``: a round trip to a template worker); conditions take turns, round after
   round (``--rounds``), and the table reports the median over all calls and the median of the
   rounds' medians. Targets: hostile at most 2x thread, and under 100 ms at the median.
2. Memory: each payload of ``tests/adversarial/test_template_payloads.py``'s ``MEMORY_BOMBS``
   rendered by the worker of a fresh process; the worker reports its peak resident set
   (``VmHWM``) after the job, and the table shows it beside the same worker's peak after a
   trivial job. Target: at most the budget plus 64 MiB.
3. Cost: the round trip of an empty job (``run_in_template_worker(len, ())``) and of rendering
   ``{{ x }}`` through ``toolflow.render_template``, median of ``2 * --calls`` calls.

Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_template_isolation.py
    .venv/bin/python tests/bench/bench_template_isolation.py --rounds 3 --calls 100 --skip-memory
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import trio
import yaml

import toolflow
from toolflow._templates import DEFAULT_TEMPLATE_BUDGET, render

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = {
    "hostile": {
        "description": "Renders lipsum(n): seconds of CPU in one expression",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "template": "{{ lipsum(n) | length }}",
        "timeout": "1h",
        "retry": {"attempts": 1},
    },
    "hello": {"description": "Plain text", "template": "hello"},
    "echo": {
        "description": "Echoes x",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        "template": "{{ x }}",
    },
}


def _registry(directory: Path) -> toolflow.Registry:
    spec = directory / "tools.yaml"
    spec.write_text(yaml.safe_dump({"toolflow": 1, "tools": SPEC}), encoding="utf-8")
    return toolflow.load_registry([spec], plugins=toolflow.load_plugins(entry_points=False))


def _spin(stop: threading.Event) -> None:
    """A plain CPU-bound Python thread."""
    while not stop.is_set():
        sum(range(1000))


async def _latencies(engine: toolflow.Engine, calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"hello": [], "echo": []}
    for _ in range(calls):
        for name, arguments in (("hello", {}), ("echo", {"x": "hi"})):
            started = time.perf_counter()
            result = await engine.call(name, arguments)
            times[name].append(time.perf_counter() - started)
            assert result.success, result.error
    return times


async def _condition(engine: toolflow.Engine, condition: str, calls: int) -> dict[str, list[float]]:
    if condition == "idle":
        return await _latencies(engine, calls)
    if condition == "thread":
        stop = threading.Event()
        thread = threading.Thread(target=_spin, args=(stop,), daemon=True)
        thread.start()
        try:
            return await _latencies(engine, calls)
        finally:
            stop.set()
            thread.join()
    async with trio.open_nursery() as nursery:

        async def hostile() -> None:
            while True:
                await engine.call("hostile", {"n": 200_000})

        nursery.start_soon(hostile)
        await trio.sleep(0.2)  # the rendering is under way
        times = await _latencies(engine, calls)
        nursery.cancel_scope.cancel()
    return times


async def stall(rounds: int, calls: int) -> dict[str, dict[str, dict[str, float]]]:
    """Latency per condition and tool, in ms: the median of all calls, the median of the rounds' medians, p90."""
    conditions = ("idle", "thread", "hostile")
    samples: dict[str, dict[str, list[float]]] = {c: {"hello": [], "echo": []} for c in conditions}
    medians: dict[str, dict[str, list[float]]] = {c: {"hello": [], "echo": []} for c in conditions}
    with tempfile.TemporaryDirectory() as directory:
        registry = _registry(Path(directory))
        async with toolflow.open_engine(registry) as engine:
            await _latencies(engine, 5)  # start the workers
            for _ in range(rounds):
                for condition in conditions:
                    times = await _condition(engine, condition, calls)
                    for name, values in times.items():
                        samples[condition][name] += values
                        medians[condition][name].append(statistics.median(values))
    return {
        condition: {
            name: {
                "median_ms": statistics.median(samples[condition][name]) * 1000,
                "median_of_rounds_ms": statistics.median(medians[condition][name]) * 1000,
                "p90_ms": statistics.quantiles(samples[condition][name], n=10)[-1] * 1000,
            }
            for name in ("hello", "echo")
        }
        for condition in conditions
    }


def peak_of(source: str, variables: dict[str, Any]) -> dict[str, Any]:
    """A job for a template worker: render, then report the outcome and the worker's peak resident set."""
    template = toolflow.compile_template(source)
    assert isinstance(template, toolflow.CompiledTemplate)
    try:
        outcome = f"rendered {len(render(template, variables)):,} characters"
    except toolflow.TemplateError as exc:
        outcome = str(exc)
    except MemoryError:
        outcome = "MemoryError"
    status = Path("/proc/self/status").read_text(encoding="ascii")
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {"outcome": outcome, "VmHWM_kB": int(fields["VmHWM"].split()[0])}


async def _measure_in_a_fresh_process(index: int) -> dict[str, Any]:
    """Run in a child process: payload *index* in this process's (new) template worker."""
    from test_template_payloads import MEMORY_BOMBS

    source, variables = MEMORY_BOMBS[index]
    baseline = await toolflow.run_in_template_worker(peak_of, "{{ 1 }}", {})
    with trio.fail_after(600):
        measured = await toolflow.run_in_template_worker(peak_of, source, variables)
    return {"source": source, "baseline": baseline, "measured": measured}


def memory() -> list[dict[str, Any]]:
    """Each memory bomb in the worker of a fresh process."""
    sys.path[:0] = [str(ROOT / "tests" / "adversarial"), str(ROOT / "tests")]
    from test_template_payloads import MEMORY_BOMBS

    rows = []
    for index in range(len(MEMORY_BOMBS)):
        command = [sys.executable, __file__, "--payload", str(index)]
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, timeout=900)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


async def cost(calls: int) -> dict[str, float]:
    """Median round trip, in microseconds, of an empty job and of rendering ``{{ x }}``."""
    template = toolflow.compile_template("{{ x }}")
    assert isinstance(template, toolflow.CompiledTemplate)
    await toolflow.render_template(template, {"x": "warm"})
    empty, rendering = [], []
    for _ in range(calls):
        started = time.perf_counter()
        await toolflow.run_in_template_worker(len, ())
        empty.append(time.perf_counter() - started)
        started = time.perf_counter()
        await toolflow.render_template(template, {"x": "hi"})
        rendering.append(time.perf_counter() - started)
    return {"empty_job_us": statistics.median(empty) * 1e6, "render_us": statistics.median(rendering) * 1e6}


def _speed(rounds: int, calls: int) -> None:
    print("\n## Cost of a template worker (median)")
    for name, value in trio.run(cost, calls * 2).items():
        print(f"{name}: {value:,.0f} us")
    print(f"\n## Stall: {rounds} interleaved rounds of {calls} calls per tool (ms)")
    results = trio.run(stall, rounds, calls)
    print("| condition | tool | median | median of rounds | p90 |")
    print("|---|---|---:|---:|---:|")
    for condition, tools in results.items():
        for name, row in tools.items():
            cells = f"{row['median_ms']:.2f} | {row['median_of_rounds_ms']:.2f} | {row['p90_ms']:.2f}"
            print(f"| {condition} | {name} | {cells} |")
    for name in ("hello", "echo"):
        ratio = results["hostile"][name]["median_ms"] / results["thread"][name]["median_ms"]
        print(f"hostile / thread ({name}): {ratio:.2f}x")


def _memory() -> None:
    print(f"\n## Memory: each payload in a fresh process (budget {DEFAULT_TEMPLATE_BUDGET // 2**20} MiB)")
    print("| payload | outcome | worker peak RSS (MiB) | over its peak after a trivial job (MiB) |")
    print("|---|---|---:|---:|")
    for row in memory():
        peak, base = row["measured"]["VmHWM_kB"], row["baseline"]["VmHWM_kB"]
        source = row["source"].replace("|", "\\|")
        outcome = row["measured"]["outcome"][:40]
        print(f"| `{source[:60]}` | {outcome} | {peak / 1024:.1f} | {(peak - base) / 1024:.1f} |")


def main() -> None:
    """Run the measurements and print them (or, with ``--payload``, measure one payload and print JSON)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--only-memory", action="store_true")
    parser.add_argument("--payload", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.payload is not None:
        sys.path[:0] = [str(ROOT / "tests" / "adversarial"), str(ROOT / "tests")]
        print(json.dumps(trio.run(_measure_in_a_fresh_process, args.payload)))
        return
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, {platform.system()}"
    )
    print(f"# load average before: {os.getloadavg()}")
    if not args.only_memory:
        _speed(args.rounds, args.calls)
    if not args.skip_memory:
        _memory()


if __name__ == "__main__":
    main()
