"""Hostile argument values through real command tools: each arrives as one literal argument, no shell.

A small real program (a Python script that prints its argv as JSON) is the tool. Every value of
the corpus goes through the Python API's engine, a sample through ``toolflow call`` and through
an agent loop whose scripted model makes the calls; each place the value is templated into
(alone, glued to an option, between literal text, after ``--``) must reach the program as that
literal text, and nothing the values say (``$(touch ...)``, backticks, ``;``) may run. A value
the operating system cannot pass (a NUL, a single argument over Linux's 128 KiB) is a failure
result, never a crash.
"""

from __future__ import annotations

import io
import json
import sys
import unicodedata
from pathlib import Path

import pytest
import trio
import yaml
from _corpus import record

import toolflow
from toolflow._cli import run
from toolflow._loop import Agent
from toolflow._policy import Policy
from toolflow.default_plugins._scripted import open_scripted

PRINT_ARGV = "import json, sys\nsys.stdout.write(json.dumps(sys.argv[1:]))\n"
MARKER = "pwned"
"""A file the shell-syntax payloads would create in the working directory if a shell ran them."""

_OPTIONS = ["-r", "-rf", "--help", "--version", "--output=/etc/passwd", "-o/etc/passwd", "-", "--", "---", "-e x"]
_SHELL = [
    f"; touch {MARKER}",
    f"$(touch {MARKER})",
    f"`touch {MARKER}`",
    f"&& touch {MARKER}",
    f"|| touch {MARKER}",
    f"| touch {MARKER}",
    f"\ntouch {MARKER}",
    f"> {MARKER}",
    f">> {MARKER}",
    f"< /etc/passwd > {MARKER}",
    f"$((1+1)) {MARKER}",
    f"{{a,b}} {MARKER}",
    f"'; touch {MARKER}; '",
    f'"; touch {MARKER}; "',
    f"\\; touch {MARKER}",
    f"& touch {MARKER} &",
    "$(id)",
    "${IFS}id",
    "$HOME ${PATH} %PATH%",
    "*",
    "?",
    "[a-z]*",
    "~",
    "~root",
    "!!",
    "#not a comment",
    "a=b",
    "IFS=x",
]
_PATHS = [
    "../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "./-r",
    "a/../../b",
    "C:\\Windows\\system32",
    "\\\\server\\share",
]
_TEMPLATES = ["{{ 7 * 7 }}", "{% raw %}", "{{ env.HOME }}", "{# comment #}", "${HOME}", "$${HOME}", "{{", "}}"]
_QUOTES = ["'", '"', "\\", "\\n", "''", '""', "a b  c", " leading", "trailing ", ""]
_UNICODE = [
    "\u2212r",  # minus sign
    "\u2013r",  # en dash
    "\uff0dr",  # fullwidth hyphen-minus
    "\u202e-r",  # right-to-left override
    "\u200b-r",  # zero-width space
    "\ufeff-r",  # byte order mark
    "e\u0301",  # combining accent
    "\U0001f600",
    "\u2028\u2029\x85",
    "日本語",
    "\udcff",  # a lone surrogate Python's file-system encoding turns into the byte 0xff
]
_CONTROL = [chr(c) for c in (*range(0x01, 0x20), 0x7F)]
_LONG = ["x" * 100_000, "-" * 10_000, "a " * 30_000]

PAYLOADS: list[str] = [*_OPTIONS, *_SHELL, *_PATHS, *_TEMPLATES, *_QUOTES, *_UNICODE, *_CONTROL, *_LONG]
"""Values that reach the program verbatim."""

REFUSED: dict[str, str] = {
    "a\x00b": "cannot run command",
    "\x00": "cannot run command",
    "y" * 200_000: "cannot run command",  # over MAX_ARG_STRLEN: the kernel refuses to start the program
}
"""Values the operating system cannot pass, and the start of the error that says so."""

SPEC = """\
toolflow: 1
tools:
  show_argv:
    description: Print the arguments the program received, as JSON.
    retry: false
    parameters:
      type: object
      properties:
        value: {type: string, description: Anything at all}
      required: [value]
    command:
      argv: [PYTHON, -I, -S, SCRIPT, "{{ value }}", "--option={{ value }}", "pre{{ value }}post", --, "{{ value }}"]
      cwd: WORK
      max_output: 2000000
"""


