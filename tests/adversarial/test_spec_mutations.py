"""Mutated spec files: the loader and ``toolflow lint`` answer every one with positioned diagnostics.

Thousands of mutants are derived from the shipped specs (``specs/``) by a seeded, deterministic
list of byte-level and YAML-level mutations: byte flips, control characters, brackets, tabs,
BOMs, truncations, deep nesting, long lines, invalid UTF-8, anchors and aliases, tags,
duplicate keys, odd line breaks, and two or three of them stacked. Each mutant goes through
the lint engine with the default plugins' kinds and facts (what ``toolflow lint`` runs) and is
rendered in every output format. Nothing may raise; every diagnostic has a line and a column
inside the file; the JSON, SARIF, GitLab and JUnit outputs parse and hold every diagnostic; the
text and GitHub outputs have one line per diagnostic.
"""

from __future__ import annotations

import io
import json
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _corpus import record

from toolflow._cli import run
from toolflow._diagnostics import Diagnostic, Severity
from toolflow._export import export_tools
from toolflow._lint._engine import LintReport, lint_paths
from toolflow._lint._formats import FORMATS, render
from toolflow._loader import load_specs
from toolflow._plugins import Plugins, load_plugins
from toolflow._registry import Registry, RegistryError

ROOT = Path(__file__).resolve().parents[2]
SEEDS = sorted((ROOT / "specs").rglob("*.yaml"))
MUTANTS = 2000
CLI_MUTANTS = 40
"""Mutants per output format run through the command line itself (each format is one run over a directory)."""
CHUNK = 100
"""Mutants linted together, as ``toolflow lint DIR`` would; a failing chunk is re-run file by file."""

Mutation = Callable[[random.Random, bytes], bytes]

_CONTROL = [bytes([c]) for c in (*range(0x01, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F)]
_ODD = [
    "\x85".encode(),
    "\u2028".encode(),
    "\u2029".encode(),
    "\ufeff".encode(),
    "\ufffe".encode(),
    "\uffff".encode(),
    "\u200b".encode(),
    "\U0001f600".encode(),
    b"\x00",
    b"\r",
]
_INVALID_UTF8 = [b"\xff", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]
_SYNTAX = [b"[", b"]", b"{", b"}", b"{{", b"}}", b"{%", b"%}", b":", b": ", b"- ", b"? ", b"#", b"'", b'"', b"|", b">"]
_SCALARS = [
    b"~",
    b"null",
    b".nan",
    b"-.inf",
    b"1e999",
    b"0x",
    b"0o9",
    b"9" * 5000,
    b"[]",
    b"{}",
    b'""',
    b"yes",
    b"${NO_SUCH_VARIABLE_14}",
    b"$${X}",
    b"${X:-",
    b"!!binary aGVsbG8=",
    b"2026-11-25",
    b"&a [*a]",
    b"*nowhere",
    b"'{{ 7 * 7 }}'",
    b'"{% for x in y %}"',
    b"-1",
    b"true",
]
_TAGS = [
    b"!!python/object:os.system ",
    b"!custom ",
    b"!!binary ",
    b"!!timestamp ",
    b"!!str ",
    b"!!int ",
    b"!<x> ",
    b"! ",
]


def _at(rng: random.Random, data: bytes) -> int:
    return rng.randrange(len(data) + 1)


def _line_starts(data: bytes) -> list[int]:
    return [0, *(m.end() for m in re.finditer(rb"\n", data))]


def flip_byte(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return data
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]


def insert_control(rng: random.Random, data: bytes) -> bytes:
    i = _at(rng, data)
    return data[:i] + rng.choice(_CONTROL + _ODD) + data[i:]


def insert_invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    i = _at(rng, data)
    return data[:i] + rng.choice(_INVALID_UTF8) + data[i:]


def insert_syntax(rng: random.Random, data: bytes) -> bytes:
    i = _at(rng, data)
    return data[:i] + rng.choice(_SYNTAX) * rng.choice((1, 1, 2, 3)) + data[i:]


def tabs(rng: random.Random, data: bytes) -> bytes:
    starts = _line_starts(data)
    i = rng.choice(starts)
    if rng.random() < 0.5:
        return data[:i] + b"\t" + data[i:]
    return re.sub(rb"\n  ", b"\n\t", data, count=rng.randrange(1, 20))


def bom(rng: random.Random, data: bytes) -> bytes:
    mark = "\ufeff".encode()
    where = rng.choice(("start", "twice", "middle", "utf16"))
    if where == "start":
        return mark + data
    if where == "twice":
        return mark + mark + data
    if where == "utf16":
        return b"\xff\xfe" + data
    i = _at(rng, data)
    return data[:i] + mark + data[i:]


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: _at(rng, data)]


