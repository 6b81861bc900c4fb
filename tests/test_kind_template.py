"""The built-in ``template`` kind: rendering, ``env``, JSON output, and the sandbox against known escapes."""

from __future__ import annotations

import functools
import inspect
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
import trio
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import toolflow
from toolflow import ToolSpec, load_specs
from toolflow._plugins import ImplementationKind, load_plugins
from toolflow._templates import (
    CHECK_EVERY,
    NESTING_MESSAGE,
    TemplateEnv,
    TemplateError,
    TemplateProblem,
    compile_template,
    has_loops,
    parse_template,
    render_template,
)

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "toolflow" / "data" / "spec-v1.schema.json"

Run = Callable[..., Any]
"""A template tool's callable: async, or sync for a template with loops or macros."""

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
    """Call *run* as the engine would: await it, or (a sync one) run it in a worker thread."""
    if inspect.iscoroutinefunction(run):
        return await run(**arguments)
    return await trio.to_thread.run_sync(functools.partial(run, **arguments))


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


# --- long renderings ------------------------------------------------------------------------------

LOOP = "{% for a in items %}{% for b in items %}{{ b }}{% endfor %}{% endfor %}"


class _Stop(BaseException):
    """Raised by a checkpoint to stop a rendering (as trio.Cancelled would)."""


def test_checkpoint_is_called_every_so_many_pieces_and_stops_the_rendering() -> None:
    """render_template calls its checkpoint every CHECK_EVERY pieces; what it raises ends the rendering."""
    template = compile_template("{% for i in items %}{{ i }},{% endfor %}")
    assert not isinstance(template, TemplateProblem)
    calls: list[int] = []
    text = render_template(template, {"items": range(1000)}, checkpoint=lambda: calls.append(1))
    assert text == render_template(template, {"items": range(1000)})
    assert len(calls) >= 2000 // CHECK_EVERY

    def stop_on_the_third() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise _Stop

    calls.clear()
    with pytest.raises(_Stop):
        render_template(template, {"items": itertools.count()}, checkpoint=stop_on_the_third)


@pytest.mark.parametrize(
    ("source", "loops"),
    [
        ("{{ x }}", False),
        ("{% if x %}{{ x | upper }}{% endif %}", False),
        ("{% for i in items %}{{ i }}{% endfor %}", True),
        ("{% macro m(n) %}{{ n }}{% endmacro %}{{ m(1) }}", True),
        ("{% for i in items %}", False),  # does not parse: never renders
    ],
)
def test_templates_with_loops_or_macros_render_in_a_worker_thread(tmp_path: Path, source: str, *, loops: bool) -> None:
    """A template with loops or macros is a sync implementation (the engine threads it); others stay async."""
    assert has_loops(source) is loops
    if not isinstance(parse_template(source), TemplateProblem):
        assert inspect.iscoroutinefunction(_build(tmp_path, source)) is not loops


class _CountingList(list[int]):
    """A list that counts how many items its iterations have handed out."""

    handed = 0

    def __iter__(self) -> Iterator[int]:
        for item in super().__iter__():
            type(self).handed += 1
            yield item


