"""Schema export: OpenAI, Anthropic and MCP tool definitions, and the `toolflow schema` command."""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from toolflow._cli import run
from toolflow._errors import UsageError
from toolflow._export import (
    EXPORT_FORMATS,
    anthropic_tool,
    export_tools,
    gemini_tool,
    input_schema,
    mcp_annotations,
    mcp_tool,
    openai_strict_compatible,
    openai_tool,
)
from toolflow._loader import load_specs
from toolflow._model import Implementation, Pipeline, PipelineStep, ToolSpec
from toolflow._plugins import ImplementationKind, load_plugins
from toolflow._registry import load_registry
from toolflow.hookspecs import hookimpl

SPECS = """\
    toolflow: 1
    tools:
      search_objects:
        title: Search objects
        description: Search the room for objects
        parameters:
          type: object
          properties:
            query: {type: string, description: What to look for}
            limit: {type: integer, minimum: 1, default: 5, description: How many}
          required: [query]
        output_schema:
          type: object
          properties:
            found: {type: array, items: {type: string}}
        implementation: world.search
      wait:
        description: Wait a moment
        category: async_required
        implementation: world.wait
      delete_note:
        description: Delete a note
        category: dangerous
        idempotent: true
        parameters:
          type: object
          properties:
            note_id: {type: integer, description: The note}
          required: [note_id]
          additionalProperties: false
        output_schema: {type: string}
        implementation: world.delete
"""

SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "limit": {"type": "integer", "minimum": 1, "default": 5, "description": "How many"},
    },
    "required": ["query"],
}
NO_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}
DELETE_PARAMETERS = {
    "type": "object",
    "properties": {"note_id": {"type": "integer", "description": "The note"}},
    "required": ["note_id"],
    "additionalProperties": False,
}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def tools(tmp_path: Path) -> dict[str, ToolSpec]:
    loaded = load_specs([write(tmp_path, "tools.yaml", SPECS)])
    assert loaded.ok
    return {tool.name: tool for tool in loaded.tools}


# --- the three formats, exact -------------------------------------------------------------------


def test_openai_format(tools: dict[str, ToolSpec]) -> None:
    """OpenAI tools are function entries with an explicit strict flag."""
    assert export_tools(tools.values(), "openai") == [
        {
            "type": "function",
            "function": {
                "name": "search_objects",
                "description": "Search the room for objects",
                "parameters": SEARCH_PARAMETERS,
                "strict": False,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "wait",
                "description": "Wait a moment",
                "parameters": NO_PARAMETERS,
                "strict": True,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "delete_note",
                "description": "Delete a note",
                "parameters": DELETE_PARAMETERS,
                "strict": True,
            },
        },
    ]


def test_anthropic_format(tools: dict[str, ToolSpec]) -> None:
    """Anthropic tools have name, description and input_schema."""
    assert export_tools(tools.values(), "anthropic") == [
        {"name": "search_objects", "description": "Search the room for objects", "input_schema": SEARCH_PARAMETERS},
        {"name": "wait", "description": "Wait a moment", "input_schema": NO_PARAMETERS},
        {"name": "delete_note", "description": "Delete a note", "input_schema": DELETE_PARAMETERS},
    ]


def test_mcp_format(tools: dict[str, ToolSpec]) -> None:
    """MCP tools carry title, inputSchema, an object outputSchema and annotations from the category."""
    assert export_tools(tools.values(), "mcp") == [
        {
            "name": "search_objects",
            "title": "Search objects",
            "description": "Search the room for objects",
            "inputSchema": SEARCH_PARAMETERS,
            "outputSchema": {"type": "object", "properties": {"found": {"type": "array", "items": {"type": "string"}}}},
            "annotations": {
                "title": "Search objects",
                "readOnlyHint": True,
                "destructiveHint": False,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        },
        {
            "name": "wait",
            "description": "Wait a moment",
            "inputSchema": NO_PARAMETERS,
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": False,
                "idempotentHint": False,
                "openWorldHint": True,
            },
        },
        {
            "name": "delete_note",
            "description": "Delete a note",
            "inputSchema": DELETE_PARAMETERS,
            "annotations": {
                "readOnlyHint": False,
                "destructiveHint": True,
                "idempotentHint": True,
                "openWorldHint": False,
            },
        },
    ]


