"""The built-in ``template`` kind: rendering, ``env``, JSON output, and the sandbox against known escapes."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2
import pytest
import trio
import trio.testing
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import toolflow
from toolflow import ToolSpec, load_specs
from toolflow._plugins import ImplementationKind, load_plugins
from toolflow._rendering import render_template
from toolflow._templates import (
    NESTING_MESSAGE,
    TemplateEnv,
    TemplateError,
    TemplateProblem,
    compile_template,
    parse_template,
)

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "toolflow" / "data" / "spec-v1.schema.json"

Run = Callable[..., Any]
"""A template tool's callable (async)."""

PARAMETERS = {
    "type": "object",
    "properties": {
        "x": {"type": "string", "description": "A string"},
        "items": {"type": "array", "description": "A list"},
        "d": {"type": "object", "description": "A mapping"},
        "name": {"type": "string", "description": "A name"},
    },
}


def _kind() -> ImplementationKind:
    kinds = load_plugins(entry_points=False).kinds()["template"]
    assert len(kinds) == 1
    return kinds[0]


def _tool(tmp_path: Path, template: object, parameters: object = None) -> ToolSpec:
    body = {"description": "A template tool", "parameters": parameters or PARAMETERS, "template": template}
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"toolflow": 1, "tools": {"t": body}}), encoding="utf-8")
    loaded = load_specs([path])
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    (tool,) = loaded.tools
    return tool


def _build(tmp_path: Path, template: object, parameters: object = None) -> Run:
    return _kind().build(_tool(tmp_path, template, parameters))


async def _render(tmp_path: Path, template: object, **arguments: Any) -> object:
    return await _call(_build(tmp_path, template), **arguments)


async def _call(run: Run, **arguments: Any) -> object:
    """Call *run* as the engine would."""
    assert inspect.iscoroutinefunction(run)
    return await run(**arguments)


def test_registered_as_a_default_plugin_with_the_spec_schema() -> None:
    """The template kind comes from the default plugin, with the spec schema's definition of `template`."""
    kind = _kind()
    assert kind.plugin == "toolflow.default_plugins.template"
    assert kind.description
    definitions = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["definitions"]
    assert kind.schema == definitions["template"]


async def test_renders_the_arguments(tmp_path: Path) -> None:
    """The short form renders with the arguments as variables, filters included."""
    result = await _render(tmp_path, "Hello {{ name }}, {{ items | join('+') }}", name="Ann", items=[1, 2])
    assert result == "Hello Ann, 1+2"


async def test_trailing_newline_of_a_block_scalar_is_kept(tmp_path: Path) -> None:
    """The rendering is the template's text exactly, trailing newline included."""
    assert await _render(tmp_path, {"source": "{{ name }}\n"}, name="Ann") == "Ann\n"


async def test_undefined_variable_is_a_clear_failure(tmp_path: Path) -> None:
    """A variable that is not an argument fails the call with its name (strict undefined)."""
    result = await _render(tmp_path, "Hello {{ nmae }}", name="Ann")
    assert result == {"success": False, "error": "template variable error: 'nmae' is undefined"}


async def test_optional_argument_not_sent_works_with_is_defined(tmp_path: Path) -> None:
    """An argument the call leaves out is undefined, which `is defined` and `default` handle."""
    run = _build(tmp_path, "{% if name is defined %}{{ name }}{% else %}{{ x | default('nobody') }}{% endif %}")
    assert await run() == "nobody"
    assert await run(name="Ann") == "Ann"


async def test_missing_attribute_names_the_type_not_its_module(tmp_path: Path) -> None:
    """Reading a missing key of an argument fails with a message naming only the type."""
    result = await _render(tmp_path, "{{ d.missing }}", d={})
    assert result == {"success": False, "error": "template variable error: 'dict' object has no attribute 'missing'"}


async def test_listed_environment_variable_is_visible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`env.NAME` and `env['NAME']` read a variable the spec lists."""
    monkeypatch.setenv("TOOLFLOW_TEST_HOST", "example.org")
    template = {"source": "{{ env.TOOLFLOW_TEST_HOST }} {{ env['TOOLFLOW_TEST_HOST'] }}", "env": ["TOOLFLOW_TEST_HOST"]}
    assert await _render(tmp_path, template) == "example.org example.org"


async def test_environment_is_read_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed variable set after the tool was built is seen by the next call."""
    monkeypatch.delenv("TOOLFLOW_TEST_LATE", raising=False)
    run = _build(tmp_path, {"source": "{{ env.TOOLFLOW_TEST_LATE | default('unset') }}", "env": ["TOOLFLOW_TEST_LATE"]})
    assert await run() == "unset"
    monkeypatch.setenv("TOOLFLOW_TEST_LATE", "set")
    assert await run() == "set"


