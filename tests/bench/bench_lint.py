"""Benchmark ``toolflow lint`` against check-jsonschema and a bare PyYAML + jsonschema baseline.

Generates a corpus of realistic spec files (default: 100 files of 20 tools) and
times, interleaved in one run so that they share the machine's noise:

- ``check-jsonschema --schemafile toolflow/data/spec-v1.schema.json FILES`` (a subprocess);
- a bare single-process baseline: ``yaml.load(text, Loader=yaml.CSafeLoader)`` and a
  precompiled ``jsonschema.Draft7Validator`` of the spec schema, file by file (in-process);
- ``toolflow._lint._engine.lint_paths`` with every rule on, without and with ``--target openai``
  (in-process, warm);
- ``toolflow lint DIR`` and ``toolflow lint --target openai DIR`` (subprocesses, so that they pay
  interpreter start-up like check-jsonschema does).

It also times ``toolflow --help`` start-up and checks which heavy modules ``toolflow lint``
imports. It prints a markdown report; ``docs/performance.md`` records one. Run it from the
repository root::

    .venv/bin/python tests/bench/bench_lint.py               # the full benchmark
    .venv/bin/python tests/bench/bench_lint.py --profile lint.prof   # also profile lint_paths

check-jsonschema comes with the ``bench`` extra (``.venv/bin/pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import collections
import compileall
import cProfile
import functools
import gc
import inspect
import io
import json
import os
import platform
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import yaml

from toolflow._lint._config import LintConfig, RuleSet
from toolflow._lint._engine import LintReport, lint_paths
from toolflow._lint._rule import LintContext
from toolflow._lint.rules import builtin_rules
from toolflow._loader import load_specs

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = ROOT / "toolflow" / "data" / "spec-v1.schema.json"
PLUGIN_PACKAGES = tuple(sorted(init.parent for init in ROOT.glob("plugins/*/toolflow_*/__init__.py")))
"""The first-party plugins' packages, which the checkout's ``.venv`` installs (editable) and lint loads."""
BIN = Path(sys.executable).parent
HEAVY_MODULES = ("trio", "pluggy", "jsonschema", "jinja2", "toolflow.default_plugins")

# --- the corpus -------------------------------------------------------------------------------

DOMAINS = {
    "memory": ["recall", "store", "forget", "summarise", "tag", "link"],
    "location": ["inspect", "search", "describe", "map", "list_exits", "measure"],
    "object": ["search", "pick_up", "drop", "examine", "use", "give"],
    "message": ["say", "whisper", "page", "broadcast", "reply", "announce"],
    "file": ["read", "write", "append", "list", "stat", "diff"],
    "experiment": ["launch", "cancel", "inspect", "list", "compare", "archive"],
    "attribute": ["get", "set", "clear", "list", "watch", "audit"],
    "story": ["log_event", "recap", "branch", "checkpoint", "rewind", "outline"],
}
NOUNS = ["room", "item", "player", "channel", "note", "run", "job", "record", "path", "topic", "owner", "label"]
ADJECTIVES = ["current", "nearby", "selected", "recent", "shared", "private", "archived", "pending", "visible"]
VERBS = ["Return", "List", "Fetch", "Update", "Record", "Send", "Check", "Compute", "Inspect", "Create"]
PARAMETERS: list[tuple[str, dict[str, Any]]] = [
    ("query", {"type": "string", "minLength": 1, "maxLength": 200}),
    ("limit", {"type": "integer", "minimum": 1, "maximum": 50, "default": 10}),
    ("offset", {"type": "integer", "minimum": 0, "default": 0}),
    ("mode", {"type": "string", "enum": ["exact", "fuzzy", "prefix"], "default": "fuzzy"}),
    ("target", {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}),
    ("message", {"type": "string", "minLength": 1, "maxLength": 2000}),
    ("importance", {"type": "string", "enum": ["low", "medium", "high"], "default": "medium"}),
    ("dry_run", {"type": "boolean", "default": False}),
    ("tags", {"type": "array", "items": {"type": "string", "maxLength": 32}, "maxItems": 8}),
    ("threshold", {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5}),
    ("path", {"type": "string", "pattern": "^[\\w./-]+$", "maxLength": 4096}),
    ("channel", {"type": "string", "enum": ["say", "whisper", "page", "pose"]}),
    ("count", {"type": "integer", "minimum": 1, "maximum": 100}),
    ("recursive", {"type": "boolean", "default": False}),
    ("owner", {"type": "string", "minLength": 3, "maxLength": 64}),
    ("options", {"type": "object", "properties": {"verbose": {"type": "boolean"}, "format": {"type": "string"}}}),
]
EXAMPLE_VALUES: dict[str, Any] = {
    "query": "brass lamp",
    "limit": 5,
    "offset": 20,
    "mode": "exact",
    "target": "north_door",
    "message": "The lift is on its way up.",
    "importance": "high",
    "dry_run": True,
    "tags": ["quest", "clue"],
    "threshold": 0.75,
    "path": "notes/today.md",
    "channel": "whisper",
    "count": 3,
    "recursive": True,
    "owner": "alice",
    "options": {"verbose": True},
}


YAML11_WORDS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})
"""Words that YAML 1.1 (CSafeLoader, the baseline) reads as booleans or null: quoted, as careful authors do."""


def _plain(text: str) -> bool:
    if not text or not text[0].isalnum() or not all(c.isalnum() or c in " ,.'()_-" for c in text):
        return False
    try:
        float(text)
    except ValueError:
        return True
    return False


def _scalar(value: Any) -> str:
    if isinstance(value, str) and _plain(value) and value not in YAML11_WORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_scalar(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value)


def _is_flat(value: Any) -> bool:
    if isinstance(value, dict):
        return len(value) <= 5 and all(not isinstance(v, dict | list) for v in value.values())
    if isinstance(value, list):
        return all(not isinstance(v, dict | list) for v in value)
    return True


def emit(value: Any, indent: int = 0) -> Iterator[str]:
    """Yield YAML lines for *value* in the mixed block/flow style people write by hand."""
    pad = " " * indent
    if isinstance(value, dict):
        for raw, item in value.items():
            key = _scalar(raw)
            if isinstance(item, str) and "\n" in item:
                yield f"{pad}{key}: |"
                yield from (f"{pad}  {line}" if line else "" for line in item.rstrip("\n").split("\n"))
            elif isinstance(item, dict | list) and item and not _is_flat(item):
                yield f"{pad}{key}:"
                yield from emit(item, indent + 2)
            else:
                yield f"{pad}{key}: {_flow(item)}"
    elif isinstance(value, list):
        for item in value:
            lines = list(emit(item, indent + 2)) if isinstance(item, dict) else [f"{pad}  {_flow(item)}"]
            yield f"{pad}- {lines[0].lstrip()}"
            yield from lines[1:]


def _sentence(rng: random.Random, words: int) -> str:
    pool = [*NOUNS, *ADJECTIVES, "the", "a", "of", "for", "with", "from", "in"]
    return " ".join(rng.choice(pool) for _ in range(words))


@attrs.frozen(kw_only=True)
class Shape:
    """How rich the generated tools are."""

    parameters: tuple[int, int]
    """Fewest and most parameters of a tool."""
    keywords: int
    """Most constraint keywords (enum, default, minimum, ...) of a parameter besides type and description."""
    description_words: tuple[int, int]
    explicit: float
    """Share of tools that spell out category and timeout even when the defaults would do."""
    retry: float
    cache: float
    rules: float
    depends_on: float
    examples: float
    full_example: float


SHAPES = {
    # About the size of the corpus the reference numbers come from: CSafeLoader needs
    # 3-4 ms and jsonschema 5-6 ms a file on the reference machine.
    "typical": Shape(
        parameters=(3, 8),
        keywords=1,
        description_words=(2, 6),
        explicit=0.3,
        retry=0.2,
        cache=0.2,
        rules=0.2,
        depends_on=0.15,
        examples=0.2,
        full_example=0.0,
    ),
    # Every parameter fully constrained, most tools with examples: about three times the bytes.
    "rich": Shape(
        parameters=(3, 8),
        keywords=4,
        description_words=(4, 10),
        explicit=1.0,
        retry=0.5,
        cache=0.4,
        rules=0.4,
        depends_on=0.3,
        examples=0.4,
        full_example=0.3,
    ),
}
MARKER = ".bench-corpus"
"""Marks a corpus directory as the benchmark's own, so that a later run may replace it."""

