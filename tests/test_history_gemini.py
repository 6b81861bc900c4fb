"""Gemini: parsing ``functionCall`` parts, the ``gemini`` history format, the ``gemini`` export, end to end.

The fixtures are the published shapes, copied from the Gemini API documentation (each with its
source URL); the messages toolflow writes are checked with google-genai's own types
(``tests/_sdk_shapes.py``). The properties every format shares are in ``tests/test_history.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from _cli_project import make_project, toolflow
from _sdk_shapes import gemini_content, gemini_request, gemini_tool_definition
from google.genai import types as genai

from toolflow._calls import MalformedCall, ToolCall, parse_tool_call, parse_tool_calls
from toolflow._executor import HistoryEntry
from toolflow._export import gemini_schema, gemini_tool
from toolflow._history import get_format
from toolflow._lint._target_facts import GEMINI_KEYWORDS
from toolflow._model import ParameterRule, ToolSpec
from toolflow._results import ToolResult

# https://ai.google.dev/gemini-api/docs/function-calling (REST, "Step 3": the model's answer to
# "Turn the lights down to a romantic level", set_light_values declared)
LIGHTS_RESPONSE: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {
                            "name": "set_light_values",
                            "args": {"color_temp": "warm", "brightness": 25},
                        }
                    }
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 101, "candidatesTokenCount": 20, "totalTokenCount": 121},
    "modelVersion": "gemini-2.5-flash",
}

# https://ai.google.dev/api/caching#FunctionCall (id, name, args) and
# https://ai.google.dev/gemini-api/docs/thought-signatures (Gemini 3: a signature on the first
# functionCall part of a turn, to be sent back as it came; parallel calls carry none)
PARALLEL_CONTENT: dict[str, Any] = {
    "role": "model",
    "parts": [
        {"text": "Let me set up the party."},
        {
            "functionCall": {"id": "c1", "name": "power_disco_ball", "args": {"power": True}},
            "thoughtSignature": "CiQBVKhc7w==",  # bytes, base64 (the docs shorten theirs)
        },
        {"functionCall": {"id": "c2", "name": "start_music", "args": {"energetic": True, "loud": True}}},
        {"functionCall": {"id": "c3", "name": "dim_lights", "args": {"brightness": 0.3}}},
    ],
}


def test_fixtures_are_valid_sdk_objects() -> None:
    """The fixtures are what google-genai accepts as a response and a content (unknown fields would fail)."""
    genai.GenerateContentResponse.model_validate(LIGHTS_RESPONSE)
    gemini_content(PARALLEL_CONTENT)


# -- parsing ----------------------------------------------------------------------------------------------------


def test_a_function_call_part_is_a_gemini_call() -> None:
    """A functionCall part gives its name, args and id; format gemini; the raw part kept."""
    part = PARALLEL_CONTENT["parts"][1]
    call = parse_tool_call(part)
    assert call == ToolCall(id="c1", name="power_disco_ball", arguments={"power": True}, format="gemini")
    assert isinstance(call, ToolCall)
    assert call.raw is part


def test_a_call_without_id_gets_one() -> None:
    """Older API versions send no id: the call gets call_<n>, as fallback and text calls do."""
    part = LIGHTS_RESPONSE["candidates"][0]["content"]["parts"][0]
    assert parse_tool_calls([part, part]) == [
        ToolCall(
            id="call_0", name="set_light_values", arguments={"color_temp": "warm", "brightness": 25}, format="gemini"
        ),
        ToolCall(
            id="call_1", name="set_light_values", arguments={"color_temp": "warm", "brightness": 25}, format="gemini"
        ),
    ]


@pytest.mark.parametrize(
    "container",
    [
        PARALLEL_CONTENT,
        {"content": PARALLEL_CONTENT, "finishReason": "STOP", "index": 0},
        {"candidates": [{"content": PARALLEL_CONTENT, "finishReason": "STOP"}]},
    ],
    ids=["content", "candidate", "response"],
)
def test_contents_candidates_and_responses_stand_for_their_calls(container: dict[str, Any]) -> None:
    """parse_tool_calls reads every functionCall part of a content, candidate or response; text parts are not calls."""
    calls = parse_tool_calls(container)
    assert [(c.id, c.name, c.format) for c in calls] == [
        ("c1", "power_disco_ball", "gemini"),
        ("c2", "start_music", "gemini"),
        ("c3", "dim_lights", "gemini"),
    ]
    assert calls[0].raw is PARALLEL_CONTENT["parts"][1]  # the part, its thoughtSignature with it


def test_sdk_objects_are_read_too() -> None:
    """google-genai objects: a response, a candidate's content, a part, and response.function_calls."""
    response = genai.GenerateContentResponse.model_validate(
        {"candidates": [{"content": PARALLEL_CONTENT, "finishReason": "STOP"}]}
    )
    expected = [("c1", "power_disco_ball"), ("c2", "start_music"), ("c3", "dim_lights")]
    assert [(c.id, c.name) for c in parse_tool_calls(response)] == expected
    content = response.candidates[0].content  # type: ignore[index]
    assert [(c.id, c.name) for c in parse_tool_calls(content)] == expected
    parts = [part for part in content.parts if part.function_call]  # type: ignore[union-attr] # a list: calls only
    assert [(c.id, c.name) for c in parse_tool_calls(parts)] == expected
    calls = parse_tool_calls(response.function_calls)
    assert [(c.id, c.name, c.format) for c in calls] == [(i, n, "gemini") for i, n in expected]
    assert all(isinstance(c, ToolCall) and not c.warnings for c in calls)