async def test_unlisted_environment_variable_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable the spec does not list is refused, even with a default filter, and its value never shows."""
    monkeypatch.setenv("TOOLFLOW_TEST_SECRET", "hunter2")
    for source in (
        "{{ env.TOOLFLOW_TEST_SECRET }}",
        "{{ env['TOOLFLOW_TEST_SECRET'] }}",
        "{{ env.TOOLFLOW_TEST_SECRET | default('x') }}",
    ):
        result = await _render(tmp_path, {"source": source, "env": ["HOME"]})
        assert result == {
            "success": False,
            "error": "template error: environment variable 'TOOLFLOW_TEST_SECRET' is not listed in the template's env",
        }, source


async def test_short_form_lists_no_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The string form of a template can read no environment variable at all."""
    monkeypatch.setenv("HOME", "/home/someone")
    result = await _render(tmp_path, "{{ env.HOME }}")
    assert isinstance(result, dict)
    assert result["success"] is False
    assert "'HOME' is not listed" in result["error"]


async def test_listed_but_unset_variable_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listed variable that is not set fails a bare read with a message naming it."""
    monkeypatch.delenv("TOOLFLOW_TEST_UNSET", raising=False)
    result = await _render(tmp_path, {"source": "{{ env.TOOLFLOW_TEST_UNSET }}", "env": ["TOOLFLOW_TEST_UNSET"]})
    assert result == {
        "success": False,
        "error": "template variable error: environment variable 'TOOLFLOW_TEST_UNSET' is not set",
    }


async def test_env_lists_only_listed_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Iterating or printing `env` shows the listed names, never other variables or values."""
    monkeypatch.setenv("TOOLFLOW_TEST_A", "secret-a")
    monkeypatch.setenv("TOOLFLOW_TEST_B", "secret-b")
    template = {"source": "{{ env | list }} {{ env }} {{ 'TOOLFLOW_TEST_B' in env }}", "env": ["TOOLFLOW_TEST_A"]}
    assert await _render(tmp_path, template) == "['TOOLFLOW_TEST_A'] env(TOOLFLOW_TEST_A) False"


async def test_parameter_named_env_is_the_argument(tmp_path: Path) -> None:
    """Without listed variables, a parameter named `env` is an ordinary argument."""
    parameters = {"type": "object", "properties": {"env": {"type": "string", "description": "Deployment"}}}
    run = _build(tmp_path, "deploy to {{ env }}", parameters)
    assert await run(env="staging") == "deploy to staging"


def test_parameter_named_env_with_listed_variables_does_not_build(tmp_path: Path) -> None:
    """Listing variables and declaring a parameter `env` is refused when the tool is built."""
    parameters = {"type": "object", "properties": {"env": {"type": "string", "description": "Deployment"}}}
    tool = _tool(tmp_path, {"source": "{{ env.HOME }}", "env": ["HOME"]}, parameters)
    with pytest.raises(TemplateError, match="the parameter 'env' would hide"):
        _kind().build(tool)


async def test_json_output_is_parsed(tmp_path: Path) -> None:
    """With `output: json` the rendering is parsed into the value returned."""
    template = {"source": '{"who": {{ name | tojson }}, "n": {{ items | length }}}', "output": "json"}
    assert await _render(tmp_path, template, name='A "quoted" name', items=[1, 2, 3]) == {
        "who": 'A "quoted" name',
        "n": 3,
    }


async def test_json_output_may_be_a_result_dict(tmp_path: Path) -> None:
    """A JSON object with `success` is returned as is, to be normalised like any result dict."""
    template = {"source": '{"success": false, "error": "no {{ name }} here"}', "output": "json"}
    assert await _render(tmp_path, template, name="door") == {"success": False, "error": "no door here"}


async def test_invalid_json_output_is_a_clear_failure(tmp_path: Path) -> None:
    """A rendering that is not JSON fails with the parser's reason and the start of the text."""
    result = await _render(tmp_path, {"source": "{'who': '{{ name }}'}", "output": "json"}, name="Ann")
    assert isinstance(result, dict)
    assert result["success"] is False
    assert result["error"].startswith("template output is not valid JSON (Expecting property name")
    assert result["error"].endswith(": \"{'who': 'Ann'}\"")