STRUCTURE = ("items", "properties")
"""Keywords a parameter keeps in every shape."""


def make_tool(rng: random.Random, shape: Shape, verb: str, domain: str, earlier: Sequence[str]) -> dict[str, Any]:
    """Return one realistic, lint-clean tool body."""
    properties: dict[str, Any] = {}
    for pname, schema in rng.sample(PARAMETERS, rng.randint(*shape.parameters)):
        prop = {"type": schema["type"], "description": f"The {rng.choice(ADJECTIVES)} {pname.replace('_', ' ')}"}
        extra = [k for k in schema if k not in ("type", *STRUCTURE)]
        keep = set(rng.sample(extra, min(len(extra), rng.randint(0, shape.keywords))))
        prop.update({k: v for k, v in schema.items() if k in STRUCTURE or k in keep})
        properties[pname] = prop
    names = list(properties)
    required = [n for n in names if "default" not in properties[n]][: rng.randint(1, 2)] or names[:1]
    category = rng.choices(["safe_chain", "terminal", "dangerous", "async_required"], [6, 2, 1, 1])[0]
    words = rng.randint(*shape.description_words)
    tool: dict[str, Any] = {
        "description": f"{rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {domain} {verb.replace('_', ' ')} "
        f"{_sentence(rng, words)}",
    }
    explicit = rng.random() < shape.explicit
    if explicit or category != "safe_chain":
        tool["category"] = category
    if explicit or rng.random() < 0.3:
        tool["timeout"] = rng.choice(["500ms", "2s", "5s", "30s", "2m", 10, 45])
    if category == "dangerous":
        tool["idempotent"] = rng.random() < 0.5
        if not tool["idempotent"]:
            tool["retry"] = False
    elif rng.random() < shape.retry:
        tool["retry"] = rng.choice(
            [{"attempts": 3, "initial": "250ms"}, {"attempts": 5, "max": "30s", "on": ["timeout", "rate_limit"]}]
        )
    if category in ("safe_chain", "terminal") and rng.random() < shape.cache:
        tool["cache"] = rng.choice([{"scope": "tick"}, {"scope": "session", "ttl": "5m"}, {"scope": "persistent"}])
    tool["parameters"] = {"type": "object", "properties": properties, "required": required}
    if explicit:
        tool["parameters"]["additionalProperties"] = False
    # A default would be filled in before the rules are checked (TF223), so rules use parameters without one.
    optional = [n for n in names if n not in required and "default" not in properties[n]]
    rules: list[dict[str, Any]] = []
    if len(optional) >= 2 and rng.random() < shape.rules:
        rules.append({"exclusive": optional[:2]})
    if len(optional) >= 4 and rng.random() < shape.rules:
        rules.append({"when": optional[2], "require": optional[3:4]})
    if rules:
        tool["parameter_rules"] = rules
    if earlier and rng.random() < shape.depends_on:
        tool["depends_on"] = rng.choice([[rng.choice(earlier)], [{"tool": rng.choice(earlier), "scope": "session"}]])
    if rng.random() < shape.examples:
        args = {n: EXAMPLE_VALUES[n] for n in required}
        tool["examples"] = [{"args": args, "description": "The smallest call"}]
        if rng.random() < shape.full_example:
            full = {n: EXAMPLE_VALUES[n] for n in names if not (rules and n == optional[1])}
            tool["examples"].append({"args": full, "result": {"ok": True}})
    # No `implementation:` kind: it names a binding that only a plugin provides (TF401 without one).
    kind = rng.choices(["template", "command"], [6, 4])[0]
    shown = required[0]
    if kind == "template":
        tool["template"] = (
            f"{verb.replace('_', ' ').capitalize()} {{{{ {shown} }}}}\n"
            f"{{% if {names[-1]} is defined %}}with {names[-1]} = {{{{ {names[-1]} }}}}{{% endif %}}\n"
        )
        if rng.random() < 0.3:
            tool["template"] = {"source": f"{{{{ {{'{shown}': {shown}}} | tojson }}}}", "output": "json"}
    else:
        argv = ["${TOOLFLOW_BIN:-toolflow-helper}", domain, verb, f"--{shown}={{{{ {shown} }}}}"]
        tool["command"] = argv if rng.random() < 0.6 else {"argv": argv, "cwd": "/srv/agent", "max_output": 32768}
    return tool