def test_an_sdk_function_call_without_id() -> None:
    """An SDK FunctionCall without id (older API versions) is a gemini call with a generated id, no warning."""
    response = genai.GenerateContentResponse.model_validate(LIGHTS_RESPONSE)
    (call,) = parse_tool_calls(response.function_calls)
    assert call == ToolCall(
        id="call_0", name="set_light_values", arguments={"color_temp": "warm", "brightness": 25}, format="gemini"
    )
    assert isinstance(call, ToolCall)
    assert not call.warnings


def test_one_content_one_call() -> None:
    """parse_tool_call reads a content holding exactly one call; one holding none or several is malformed."""
    call = parse_tool_call(LIGHTS_RESPONSE)
    assert isinstance(call, ToolCall)
    assert call.name == "set_light_values"
    several = parse_tool_call(PARALLEL_CONTENT)
    assert several == MalformedCall(
        id="call_0", error="Error: Expected one functionCall part in the Gemini content, got 3", format="gemini"
    )
    none = parse_tool_call({"role": "model", "parts": [{"text": "No tool needed."}]})
    assert isinstance(none, MalformedCall)
    assert none.error.endswith("got 0")


def test_a_candidate_without_content_calls_nothing() -> None:
    """A response whose candidate was blocked (no content) or that has no candidates has no calls."""
    assert parse_tool_calls({"candidates": [{"finishReason": "SAFETY", "index": 0}]}) == []
    assert parse_tool_calls({"candidates": []}) == []
    assert parse_tool_calls({"role": "model", "parts": [{"text": "Done."}]}) == []


@pytest.mark.parametrize(
    ("part", "error"),
    [
        (
            {"functionCall": "set_light_values"},
            "Error: 'functionCall' must be an object with 'name' and 'args', got string",
        ),
        ({"functionCall": {"args": {}}}, "Error: Missing tool name"),
        ({"functionCall": {"name": 7, "args": {}}}, "Error: Tool name must be a string, got integer"),
        ({"functionCall": {"name": "f", "args": [1]}}, "Error: Arguments must be a JSON object, got list"),
        ({"functionCall": {"name": "f", "args": "{oops"}}, "Error: Invalid JSON arguments - "),
    ],
)
def test_malformed_parts_give_model_readable_errors(part: dict[str, Any], error: str) -> None:
    """A malformed functionCall part is a MalformedCall of format gemini whose error the model can act on."""
    call = parse_tool_call(part)
    assert isinstance(call, MalformedCall)
    assert call.format == "gemini"
    assert call.error.startswith(error)