def deep_nesting(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice((100, 240, 260, 1000, 20_000))
    kind = rng.choice(("flow", "map", "block", "indent"))
    if kind == "flow":
        value = b"[" * depth + b"1" + b"]" * depth
    elif kind == "map":
        value = b"{a: " * depth + b"1" + b"}" * depth
    elif kind == "block":
        value = b"\n  " + b"- " * depth + b"x"
    else:
        value = b"\n" + b"".join(b" " * (2 * k) + b"k:\n" for k in range(1, min(depth, 300)))
    starts = _line_starts(data)
    i = rng.choice(starts)
    line_end = data.find(b"\n", i)
    line_end = len(data) if line_end < 0 else line_end
    colon = data.find(b": ", i, line_end)
    if colon >= 0 and rng.random() < 0.8:
        return data[: colon + 2] + value + data[line_end:]
    return data[:i] + b"x: " + value + b"\n" + data[i:]


def long_line(rng: random.Random, data: bytes) -> bytes:
    i = _at(rng, data)
    return data[:i] + rng.choice((b"a", b"\xc3\xa9", b" ", b"- ")) * rng.choice((1000, 100_000)) + data[i:]


def replace_value(rng: random.Random, data: bytes) -> bytes:
    matches = list(re.finditer(rb": ([^\n]*)", data))
    if not matches:
        return data
    m = rng.choice(matches)
    return data[: m.start(1)] + rng.choice(_SCALARS) + data[m.end(1) :]


def tag(rng: random.Random, data: bytes) -> bytes:
    matches = list(re.finditer(rb": ", data))
    if not matches:
        return data
    i = rng.choice(matches).end()
    return data[:i] + rng.choice(_TAGS) + data[i:]


def aliases(rng: random.Random, data: bytes) -> bytes:
    matches = list(re.finditer(rb": ", data))
    if len(matches) < 2:
        return data
    first, second = sorted(rng.sample(matches, 2), key=lambda m: m.start())
    name = rng.choice((b"a", b"x", b"loop"))
    if rng.random() < 0.3:  # an alias before its anchor, or to a node that contains it
        first, second = second, first
    out = data[: second.end()] + b"*" + name + b" #" + data[second.end() :]
    return out[: first.end()] + b"&" + name + b" " + out[first.end() :]


def laughs(rng: random.Random, data: bytes) -> bytes:
    rows = [b"l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    rows += [
        b"l%d: &l%d [%s]" % (k, k, b", ".join(b"*l%d" % (k - 1) for _ in range(9)))
        for k in range(1, rng.randrange(2, 9))
    ]
    return data + b"\n" + b"\n".join(rows) + b"\n"


def duplicate_line(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    lines.insert(k, lines[k])
    return b"\n".join(lines)


def delete_line(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def swap_lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[a], lines[b] = lines[b], lines[a]
    return b"\n".join(lines)


def reindent(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    k = rng.randrange(len(lines))
    lines[k] = rng.choice((b" ", b"   ", b"")) + lines[k].lstrip(b" ") if rng.random() < 0.5 else b"  " + lines[k]
    return b"\n".join(lines)


def line_breaks(rng: random.Random, data: bytes) -> bytes:
    return data.replace(b"\n", rng.choice((b"\r\n", b"\r", "\x85".encode(), "\u2028".encode(), b"\n\r")))


def documents(rng: random.Random, data: bytes) -> bytes:
    i = rng.choice(_line_starts(data))
    return (
        data[:i] + rng.choice((b"---\n", b"...\n", b"%YAML 1.1\n---\n", b"%TAG ! tag:x,2000:\n", b"--- |\n")) + data[i:]
    )


MUTATIONS: tuple[Mutation, ...] = (
    flip_byte,
    insert_control,
    insert_invalid_utf8,
    insert_syntax,
    tabs,
    bom,
    truncate,
    deep_nesting,
    long_line,
    replace_value,
    tag,
    aliases,
    laughs,
    duplicate_line,
    delete_line,
    swap_lines,
    reindent,
    line_breaks,
    documents,
)


def mutants(count: int = MUTANTS, seed: int = 14) -> Iterator[tuple[str, bytes]]:
    """``(name, content)`` of *count* mutants; the same list on every run."""
    rng = random.Random(seed)
    originals = [path.read_bytes() for path in SEEDS]
    for number in range(count):
        k = number % len(SEEDS)
        data = originals[k]
        chosen = [MUTATIONS[number % len(MUTATIONS)], *rng.choices(MUTATIONS, k=rng.choice((0, 0, 1, 2)))]
        for mutation in chosen:
            data = mutation(rng, data)
        yield f"m{number:04d}-{SEEDS[k].stem}-{'+'.join(m.__name__ for m in chosen)}.yaml", data


_YAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def _lines(raw: bytes) -> list[str]:
    """The file's lines as YAML counts them (and so every diagnostic), for checking positions."""
    return _YAML_BREAK.split(raw.decode("utf-8", "replace").removeprefix("\ufeff"))


def _check_position(d: Diagnostic, lines: list[str]) -> None:
    where = f"{d.render()!r} in a file of {len(lines)} lines"
    assert 1 <= d.line <= len(lines), where
    assert 1 <= d.column <= len(lines[d.line - 1]) + 1, where
    end_line, end_column = d.end_line or d.line, d.end_column or d.column
    assert (d.line, d.column) <= (end_line, end_column), where
    assert end_line <= len(lines), where
    assert end_column <= len(lines[end_line - 1]) + 1, where


def _check_formats(report: LintReport) -> None:
    count = len(report.diagnostics)
    outputs = {name: render(report, name) for name in FORMATS}
    assert len(outputs["text"].splitlines()) == count + 1
    assert len(outputs["github"].splitlines()) == 2 * count + 1
    assert len(json.loads(outputs["json"])["diagnostics"]) == count
    assert len(json.loads(outputs["sarif"])["runs"][0]["results"]) == count
    assert len(json.loads(outputs["gitlab"])) == count
    junit = ET.fromstring(outputs["junit"].encode())
    assert len(junit.findall(".//failure")) == count


@pytest.fixture(scope="module")
def plugins() -> Plugins:
    return load_plugins()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, bytes]:
    """The mutants, written once into a directory: path to content."""
    folder = tmp_path_factory.mktemp("mutants")
    written = {}
    for name, data in mutants():
        (folder / name).write_bytes(data)
        written[folder / name] = data
    return written


def _lint(paths: list[Path], plugins: Plugins) -> LintReport:
    return lint_paths(paths, plugins=plugins.lint_facts(), kinds=plugins.kind_schemas())


def _check(paths: list[Path], corpus: dict[Path, bytes], plugins: Plugins) -> int:
    """Lint *paths*, check the report, and build the registry of each file without errors; return how many built."""
    report = _lint(paths, plugins)
    for d in report.diagnostics:
        _check_position(d, _lines(corpus[Path(d.file)]))
    _check_formats(report)
    # The loader's own codes (parse and spec schema); a file with one of those does not load.
    unloadable = {d.file for d in report.diagnostics if d.severity is Severity.ERROR and d.code[2] in "01"}
    built = 0
    for path in paths:
        if str(path) in unloadable:
            continue
        # What `toolflow call` and `toolflow schema` do: load, build (which may refuse), export.
        loaded = load_specs([path], kinds=plugins.kind_schemas())
        if not loaded.ok:
            continue
        try:
            registry = Registry.build(loaded, plugins)
        except RegistryError:
            continue
        for format_ in ("openai", "anthropic", "mcp"):
            json.dumps(export_tools((tool.spec for tool in registry), format_))
        built += 1
    return built


def test_mutated_specs_lint_in_every_format(corpus: dict[Path, bytes], plugins: Plugins) -> None:
    """Thousands of mutated specs: no exception, positions inside the file, every format well-formed.

    A mutant that loads also builds its registry (or is refused with a RegistryError) and
    exports its tools in every format.
    """
    paths = list(corpus)
    built = 0
    for start in range(0, len(paths), CHUNK):
        chunk = paths[start : start + CHUNK]
        try:
            built += _check(chunk, corpus, plugins)
        except BaseException:
            for path in chunk:  # name the mutant that fails
                try:
                    _check([path], corpus, plugins)
                except BaseException as exc:
                    msg = f"mutant {path.name} failed ({type(exc).__name__}: {exc}); it starts {corpus[path][:300]!r}"
                    raise AssertionError(msg) from exc
            raise
    assert built >= len(paths) // 10  # enough stay usable for the registry half to mean something
    record("specs", len(paths))


def test_mutants_are_diverse() -> None:
    """The corpus reaches every mutation, each at least MUTANTS / len(MUTATIONS) times."""
    seen = {m.__name__: 0 for m in MUTATIONS}
    for name, _ in mutants():
        for part in name.removesuffix(".yaml").split("-", 2)[2].split("+"):
            seen[part] += 1
    assert min(seen.values()) >= MUTANTS // len(MUTATIONS)


@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_mutants_through_the_cli(tmp_path: Path, output_format: str) -> None:
    """A directory of other mutants through `toolflow lint` itself, in-process: no internal error, exit 0 or 1."""
    for name, data in mutants(count=CLI_MUTANTS, seed=1414):
        (tmp_path / name).write_bytes(data)
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run(["lint", "--isolated", "--output-format", output_format, str(tmp_path)], stdout=stdout, stderr=stderr)
    assert code in (0, 1), stderr.getvalue()
    assert "internal error" not in stderr.getvalue()
    record("specs", CLI_MUTANTS)