def test_export_tools_matches_the_per_format_functions(tools: dict[str, ToolSpec]) -> None:
    """export_tools dispatches to openai_tool, anthropic_tool, mcp_tool and gemini_tool."""
    functions: dict[str, Callable[[ToolSpec], dict[str, Any]]] = {
        "openai": openai_tool,
        "anthropic": anthropic_tool,
        "mcp": mcp_tool,
        "gemini": gemini_tool,
    }
    assert set(functions) == set(EXPORT_FORMATS)
    for name, function in functions.items():
        for tool in tools.values():
            assert export_tools([tool], name) == [function(tool)]


def test_exports_are_copies(tools: dict[str, ToolSpec]) -> None:
    """Changing an exported definition leaves the spec untouched."""
    spec = tools["search_objects"]
    exported = mcp_tool(spec)
    exported["inputSchema"]["properties"]["query"]["type"] = "integer"
    exported["outputSchema"]["properties"].clear()
    assert spec.parameters["properties"]["query"]["type"] == "string"
    assert spec.output_schema is not None
    assert "found" in spec.output_schema["properties"]
    assert input_schema(spec) == SEARCH_PARAMETERS
    assert input_schema(spec) is not input_schema(spec)


def test_unknown_format_is_a_usage_error(tools: dict[str, ToolSpec]) -> None:
    """An unknown format raises UsageError with a suggestion."""
    with pytest.raises(
        UsageError, match=r"unknown export format 'opneai': use one of openai, anthropic, mcp, gemini; did you"
    ):
        export_tools(tools.values(), "opneai")
    with pytest.raises(UsageError):
        export_tools([tools["wait"]], "vertex")


# --- MCP annotations ----------------------------------------------------------------------------


def _spec(category: str, kind: str = "implementation", *, idempotent: bool = False, title: str = "") -> ToolSpec:
    return ToolSpec(
        name="t",
        category=category,
        idempotent=idempotent,
        title=title,
        implementations=(Implementation(kind=kind, config="x"),),
    )


@pytest.mark.parametrize(
    ("category", "kind", "idempotent", "expected"),
    [
        ("safe_chain", "implementation", False, (True, False, True, False)),
        ("safe_chain", "template", False, (True, False, True, False)),
        ("safe_chain", "command", False, (True, False, True, True)),
        ("safe_chain", "http", False, (True, False, True, True)),
        ("terminal", "implementation", False, (False, False, False, False)),
        ("terminal", "template", True, (False, False, True, False)),
        ("dangerous", "implementation", False, (False, True, False, False)),
        ("dangerous", "command", True, (False, True, True, True)),
        ("async_required", "implementation", False, (False, False, False, True)),
        ("async_required", "template", True, (False, False, True, True)),
        ("observe", "implementation", False, (False, True, False, False)),
        ("observe", "http", True, (False, True, True, True)),
    ],
)
def test_mcp_annotations_follow_category_and_kind(
    category: str, kind: str, idempotent: bool, expected: tuple[bool, bool, bool, bool]
) -> None:
    """readOnly/destructive follow the category, idempotent the spec (or read-only), openWorld the kind."""
    annotations = mcp_annotations(_spec(category, kind, idempotent=idempotent))
    assert annotations == dict(
        zip(("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"), expected, strict=True)
    )


def _pipeline(name: str, *steps: str, category: str = "safe_chain") -> ToolSpec:
    pipeline = Pipeline(steps=tuple(PipelineStep(name=f"s{i}", tool=tool) for i, tool in enumerate(steps)))
    return ToolSpec(name=name, category=category, implementations=(Implementation(kind="pipeline", config=pipeline),))


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _hints(spec: ToolSpec, *tools: ToolSpec) -> tuple[bool, ...]:
    annotations = mcp_annotations(spec, {tool.name: tool for tool in tools})
    return tuple(annotations[hint] for hint in HINTS)


