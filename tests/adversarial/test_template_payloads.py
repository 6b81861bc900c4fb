"""Hostile templates against every limit of every template: the per-render budget, the timeout, and no Python internals in any text.

Two corpora, printed at the end of the run:

- ``template payloads``: templates (and argument values) that try to build far more than the
  per-render budget through every operator, filter and method that makes strings or lists, or
  to loop forever; each fails its call with the budget's or the timeout's message, through the
  ``template`` kind, the ``command`` kind's argv, the ``http`` kind and the text protocol;
- ``template leaks``: every source of a function, class, method, generator, macro or loop
  (globals, look-ups, calls, filters, template definitions) through every way a value becomes
  text (output, containers, filters, ``~``, ``%``, ``str.format``, ``pprint``, ``tojson``,
  ``join``); none may show a ``<function ... at 0x...>``.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _corpus import record
from hypothesis import given, settings
from hypothesis import strategies as st

import toolflow
from toolflow import TemplateError, TemplateProblem, compile_template, render_template
from toolflow._plugins import load_plugins
from toolflow._templates import FUNCTION_REFUSAL, NOT_ITERABLE, OBJECT_REFUSAL

BUDGET_MESSAGE = "the template needed more than 64 MiB of memory (the per-render budget)"

N = {"type": "integer"}
S = {"type": "string"}
L = {"type": "array"}

# (template, arguments): each builds far more than 64 MiB, from a small template or a model's number.
MEMORY_BOMBS: list[tuple[str, dict[str, Any]]] = [
    ("{{ '=' * n }}", {"n": 10**12}),
    ("{{ [0] * n }}", {"n": 10**9}),
    ("{{ (range(100000) | list) * n }}", {"n": 1000}),
    ("{{ x * n }}", {"x": "ab", "n": 10**9}),
    ("{{ x.replace('a', y) }}", {"x": "a" * 10**6, "y": "b" * 200}),
    ("{{ x | replace('a', y) }}", {"x": "a" * 10**6, "y": "b" * 200}),
    ("{{ items | join(y) }}", {"items": ["a"] * 10**4, "y": "b" * 10**4}),
    ("{{ y.join(items) }}", {"items": ["a"] * 10**4, "y": "b" * 10**4}),
    ("{{ items | tojson(indent=n) }}", {"items": [[[[1]]]] * 10**4, "n": 10**4}),
    ("{{ x | wordwrap(2, wrapstring=y) }}", {"x": "a b " * 10**5, "y": "z" * 10**4}),
    ("{% set s = x %}" + "{% set s = s ~ s %}" * 40 + "{{ s | length }}", {"x": "abcdefgh"}),
    ("{% set s = x %}" + "{% set s = s + s %}" * 40 + "{{ s | length }}", {"x": "abcdefgh"}),
    (
        "{% set ns = namespace(s=x) %}{% for i in range(n) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        {"x": "ab", "n": 60},
    ),
    ("{% set ns = namespace(l=[0]) %}{% for i in range(n) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", {"n": 60}),
    ("{{ x.ljust(n) }}", {"x": "a", "n": 10**9}),
    ("{{ x.center(n) }}", {"x": "a", "n": 10**9}),
    ("{{ x.zfill(n) }}", {"x": "1", "n": 10**9}),
    ("{{ x.expandtabs(n) }}", {"x": "\t" * 100, "n": 10**7}),
    ("{{ x | center(n) }}", {"x": "a", "n": 10**9}),
    ("{{ x | indent(n) }}", {"x": "a\nb", "n": 10**9}),
    ("{{ '%*d' % (n, 1) }}", {"n": 10**9}),
    ("{{ '%.*f' % (n, 1.0) }}", {"n": 10**8}),
    ("{{ '%s' | format(x * n) }}", {"x": "a", "n": 10**9}),
    ("{{ '{:>{w}}'.format(x, w=n) }}", {"x": "a", "n": 10**9}),
    ("{{ '{a:.{n}f}'.format_map({'a': 1.5, 'n': n}) }}", {"n": 10**8}),
    ("{% for i in range(n) %}{{ x }}{% endfor %}", {"x": "a" * 10**4, "n": 100000}),
    ("{{ range(100000) | map('string') | join(x) }}", {"x": "a" * 2000}),
    ("{{ dict(a=x) | tojson(indent=n) }}", {"x": "a", "n": 10**9}),
    ("{{ (x ~ x ~ x ~ x) * n }}", {"x": "abcd", "n": 10**8}),
]

FOREVER: list[tuple[str, dict[str, Any]]] = [
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", {}),
    ("{{ 10 ** n }}", {"n": 10**12}),
    ("{{ lipsum(n) | length }}", {"n": 10**6}),
    ("{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}", {}),
]

PARAMETERS = {"type": "object", "properties": {"n": N, "x": S, "y": S, "items": L}}


def _registry(tmp_path: Path, tools: dict[str, Any]) -> toolflow.Registry:
    spec = tmp_path / "tools.yaml"
    spec.write_text(yaml.safe_dump({"toolflow": 1, "tools": tools}), encoding="utf-8")
    return toolflow.load_registry([spec], plugins=load_plugins(entry_points=False))


def _template_tools(payloads: list[tuple[str, dict[str, Any]]], timeout: str) -> dict[str, Any]:
    return {
        f"t{index}": {
            "description": "A hostile template",
            "parameters": PARAMETERS,
            "template": source,
            "timeout": timeout,
            "retry": {"attempts": 1},
        }
        for index, (source, _) in enumerate(payloads)
    }


async def test_memory_bombs_fail_at_the_budget_through_the_template_kind(tmp_path: Path) -> None:
    """Every way of building a huge string or list fails its call with the budget's message, through the engine."""
    registry = _registry(tmp_path, _template_tools(MEMORY_BOMBS, "60s"))
    with trio.fail_after(300):
        async with toolflow.open_engine(registry) as engine:
            results = [await engine.call(f"t{index}", arguments) for index, (_, arguments) in enumerate(MEMORY_BOMBS)]
    record("template payloads", len(MEMORY_BOMBS))
    failures = {source: result.error for (source, _), result in zip(MEMORY_BOMBS, results, strict=True)}
    assert failures == dict.fromkeys(failures, f"Error: {BUDGET_MESSAGE}")