async def test_json_output_refuses_nan(tmp_path: Path) -> None:
    """NaN and Infinity are not JSON, although Python's parser would take them."""
    result = await _render(tmp_path, {"source": "[NaN]", "output": "json"})
    assert result == {"success": False, "error": "template output is not valid JSON (NaN is not JSON): '[NaN]'"}


async def test_json_output_nested_too_deeply_is_a_failure(tmp_path: Path) -> None:
    """A rendering deeper than the parser's recursion limit is a failure result; nothing is raised."""
    result = await _render(tmp_path, {"source": "{{ '[' * 100000 }}{{ ']' * 100000 }}", "output": "json"})
    assert result == {"success": False, "error": "template output nests too deeply to be read as JSON"}


def test_syntax_error_is_found_when_the_tool_is_built(tmp_path: Path) -> None:
    """A template that does not compile fails at build time, with its line, not at the first call."""
    tool = _tool(tmp_path, "line one\n{{ name }")
    with pytest.raises(TemplateError, match=r"^the template does not compile \(line 2\)") as info:
        _kind().build(tool)
    assert info.value.line == 2


def test_unknown_filter_is_found_when_the_tool_is_built(tmp_path: Path) -> None:
    """An unknown filter, which parsing alone accepts, fails the build."""
    tool = _tool(tmp_path, "{{ name | shout }}")
    with pytest.raises(TemplateError, match="No filter named 'shout'"):
        _kind().build(tool)


@pytest.mark.parametrize(
    "source",
    [
        "{{ " + "(" * 3000 + "x" + ")" * 3000 + " }}",
        "{% if a %}" * 400 + "x" + "{% endif %}" * 400,
        "{{ x" + ".a" * 1000 + " }}",
        "{% for a in b %}" * 25 + "{% endfor %}" * 25,
    ],
    ids=["parentheses", "blocks", "attributes", "python-blocks"],
)
def test_absurd_nesting_is_a_problem_not_a_crash(tmp_path: Path, source: str) -> None:
    """Deep nesting gives a TemplateProblem from parsing and compiling, and a TemplateError from build."""
    assert isinstance(parse_template(source), TemplateProblem | jinja2.nodes.Template)
    compiled = compile_template(source)
    assert isinstance(compiled, TemplateProblem)
    assert compiled.message.startswith(NESTING_MESSAGE)
    with pytest.raises(TemplateError, match=NESTING_MESSAGE):
        _kind().build(_tool(tmp_path, source))


def test_parse_template_reports_recursion_as_a_problem() -> None:
    """parse_template returns a problem rather than raising RecursionError."""
    problem = parse_template("{{ " + "[" * 5000 + "]" * 5000 + " }}")
    assert problem == TemplateProblem(message=NESTING_MESSAGE, line=1)


