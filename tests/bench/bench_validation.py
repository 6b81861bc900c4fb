"""Benchmark argument validation: toolflow's ArgumentValidator against the bare engines.

Validates ``{"a": 1, "b": 2}`` for an ``add(a: integer, b: integer)`` tool, the happy path of
every call, with:

- ``ArgumentValidator.validate`` (``toolflow._validation``), the engine's per-call check;
- a bare ``jsonschema_rs`` validator's ``is_valid`` (compiled once), the floor;
- the ``jsonschema`` library's ``Draft202012Validator.is_valid`` (compiled once), the old way;

and, for the failure path, ``validate`` of ``{"a": "x"}`` (explained by ``jsonschema``) and of
``{"a": "1", "b": "2"}`` (coerced). The contenders run interleaved, in short rounds, so that
they share the machine's noise; the table reports the median and the fastest round per call.
Run it from the repository root (it is not collected by pytest)::

    .venv/bin/python tests/bench/bench_validation.py
    .venv/bin/python tests/bench/bench_validation.py --rounds 50 --calls 20000
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time
from collections.abc import Callable
from importlib import metadata

import jsonschema
import jsonschema_rs

from toolflow._model import ToolSpec
from toolflow._validation import ArgumentValidator

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first addend."},
            "b": {"type": "integer", "description": "The second addend."},
        },
        "required": ["a", "b"],
    },
)
ARGS = {"a": 1, "b": 2}


def _contenders() -> dict[str, Callable[[], object]]:
    validator = ArgumentValidator.for_spec(ADD)
    fast = jsonschema_rs.Draft202012Validator(dict(ADD.parameters))
    slow = jsonschema.Draft202012Validator(dict(ADD.parameters))
    for check in (validator.validate(ARGS).valid, fast.is_valid(ARGS), slow.is_valid(ARGS)):
        assert check, "the arguments must be valid"
    bad = {"a": "x"}
    coerced = {"a": "1", "b": "2"}
    assert not validator.validate(bad).valid
    assert validator.validate(coerced).valid
    return {
        "ArgumentValidator.validate": lambda: validator.validate(ARGS),
        "jsonschema_rs is_valid (bare)": lambda: fast.is_valid(ARGS),
        "jsonschema is_valid": lambda: slow.is_valid(ARGS),
        "validate, invalid (explained)": lambda: validator.validate(bad),
        "validate, coerced strings": lambda: validator.validate(coerced),
    }


def _time(function: Callable[[], object], calls: int) -> float:
    """Seconds per call over *calls* calls."""
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def run(rounds: int, calls: int) -> dict[str, list[float]]:
    """Time every contender for *rounds* interleaved rounds; return per-call seconds per round."""
    contenders = _contenders()
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    slow_names = {"jsonschema is_valid", "validate, invalid (explained)"}
    for function in contenders.values():  # warm up
        _time(function, 1000)
    gc.disable()
    try:
        for _ in range(rounds):
            for name, function in contenders.items():
                samples[name].append(_time(function, calls // 10 if name in slow_names else calls))
    finally:
        gc.enable()
    return samples


def report(samples: dict[str, list[float]], rounds: int, calls: int) -> str:
    """A markdown table of medians, fastest rounds, and the ratio to bare jsonschema_rs."""
    floor = statistics.median(samples["jsonschema_rs is_valid (bare)"])
    lines = [
        (
            f"Validating `{ARGS}` for `add(a: integer, b: integer)`; {rounds} interleaved rounds of "
            f"{calls:,} calls (a tenth for the slow rows), per call."
        ),
        "",
        "| what | median | fastest round | x bare jsonschema_rs |",
        "|---|---:|---:|---:|",
    ]
    for name, values in samples.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1e6:.2f} µs | {min(values) * 1e6:.2f} µs | {median / floor:.1f} |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    versions = ", ".join(f"{d} {metadata.version(d)}" for d in ("jsonschema", "jsonschema-rs"))
    lines += [
        "",
        (
            f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
            f"load average {load:.2f} at the end; {versions}."
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds (default 30)")
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round (default 20000)")
    options = parser.parse_args()
    samples = run(options.rounds, options.calls)
    print(report(samples, options.rounds, options.calls))


if __name__ == "__main__":
    main()