async def test_a_long_rendering_times_out_without_stalling_the_engine(tmp_path: Path) -> None:
    """A looping template over a long list times out at its timeout, other calls run meanwhile, and it stops."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "toolflow": 1,
                "tools": {
                    "grid": {
                        "description": "Renders every pair of items",
                        "parameters": {"type": "object", "properties": {"items": {"type": "array"}}},
                        "template": LOOP,
                        "timeout": "200ms",
                        "retry": {"attempts": 1},
                    },
                    "hello": {"description": "Says hello", "template": "hello"},
                },
            }
        ),
        encoding="utf-8",
    )
    plugins = load_plugins(entry_points=False)
    registry = toolflow.load_registry([spec], plugins=plugins)
    items = _CountingList(range(100_000))  # 10^10 pieces: hours of rendering
    with trio.fail_after(20):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            async with trio.open_nursery() as nursery:
                hellos: list[object] = []

                async def greet() -> None:
                    for _ in range(5):
                        hellos.append((await engine.call("hello", {})).data)
                        await trio.sleep(0.01)

                nursery.start_soon(greet)
                result = await engine.call("grid", {"items": items})
            assert hellos == ["hello"] * 5  # the engine went on while the template rendered
            assert (result.success, result.error) == (False, "timed out after 200ms")
            # The abandoned rendering stops at its next checkpoint: the count stops growing.
            seen = -1
            while seen != _CountingList.handed:
                seen = _CountingList.handed
                await trio.sleep(0.2)
    assert 0 < seen < 100_000 * 100_000


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
    ],
)
async def test_growing_operations_within_the_limits_render(
    tmp_path: Path, source: str, arguments: dict[str, Any], expected: str
) -> None:
    """`*`, `**`, padding, `replace` and `indent` work as usual up to a million items and 4,300 digits."""
    parameters = {"type": "object", "properties": {"n": {"type": "number"}, "x": {"type": "string"}}}
    assert await _call(_build(tmp_path, source, parameters), **arguments) == expected


@pytest.mark.parametrize(
    ("source", "arguments", "error"),
    [
        ("{{ '=' * n }}", {"n": 10**12}, "template error: '*' would make 1,000,000,000,000 items, more than 1,000,000"),
        ("{{ n * [0] }}", {"n": 2_000_000}, "template error: '*' would make 2,000,000 items, more than 1,000,000"),
        ("{{ 10 ** n }}", {"n": 10**12}, "template error: '**' would make a number of more than 4300 digits"),
        ("{{ 3 ** 3000000 }}", {}, "template error: '**' would make a number of more than 4300 digits"),
        (
            "{{ x.ljust(n) }}",
            {"x": "a", "n": 10**9},
            "template error: 'ljust' would make 1,000,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ x.center(width=n) }}",
            {"x": "a", "n": 10**7},
            "template error: 'center' would make 10,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ x.expandtabs(n) }}",
            {"x": "\t", "n": 10**7},
            "template error: 'expandtabs' would make 10,000,001 characters, more than 1,000,000",
        ),
        (
            "{{ x.replace('', y) }}",
            {"x": "a" * 1000, "y": "b" * 1000},
            "template error: 'replace' would make 1,002,000 characters, more than 1,000,000",
        ),
        (
            "{{ x | center(n) }}",
            {"x": "a", "n": 10**9},
            "template error: 'center' would make 1,000,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ x | indent(n) }}",
            {"x": "a\nb", "n": 10**6},
            "template error: 'indent' would make 2,000,003 characters, more than 1,000,000",
        ),
        (
            "{{ '%*d' % (n, 1) }}",
            {"n": 10**8},
            "template error: a '%' width would make 100,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ '%.*f' % (n, 1.0) }}",
            {"n": 10**7},
            "template error: a '%' width would make 10,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ '{:>{w}}'.format(x, w=n) }}",
            {"x": "a", "n": 10**9},
            "template error: a format width would make 1,000,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ '{a:.{n}f}'.format_map({'a': 1.5, 'n': n}) }}",
            {"n": 10**7},
            "template error: a format width would make 10,000,000 characters, more than 1,000,000",
        ),
        (
            "{{ '%*s' | format(n, x) }}",
            {"n": 10**8, "x": "q"},
            "template error: a '%' width would make 100,000,000 characters, more than 1,000,000",
        ),
    ],
)
async def test_growing_operations_beyond_the_limits_fail_at_once(
    tmp_path: Path, source: str, arguments: dict[str, Any], error: str
) -> None:
    """A huge `*`, `**`, padding, `replace` or `indent` (a model's number, or constants Jinja would fold) fails first."""
    parameters = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "string"}, "y": {"type": "string"}},
    }
    result = await _call(_build(tmp_path, source, parameters), **arguments)
    assert result == {"success": False, "error": error}


_PRINTF_PIECES = st.sampled_from(
    ["%s", "%5d", "%-3s", "%%", "%*d", "%.2f", "%.*f", "%x", "%c", "%r", "abc", " ", "%", "%(", "%5", "%.3s"]
)
_PRINTF_VALUES = st.lists(
    st.one_of(st.integers(-50, 50), st.sampled_from(["a", "bc", ""]), st.sampled_from([1.5, -2.25])), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(fmt=st.lists(_PRINTF_PIECES, max_size=5).map("".join), values=_PRINTF_VALUES)
def test_small_percent_formats_render_as_python_does(fmt: str, values: list[object]) -> None:
    """The '%' check refuses nothing small: a template's `fmt % values` gives Python's text, or a template error where Python fails."""
    template = compile_template("{{ fmt % values }}")
    assert not isinstance(template, TemplateProblem)
    try:
        expected: str | None = fmt % tuple(values)
    except (TypeError, ValueError, OverflowError):
        expected = None
    if expected is None:
        with pytest.raises(TemplateError):
            render_template(template, {"fmt": fmt, "values": tuple(values)})
    else:
        assert render_template(template, {"fmt": fmt, "values": tuple(values)}) == expected