def test_a_pipelines_annotations_come_from_its_steps_not_its_category() -> None:
    """A `dangerous` pipeline of read-only steps reads only; one destructive step makes it destructive."""
    template = (Implementation(kind="template", config="x"),)
    read = ToolSpec(name="read", category="safe_chain", implementations=template)
    wipe = ToolSpec(name="wipe", category="dangerous", implementations=template)
    assert _hints(_pipeline("p", "read", "read", category="dangerous"), read) == (True, False, True, False)
    assert _hints(_pipeline("p", "read", "wipe"), read, wipe) == (False, True, False, False)


def test_nested_pipelines_are_followed_and_a_shared_step_counted_once() -> None:
    """Hints go through nested pipelines; a diamond of pipelines is worked out once per tool."""
    send = ToolSpec(
        name="send",
        category="terminal",
        idempotent=True,
        implementations=(Implementation(kind="command", config=["true"]),),
    )
    tools = [send, *(_pipeline(f"p{i}", f"p{i + 1}", f"p{i + 1}") for i in range(60)), _pipeline("p60", "send")]
    assert _hints(tools[1], *tools) == (False, False, True, True)


def test_an_unknown_step_tool_or_a_cycle_gets_the_worst_case() -> None:
    """A step tool that is not given, or a cycle (refused by the registry), has MCP's pessimistic defaults."""
    worst = (False, True, False, True)
    assert _hints(_pipeline("p", "missing")) == worst
    a, b = _pipeline("a", "b"), _pipeline("b", "a")
    assert _hints(a, a, b) == worst
    assert _hints(_pipeline("p")) == (True, False, True, False)  # no step: does nothing


def test_export_tools_looks_steps_up_in_the_given_tools() -> None:
    """export_tools finds steps among the specs it exports, or among `tools` when the export is a selection."""
    read = ToolSpec(name="read", implementations=(Implementation(kind="template", config="x"),))
    pipeline = _pipeline("p", "read")
    (alone,) = export_tools([pipeline], "mcp")
    assert alone["annotations"]["readOnlyHint"] is False
    (selected,) = export_tools([pipeline], "mcp", tools={"read": read, "p": pipeline})
    assert selected["annotations"]["readOnlyHint"] is True
    assert export_tools([pipeline, read], "mcp")[0] == selected


def test_mcp_title_and_output_schema_rules() -> None:
    """title appears in the tool and its annotations; only an object output schema becomes outputSchema."""
    spec = ToolSpec(name="t", title="Tee", output_schema={"type": "array"})
    exported = mcp_tool(spec)
    assert exported["title"] == "Tee"
    assert exported["annotations"]["title"] == "Tee"
    assert "outputSchema" not in exported
    assert "title" not in mcp_tool(ToolSpec(name="t"))


# --- OpenAI strict mode -------------------------------------------------------------------------


def _closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
        **extra,
    }


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        (_closed({}), True),
        (_closed({"a": {"type": "string"}}), True),
        (_closed({"a": {"type": ["string", "null"], "enum": ["x", None]}}), True),
        (_closed({"a": _closed({"b": {"type": "integer"}})}), True),
        (_closed({"a": {"type": "array", "items": _closed({"b": {"type": "string"}})}}), True),
        (_closed({"a": {"anyOf": [{"type": "string"}, _closed({"b": {"type": "number"}})]}}), True),
        (_closed({"a": {"$ref": "#/$defs/a"}}, **{"$defs": {"a": {"type": "string"}}}), False),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, False),
        ({**_closed({"a": {"type": "string"}}), "required": []}, False),
        (_closed({"a": {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]}}), False),
        (_closed({"a": {"type": "array", "items": {"type": "object", "properties": {}}}}), False),
        (_closed({"a": {"type": "string"}}, additionalProperties={"type": "string"}), False),
        (_closed({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}), False),
        (_closed({"a": {"type": "array", "uniqueItems": True}}), False),
        (_closed({"a": {"type": "string"}}, allOf=[{"required": ["a"]}]), False),
        (_closed({"a": {"type": "string", "enum": list(range(1001))}}), False),
        (_closed({"a": True}), False),
        ({"type": "string"}, False),
        ({"anyOf": [_closed({})], "type": "object", "additionalProperties": False}, False),
        ("not a schema", False),
    ],
)
def test_openai_strict_compatibility(schema: Any, strict: bool) -> None:
    """strict is claimed only for schemas OpenAI's strict mode accepts as they are."""
    assert openai_strict_compatible(schema) is strict


