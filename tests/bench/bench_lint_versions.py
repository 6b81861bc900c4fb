"""Compare the CPU time of ``lint_paths`` (or of the whole ``toolflow lint``) between two source trees of toolflow.

    git archive main | tar -x -C /tmp/toolflow-main
    .venv/bin/python tests/bench/bench_lint_versions.py /tmp/toolflow-main .
    .venv/bin/python tests/bench/bench_lint_versions.py /tmp/toolflow-main . --command

Each tree is imported in a fresh interpreter (``PYTHONPATH`` puts it first, and its first-party
plugins' packages, ``plugins/*``, after it, so that each tree lints with its own plugins) that lints the
benchmark corpus of ``bench_lint.py`` once to warm up and once timed, and reports its peak
resident memory; the trees take turns,
the order alternating each round, and the medians of the rounds are compared. Run it from
the root of a checkout whose ``.venv`` has toolflow's dependencies.

With ``--command`` each round is one whole ``toolflow lint --isolated CORPUS`` instead, timed
from the interpreter's start (what a CI job waits for: start-up, imports and first use). Each
tree's modules are compiled to bytecode first (``compileall``, as ``pip install`` compiles an
installed package's), so that neither pays for compiling its sources on every run when
``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import bench_lint

PROBE = r"""
import resource, sys, time
from toolflow._lint._engine import lint_paths
from toolflow._plugins import load_plugins
plugins = load_plugins(entry_points=False)
facts, kinds = plugins.lint_facts(), plugins.kind_schemas()
lint_paths([sys.argv[1]], plugins=facts, kinds=kinds)
before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
report = lint_paths([sys.argv[1]], plugins=facts, kinds=kinds)
after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - start
cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(cpu, wall, peak, len(report.diagnostics), sys.modules["toolflow"].__file__)
"""

COMMAND = r"""
import io, resource, sys
from toolflow._cli import run
code = run(["lint", "--isolated", sys.argv[1]], stdout=io.StringIO(), stderr=io.StringIO())
usage = resource.getrusage(resource.RUSAGE_SELF)  # the whole process: start-up, imports, the run
print(usage.ru_utime + usage.ru_stime, "-", usage.ru_maxrss / 1024, f"exit-status-{code}", sys.modules["toolflow"].__file__)
"""
"""``toolflow lint`` as the command runs it; the parent times its wall clock from the interpreter's start."""


def _plugin_dirs(tree: Path) -> list[Path]:
    """The directories of *tree*'s first-party plugin distributions (each holds a ``toolflow_*`` package)."""
    return sorted(init.parent.parent for init in tree.glob("plugins/*/toolflow_*/__init__.py"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, type=Path, help="two directories holding a 'toolflow' package")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--command", action="store_true", help="time whole `toolflow lint` runs, start-up included")
    args = parser.parse_args(argv)
    if args.command:
        for tree in args.trees:
            for package in (tree / "toolflow", *_plugin_dirs(tree)):
                compileall.compile_dir(package, quiet=1)
    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder)
        bench_lint.write_corpus(corpus, args.files, args.tools, bench_lint.SHAPES["typical"])
        samples: dict[Path, list[tuple[float, float, float]]] = {tree: [] for tree in args.trees}
        for number in range(args.rounds):
            order = args.trees if number % 2 == 0 else args.trees[::-1]
            for tree in order:
                env = {
                    **os.environ,
                    "PYTHONPATH": os.pathsep.join(str(d.resolve()) for d in (tree, *_plugin_dirs(tree))),
                }
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", COMMAND if args.command else PROBE, str(corpus)],
                    env=env,
                    cwd=folder,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                elapsed = time.perf_counter() - started
                cpu, wall, peak, found, module = done.stdout.split()
                wall = str(elapsed) if wall == "-" else wall
                found = found.replace("-", " ") if args.command else f"{found} diagnostics"
                if not module.startswith(str(tree.resolve())):
                    msg = f"{tree} did not provide toolflow (imported {module})"
                    raise SystemExit(msg)
                samples[tree].append((float(cpu), float(wall), float(peak)))
                print(
                    f"round {number + 1}: {tree}: {float(cpu):.3f} s CPU, {float(wall):.3f} s wall, "
                    f"peak {float(peak):.0f} MiB, {found}"
                )
    first, second = (statistics.median(cpu for cpu, _, _ in samples[tree]) for tree in args.trees)
    print(f"median CPU: {args.trees[0]} {first:.3f} s, {args.trees[1]} {second:.3f} s; ratio {second / first:.3f}")
    first, second = (statistics.median(peak for _, _, peak in samples[tree]) for tree in args.trees)
    print(f"median peak memory: {args.trees[0]} {first:.0f} MiB, {args.trees[1]} {second:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