_WORKER_SEQUENCE = """
import sys
from toolflow._templates import compile_template, render, run_job, template_budget

def _data_size():
    with open("/proc/self/status", "rb") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(b"VmData:"))

sizes = [_data_size()]
for source, arguments in BOMBS:
    try:
        run_job(template_budget(), render, (compile_template(source), arguments))
    except Exception as exc:
        assert "per-render budget" in str(exc), exc
    sizes.append(_data_size())
print(" ".join(str(size >> 20) for size in sizes))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the budget is RLIMIT_DATA, Linux's")
def test_a_job_leaves_no_memory_for_the_next_to_use_beyond_its_budget() -> None:
    """After each failed job the worker's data size is back near its start, so the next job's budget is its own.

    A failed rendering's objects stay in reference cycles (its traceback's frames) until the
    collector runs; counted in the next job's starting size, they were headroom on top of its
    budget, and the next job could build more than 64 MiB (seen once, as a flaky pass of '%.*f').
    """
    bombs = [
        (source, args) for source, args in MEMORY_BOMBS if "ns.s" in source or "s ~ s" in source or "ns.l" in source
    ]
    code = f"BOMBS = {bombs!r}\n" + _WORKER_SEQUENCE
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    start, *after = (int(mib) for mib in done.stdout.split())
    assert len(after) == len(bombs) == 3
    assert all(size <= start + 4 for size in after), (start, after)  # MiB; each bomb reached 64 MiB


@pytest.mark.parametrize(("source", "arguments"), FOREVER)
async def test_endless_renderings_stop_at_the_timeout(
    tmp_path: Path, source: str, arguments: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    """A rendering that would run for hours (a loop writing nothing, a huge power, lipsum) ends at the tool's timeout."""
    registry = _registry(tmp_path, _template_tools([(source, arguments)], "2s"))
    async with toolflow.open_engine(registry) as engine:  # no guard: the virtual deadline comes at once
        result = await engine.call("t0", arguments)
    record("template payloads", 1)
    assert (result.success, result.error) == (False, "Error: tool 't0' timed out after 2s")