async def test_recursion_while_rendering_is_a_failure(tmp_path: Path) -> None:
    """A macro that calls itself forever fails the call instead of crashing it."""
    result = await _render(tmp_path, "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
    assert result == {"success": False, "error": "template error: recursion too deep"}


async def test_arguments_are_not_modified(tmp_path: Path) -> None:
    """The immutable sandbox refuses to change the call's arguments."""
    items: list[object] = [1]
    d: dict[str, object] = {"k": "v"}
    run = _build(tmp_path, "{{ items.append(2) }}{% set _ = d.update({'a': 1}) %}")
    result = await run(items=items, d=d)
    assert isinstance(result, dict)
    assert result["success"] is False
    assert items == [1]
    assert d == {"k": "v"}


def test_template_env_has_no_public_attributes() -> None:
    """No method of `env` can shadow a variable name such as `keys` or `get`."""
    env = TemplateEnv(["keys", "get"], {"keys": "k", "get": "g"})
    assert [name for name in dir(env) if not name.startswith("_")] == []
    assert (env["keys"], env["get"]) == ("k", "g")


# Known escapes of Jinja2 sandboxes (SSTI payloads and the published sandbox CVEs): each must fail.
ESCAPES = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ [].__class__.__base__.__subclasses__() }}",
    "{{ ().__class__.__bases__[0].__subclasses__() }}",
    "{{ {}.__class__.__subclasses__ }}",
    "{{ (1).__class__ }}",
    "{{ x.__globals__ }}",
    "{{ x.__class__.__init__.__globals__ }}",
    "{{ x.__dir__() }}",
    "{{ x.__doc__ }}",
    "{{ x['__class__'] }}",
    "{{ x|attr('__class__') }}",
    "{{ x|attr('\\x5f\\x5fclass\\x5f\\x5f') }}",
    "{{ x|string|attr('__class__') }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ cycler.__init__.__globals__.__builtins__ }}",
    "{{ cycler('a').next.__func__ }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ namespace(a=1).__dict__ }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ lipsum.__code__ }}",
    "{{ range.__class__ }}",
    "{{ dict.mro() }}",
    "{{ dict.__base__.__subclasses__() }}",
    "{{ dict(a=1).__class__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os }}",
    "{{ self.__init__.__globals__ }}",
    "{{ self.__dict__ }}",
    "{{ x.encode.__self__ }}",
    "{{ ''.join.__self__ }}",
    "{{ x.format_map.__self__ }}",
    "{{ items.__iter__ }}",
    "{{ '{0.__class__}'.format(x) }}",
    "{{ '{0.__class__.__mro__}'.format(x) }}",
    "{{ '{0[__class__]}'.format(d) }}",
    "{{ '{a.__class__.__mro__}'.format_map({'a': x}) }}",
    "{{ '%s'|format(x.__class__) }}",
    "{% set f = '{0.__class__.__mro__}'.format %}{{ f(x) }}",
    "{{ ('{0.__class__.__mro__}'|attr('format'))(x) }}",
    "{{ x|attr('format') }}",
    "{{ items|selectattr('__class__')|list }}",
    "{{ items|sort(attribute='__class__') }}",
    "{{ items|groupby('__class__') }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{{ c }}{% endfor %}",
    "{% for i in items %}{{ loop.__class__ }}{% endfor %}",
    "{% for i in items %}{{ loop.cycle.__func__ }}{% endfor %}",
    "{% macro m() %}{% endmacro %}{{ m.__globals__ }}",
    "{% macro m() %}{% endmacro %}{{ m._func }}",
    "{{ env.__class__ }}",
    "{{ env._values }}",
    "{{ range }}",
    "{{ lipsum }}",
    "{{ cycler }}",
    "{{ x.upper }}",
    "{{ request }}",
    "{{ config.items() }}",
    "{% include '/etc/passwd' %}",
    "{% extends '/etc/passwd' %}",
    "{% import 'os' as os %}{{ os }}",
    "{% from 'os' import popen %}{{ popen }}",
    "{{ range(100000000) | list }}",
    "{{ items.append(1) }}",
    "{{ d.pop('k') }}",
    "{% set _ = d.update({'k': 'x'}) %}",
]

LEAKS = ("<class", "<function", "<built-in", "<module", "<bound", "0x", "jinja2.", "posix", "uid=", "root:")


@pytest.mark.parametrize("payload", ESCAPES)
async def test_sandbox_escape_fails_safely(tmp_path: Path, payload: str) -> None:
    """A template reaching for Python internals gives a failure result that names no internals."""
    result = await _render(tmp_path, payload, x="abc", items=[1, 2], d={"k": "v"})
    assert isinstance(result, dict), result
    assert result["success"] is False
    assert set(result) == {"success", "error"}
    assert not any(leak in result["error"] for leak in LEAKS), result["error"]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("{{ items|map(attribute='__class__')|list }}", "[Undefined, Undefined]"),
        ("{{ [x]|map('attr', '__class__')|list }}", "[Undefined]"),
        ("{{ (''|attr('format'))('{0.__class__}', 1) }}", ""),
    ],
)
async def test_escapes_that_render_reveal_nothing(tmp_path: Path, payload: str, expected: str) -> None:
    """Payloads that the sandbox turns into undefined values or empty text render harmlessly."""
    assert await _render(tmp_path, payload, x="abc", items=[1, 2]) == expected


async def test_escape_payload_runs_nothing_in_the_sandbox(tmp_path: Path) -> None:
    """A payload that creates a directory through `os` under plain Jinja2 does nothing in the sandbox."""
    payload = "{{ cycler.__init__.__globals__.os.mkdir(x) }}"
    control = tmp_path / "made-by-plain-jinja"
    jinja2.Environment(autoescape=False).from_string(payload).render(x=str(control))
    assert control.is_dir(), "the payload is a real escape outside the sandbox"
    target = tmp_path / "made-in-the-sandbox"
    result = await _render(tmp_path, payload, x=str(target))
    assert isinstance(result, dict)
    assert result["success"] is False
    assert not target.exists()


