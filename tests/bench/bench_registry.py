"""Time ``load_registry`` (load and build, what a user waits for) at two sizes and print the ratio.

Writes the corpus of ``bench_lint.py`` (files of 20 tools) at a small and a large size (default
1,000 and 5,000 tools), then times ``toolflow.load_registry`` of each in a fresh interpreter,
so that each run starts with the collector's generations empty, as a user's process does. The
sizes take turns, in alternating order, for ``--rounds`` rounds; the medians are compared.
Issue 15's target: the large size takes at most its size ratio plus 20% (6x for 5x the tools).

    .venv/bin/python tests/bench/bench_registry.py
    PYTHONPATH=/tmp/base .venv/bin/python tests/bench/bench_registry.py   # another source tree

With ``--phases``, each run also reports the time of loading and of building separately and the
collector's passes during each (through ``gc.callbacks``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import bench_lint

TOOLS_PER_FILE = 20

PROBE = r"""
import gc, json, sys, time
import toolflow
from toolflow._loader import load_specs
from toolflow._registry import Registry
passes = {"load": [0, 0, 0], "build": [0, 0, 0]}
phase = ["load"]
def watch(event, info):
    if event == "start":
        passes[phase[0]][info["generation"]] += 1
plugins = toolflow.load_plugins(entry_points=False)
kinds = plugins.kind_schemas()
if sys.argv[2] == "phases":
    gc.callbacks.append(watch)
    start = time.perf_counter()
    specs = load_specs([sys.argv[1]], kinds=kinds)
    loaded = time.perf_counter()
    phase[0] = "build"
    registry = Registry.build(specs, plugins)
    built = time.perf_counter()
    result = {"load": loaded - start, "build": built - loaded, "total": built - start, "passes": passes}
else:
    start = time.perf_counter()
    registry = toolflow.load_registry([sys.argv[1]], plugins=plugins)
    result = {"total": time.perf_counter() - start}
result["tools"] = len(registry)
result["module"] = toolflow.__file__
print(json.dumps(result))
"""


def run_once(corpus: Path, phases: bool) -> dict[str, object]:
    """One ``load_registry`` of *corpus* in a fresh interpreter; its timings."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(corpus), "phases" if phases else "total"],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=1000, help="tools of the small corpus (default 1,000)")
    parser.add_argument("--large", type=int, default=5000, help="tools of the large corpus (default 5,000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--phases", action="store_true", help="time loading and building apart, count gc passes")
    args = parser.parse_args(argv)
    sizes = (args.small, args.large)
    with tempfile.TemporaryDirectory() as folder:
        corpora = {}
        for size in sizes:
            corpora[size] = Path(folder) / str(size)
            bench_lint.write_corpus(corpora[size], size // TOOLS_PER_FILE, TOOLS_PER_FILE, bench_lint.SHAPES["typical"])
        samples: dict[int, list[float]] = {size: [] for size in sizes}
        for number in range(args.rounds):
            for size in sizes if number % 2 == 0 else sizes[::-1]:
                result = run_once(corpora[size], args.phases)
                total = float(result["total"])  # type: ignore[arg-type]
                samples[size].append(total)
                detail = ""
                if args.phases:
                    detail = (
                        f" (load {result['load']:.3f} s, build {result['build']:.3f} s; gc passes {result['passes']})"
                    )
                print(
                    f"round {number + 1}: {result['tools']} tools: {total:.3f} s{detail}; toolflow from {result['module']}"
                )
    small, large = (statistics.median(samples[size]) for size in sizes)
    print(
        f"median load_registry: {args.small} tools {small:.3f} s, {args.large} tools {large:.3f} s; "
        f"ratio {large / small:.2f}x for {args.large / args.small:.0f}x the tools"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