async def test_payloads_as_argument_values_are_text(tmp_path: Path) -> None:
    """Template syntax in an argument value is data: it is printed, never evaluated."""
    payloads = [source for source, _ in MEMORY_BOMBS + FOREVER] + ["{{ lipsum }}", "{% include '/etc/passwd' %}"]
    registry = _registry(tmp_path, {"echo": {"description": "Echo", "parameters": PARAMETERS, "template": "<{{ x }}>"}})
    with trio.fail_after(120):
        async with toolflow.open_engine(registry) as engine:
            results = [(await engine.call("echo", {"x": payload})).data for payload in payloads]
    record("template payloads", len(payloads))
    assert results == [f"<{payload}>" for payload in payloads]


async def test_command_argv_templates_hold_the_same_limits(tmp_path: Path) -> None:
    """The command kind renders its argv under the same budget and timeout; the program never starts."""
    bombs = MEMORY_BOMBS[:8]
    tools = {
        f"c{index}": {
            "description": "A hostile command",
            "parameters": PARAMETERS,
            "command": ["/bin/echo", "fixed", source],
            "timeout": "60s",
        }
        for index, (source, _) in enumerate(bombs)
    }
    registry = _registry(tmp_path, tools)
    with trio.fail_after(300):
        async with toolflow.open_engine(registry) as engine:
            results = [await engine.call(f"c{index}", arguments) for index, (_, arguments) in enumerate(bombs)]
    record("template payloads", len(bombs))
    assert [result.error for result in results] == [f"Error: command argv: {BUDGET_MESSAGE}"] * len(bombs)


async def test_the_text_protocol_template_holds_the_same_limits(tmp_path: Path) -> None:
    """A spec's text protocol template that builds past the budget fails the loop's start with the budget's message."""
    history = toolflow.history_format("text", text_protocol_template="{{ tools[0].name * 10**9 }}")
    with trio.fail_after(120), pytest.raises(toolflow.UsageError, match=re.escape(BUDGET_MESSAGE)):
        await history.system_prompt(
            "base", [next(iter(_registry(tmp_path, {"a": {"description": "A", "template": "a"}}))).spec]
        )
    record("template payloads", 1)


# --- leaks ------------------------------------------------------------------------------------------

SOURCES = [
    "lipsum",
    "range",
    "dict",
    "cycler",
    "joiner",
    "namespace",
    "x.upper",
    "x.format",
    "d.get",
    "d.items",
    "items.index",
    "cycler('a')",
    "cycler('a').next",
    "joiner(',')",
    "x | map('upper')",
    "items | batch(1)",
    "items | select",
    "items | reverse",
    "x | attr('upper')",
    "d | dictsort | map(attribute='0')",
    "m",
    "caller_m",
    "loop_value",
    "range(3).__iter__",
    "self",
    "(items | map(attribute='upper') | list)[0]",
]
"""Expressions whose value is (or, for ``self``, holds) something callable or an iterator."""