def test_gemini_args_under_the_size_cap() -> None:
    """The argument size cap applies to Gemini's args as to every format's."""
    call = parse_tool_call({"functionCall": {"name": "f", "args": {"blob": "x" * 5000}}}, max_argument_bytes=2048)
    assert isinstance(call, MalformedCall)
    assert call.error.startswith("Error: Arguments are too large")


def test_repeated_ids_are_renamed() -> None:
    """Two parts with the same id: the second is renamed with a warning, as for the other formats."""
    part = {"functionCall": {"id": "same", "name": "f", "args": {}}}
    first, second = parse_tool_calls({"role": "model", "parts": [part, copy.deepcopy(part)]})
    assert (first.id, second.id) == ("same", "call_1")
    assert isinstance(second, ToolCall)
    assert second.warnings


def test_unknown_shapes_name_gemini_among_the_expected() -> None:
    """An unrecognised call's error lists Gemini's part among the shapes it expected."""
    call = parse_tool_call({"functionCalls": []})
    assert isinstance(call, MalformedCall)
    assert 'a Gemini part {"functionCall": {"name", "args"}}' in call.error


# -- the history format -----------------------------------------------------------------------------------------

ROOM = ToolSpec(
    name="inspect_location",
    description="Describe the current location.",
    parameters={
        "type": "object",
        "properties": {"detail_level": {"type": "string", "enum": ["brief", "full"]}},
        "required": ["detail_level"],
        "additionalProperties": False,
    },
)
PING = ToolSpec(name="ping", description="Check the connection.")


def test_tool_definitions_are_one_tool_of_function_declarations() -> None:
    """The tools of a request are one Gemini Tool; a tool without parameters declares none; no tools, no Tool."""
    history = get_format("gemini")
    definitions = history.tool_definitions([ROOM, PING])
    assert definitions == [
        {
            "functionDeclarations": [
                {
                    "name": "inspect_location",
                    "description": "Describe the current location.",
                    "parameters": {
                        "type": "object",
                        "properties": {"detail_level": {"type": "string", "enum": ["brief", "full"]}},
                        "required": ["detail_level"],
                    },
                },
                {"name": "ping", "description": "Check the connection."},
            ]
        }
    ]
    gemini_tool_definition(definitions[0])
    assert history.tool_definitions([]) == []


def test_assistant_message_and_read_response() -> None:
    """The model's content: a text part, then a functionCall part per call; read back with thoughts left out."""
    history = get_format("gemini")
    call = ToolCall(id="c1", name="inspect_location", arguments={"detail_level": "full"}, format="direct")
    message = history.assistant_message("Looking.", [call])
    assert message == {
        "role": "model",
        "parts": [
            {"text": "Looking."},
            {"functionCall": {"id": "c1", "name": "inspect_location", "args": {"detail_level": "full"}}},
        ],
    }
    gemini_content(message)
    thinking = {"role": "model", "parts": [{"text": "Hmm, the user wants...", "thought": True}, *message["parts"]]}
    text, raw = history.read_response(thinking)
    assert text == "Looking."
    assert raw == [message["parts"][1]]
    assert history.assistant_message("  ", []) == {"role": "model", "parts": []}