def test_openai_strict_depth_limit() -> None:
    """Nesting deeper than OpenAI's limit is not strict."""
    schema: dict[str, Any] = _closed({"leaf": {"type": "string"}})
    for _ in range(9):
        schema = _closed({"child": schema})
    assert openai_strict_compatible(schema)
    assert not openai_strict_compatible(_closed({"child": schema}))


# --- Registry.schemas and the CLI ----------------------------------------------------------------


class WorldPlugin:
    @hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        for name in ("world.search", "world.wait", "world.delete"):
            register(name, len)


def test_registry_schemas_exports_in_load_order(tmp_path: Path, tools: dict[str, ToolSpec]) -> None:
    """Registry.schemas() is the export of its tools, also after a selection."""
    plugins = load_plugins(entry_points=False)
    plugins.register(WorldPlugin(), "world")
    registry = load_registry([tmp_path / "tools.yaml"], plugins=plugins)
    for name in EXPORT_FORMATS:
        assert registry.schemas(name) == export_tools(tools.values(), name)
    selected = registry.filter(exclude_categories=["safe_chain"])
    assert [t["name"] for t in selected.schemas("anthropic")] == ["wait", "delete_note"]
    with pytest.raises(UsageError):
        registry.schemas("yaml")


def cli(*args: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run(["schema", *args], stdout=stdout, stderr=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


TEMPLATES = """\
    toolflow: 1
    tools:
      greet:
        description: Greet someone
        category: terminal
        parameters:
          type: object
          properties:
            name: {type: string, description: Who to greet}
          required: [name]
        template: "Hello {{ name }}"
      stamp:
        description: The current stamp
        template: "stamp"
    toolsets:
      talk:
        tools: [greet]
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with template tools; installed third-party plugins are not loaded."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "no-such-plugin")
    write(tmp_path, "pyproject.toml", "[project]\nname = 'demo'\n")
    (tmp_path / "specs").mkdir()
    write(tmp_path / "specs", "tools.yaml", TEMPLATES)
    return tmp_path


@pytest.mark.parametrize("name", EXPORT_FORMATS)
def test_cli_schema_prints_a_json_list(project: Path, name: str) -> None:
    """`toolflow schema --format F` prints the export of the default specs/ as a JSON list."""
    code, out, err = cli("--format", name)
    assert (code, err) == (0, "")
    expected = export_tools(load_specs([project / "specs"]).tools, name)
    assert json.loads(out) == expected
    assert len(expected) == 2


def test_cli_schema_specs_and_toolset(project: Path) -> None:
    """--specs chooses the files and --toolset the tools."""
    write(project, "other.yaml", "toolflow: 1\ntools:\n  solo:\n    description: Alone\n    template: x\n")
    code, out, _ = cli("--format", "anthropic", "--specs", "other.yaml", "--specs", "specs")
    assert code == 0
    assert [t["name"] for t in json.loads(out)] == ["solo", "greet", "stamp"]
    code, out, _ = cli("--format", "mcp", "--toolset", "talk")
    assert code == 0
    assert [t["name"] for t in json.loads(out)] == ["greet"]


def test_cli_schema_spec_errors_exit_1(project: Path) -> None:
    """Spec errors exit 1 with the diagnostics on stderr and nothing on stdout."""
    write(project / "specs", "bad.yaml", "toolflow: 1\ntools:\n  oops:\n    descripton: x\n    template: x\n")
    code, out, err = cli("--format", "openai")
    assert (code, out) == (1, "")
    assert "specs/bad.yaml:4:5: TF101" in err


def test_cli_schema_registry_errors_exit_1(project: Path) -> None:
    """An implementation no plugin binds exits 1 with the problem on stderr."""
    write(
        project / "specs",
        "more.yaml",
        "toolflow: 1\ntools:\n  far:\n    description: x\n    implementation: nowhere.far\n",
    )
    code, out, err = cli("--format", "openai")
    assert (code, out) == (1, "")
    assert "tool 'far' uses implementation 'nowhere.far', which no plugin binds" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: --format"),
        (("--format", "yaml"), "invalid choice: 'yaml'"),
        (("--format", "openai", "--toolset", "tlak"), "Unknown toolset: 'tlak' (did you mean 'talk'?)"),
        (("--format", "openai", "--bogus"), "unrecognized arguments: --bogus"),
    ],
)
def test_cli_schema_usage_errors_exit_2(project: Path, args: tuple[str, ...], message: str) -> None:
    """Usage errors, including an unknown toolset, exit 2 with a message."""
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    assert message in err
    assert "Traceback" not in err


def test_cli_schema_uses_plugin_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kinds the default plugins provide are known to the loader the command runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "no-such-plugin")
    write(tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  ls:\n    description: List files\n    command: [ls]\n")
    code, out, err = cli("--format", "mcp", "--specs", "specs.yaml")
    assert (code, err) == (0, "")
    assert json.loads(out)[0]["annotations"]["openWorldHint"] is True


def test_kinds_reach_the_exported_annotations(tmp_path: Path) -> None:
    """A plugin kind's tools export with openWorldHint true."""

    class HttpKind:
        @hookimpl
        def toolflow_register_kinds(self, register: Callable[[Any], None]) -> None:
            register(ImplementationKind(name="fetch", schema={"type": "string"}, build=lambda spec: len))

    plugins = load_plugins(entry_points=False)
    plugins.register(HttpKind(), "httpkind")
    write(tmp_path, "s.yaml", "toolflow: 1\ntools:\n  get:\n    description: Get a page\n    fetch: https://x\n")
    registry = load_registry([tmp_path / "s.yaml"], plugins=plugins)
    assert registry.schemas("mcp")[0]["annotations"]["openWorldHint"] is True


# --- parameter rules -----------------------------------------------------------------------------

RULES_SPEC = """\
toolflow: 1
tools:
  find:
    description: Find a thing.
    parameters:
      type: object
      properties:
        name: {type: string, description: By name.}
        dbref: {type: string, description: By reference.}
        mode: {type: string, enum: [fast, full], description: How.}
        depth: {type: integer, description: How deep.}
        tag: {type: string, description: A tag.}
        owner: {type: string, description: An owner.}
    parameter_rules:
      - exactly_one: [name, dbref]
      - when: {mode: full}
        require: [depth]
      - when: tag
        require: [owner, depth]
      - exclusive: [tag, dbref]
      - at_least_one: [name, tag]
    template: "{{ name }}"
"""

RULES_SENTENCE = (
    'Parameter rules: give exactly one of `name` or `dbref`; if `mode` is "full", also give `depth`;'
    " if `tag` is given, also give `owner` and `depth`; give at most one of `tag` or `dbref`;"
    " give at least one of `name` and `tag`."
)


@pytest.fixture
def ruled(tmp_path: Path) -> ToolSpec:
    loaded = load_specs([write(tmp_path, "tools.yaml", RULES_SPEC)])
    assert loaded.ok
    (tool,) = loaded.tools
    return tool


def test_parameter_rules_are_a_sentence_for_openai_and_anthropic(ruled: ToolSpec) -> None:
    """OpenAI and Anthropic refuse the rules' keywords at the top level: the description says them."""
    (openai,) = export_tools([ruled], "openai")
    (anthropic,) = export_tools([ruled], "anthropic")
    assert openai["function"]["description"] == f"Find a thing.\n\n{RULES_SENTENCE}"
    assert anthropic["description"] == f"Find a thing.\n\n{RULES_SENTENCE}"
    assert "allOf" not in openai["function"]["parameters"]
    assert "allOf" not in anthropic["input_schema"]


def test_parameter_rules_are_json_schema_for_mcp(ruled: ToolSpec) -> None:
    """MCP takes any JSON Schema: the rules are the validator's own fragments, and a client checking them agrees."""
    (mcp,) = export_tools([ruled], "mcp")
    schema = mcp["inputSchema"]
    assert mcp["description"] == "Find a thing."
    assert len(schema["allOf"]) == 5
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"name": "a"})
    assert not validator.is_valid({"name": "a", "dbref": "#1"})  # exactly one
    assert not validator.is_valid({"name": "a", "mode": "full"})  # depth required
    assert not validator.is_valid({"dbref": "#1"})  # at least one of name, tag