# --- where and how templates render ---------------------------------------------------------------


@pytest.mark.parametrize(
    "source", ["{{ x }}", "{% for i in items %}{{ i }}{% endfor %}", "{% macro m(n) %}{{ n }}{% endmacro %}{{ m(1) }}"]
)
def test_every_template_tool_is_async(tmp_path: Path, source: str) -> None:
    """Every template tool renders in a worker process, so its callable is async (the engine awaits it)."""
    assert inspect.iscoroutinefunction(_build(tmp_path, source))


def test_templates_render_only_in_a_template_worker() -> None:
    """Rendering a template of the sandbox in toolflow's own process is refused, whatever the entry point."""
    template = toolflow.template_environment().from_string("{{ 1 }}")
    with pytest.raises(TemplateError, match="templates render only in a template worker"):
        template.render()
    expression = toolflow.template_environment().compile_expression("1")
    with pytest.raises(TemplateError, match="templates render only in a template worker"):
        expression()


async def test_a_template_with_no_jinja_syntax_is_its_text_without_a_worker() -> None:
    """Plain text is its own rendering: nothing is sent to a worker."""
    template = compile_template("hello, {world}\n")
    assert not isinstance(template, TemplateProblem)
    assert template.constant == "hello, {world}\n"
    assert await render_template(template, {}) == "hello, {world}\n"


def _tools_file(tmp_path: Path, tools: dict[str, Any]) -> Path:
    spec = tmp_path / "tools.yaml"
    spec.write_text(yaml.safe_dump({"toolflow": 1, "tools": tools}), encoding="utf-8")
    return spec


LOOP_FOREVER = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
"""Ten billion iterations that write nothing: hours of rendering without a piece of output."""


async def test_a_timed_out_rendering_stops_at_once(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    """A looping template that writes nothing times out at its timeout, and its worker process is killed."""
    spec = _tools_file(
        tmp_path,
        {"spin": {"description": "Spins", "template": LOOP_FOREVER, "timeout": "200ms", "retry": {"attempts": 1}}},
    )
    plugins = load_plugins(entry_points=False)
    registry = toolflow.load_registry([spec], plugins=plugins)
    # No fail_after guard: the clock would jump to its deadline while the killed worker is
    # reaped. The call's own deadline is virtual, reached as soon as the test waits.
    worker = await toolflow.run_in_template_worker(os.getpid)  # reused last in, first out: the next job's
    async with toolflow.open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("spin", {})
    assert (result.success, result.error) == (False, "Error: tool 'spin' timed out after 200ms")
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)  # killed and reaped before the call returned