def test_results_are_function_responses_in_one_user_content() -> None:
    """The results of a turn: one user content of functionResponse parts; a failure's response has its error."""
    history = get_format("gemini")
    call = ToolCall(id="c1", name="say", arguments={}, format="gemini")
    ok = HistoryEntry(
        call_id="c1", tool_name="say", call=call, result=ToolResult(success=True, data="said"), success=True
    )
    failed = HistoryEntry(
        call_id="c2",
        tool_name="say",
        call=call,
        result=ToolResult.failure("Error: Missing required parameter: message"),
        success=False,
    )
    (message,) = history.result_messages([ok, failed])
    assert message == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "say", "response": {"success": True, "data": "said"}}},
            {
                "functionResponse": {
                    "id": "c2",
                    "name": "say",
                    "response": {"success": False, "data": None, "error": "Error: Missing required parameter: message"},
                }
            },
        ],
    }
    gemini_content(message)
    assert history.result_messages([]) == []


def test_a_cut_result_goes_as_output_text() -> None:
    """A result cut to max_chars is no longer JSON: its response is {"output": the cut text}."""
    call = ToolCall(id="c1", name="dump", arguments={}, format="gemini")
    result = ToolResult(success=True, data="x" * 500)
    big = HistoryEntry(call_id="c1", tool_name="dump", call=call, result=result, success=True)
    (message,) = get_format("gemini").result_messages([big], max_chars=100)
    response = message["parts"][0]["functionResponse"]["response"]
    assert list(response) == ["output"]
    assert len(response["output"]) <= 100
    assert "[truncated" in response["output"]


# -- the export -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
            {"type": "object", "properties": {"a": {"type": "string"}}},
        ),
        ({"type": ["string", "null"]}, {"nullable": True, "type": "string"}),
        ({"type": ["string", "integer"]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}),
        ({"type": "string", "const": "on"}, {"type": "string", "enum": ["on"]}),
        ({"type": "integer", "enum": [1, 2, 3]}, {"type": "integer"}),
        ({"type": "string", "examples": ["a", "b"]}, {"type": "string", "example": "a"}),
        ({"type": "string", "format": "email"}, {"type": "string"}),
        ({"type": "string", "format": "date-time"}, {"type": "string", "format": "date-time"}),
        ({"type": "integer", "exclusiveMinimum": 0, "minimum": 1}, {"type": "integer", "minimum": 1}),
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            {"type": "array", "items": {"type": "string"}},
        ),
        (
            {
                "type": "object",
                "properties": {"p": {"$ref": "#/$defs/point"}, "q": {"$ref": "#/definitions/missing"}},
                "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            },
            {
                "type": "object",
                "properties": {"p": {"type": "object", "properties": {"x": {"type": "number"}}}, "q": {}},
            },
        ),
        (
            {
                "type": "object",
                "properties": {"node": {"$ref": "#/$defs/node"}},
                "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            },
            {"type": "object", "properties": {"node": {"type": "object", "properties": {"next": {}}}}},
        ),
        ({"allOf": [{"required": ["a"]}], "not": {"required": ["b"]}, "$schema": "x"}, {}),
    ],
    ids=[
        "additionalProperties",
        "nullable",
        "type-list",
        "oneOf",
        "const",
        "number-enum",
        "examples",
        "string-format",
        "date-time",
        "exclusiveMinimum",
        "uniqueItems",
        "ref",
        "ref-cycle",
        "dropped",
    ],
)
def test_gemini_schema_rewrites(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    """gemini_schema keeps Gemini's OpenAPI subset, rewrites what has an equivalent and drops the rest."""
    before = copy.deepcopy(schema)
    assert gemini_schema(schema) == expected
    assert schema == before


def _keywords(schema: object) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key == "properties":
            for sub in value.values():
                found |= _keywords(sub)
        elif key == "items":
            found |= _keywords(value)
        elif key == "anyOf":
            for sub in value:
                found |= _keywords(sub)
    return found


def test_exports_of_the_shipped_specs_use_gemini_keywords_only() -> None:
    """Every tool of specs/ exports to a declaration google-genai accepts, with Gemini's keywords only."""
    from toolflow._loader import load_specs

    loaded = load_specs([Path(__file__).resolve().parent.parent / "specs"])
    assert loaded.ok, loaded.diagnostics
    for spec in loaded.tools:
        declaration = gemini_tool(spec)
        gemini_tool_definition({"functionDeclarations": [declaration]})
        assert _keywords(declaration.get("parameters")) <= GEMINI_KEYWORDS, spec.name


def test_parameter_rules_are_a_sentence() -> None:
    """Parameter rules, which Gemini's schema cannot hold, end the description as a sentence."""
    spec = ToolSpec(
        name="find",
        description="Find an object.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}, "dbref": {"type": "string"}}},
        parameter_rules=(ParameterRule(kind="exactly_one", params=("name", "dbref")),),
    )
    declaration = gemini_tool(spec)
    assert declaration["description"] == "Find an object.\n\nParameter rules: give exactly one of `name` or `dbref`."
    assert "allOf" not in declaration["parameters"]


# -- end to end: toolflow schema and toolflow run ---------------------------------------------------------------

SPECS = """\
toolflow: 1
tools:
  echo:
    description: Echo a word.
    parameters:
      type: object
      properties:
        word: {type: string, description: The word, examples: [hi]}
      required: [word]
      additionalProperties: false
    template: "echo {{ word }}"
  done:
    description: Say goodbye; ends the loop.
    category: terminal
    template: "goodbye"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_project(tmp_path, monkeypatch, SPECS)


def test_cli_schema_format_gemini(project: Path) -> None:
    """`toolflow schema --format gemini` prints FunctionDeclarations in Gemini's schema subset."""
    code, out, err = toolflow("schema", "--format", "gemini")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        {
            "name": "echo",
            "description": "Echo a word.",
            "parameters": {
                "type": "object",
                "properties": {"word": {"type": "string", "description": "The word", "example": "hi"}},
                "required": ["word"],
            },
        },
        {"name": "done", "description": "Say goodbye; ends the loop."},
    ]