def expected(value: str) -> list[str]:
    """The argv the program must print for *value*."""
    return [value, f"--option={value}", f"pre{value}post", "--", value]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose one tool runs the argv-printing script in a working directory of its own."""
    script = tmp_path / "print_argv.py"
    script.write_text(PRINT_ARGV, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "argv"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    spec = SPEC
    for name, value in {"PYTHON": sys.executable, "SCRIPT": str(script), "WORK": str(work)}.items():
        spec = spec.replace(name, json.dumps(value))
    (tmp_path / "specs" / "tools.yaml").write_text(spec, encoding="utf-8")
    return tmp_path


def _registry(project: Path) -> tuple[toolflow.Registry, toolflow.Plugins]:
    plugins = toolflow.load_plugins(entry_points=False)
    loaded = toolflow.load_specs([project / "specs"], kinds=plugins.kind_schemas())
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    return toolflow.Registry.build(loaded, plugins), plugins


def _check(value: str, result: toolflow.ToolResult) -> None:
    where = f"value {value[:80]!r}"
    assert result.success, (where, result.error)
    assert isinstance(result.data, dict), where
    assert result.data["truncated"] is False, where
    assert json.loads(result.data["stdout"]) == expected(value), where


def _no_shell_ran(project: Path) -> None:
    assert list((project / "work").iterdir()) == [], "a payload created a file: something interpreted it"


def test_the_corpus_is_varied() -> None:
    """Every payload is distinct; options, shell syntax, control and format characters are all there."""
    assert len(set(PAYLOADS)) == len(PAYLOADS)
    assert {unicodedata.category(c) for p in PAYLOADS for c in p} >= {"Cc", "Cf", "Pd", "Sm", "Zl", "Mn", "So"}


async def test_every_payload_reaches_the_program_literally_through_the_engine(project: Path) -> None:
    """Engine.call: each value, in every place of the argv, arrives as that literal text; nothing runs."""
    registry, plugins = _registry(project)
    results: dict[str, toolflow.ToolResult] = {}
    limit = trio.CapacityLimiter(4)

    async def one(value: str) -> None:
        async with limit:
            results[value] = await engine.call("show_argv", {"value": value})

    with trio.fail_after(240):
        async with toolflow.open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:
            for value in [*PAYLOADS, *REFUSED]:
                nursery.start_soon(one, value)
    for value in PAYLOADS:
        _check(value, results[value])
    for value, error in REFUSED.items():
        assert not results[value].success, value[:40]
        assert str(results[value].error).startswith(f"Error: {error} {sys.executable!r}: "), results[value].error
    _no_shell_ran(project)
    record("argv", len(PAYLOADS) + len(REFUSED))


SAMPLE = [*_OPTIONS[:4], *_SHELL[:8], _TEMPLATES[0], _UNICODE[3], "\x1b[31m", "line\nbreak", _LONG[0]]


def test_a_sample_through_toolflow_call(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow call` (in-process): the same values arrive the same way."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    for value in SAMPLE:
        stdout, stderr = io.StringIO(), io.StringIO()
        code = run(["call", "show_argv", json.dumps({"value": value})], stdout=stdout, stderr=stderr)
        assert code == 0, (value[:80], stderr.getvalue())
        result = json.loads(stdout.getvalue())
        assert json.loads(result["data"]["stdout"]) == expected(value), value[:80]
    _no_shell_ran(project)
    record("argv", len(SAMPLE))


async def test_a_sample_chosen_by_a_model(project: Path) -> None:
    """An agent loop whose scripted model sends the values: each call's result shows them verbatim."""
    registry, plugins = _registry(project)
    calls = [{"name": "show_argv", "arguments": {"value": value}} for value in SAMPLE]
    transcript = project / "session.yaml"
    transcript.write_text(yaml.safe_dump({"turns": [{"tool_calls": calls}, {"text": "done"}]}), encoding="utf-8")
    provider = open_scripted(str(transcript))
    policy = Policy()
    with trio.fail_after(120):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            result = await Agent(engine, provider, policy=policy).run("print them")
    entries = result.turns[0].entries
    assert len(entries) == len(SAMPLE)
    for value, entry in zip(SAMPLE, entries, strict=True):
        _check(value, entry.result)
    _no_shell_ran(project)
    record("argv", len(SAMPLE))