async def test_a_timed_out_rendering_stops_through_invoke(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """`toolflow.invoke` (no engine timeout) still stops a template at the tool's own timeout."""
    spec = _tools_file(tmp_path, {"spin": {"description": "Spins", "template": LOOP_FOREVER, "timeout": "100ms"}})
    registry = toolflow.load_registry([spec], plugins=load_plugins(entry_points=False))
    result = await toolflow.invoke(registry.get("spin"), {})  # no guard: see above
    assert (result.success, result.error) == (False, "Error: tool 'spin' timed out after 100ms")


async def test_a_hostile_rendering_does_not_hold_up_the_engine(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """While a template renders for its whole timeout, the engine answers other calls."""
    spec = _tools_file(
        tmp_path,
        {
            "words": {
                "description": "Writes n paragraphs",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "template": "{{ lipsum(n) }}",
                "timeout": "30s",
                "retry": {"attempts": 1},
            },
            "hello": {"description": "Says hello", "template": "hello"},
        },
    )
    plugins = load_plugins(entry_points=False)
    registry = toolflow.load_registry([spec], plugins=plugins)
    done: list[str] = []
    # No fail_after guard (see above); lipsum(20000) takes seconds, the virtual 30s come at once.
    async with toolflow.open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def hostile() -> None:
            result = await engine.call("words", {"n": 20_000})
            done.append(f"words: {result.error}")

        nursery.start_soon(hostile)
        await trio.sleep(0.001)  # the hostile call is under way
        for _ in range(5):
            done.append(f"hello: {(await engine.call('hello', {})).data}")  # noqa: PERF401 - awaited one by one
    assert done == [*(["hello: hello"] * 5), "words: Error: tool 'words' timed out after 30s"]


@pytest.mark.parametrize(
    ("source", "arguments", "expected"),
    [
        ("{{ '=' * n }}", {"n": 3}, "==="),
        ("{{ x * n }}", {"x": "ab", "n": 500_000}, "ab" * 500_000),
        ("{{ n ** 2 }}", {"n": 12}, "144"),
        ("{{ 10 ** n }}", {"n": 4299}, "1" + "0" * 4299),
        ("{{ 2.0 ** n }}", {"n": 3}, "8.0"),
        ("{{ x.ljust(n) }}|", {"x": "ab", "n": 4}, "ab  |"),
        ("{{ x.zfill(n) }}", {"x": "7", "n": 3}, "007"),
        ("{{ x.replace('a', 'bb') }}", {"x": "aXa"}, "bbXbb"),
        ("{{ x | center(n) }}", {"x": "a", "n": 3}, " a "),
        ("{{ x | indent(n, first=true) }}", {"x": "a\nb", "n": 2}, "  a\n  b"),
        ("{{ '%*d|%d%%' % (n, 7, 50) }}", {"n": 3}, "  7|50%"),
        ("{{ '%(x)s' % {'x': x} }}", {"x": "q"}, "q"),
        ("{{ '{:>{w}}|{:.2f}'.format(x, 1.5, w=n) }}", {"x": "ab", "n": 4}, "  ab|1.50"),
        ("{{ '{a:^5}'.format_map({'a': x}) }}", {"x": "a"}, "  a  "),
        ("{{ '%-4s|' | format(x) }}", {"x": "a"}, "a   |"),
        ("{{ n % 4 }}", {"n": 10}, "2"),
        ("{{ x * n }}", {"x": "abcd", "n": 5_000_000}, "abcd" * 5_000_000),  # 20 MB: within the budget
        ("{{ x | map('upper') | join(',') }}", {"x": "ab"}, "A,B"),
        ("{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}", {}, "2"),
        ("{% macro m(n) %}<{{ n }}>{% endmacro %}{{ m(1) }}{% for i in [2] %}{{ loop.index }}{% endfor %}", {}, "<1>1"),
        ("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.current }}", {}, "aba"),
        (
            "{{ range(3) | list }} {{ dict(a=1) }} {{ lipsum(1, html=false) | length > 0 }}",
            {},
            "[0, 1, 2] {'a': 1} True",
        ),
        ("{{ lipsum is callable }} {{ x.upper() }} {{ x | attr('upper') is callable }}", {"x": "a"}, "True A True"),
    ],
)
async def test_templates_within_the_limits_render(
    tmp_path: Path, source: str, arguments: dict[str, Any], expected: str
) -> None:
    """Operators, padding, filters, globals, macros and loops work as usual within the per-render budget."""
    parameters = {"type": "object", "properties": {"n": {"type": "number"}, "x": {"type": "string"}}}
    assert await _call(_build(tmp_path, source, parameters), **arguments) == expected


_PRINTF_PIECES = st.sampled_from(
    ["%s", "%5d", "%-3s", "%%", "%*d", "%.2f", "%.*f", "%x", "%c", "%r", "abc", " ", "%", "%(", "%5", "%.3s"]
)
_PRINTF_VALUES = st.lists(
    st.one_of(st.integers(-50, 50), st.sampled_from(["a", "bc", ""]), st.sampled_from([1.5, -2.25])), max_size=4
)


@settings(max_examples=200, deadline=None)
@given(fmt=st.lists(_PRINTF_PIECES, max_size=5).map("".join), values=_PRINTF_VALUES)
async def test_small_percent_formats_render_as_python_does(fmt: str, values: list[object]) -> None:
    """A template's `fmt % values` gives Python's text, or a template error where Python fails."""
    template = compile_template("{{ fmt % values }}")
    assert not isinstance(template, TemplateProblem)
    try:
        expected: str | None = fmt % tuple(values)
    except (TypeError, ValueError, OverflowError):
        expected = None
    with trio.fail_after(60):
        if expected is None:
            with pytest.raises(TemplateError):
                await render_template(template, {"fmt": fmt, "values": tuple(values)})
        else:
            assert await render_template(template, {"fmt": fmt, "values": tuple(values)}) == expected