def test_cli_run_format_gemini(project: Path) -> None:
    """`toolflow run --format gemini` with a scripted model that sends Gemini contents, ids or not.

    The first turn is a content as an older API version sends it (no ids) with a thought
    signature: the history keeps the signature and writes each call's id inside its functionCall,
    the id its functionResponse answers. Every message is a valid Gemini content.
    """
    first = {
        "role": "model",
        "parts": [
            {"functionCall": {"name": "echo", "args": {"word": "hi"}}, "thoughtSignature": "c2ln"},
            {"functionCall": {"name": "echo", "args": {"word": 3}}},
        ],
    }
    turns = [{"message": first}, {"tool_calls": [{"name": "done", "arguments": {}}]}]
    (project / "session.yaml").write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    code, out, err = toolflow(
        "run", "--model", "scripted:session.yaml", "--prompt", "go", "--format", "gemini", "--output-format", "json"
    )
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert (document["format"], document["reason"]) == ("gemini", "terminal")
    history = document["history"]
    assert history[0] == {"role": "user", "parts": [{"text": "go"}]}
    model, results = history[1], history[2]
    assert model["parts"][0] == {
        "functionCall": {"id": "call_0", "name": "echo", "args": {"word": "hi"}},
        "thoughtSignature": "c2ln",
    }
    assert model["parts"][1]["functionCall"]["id"] == "call_1"
    responses = [part["functionResponse"] for part in results["parts"]]
    assert [(r["id"], r["name"]) for r in responses] == [("call_0", "echo"), ("call_1", "echo")]
    assert responses[0]["response"]["data"] == "echo hi"
    assert responses[1]["response"]["success"] is False
    assert "word" in responses[1]["response"]["error"]
    assert [c["tool"] for t in document["turns"] for c in t["calls"]] == ["echo", "echo", "done"]
    gemini_request("", history, get_format("gemini").tool_definitions([]))