CONVERSIONS = [
    "{{ SRC }}",
    "{{ [SRC] }}",
    "{{ (SRC, 1) }}",
    "{{ {'k': SRC} }}",
    "{{ SRC | string }}",
    "{{ [SRC] | string }}",
    "{{ [SRC] | join }}",
    "{{ [SRC, 'a'] | join(',') }}",
    "{{ SRC ~ '' }}",
    "{{ 'a' ~ [SRC] }}",
    "{{ '%s' % (SRC,) }}",
    "{{ '%r' % (SRC,) }}",
    "{{ '%s' | format(SRC) }}",
    "{{ '{}'.format(SRC) }}",
    "{{ '{!r}'.format(SRC) }}",
    "{{ '{0}'.format_map({'0': SRC}) }}",
    "{{ SRC | pprint }}",
    "{{ [SRC] | pprint }}",
    "{{ SRC | tojson }}",
    "{{ SRC | e }}",
    "{{ SRC | trim }}",
    "{{ SRC | upper }}",
    "{{ SRC | center(3) }}",
    "{{ SRC | replace('a', 'b') }}",
    "{{ SRC | wordcount }}",
    "{{ SRC | list | string }}",
    "{{ [SRC] | map('string') | join }}",
    "{{ dict(k=SRC) | dictsort | string }}",
    "{% set v = SRC %}{{ v }}",
    "{% set v = [SRC] %}{{ v | first | string }}",
]
"""Every way a value becomes text; ``SRC`` is replaced by a source."""

PREAMBLE = (
    "{% macro m() %}M{% endmacro %}"
    "{% macro caller_m() %}{{ caller }}{% endmacro %}"
    "{% set loop_value = namespace(v=none) %}"
)
"""Defines the sources that a template makes itself (a macro, a call block's caller, a loop)."""

LEAKS = re.compile(r"<\w|0x[0-9a-f]|jinja2|Macro|LoopContext|TemplateReference|function|generator|object at")
"""Text that names Python internals: a repr in angle brackets, an address, a Jinja class."""


def _leak_template(source: str, conversion: str) -> str:
    if source == "loop_value":
        return PREAMBLE + "{% for i in [1] %}" + conversion.replace("SRC", "loop") + "{% endfor %}"
    if source == "caller_m":
        return PREAMBLE + "{% call m() %}" + conversion.replace("SRC", "caller") + "{% endcall %}"
    return PREAMBLE + conversion.replace("SRC", source)


def _without_refusals(text: str) -> str:
    return text.replace(FUNCTION_REFUSAL, "").replace(OBJECT_REFUSAL, "").replace(NOT_ITERABLE, "")


VALUES = {"x": "abc", "d": {"k": "v"}, "items": ["a", "b"]}


async def _rendered(source: str) -> str:
    template = compile_template(source)
    if isinstance(template, TemplateProblem):
        return f"problem: {template.message}"
    try:
        return await render_template(template, VALUES)
    except TemplateError as exc:
        return f"error: {exc}"


async def test_no_source_leaks_through_any_conversion() -> None:
    """Every source of a callable through every text conversion fails or renders without Python internals."""
    leaked = {}
    with trio.fail_after(300):
        for source, conversion in itertools.product(SOURCES, CONVERSIONS):
            text = await _rendered(_leak_template(source, conversion))
            shown = _without_refusals(text)
            if LEAKS.search(shown):
                leaked[(source, conversion)] = text
    record("template leaks", len(SOURCES) * len(CONVERSIONS))
    assert leaked == {}, "\n".join(f"{key}: {text}" for key, text in leaked.items())


_PIECES = st.sampled_from(SOURCES)
_WRAPPERS = st.lists(
    st.sampled_from(["[{}]", "({},)", "{{'k': {}}}", "{} | list", "{} | first", "({} | string)"]), max_size=3
)


@settings(max_examples=150, deadline=None)
@given(source=_PIECES, wrappers=_WRAPPERS, conversion=st.sampled_from(CONVERSIONS))
async def test_nested_sources_never_leak(source: str, wrappers: list[str], conversion: str) -> None:
    """Sources nested in lists, tuples, dicts and filters before a conversion never leak either."""
    expression = source
    for wrapper in wrappers:
        expression = wrapper.format(expression)
    with trio.fail_after(60):
        text = await _rendered(
            _leak_template(expression, conversion)
            if source not in {"loop_value", "caller_m"}
            else _leak_template(source, conversion)
        )
    record("template leaks", 1)
    assert not LEAKS.search(_without_refusals(text)), text
