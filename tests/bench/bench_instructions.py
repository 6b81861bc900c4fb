"""Count the CPU instructions of one agent-loop turn (or one engine call), for A/B comparisons that noise cannot blur.

Wall time on a shared machine moves by 10-50% from one run to the next; callgrind's instruction
count is the same on every run of the same code, whatever else the machine does. This script
runs one contender of ``bench_loop.py`` under ``valgrind --tool=callgrind`` twice, once with
one timed session and once with four (after the same warm-up), and prints the difference per
tool call: the set-up, the imports and the warm-up cancel out.

Instructions are not time (a cache miss costs more than an add), so use this to compare two
versions of the code, and ``bench_loop.py`` for the numbers themselves. The garbage collector's
share moves with where its collections happen to fall; ``--no-gc`` leaves it out, to compare
code paths alone. Needs valgrind (Debian: ``apt install valgrind``). From the repository root::

    .venv/bin/python tests/bench/bench_instructions.py                    # openai loop turn
    .venv/bin/python tests/bench/bench_instructions.py hand call --no-gc  # other contenders
    PYTHONPATH=/tmp/old .venv/bin/python tests/bench/bench_instructions.py  # another checkout

A run takes about 40 seconds per contender.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import trio
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_loop

import toolflow
from toolflow._executor import open_engine

CONTENDERS = ("openai", "anthropic", "fallback", "text", "hand", "hand-killable", "batch", "call", "invoke", "floor")
SESSIONS = (1, 4)
_COLLECTED = re.compile(r"Collected : (\d+)")


def _run(contender: str, sessions: int, calls: int) -> None:
    """Warm up, then run *sessions* sessions of *contender* (the part valgrind counts twice)."""
    with tempfile.TemporaryDirectory() as folder:
        registry, plugins, policy = bench_loop._setup(Path(folder))
        path = str(Path(folder) / "session.yaml")
        document = bench_loop._transcript(calls)
        Path(path).write_text(yaml.safe_dump(document), encoding="utf-8")

        async def main() -> None:
            async with open_engine(registry, plugins=plugins) as engine:
                round_: bench_loop.Round
                if contender == "hand":
                    round_ = bench_loop._hand_round(bench_loop._assistant_messages(calls))
                elif contender == "hand-killable":
                    round_ = bench_loop._hand_round(bench_loop._assistant_messages(calls), killable=True)
                elif contender == "batch":
                    round_ = bench_loop._batch_round(engine)
                elif contender == "call":
                    round_ = bench_loop._call_round(engine)
                elif contender == "invoke":
                    round_ = _invoke_round(registry.get("add"))
                elif contender == "floor":
                    round_ = _floor_round
                else:
                    round_ = bench_loop._toolflow_round(engine, policy, path, document, contender)
                await round_(calls)
                await round_(calls)
                for _ in range(sessions):
                    await round_(calls)

        trio.run(main)


def _invoke_round(tool: toolflow.RegisteredTool) -> bench_loop.Round:
    """One call of ``toolflow.invoke``, the engine-less path, of the tool ``call`` runs through the engine."""

    async def run(calls: int) -> tuple[float, float]:
        for n in range(calls):
            result = await toolflow.invoke(tool, {"a": n, "b": 1}, call_id=f"call_{n}")
        if result.data != calls:
            msg = f"toolflow.invoke went wrong: {result!r}"
            raise AssertionError(msg)
        return 0.0, 0.0

    return run


async def _floor_round(calls: int) -> tuple[float, float]:
    """The floor ``Engine.call`` is measured against: a bare await of the tool under a cancel scope with a deadline."""
    total = 0
    for n in range(calls):
        with trio.CancelScope(deadline=trio.current_time() + 5):
            total = await bench_loop.add(a=n, b=1)
    if total != calls:
        msg = f"the floor went wrong: {total!r}"
        raise AssertionError(msg)
    return 0.0, 0.0


def _count(contender: str, sessions: int, calls: int, *, no_gc: bool) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--run",
        contender,
        str(sessions),
        "--calls",
        str(calls),
    ]
    if no_gc:
        command.append("--no-gc")
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
    found = _COLLECTED.search(done.stderr)
    if found is None:
        msg = f"valgrind printed no instruction count:\n{done.stderr[-2000:]}"
        raise RuntimeError(msg)
    return int(found.group(1))


def main() -> None:
    """Count and print instructions per tool call for each contender asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("contenders", nargs="*", metavar="CONTENDER", help=f"{', '.join(CONTENDERS)} (default: openai)")
    parser.add_argument("--calls", type=int, default=bench_loop.CALLS, help="tool calls per session")
    parser.add_argument("--no-gc", action="store_true", help="disable the garbage collector (code paths alone)")
    parser.add_argument("--run", nargs=2, metavar=("CONTENDER", "SESSIONS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.no_gc:
        gc.disable()
    if options.run:
        _run(options.run[0], int(options.run[1]), options.calls)
        return
    unknown = sorted(set(options.contenders) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contenders {', '.join(unknown)}; choose from {', '.join(CONTENDERS)}")
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt install valgrind)")
    print("| contender | instructions per tool call |")
    print("|---|---:|")
    for contender in options.contenders or ["openai"]:
        low, high = (_count(contender, n, options.calls, no_gc=options.no_gc) for n in SESSIONS)
        per_call = (high - low) / ((SESSIONS[1] - SESSIONS[0]) * options.calls)
        print(f"| {contender} | {per_call:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