def write_corpus(root: Path, files: int, tools: int, shape: Shape, seed: int = 2) -> list[Path]:
    """Write *files* spec files of *tools* tools each under *root*; return their paths."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("written by tests/bench/bench_lint.py; replaced on every run\n", encoding="utf-8")
    paths: list[Path] = []
    earlier: list[str] = []
    for index in range(files):
        domain = rng.choice(list(DOMAINS))
        body: dict[str, Any] = {}
        for number in range(tools):
            verb = rng.choice(DOMAINS[domain])
            body[f"{domain}_{verb}_{index:03d}_{number:02d}"] = make_tool(
                rng, shape, verb, domain, [*earlier[-20:], *body]
            )
        earlier.extend(body)
        document: dict[str, Any] = {"toolflow": 1}
        if rng.random() < 0.5:
            document["defaults"] = {"timeout": "20s", "retry": {"attempts": 3}}
        document["tools"] = body
        header = [
            "# yaml-language-server: $schema=https://toolflow.dev/schema/spec-v1.schema.json",
            f"# {domain} tools, generated by tests/bench/bench_lint.py",
        ]
        path = root / f"{index:03d}_{domain}.yaml"
        path.write_text("\n".join([*header, *emit(document)]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


# --- what is timed --------------------------------------------------------------------------------


@attrs.frozen
class Sample:
    """One timed run: wall-clock and CPU seconds."""

    wall: float
    cpu: float


def forget_content_caches() -> int:
    """Clear every ``functools`` cache of a toolflow function that takes arguments; return how many.

    A fresh ``toolflow lint`` process starts with empty caches. In-process runs keep the
    process-wide singletons warm (compiled spec schema, rule table, Jinja environment: functions
    without arguments), as the baseline keeps its precompiled validator, but forget what earlier
    runs learnt about the corpus (parsed templates, compiled regexes, ...), so that every run
    analyses it from scratch.
    """
    cleared = 0
    for name, module in list(sys.modules.items()):
        if name != "toolflow" and not name.startswith("toolflow."):
            continue
        for value in list(vars(module).values()):
            wrapped = getattr(value, "__wrapped__", None)
            if wrapped is None or not hasattr(value, "cache_clear"):
                continue
            try:
                takes_arguments = bool(inspect.signature(wrapped).parameters)
            except (TypeError, ValueError):
                takes_arguments = True
            if takes_arguments:
                value.cache_clear()
                cleared += 1
    return cleared


def timed_call(function: Callable[[], object], *, gc_paused: bool = False) -> Sample:
    """Run *function* in-process with content caches forgotten; return its wall and CPU time.

    With *gc_paused*, the cyclic garbage collector is off while *function* runs (a prototype
    of pausing it for the whole lint run rather than for loading only).
    """
    forget_content_caches()
    gc.collect()
    if gc_paused:
        gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        return Sample(time.perf_counter() - wall, time.process_time() - cpu)
    finally:
        gc.enable()


def timed_subprocess(argv: Sequence[str], cwd: Path, ok: Sequence[int] = (0,)) -> Sample:
    """Run *argv*; return its wall time and the CPU time of the child (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        msg = f"{argv[0]} exited {done.returncode}:\n{done.stdout.decode()[-2000:]}{done.stderr.decode()[-2000:]}"
        raise RuntimeError(msg)
    return Sample(wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def baseline(paths: Sequence[Path], validator: jsonschema.Draft7Validator) -> int:
    """The bare baseline: CSafeLoader plus a precompiled jsonschema validator; return the error count."""
    errors = 0
    for path in paths:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        errors += sum(1 for _ in validator.iter_errors(data))
    return errors


def toolflow_command() -> list[str]:
    """The ``toolflow`` console script beside this interpreter, or ``python -m toolflow``."""
    script = BIN / "toolflow"
    return [str(script)] if script.exists() else [sys.executable, "-m", "toolflow"]


@attrs.frozen
class Case:
    """A named measurement; *kind* is ``baseline``, ``check-jsonschema``, ``in-process`` or ``subprocess``."""

    name: str
    run: Callable[[], Sample]
    kind: str


def measure(cases: Sequence[Case], repeat: int) -> dict[str, list[Sample]]:
    """Run every case once to warm up, then *repeat* rounds, rotating the order each round."""
    for case in cases:
        case.run()
    samples: dict[str, list[Sample]] = {case.name: [] for case in cases}
    for round_ in range(repeat):
        shift = round_ % len(cases)
        for case in [*cases[shift:], *cases[:shift]]:
            samples[case.name].append(case.run())
        print(f"  round {round_ + 1}/{repeat} done", file=sys.stderr, flush=True)
    return samples


def startup(argv: Sequence[str], runs: int, ok: Sequence[int] = (0,)) -> list[float]:
    """Wall-clock seconds of *runs* runs of *argv* (after one untimed run)."""
    timed_subprocess(argv, ROOT, ok)
    return [timed_subprocess(argv, ROOT, ok).wall for _ in range(runs)]


BASELINE_SCRIPT = """
import json, sys, yaml, jsonschema
with open(sys.argv[1], encoding="utf-8") as stream:
    validator = jsonschema.Draft7Validator(json.load(stream))
errors = 0
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as stream:
        errors += sum(1 for _ in validator.iter_errors(yaml.load(stream.read(), Loader=yaml.CSafeLoader)))
sys.exit(1 if errors else 0)
"""
"""The baseline as a program of its own, to set against ``toolflow lint`` with start-up on both sides."""

GC_OFF_CLI = "import gc, sys; gc.disable(); from toolflow._cli import main; sys.argv[0] = 'toolflow'; main()"
"""A prototype: the ``toolflow`` console script with the cyclic garbage collector off for the whole process."""

IMPORT_PROBE = """
import io, json, sys
from toolflow._cli import run
code = run(sys.argv[1:], stdout=io.StringIO(), stderr=io.StringIO())
heavy = {heavy!r}
print(json.dumps({{"exit": code, "loaded": [m for m in heavy if m in sys.modules]}}))
"""


def imported_by(argv: Sequence[str]) -> dict[str, Any]:
    """Run the CLI with *argv* in a fresh interpreter; return its exit code and the heavy modules it loaded."""
    probe = IMPORT_PROBE.format(heavy=HEAVY_MODULES)
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, check=True, text=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def summarize(report: LintReport) -> str:
    """``N diagnostics (TF301 x3, ...)``."""
    counts = collections.Counter(d.code for d in report.diagnostics)
    detail = ", ".join(f"{code} x{n}" for code, n in sorted(counts.items()))
    return f"{len(report.diagnostics)} diagnostics" + (f" ({detail})" if detail else "")


def breakdown(corpus: Path, config: LintConfig, repeat: int) -> list[tuple[str, float, int]]:
    """CPU seconds (median of *repeat* runs) of loading and of each enabled rule, as the engine runs them.

    The garbage collector is paused, so that its passes do not land on whichever rule happens
    to allocate at the time; its cost shows as the difference of the two in-process runs. Facts that several rules share (compiled validators, template analyses) are charged
    to the first rule that asks for them. Returns ``(what, seconds, diagnostics)`` rows.
    """
    enabled = RuleSet(builtin_rules()).enabled(config)
    runs: dict[str, list[float]] = collections.defaultdict(list)
    counts: dict[str, int] = {}
    for _ in range(repeat):
        forget_content_caches()
        gc.collect()
        gc.disable()  # collections would land on whichever rule allocates at the time
        start = time.process_time()
        loaded = load_specs([corpus])
        runs["load_specs"].append(time.process_time() - start)
        counts["load_specs"] = len(loaded.diagnostics)
        context = LintContext(files=loaded.files, targets=config.target)
        for rule in enabled:
            if rule.check is not None:
                start = time.process_time()
                counts[rule.code] = sum(1 for _ in rule.check(context))
                runs[rule.code].append(time.process_time() - start)
        gc.enable()
    return [(what, statistics.median(times), counts[what]) for what, times in runs.items()]


def gc_passes(corpus: Path, config: LintConfig) -> dict[int, tuple[int, float]]:
    """Collections during one ``lint_paths`` run: generation to ``(count, wall seconds)``."""
    forget_content_caches()
    gc.collect()
    found: dict[int, tuple[int, float]] = {}
    started: list[float] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            count, seconds = found.get(info["generation"], (0, 0.0))
            found[info["generation"]] = (count + 1, seconds + time.perf_counter() - started.pop())

    gc.callbacks.append(watch)
    try:
        lint_paths([corpus], config)
    finally:
        gc.callbacks.remove(watch)
    return found


def profile(corpus: Path, config: LintConfig, out: str, top: int) -> str:
    """Profile one ``lint_paths`` run; save the stats to *out*; return the top functions."""
    lint_paths([corpus], config)
    forget_content_caches()
    profiler = cProfile.Profile()
    profiler.runcall(lint_paths, [corpus], config)
    profiler.dump_stats(out)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


# --- the report -------------------------------------------------------------------------------------


@attrs.define
class Results:
    """Everything one benchmark run found."""

    args: argparse.Namespace
    compiled: bool
    """Whether toolflow's modules (and its plugins') were compiled to bytecode before the runs."""
    files: int
    lines: int
    size: int
    cases: list[Case]
    samples: dict[str, list[Sample]] = attrs.field(factory=dict)
    checks: dict[str, object] = attrs.field(factory=dict)
    help_runs: list[float] = attrs.field(factory=list)
    bare_runs: list[float] = attrs.field(factory=list)
    one_file_runs: list[float] = attrs.field(factory=list)
    imports: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    breakdowns: dict[str, list[tuple[str, float, int]]] = attrs.field(factory=dict)
    gc: dict[str, dict[int, tuple[int, float]]] = attrs.field(factory=dict)
    profile: str = ""


def main(argv: Sequence[str] | None = None) -> int:
    """Generate the corpus, run every measurement, print the markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=100, help="spec files in the corpus (default 100)")
    parser.add_argument("--tools", type=int, default=20, help="tools per file (default 20)")
    parser.add_argument("--shape", choices=SHAPES, default="typical", help="how rich the tools are (default typical)")
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--startup-runs", type=int, default=20, help="runs of 'toolflow --help' (default 20)")
    parser.add_argument("--corpus", type=Path, help="write the corpus here and keep it (default: a temp dir)")
    parser.add_argument("--profile", metavar="OUT", help="also profile one in-process lint run; save pstats to OUT")
    parser.add_argument(
        "--prototypes", action="store_true", help="also time proposed changes that are not in toolflow yet"
    )
    parser.add_argument("--skip-check-jsonschema", action="store_true", help="leave check-jsonschema out")
    args = parser.parse_args(argv)

    # As `pip install` does for an installed package (check-jsonschema's are), so that no `toolflow lint` run
    # compiles toolflow's sources again when PYTHONDONTWRITEBYTECODE is set (an editable install then writes none).
    compiled = all(compileall.compile_dir(folder, quiet=1) for folder in (ROOT / "toolflow", *PLUGIN_PACKAGES))
    with tempfile.TemporaryDirectory(prefix="toolflow-bench-") as scratch:
        corpus = (args.corpus or Path(scratch) / "specs").resolve()
        if corpus.exists():
            if not (corpus / MARKER).exists():
                parser.error(f"{corpus} exists and was not written by this benchmark; not replacing it")
            shutil.rmtree(corpus)
        paths = write_corpus(corpus, args.files, args.tools, SHAPES[args.shape])
        cwd = Path(scratch)  # no pyproject.toml above it: the subprocesses use the default configuration
        default, openai = LintConfig(), LintConfig(target=("openai",))
        validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
        lint = [*toolflow_command(), "lint", "--isolated"]
        # fmt: off
        cases = [
            Case("baseline: CSafeLoader + jsonschema.Draft7Validator", lambda: timed_call(lambda: baseline(paths, validator)), "baseline"),
            Case("baseline as a program: `python -c ...` FILES", functools.partial(timed_subprocess, [sys.executable, "-c", BASELINE_SCRIPT, str(SCHEMA), *map(str, paths)], cwd), "baseline-subprocess"),
        ]
        variants = [("", False)] + ([("prototype, GC off: ", True)] if args.prototypes else [])
        for prefix, gc_off in variants:
            for label, config, extra in (("", default, []), (" --target openai", openai, ["--target", "openai"])):
                argv = [sys.executable, "-c", GC_OFF_CLI, "lint", "--isolated"] if gc_off else lint
                cases += [
                    Case(f"{prefix}`lint_paths`{', target openai' if label else ''}", functools.partial(timed_call, functools.partial(lint_paths, [corpus], config), gc_paused=gc_off), "in-process"),
                    Case(f"{prefix}`toolflow lint{label} DIR`", functools.partial(timed_subprocess, [*argv, *extra, str(corpus)], cwd, (0, 1)), "subprocess"),
                ]
        check_jsonschema = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
        if check_jsonschema and not args.skip_check_jsonschema:
            command = [check_jsonschema, "--schemafile", str(SCHEMA), *map(str, paths)]
            cases.append(Case("`check-jsonschema --schemafile spec-v1.schema.json FILES`", functools.partial(timed_subprocess, command, cwd), "check-jsonschema"))
        elif not args.skip_check_jsonschema:
            print("check-jsonschema not found: pip install -e '.[bench]'", file=sys.stderr)
        # fmt: on
        results = Results(
            args=args,
            compiled=compiled,
            files=len(paths),
            lines=sum(p.read_text(encoding="utf-8").count("\n") for p in paths),
            size=sum(p.stat().st_size for p in paths),
            cases=cases,
        )
        results.checks = {
            "baseline errors": baseline(paths, validator),
            "toolflow lint": summarize(lint_paths([corpus], default)),
            "toolflow lint --target openai": summarize(lint_paths([corpus], openai)),
        }
        print(f"corpus: {results.files} files, {results.lines} lines; measuring", file=sys.stderr)
        results.samples = measure(cases, args.repeat)
        results.help_runs = startup([*toolflow_command(), "--help"], args.startup_runs)
        results.bare_runs = startup([sys.executable, "-c", "pass"], args.startup_runs)
        results.one_file_runs = startup([*lint, str(paths[0])], args.startup_runs, (0, 1))
        results.imports = {
            "toolflow lint": imported_by(["lint", "--isolated", str(corpus)]),
            "toolflow --help": imported_by(["--help"]),
        }
        if "--no-plugins" in subprocess.run([*toolflow_command(), "lint", "--help"], capture_output=True, text=True, check=False).stdout:  # fmt: skip
            results.imports["toolflow lint --no-plugins"] = imported_by(
                ["lint", "--isolated", "--no-plugins", str(corpus)]
            )
        results.breakdowns = {
            "toolflow lint": breakdown(corpus, default, args.repeat),
            "toolflow lint --target openai": breakdown(corpus, openai, args.repeat),
        }
        results.gc = {
            "toolflow lint": gc_passes(corpus, default),
            "toolflow lint --target openai": gc_passes(corpus, openai),
        }
        if args.profile:
            results.profile = profile(corpus, default, args.profile, 30)
    print(render(results))
    return 0


def render(results: Results) -> str:
    """The markdown report."""
    args, files, samples = results.args, results.files, results.samples
    wall = {name: statistics.median(s.wall for s in runs) for name, runs in samples.items()}
    cpu = {name: statistics.median(s.cpu for s in runs) for name, runs in samples.items()}
    when = (
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}; {len(os.sched_getaffinity(0))} CPUs (nproc), "
        f"{platform.machine()} Linux {platform.release()}; load average at the end: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    what = (
        f"- Python {platform.python_version()}; {len(builtin_rules())} built-in rules "
        f"({sum(1 for r in builtin_rules() if r.check is not None)} with a check); "
        f"PyYAML {yaml.__version__} (libyaml: {yaml.__with_libyaml__}), jsonschema {_version('jsonschema')}, "
        f"jsonschema-rs {_version('jsonschema_rs')}, check-jsonschema {_version('check_jsonschema')}"
    )
    what += (
        "; toolflow's modules and its plugins' compiled to bytecode first (as `pip install` does)"
        if results.compiled
        else "; compiling toolflow's modules to bytecode FAILED: the subprocesses may compile them on every run"
    )
    corpus = (
        f"- corpus (`--shape {args.shape}`): {files} files x {args.tools} tools = {files * args.tools} tools, "
        f"{results.lines:,} lines, {results.size / 1024:.0f} KiB; {args.repeat} interleaved rounds after a warm-up round"
    )
    out = [
        when,
        what,
        corpus,
        *(f"- {name}: {value}" for name, value in results.checks.items()),
        "",
        "| measurement | median wall s | ms / file | min / max wall s | median CPU s | CPU ms / file |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    base = next(case.name for case in results.cases if case.kind == "baseline")
    base_program = next(case.name for case in results.cases if case.kind == "baseline-subprocess")
    cjs = next((case.name for case in results.cases if case.kind == "check-jsonschema"), None)
    for case in results.cases:
        runs = samples[case.name]
        where = " (in-process)" if case.kind in ("baseline", "in-process") else " (subprocess)"
        where = "" if case.kind == "baseline-subprocess" else where
        out.append(
            f"| {case.name}{where} | {wall[case.name]:.3f} | {wall[case.name] / files * 1000:.1f} "
            f"| {min(s.wall for s in runs):.3f} / {max(s.wall for s in runs):.3f} "
            f"| {cpu[case.name]:.3f} | {cpu[case.name] / files * 1000:.1f} |"
        )
    out += [
        "",
        "Targets: (b) in-process toolflow faster than the in-process baseline; (a) toolflow as a subprocess at",
        "least 6x faster than check-jsonschema, a subprocess too. Subprocess rows are set against the baseline",
        "run as a program, so that both sides pay interpreter start-up.",
        "",
        "| toolflow | baseline / toolflow (wall, CPU) | check-jsonschema / toolflow (wall, CPU) | target met |",
        "|---|--:|--:|---|",
    ]
    for case in results.cases:
        if case.kind not in ("in-process", "subprocess"):
            continue
        against = base if case.kind == "in-process" else base_program
        versus_base = f"{wall[against] / wall[case.name]:.2f}x, {cpu[against] / cpu[case.name]:.2f}x"
        versus_cjs = f"{wall[cjs] / wall[case.name]:.2f}x, {cpu[cjs] / cpu[case.name]:.2f}x" if cjs else "-"
        if case.kind == "in-process":
            met = "(b) yes" if wall[base] >= wall[case.name] else "(b) **no**"
        else:
            met = "-" if cjs is None else ("(a) yes" if wall[cjs] >= 6 * wall[case.name] else "(a) **no**")
        out.append(f"| {case.name} | {versus_base} | {versus_cjs} | {met} |")
    help_ms, bare_ms = statistics.median(results.help_runs) * 1000, statistics.median(results.bare_runs) * 1000
    out += [
        "",
        (
            f"- `toolflow --help`: median {help_ms:.0f} ms over {len(results.help_runs)} runs "
            f"(min {min(results.help_runs) * 1000:.0f}, max {max(results.help_runs) * 1000:.0f}); target < 150 ms: "
            f"{'met' if help_ms < 150 else '**not met**'}. Bare `python -c pass`: median {bare_ms:.0f} ms."
        ),
        (
            f"- `toolflow lint` of one spec file of {args.tools} tools: median "
            f"{statistics.median(results.one_file_runs) * 1000:.0f} ms over {len(results.one_file_runs)} runs "
            "(start-up, imports and first-use compilation, paid once per run)"
        ),
    ]
    for label, found in results.imports.items():
        loaded = ", ".join(found["loaded"]) or "none of them"
        out.append(f"- `{label}` (exit {found['exit']}) imports, of {', '.join(HEAVY_MODULES)}: {loaded}")
    for label, passes in results.gc.items():
        detail = ", ".join(
            f"generation {gen}: {count} passes, {seconds * 1000:.0f} ms"
            for gen, (count, seconds) in sorted(passes.items())
        )
        total = sum(seconds for _, seconds in passes.values())
        out.append(f"- garbage collection during one `{label}` run (in-process): {total * 1000:.0f} ms ({detail})")
    for label, rows in results.breakdowns.items():
        total = sum(seconds for _, seconds, _ in rows)
        out += ["", f"Where `{label}` spends its CPU time (median of {args.repeat} runs, ms / file):", ""]
        out += ["| step | ms / file | share | diagnostics |", "|---|--:|--:|--:|"]
        ranked = sorted(rows, key=lambda row: -row[1])
        shown = [row for row in ranked if row[1] / total >= 0.02]
        for what, seconds, count in shown:
            out.append(f"| {what} | {seconds / files * 1000:.2f} | {seconds / total:.0%} | {count} |")
        rest = ranked[len(shown) :]
        if rest:
            seconds = sum(row[1] for row in rest)
            out.append(f"| {len(rest)} other rules | {seconds / files * 1000:.2f} | {seconds / total:.0%} | {sum(r[2] for r in rest)} |")  # fmt: skip
        out.append(f"| total | {total / files * 1000:.2f} | | |")
    if results.profile:
        out += [
            "",
            "Profile of one in-process `lint_paths` (default configuration):",
            "",
            "```",
            results.profile,
            "```",
        ]
    return "\n".join(out)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
